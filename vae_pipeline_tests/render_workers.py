"""A build's process with the review site's render workers, for a test that kills it: kept apart
from the test module so that the spawned processes import the site's module, not the suite's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl

from vae_pipeline.domain.review import site
from vae_pipeline.domain.verdicts.rubric import load_rubric


def busy(folder: str) -> None:
    """A render worker's task that takes long: says its pid, then waits."""
    (Path(folder) / str(os.getpid())).touch()
    time.sleep(600)


def build_process_with_workers(out: str, rubric_file: str, folder: str) -> None:
    """The site's render workers, each busy, until this process is killed."""
    inputs = site.SiteInputs(rows=pl.DataFrame(), published=set(), withheld={}, checks=[], history={},
                             rubric=load_rubric(Path(rubric_file)))
    with site.render_workers(2, inputs, Path(out).parent, Path(out), "v") as pool:
        for future in [pool.submit(busy, folder) for _ in range(2)]:
            future.result()
