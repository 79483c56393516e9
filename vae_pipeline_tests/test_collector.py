"""The garbage collector's pace (engines/collector): `vae build` and a run's own process collect
at BUILD_PACE, a build leaves the objects held when it began out of its collections, and a build
called inside another process gives that process its pace and those objects back."""

import contextlib
import gc
import weakref

import dagster as dg
import pytest

import vae_pipeline.cli.build as cli_build
from vae_pipeline.engines import collector
from vae_pipeline.engines.executor import vae_executor

DEFAULT = (700, 10, 10)  # Python's own pace


@dg.op
def note_pace() -> list[int]:
    return list(gc.get_threshold())


@dg.job(executor_def=vae_executor)
def paced_job():
    note_pace()


@pytest.fixture
def default_pace():
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*before)


def test_a_build_collects_at_the_build_pace_and_gives_the_pace_back(default_pace):
    with collector.paced_for_a_build():
        assert gc.get_threshold() == collector.BUILD_PACE
    assert gc.get_threshold() == DEFAULT
    with pytest.raises(RuntimeError, match="failed build"), collector.paced_for_a_build():
        raise RuntimeError("failed build")
    assert gc.get_threshold() == DEFAULT


def test_a_build_leaves_what_the_process_held_out_of_its_collections_and_gives_it_back(default_pace):
    """A cycle the process held when the build began and dropped during it is collected only once
    the build is over (the build's own passes do not walk it); a failed build gives it back too."""
    for failing in (False, True):
        cycle = Node()
        cycle.self = cycle
        alive = weakref.ref(cycle)
        with contextlib.suppress(RuntimeError), collector.paced_for_a_build():
            assert gc.get_freeze_count() > 0
            del cycle
            gc.collect()
            assert alive() is not None
            if failing:
                raise RuntimeError("failed build")
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert alive() is None


def test_a_series_packed_inside_a_build_leaves_the_build_s_objects_frozen_until_the_build_ends(default_pace):
    """The packing of a series freezes too (`bundle_rows`); leaving it inside a build must not
    give back what the build froze: only the build's end does, as Python unfreezes all at once."""
    cycle = Node()
    cycle.self = cycle
    alive = weakref.ref(cycle)
    with collector.paced_for_a_build():
        with collector.held_objects_frozen():
            pass
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None


class Node:
    """An object that can refer to itself."""


def test_a_slower_pace_already_set_is_kept(default_pace):
    gc.set_threshold(200_000, 10, 10)
    collector.pace_for_a_run()
    assert gc.get_threshold() == (200_000, 10, 10)


def test_vae_build_plans_and_runs_at_the_build_pace(default_pace, pipeline_env, monkeypatch, tmp_path):
    paces = []
    monkeypatch.setattr(cli_build, "_build", lambda *args: paces.append(gc.get_threshold()) or {})
    (tmp_path / "runs").mkdir()
    cli_build.build(tmp_path / "runs", pipeline_env["dataset"])
    assert paces == [collector.BUILD_PACE] and gc.get_threshold() == DEFAULT


def test_a_run_on_the_in_process_engine_runs_its_steps_at_the_build_pace(default_pace, monkeypatch):
    """As the run worker the webserver and the daemon launch executes a run: with the job's own
    executor (`execute_in_process` would put Dagster's in-process executor in its place)."""
    monkeypatch.delenv("VAE_EXECUTOR", raising=False)
    with dg.instance_for_test() as instance, \
            dg.execute_job(dg.reconstructable(paced_job), instance=instance) as result:
        assert result.success
        assert tuple(result.output_for_node("note_pace")) == collector.BUILD_PACE
