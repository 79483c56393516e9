"""Python's cyclic garbage collector, paced for a build or a run.

At its default pace (a collection for every 700 new container objects) a build over 10,000
episodes collects over 2,000 times while it holds several hundred thousand objects (Dagster's
definitions and events, listings, rows made dicts for the checks), and each older-generation pass
walks them all again: a new series' build spent 1.5-1.7 s of about 12 s in the collector. The
pipeline's data lives in Polars and Arrow, outside the collector, and its Python objects rarely
form cycles, so a build collects once per BUILD_PACE[0] new objects instead (15 collections for
that build, 0.13 s). Memory is no concern: cyclic garbage waits at most that many objects longer.
A build also leaves out of its collections the objects the process held when it began (the
imported modules and definitions, which live as long as the process): each older-generation
pass walks only what the build made.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

BUILD_PACE = (50_000, 10, 10)  # gc.set_threshold's (first, second, third) during a build


def pace_for_a_run() -> None:
    """Collect at BUILD_PACE for the rest of this process: a run's own process (the run worker
    the webserver and the daemon launch), which ends with its run."""
    if gc.get_threshold()[0] < BUILD_PACE[0]:
        gc.set_threshold(*BUILD_PACE)


@contextmanager
def held_objects_frozen() -> Iterator[None]:
    """Leave the objects held on entry out of the collector's walks while inside (`gc.freeze`);
    they are collected again on leaving the outermost such block. `gc.unfreeze` gives back every
    frozen object at once, so an inner block (a series' packing inside a build) leaves that to
    the outer one: what it froze stays frozen until the build ends, which delays only cyclic
    garbage (the rest is freed as its last reference goes)."""
    outermost = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if outermost:
            gc.unfreeze()


@contextmanager
def paced_for_a_build() -> Iterator[None]:
    """Collect at BUILD_PACE while inside (`vae build`), leaving out the objects held on entry
    (`held_objects_frozen`), then at the pace before, with those objects collected again."""
    before = gc.get_threshold()
    pace_for_a_run()
    try:
        with held_objects_frozen():
            yield
    finally:
        gc.set_threshold(*before)
