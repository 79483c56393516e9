"""The sensors, the nightly schedule and rehosting, on a real Dagster instance."""

import json
import os
import subprocess
import sys
import shutil

import dagster as dg

from vae_pipeline.assets.episodes import episodes
from vae_pipeline.assets.meta import rubric
from vae_pipeline.automation.planner import REFRESH_TAG, asset_specs, covers_every_item, next_runs
from vae_pipeline.automation.schedules import nightly_refresh
from vae_pipeline.automation.sensors import new_series_sensor, refresh_followup_sensor
from vae_pipeline.cli.build import build
from vae_pipeline.definitions import defs, resources_from_environ
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import ProjectMeta, Warehouse
from vae_pipeline.storage.versions import StaleItem, inputs_fingerprint
from vae_pipeline_tests.conftest import copy_runs

PARTITIONED = {"episodes", "renders", "verdicts", "labels"}


def _runs(requests) -> list[tuple[str | None, str | None, list[str]]]:
    """Each requested run as (first series, last series, assets): its partition, or Dagster's
    partition range tags."""
    return [(r.partition_key or r.tags.get("dagster/asset_partition_range_start"),
             r.partition_key or r.tags.get("dagster/asset_partition_range_end"),
             sorted(k.to_user_string() for k in r.asset_selection)) for r in requests]


def _resources_env(runs, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("VAE_RUNS_ROOT", str(runs))
    return apply_defaults()


def _resources(runs, monkeypatch):
    resources = resources_from_environ(_resources_env(runs, monkeypatch))
    return {key: resources[key] for key in ("runs_root", "project_meta", "scrub_settings", "dataset_folder")}


def test_new_series_sensor_adds_partitions_and_requests_their_runs(sample_runs, pipeline_env, tmp_path, monkeypatch):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    (runs / "bad..id").mkdir()
    resources = _resources(runs, monkeypatch)
    with dg.instance_for_test() as instance:
        with dg.build_sensor_context(instance=instance, resources=resources) as context:
            result = new_series_sensor(context)
        assert sorted(instance.get_dynamic_partitions(SERIES)) == sorted(sample_runs.series)
        # the new series' first stages run in one run over all of them (labels wait for the rubric)
        first, *_, last = sorted(sample_runs.series)
        assert _runs(result.run_requests) == [(first, last, ["bundles", "episodes", "renders", "verdicts"])]
        assert all(r.tags[REFRESH_TAG] == "true" for r in result.run_requests)
        with dg.build_sensor_context(instance=instance, resources=resources) as context:
            again = new_series_sensor(context)
        assert isinstance(again, dg.SkipReason)


def test_nightly_schedule_requests_only_what_is_stale(sample_runs, pipeline_env, tmp_path, monkeypatch):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    build(runs, pipeline_env["dataset"])
    resources = _resources(runs, monkeypatch)
    instance = dg.DagsterInstance.get()
    with dg.build_schedule_context(instance=instance, resources=resources) as context:
        quiet = nightly_refresh(context)
    assert isinstance(quiet, dg.SkipReason)
    source = next(s for s, status in sample_runs.series.items() if status == "completed")
    shutil.copytree(runs / source, runs / "2026-11-01-s9")
    series_json = runs / "2026-11-01-s9" / "series.json"
    series_json.write_text(json.dumps({**json.loads(series_json.read_text()), "series_id": "2026-11-01-s9"}))
    with dg.build_schedule_context(instance=instance, resources=resources) as context:
        requests = nightly_refresh(context)
    # the new series' stages and, in the same run after them, the roll-up (once, not once per series)
    # (the leaderboard's assets read every series' episodes, verdicts and bundles; the review site the roll-up)
    assert _runs(requests) == [("2026-11-01-s9", "2026-11-01-s9", [
        "bundles", "dataset_card", "dataset_episodes", "dataset_rows", "entrants", "episode_table", "episodes",
        "human_votes", "judge_agreement", "labels", "leaderboard", "pairwise_judgments", "renders", "review_site",
        "verdicts"])]
    assert "2026-11-01-s9" in instance.get_dynamic_partitions(SERIES)
    # issue 19: the run the schedule requests ends green although a publish check it runs fails
    # (the sample's bad episodes): the checks refuse the release, not the refresh
    (request,) = requests
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=request.partition_key, asset_selection=request.asset_selection,
        tags=request.tags, raise_on_error=False)
    evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert result.success and evaluations["no_invalid_episodes"] is False


def test_followup_sensor_launches_the_next_stage(sample_runs, pipeline_env, tmp_path, monkeypatch):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    resources = _resources(runs, monkeypatch)
    instance = dg.DagsterInstance.get()
    series = sorted(sample_runs.series)[0]
    instance.add_dynamic_partitions(SERIES, sorted(sample_runs.series))
    result = defs.resolve_job_def("refresh").execute_in_process(
        instance=instance, partition_key=series, asset_selection=[dg.AssetKey("episodes")], tags={REFRESH_TAG: "true"})
    success = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)[0].dagster_event
    with dg.build_run_status_sensor_context(sensor_name="refresh_followup_sensor", dagster_instance=instance,
                                            dagster_run=result.dagster_run, dagster_event=success,
                                            resources=resources) as context:  # runs_root holds its listings
        requests = refresh_followup_sensor(context)
    # the finished series moves on to its next stage; the others start from episodes in one run
    # over both, and what is missing downstream of it in the same series comes along; labels wait
    # for the rubric's run
    _, second, third = sorted(sample_runs.series)
    assert _runs(requests) == [(series, series, ["bundles", "renders", "verdicts"]),
                               (second, third, ["bundles", "episodes", "renders", "verdicts"]),
                               (None, None, ["brief_bank", "dataset_meta", "rubric"])]


def test_rubric_switch_rehosts_labels_only(sample_runs, pipeline_env, tmp_path):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    build(runs, pipeline_env["dataset"])
    before = {r["id"]: r for r in map(json.loads, (pipeline_env["dataset"] / "episodes.jsonl").read_text().splitlines())}
    summary = build(runs, pipeline_env["dataset"], rubric_version="1.0")
    materialized = summary["materialized"]
    assert not PARTITIONED - {"labels"} & set(materialized), materialized
    assert sorted(materialized["labels"]) == sorted(sample_runs.series)
    assert {"rubric", "episode_table", "dataset_rows", "dataset_card"} <= set(materialized)
    after = {r["id"]: r for r in map(json.loads, (pipeline_env["dataset"] / "episodes.jsonl").read_text().splitlines())}
    assert after.keys() == before.keys()
    changed = {i for i in after if after[i]["label"] != before[i]["label"]}
    for episode_id, row in after.items():
        assert row["host_rubric_version"] == "1.0"
        if episode_id in changed:
            assert row["rehosted_at"] is not None and row["previous_final_label"] == before[episode_id]["label"]
        else:
            assert (row["rehosted_at"], row["previous_final_label"]) == (before[episode_id]["rehosted_at"],
                                                                        before[episode_id]["previous_final_label"])
    with Warehouse(path=str(pipeline_env["home"])).connect() as con:
        history = con.execute("SELECT id, old_label, new_label, host_rubric_version FROM label_history").fetchall()
    published_history = {(i, o, n) for i, o, n, v in history if i in after}
    assert published_history == {(i, before[i]["label"], after[i]["label"]) for i in changed}
    assert all(v == "1.0" for *_, v in history)
    # back to the newest rubric: labels again, still nothing upstream
    back = build(runs, pipeline_env["dataset"])
    assert not PARTITIONED - {"labels"} & set(back["materialized"])


def _labels_spec() -> dg.AssetSpec:
    return next(s for s in asset_specs() if s.key.to_user_string() == "labels")


def test_fingerprint_moves_with_code_version():
    spec = _labels_spec()
    with dg.instance_for_test() as instance:
        base = inputs_fingerprint(instance, spec, "s1", ["s1"], None)
        changed = spec.replace_attributes(code_version=f"{spec.code_version}-corrected")
        assert inputs_fingerprint(instance, changed, "s1", ["s1"], None) != base
        assert inputs_fingerprint(instance, spec, "s1", ["s1"], None) == base


def test_fingerprint_follows_what_the_upstream_materializations_produced(sample_runs, pipeline_env, tmp_path,
                                                                         monkeypatch):
    """labels[s] records the data versions of `rubric` and of `episodes[s]`, as real materializations
    left them: a re-run that produced the same data leaves the fingerprint, different data moves
    it, and another series' episodes do not touch it."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    resources = resources_from_environ(_resources_env(runs, monkeypatch))
    series, other = sorted(s for s, status in sample_runs.series.items() if status == "completed")
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(SERIES, [series, other])
    spec = _labels_spec()

    def fingerprint() -> str:
        return inputs_fingerprint(instance, spec, series, [series, other], None)

    def materialize(asset, partition: str | None = None, **overrides) -> None:
        result = dg.materialize([asset], instance=instance, resources={**resources, **overrides},
                                partition_key=partition)
        assert result.success

    nothing = fingerprint()
    materialize(rubric)
    under_12 = fingerprint()
    assert under_12 != nothing
    materialize(rubric)  # ran again on the same rubric: the same data version
    assert fingerprint() == under_12
    materialize(rubric, project_meta=ProjectMeta(path=str(pipeline_env["meta"]), rubric_version="1.0"))
    assert fingerprint() not in (nothing, under_12)
    materialize(rubric)  # back to 1.2: the data, and so the fingerprint, are 1.2's again
    assert fingerprint() == under_12

    materialize(episodes, series)
    parsed = fingerprint()
    assert parsed != under_12
    materialize(episodes, series)  # nothing changed in the series: the same data version
    assert fingerprint() == parsed
    materialize(episodes, other)  # another series' episodes
    assert fingerprint() == parsed
    gone = next(p for p in sample_runs.episodes if p.series == series and p.bad is None and not p.archive)
    shutil.rmtree(runs / series / gone.episode_id)
    materialize(episodes, series)  # one episode fewer: different data
    assert fingerprint() not in (nothing, under_12, parsed)


def test_the_planned_order_of_assets_is_the_same_in_every_process() -> None:
    """Dagster keeps an asset's deps in a set, whose order follows the process's hash seed: the
    build's stage lines must not."""
    script = ("from vae_pipeline.storage.versions import _topological\n"
              "from vae_pipeline.automation.planner import asset_specs\n"
              "print([s.key.to_user_string() for s in _topological(asset_specs())])")
    orders = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                             capture_output=True, text=True, check=True).stdout for seed in range(1, 6)}
    assert len(orders) == 1


def test_a_build_plans_again_only_when_its_runs_left_something_stale(tmp_path, pipeline_env, monkeypatch):
    """A round whose runs cover every stale item ends the build: a full build, a new series and a
    rehost each plan once (planning is a pass over every series), and the next build finds
    nothing stale. A round whose runs leave an item out (a costly asset waiting for its upstream's
    new data version) plans again."""
    from vae_pipeline.cli import build as build_module
    from vae_pipeline.sample.generator import generate
    from vae_pipeline_tests.conftest import META

    sample = generate(tmp_path / "sample", META, series=2, episodes=1, seed=3, bad=False)
    first, second = sorted(sample.series)
    runs = tmp_path / "runs"
    shutil.copytree(sample.root / first, runs / first)
    passes = []
    planned = build_module.stale
    monkeypatch.setattr(build_module, "stale", lambda *args: passes.append(1) or planned(*args))

    def planning_passes(**options) -> tuple[int, dict]:
        passes.clear()
        summary = build(runs, pipeline_env["dataset"], **options)
        assert summary["failed_runs"] == []
        return len(passes), summary["materialized"]

    assert planning_passes()[0] == 1
    shutil.copytree(sample.root / second, runs / second)
    count, materialized = planning_passes()
    assert count == 1 and materialized["labels"] == [second]
    count, materialized = planning_passes(rubric_version="1.0")
    assert count == 1 and sorted(materialized["labels"]) == [first, second]
    assert planning_passes(rubric_version="1.0") == (1, {})

    spec = {s.key.to_user_string(): s for s in asset_specs()}
    partitions = [first, second]
    waiting = [StaleItem(spec["episodes"].key, first, "inputs or code changed"),
               StaleItem(spec["renders"].key, first, "upstream stale", frozenset({(spec["episodes"].key, first)}))]
    runs_now = next_runs(waiting, partitions)
    assert [sorted(k.to_user_string() for k in run.keys) for run in runs_now] == [["episodes"]]
    assert not covers_every_item(runs_now, waiting, partitions)
    assert covers_every_item(runs_now, waiting[:1], partitions)
