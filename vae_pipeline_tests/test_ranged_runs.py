"""Ranged runs: a stage over many series is one run; the roll-up runs once and refuses partial inputs."""

import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.cli.build import build
from vae_pipeline.cli.common import settings
from vae_pipeline.definitions import defs
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline_tests.conftest import copy_runs

ROLL_UP = {"episode_table", "dataset_rows", "dataset_episodes", "dataset_card"}
PARTITIONED = {"episodes", "renders", "verdicts", "labels", "bundles"}

# Scores planted in two clean episodes, and their labels worked out by hand from the two rubrics'
# rules (meta/rubric-v1.2.json, meta/rubric-archive/rubric-v1.0.json), with no defect and a clean
# video (no gate fails):
# - mean 29/6 = 4.83, min 4: 1.2 R4 (mean < 5.0) FAIL; 1.0 R4 (< 4.5) no, R6 (min < 5) PASS_WITH_NITS
# - all 5: 1.2 R6 (min < 6) PASS_WITH_NITS; 1.0 R6 (min < 5) no, R7 no, R8 PASS
PLANTED_SCORES = [
    ({"brief_fidelity": 4, "composition": 5, "typography": 5, "motion": 5, "craft": 5, "engagement": 5},
     "FAIL", "PASS_WITH_NITS"),
    ({"brief_fidelity": 5, "composition": 5, "typography": 5, "motion": 5, "craft": 5, "engagement": 5},
     "PASS_WITH_NITS", "PASS"),
]


def plant_rubric_flips(sample, runs: Path) -> dict[str, tuple[str, str]]:
    """Rewrite two clean, judged run folders' judge.json with the planted scores; episode id ->
    (label under 1.2, label under 1.0)."""
    clean = [p for p in sample.episodes if p.bad is None and p.variant == "clean" and not p.archive
             and not p.brief.get("loop") and sample.series[p.series] == "completed"]
    planted = {}
    for plan, (scores, label_12, label_10) in zip(clean, PLANTED_SCORES, strict=False):
        path = runs / plan.series / plan.episode_id / "judge.json"
        judge = json.loads(path.read_text())
        judge["answer"].update(scores=scores, defects=[])
        judge["host"].update(label=label_12, rule=None, gates_failed=[])
        path.write_text(json.dumps(judge, indent=2) + "\n")
        planted[plan.episode_id] = (label_12, label_10)
    assert len(planted) == 2
    return planted


def labels_rows(home: Path) -> dict[str, dict]:
    tables = sorted((home / "tables" / "labels").glob("*.parquet"))
    return {row["id"]: row for path in tables for row in pl.read_parquet(path).iter_rows(named=True)}


def test_a_build_over_every_series_is_one_run_and_a_rehost_too(sample_runs, pipeline_env, tmp_path):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    planted = plant_rubric_flips(sample_runs, runs)
    build(runs, pipeline_env["dataset"])
    instance = dg.DagsterInstance.get()
    # every stage of every series and the roll-up after them: one run, each asset once per series,
    # the review site included (issue 19: the publish checks the sample's bad episodes fail block
    # nothing but the release) — and that run succeeded
    first_runs = instance.get_runs()  # newest first
    assert len(first_runs) == 1 and dg.AssetKey("review_site") in first_runs[0].asset_selection
    assert first_runs[0].status == dg.DagsterRunStatus.SUCCESS
    assert {id_: labels_rows(pipeline_env["home"])[id_]["label"] for id_ in planted} == \
        {id_: before for id_, (before, _) in planted.items()}
    check_every_materialization_describes_the_whole_run(instance, sample_runs, pipeline_env["home"])
    summary = build(runs, pipeline_env["dataset"], rubric_version="1.0")
    # the rehost: rubric, labels over every series, the roll-up and the review site once, in one run
    rehost_runs = instance.get_runs()[:-1]
    assert len(rehost_runs) == 1 and dg.AssetKey("review_site") in rehost_runs[0].asset_selection
    assert rehost_runs[0].status == dg.DagsterRunStatus.SUCCESS
    assert sorted(summary["materialized"]["labels"]) == sorted(sample_runs.series)
    assert all(summary["materialized"][key] == [None] for key in ROLL_UP | {"rubric"})
    assert not (PARTITIONED - {"labels"}) & set(summary["materialized"])
    after = labels_rows(pipeline_env["home"])
    assert {id_: after[id_]["label"] for id_ in planted} == {id_: later for id_, (_, later) in planted.items()}
    assert {row["host_rubric_version"] for row in after.values()} == {"1.0"}
    check_labels_say_what_changed(instance, sample_runs, planted, after)


def labels_metadata(instance: dg.DagsterInstance, series: str) -> dict:
    (record,) = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("labels"), asset_partitions=[series]), limit=1).records
    return record.asset_materialization.metadata


def check_labels_say_what_changed(instance, sample_runs, planted: dict[str, tuple[str, str]], after: dict) -> None:
    """Issue 29 item 4: `labels` names this run's changes, never "no label changed" above rows
    that show one; the drift check says it compared nothing under 1.0 (the judge's answers were
    stored under 1.2), and why."""
    by_series = {p.episode_id: p.series for p in sample_runs.episodes}
    for episode_id, (before, later) in planted.items():
        assert f"- {before} → {later}: " in labels_metadata(instance, by_series[episode_id])["transitions"].value
    drift = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("labels"), "no_drift_from_stored_host_label")).evaluation
    assert drift.passed and drift.metadata["compared"].value == 0
    assert drift.description.startswith("0 compared: no judge.json host label was stored under rubric 1.0"), \
        drift.description
    assert "under 1.2" in drift.description
    # labels again, under the same rubric: nothing changes in this run, and it says the rows keep an earlier one
    series = by_series[next(iter(planted))]
    with settings(VAE_RUBRIC_VERSION="1.0"):
        assert defs.resolve_job_def("rehost").execute_in_process(
            instance=instance, partition_key=series,
            asset_selection=[dg.AssetKey("rubric"), dg.AssetKey("labels")]).success
    kept = sum(1 for row in after.values() if by_series[row["id"]] == series and row["rehosted_at"] is not None)
    metadata = labels_metadata(instance, series)
    assert kept >= 1 and metadata["labels_changed"].value == 0
    assert metadata["transitions"].value == (
        f"no label changed in this run\n\n{kept} episode(s) keep the change of an earlier run "
        "(previous_final_label → label, at rehosted_at)")


def run_table(metadata: dict) -> dict[str, dict[str, str]]:
    """The `series_in_this_run` Markdown table: series -> {column: cell}."""
    lines = [line for line in metadata["series_in_this_run"].value.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[1:]]
    return {row["series"]: row for row in rows}


def check_every_materialization_describes_the_whole_run(instance, sample_runs, home: Path) -> None:
    """Issue 19 item 4: whichever series' materialization the asset page shows, it lists every
    series the run covered with its counts."""
    for key in PARTITIONED:
        latest = instance.get_latest_materialization_event(dg.AssetKey(key))  # what the asset's page shows
        assert sorted(run_table(latest.asset_materialization.metadata)) == sorted(sample_runs.series), key
        for series in sample_runs.series:
            (record,) = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[series]), limit=1).records
            assert sorted(run_table(record.asset_materialization.metadata)) == sorted(sample_runs.series), key
    # the labels' counts: each series' episodes (its stored table's rows), split by label
    table = run_table(instance.get_latest_materialization_event(dg.AssetKey("labels")).asset_materialization.metadata)
    for series in sample_runs.series:
        row = table[series]
        assert int(row["episodes"]) == pl.read_parquet(home / "tables" / "labels" / f"{series}.parquet").height
        assert int(row["episodes"]) == sum(int(v) for k, v in row.items()
                                           if k not in ("series", "episodes", "labels_changed"))


def test_the_roll_up_refuses_a_series_stage_that_is_missing_or_older_than_its_episodes(
        sample_runs, pipeline_env, tmp_path):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    build(runs, pipeline_env["dataset"])
    instance = dg.DagsterInstance.get()
    series = sorted(s for s, status in sample_runs.series.items() if status == "completed")[-1]
    rows_before = (pipeline_env["dataset"] / "episodes.jsonl").read_bytes()
    with settings(VAE_RUNS_ROOT=str(runs)):
        check_roll_up_refuses(sample_runs, pipeline_env, runs, instance, series, rows_before)


def check_roll_up_refuses(sample_runs, pipeline_env, runs, instance, series, rows_before):
    job = defs.resolve_job_def("refresh")
    roll_up = [dg.AssetKey("episode_table"), dg.AssetKey("dataset_rows")]

    def failure(result: dg.ExecuteInProcessResult) -> str:
        """Everything the failed episode_table step says: its error and their causes, or the Failure's description."""
        assert not result.success
        data = next(e.step_failure_data for e in result.all_events if e.is_step_failure and e.step_key == "episode_table")
        texts, error = [data.user_failure_data.description if data.user_failure_data else ""], data.error
        while error is not None:
            texts.append(error.message)
            error = error.cause
        return "\n".join(texts)

    # labels missing for one series
    labels_table = pipeline_env["home"] / "tables" / "labels" / f"{series}.parquet"
    saved = labels_table.read_bytes()
    labels_table.unlink()
    description = failure(job.execute_in_process(instance=instance, asset_selection=roll_up, raise_on_error=False))
    assert f"labels has not been materialized for series {series}" in description
    labels_table.write_bytes(saved)

    # the series' episodes changed and were re-materialized; its other stages were not
    extra = next(p for p in sample_runs.episodes if p.series == series and p.bad is None and not p.archive)
    (runs / series / extra.episode_id / "work" / "README.txt").write_text("a note added after the run\n")
    assert job.execute_in_process(instance=instance, asset_selection=[dg.AssetKey("episodes")],
                                  partition_key=series).success
    description = failure(job.execute_in_process(instance=instance, asset_selection=roll_up, raise_on_error=False))
    for stage in ("renders", "verdicts", "labels", "bundles"):
        assert f"{series}: {stage} is older than its episodes" in description
    assert (pipeline_env["dataset"] / "episodes.jsonl").read_bytes() == rows_before
    # once the stages have caught up, the roll-up runs
    assert job.execute_in_process(instance=instance, partition_key=series, asset_selection=[
        dg.AssetKey(k) for k in ("renders", "verdicts", "labels", "bundles")]).success
    assert job.execute_in_process(instance=instance, asset_selection=roll_up).success


def test_stale_series_apart_in_partition_order_make_one_run_per_range(sample_runs, pipeline_env, tmp_path):
    """Series needing the same stages run together, one run per contiguous range of them."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    source = next(s for s, status in sample_runs.series.items() if status == "completed")
    added = [f"2026-11-{day:02d}-s9" for day in range(1, 8)]
    for series_id in added:
        (runs / series_id).mkdir()
        info = json.loads((runs / source / "series.json").read_text())
        (runs / series_id / "series.json").write_text(json.dumps({**info, "series_id": series_id}))
        plan = next(p for p in sample_runs.episodes if p.series == source and p.bad is None and not p.archive)
        shutil.copytree(runs / source / plan.episode_id, runs / series_id / plan.episode_id, symlinks=True)
    build(runs, pipeline_env["dataset"])
    instance = dg.DagsterInstance.get()
    partitions = instance.get_dynamic_partitions(SERIES)
    # change the 2nd, 3rd and 6th new series: two ranges
    for index in (1, 2, 5):
        (runs / added[index] / plan.episode_id / "work" / "README.txt").write_text("changed\n")
    before = len(instance.get_runs())
    summary = build(runs, pipeline_env["dataset"])
    new_runs = instance.get_runs()[: len(instance.get_runs()) - before]
    ranges = sorted((r.tags.get("dagster/asset_partition_range_start", r.tags.get("dagster/partition")),
                     r.tags.get("dagster/asset_partition_range_end", r.tags.get("dagster/partition")))
                    for r in new_runs if "dagster/asset_partition_range_start" in r.tags or "dagster/partition" in r.tags)
    assert (added[1], added[2]) in ranges and (added[5], added[5]) in ranges
    assert sorted(summary["materialized"]["episodes"]) == sorted(added[i] for i in (1, 2, 5))
    assert partitions.index(added[2]) == partitions.index(added[1]) + 1
    assert summary["materialized"]["episode_table"] == [None]



def test_a_ranged_run_reads_the_partitions_once_for_its_per_series_metadata(tmp_path):
    """Dagster's `add_asset_metadata(partition_key=...)` lists every partition to check the key is
    in the run's range (three queries a call: N^2 over a range of N series). Inside
    `partitions_read_once` the step lists them once, each series still gets its own metadata, a
    key outside the run's range is still refused, and the instance reads afresh afterwards."""
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from vae_pipeline.storage.partitions import partitions_read_once, series_partitions

    keys = [f"2026-01-{day:02d}-s{day}" for day in range(1, 21)]
    reads = []
    refused = []

    @dg.asset(partitions_def=series_partitions, backfill_policy=dg.BackfillPolicy.single_run())
    def per_series(context: dg.AssetExecutionContext) -> dg.Output[None]:
        storage = context.instance.event_log_storage
        real = storage.get_dynamic_partitions
        storage.get_dynamic_partitions = lambda name: reads.append(name) or real(name)
        try:
            with partitions_read_once(context.instance):
                with partitions_read_once(context.instance):  # a scope inside another leaves it whole
                    context.add_asset_metadata({"series_named": keys[0]}, partition_key=keys[0])
                for key in context.partition_keys:
                    context.add_asset_metadata({"series_named": key}, partition_key=key)
                try:
                    context.add_asset_metadata({"series_named": keys[-1]}, partition_key=keys[-1])
                except dg.DagsterInvariantViolationError as exc:
                    refused.append(str(exc))
                context.instance.add_dynamic_partitions(SERIES, ["2026-02-01-late"])
                assert "2026-02-01-late" not in context.instance.get_dynamic_partitions(SERIES)
            assert "2026-02-01-late" in context.instance.get_dynamic_partitions(SERIES)
        finally:
            del storage.get_dynamic_partitions
        return dg.Output(None)

    with dg.DagsterInstance.ephemeral(tempdir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SERIES, keys)
        tags = {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[9]}
        job = dg.Definitions(assets=[per_series]).resolve_implicit_global_asset_job_def()
        assert job.execute_in_process(instance=instance, tags=tags).success
        assert reads == [SERIES, SERIES]  # once inside, once after; not three times a series
        assert len(refused) == 1 and keys[-1] in refused[0]
        for key in keys[:10]:
            (record,) = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("per_series"), asset_partitions=[key]), limit=1).records
            assert record.asset_materialization.metadata["series_named"].value == key
        assert not instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("per_series"), asset_partitions=[keys[-1]]), limit=1).records


def test_an_in_process_run_reads_the_series_once_however_often_its_steps_ask(tmp_path, monkeypatch):
    """Dagster lists every series again each time a step asks for its partition keys or range
    (and at the run's creation); `vae build`'s in-process run answers them all from one read
    (no step adds a series), and the instance reads afresh once the run is over."""
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from vae_pipeline.cli import launch
    from vae_pipeline.storage.partitions import series_partitions

    keys = [f"2026-01-{day:02d}-s{day}" for day in range(1, 11)]
    seen = []

    def stage(name: str, upstream: list[str]) -> dg.AssetsDefinition:
        @dg.asset(name=name, deps=upstream, partitions_def=series_partitions,
                  backfill_policy=dg.BackfillPolicy.single_run())
        def _stage(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
            for _ in range(3):
                seen.append(list(context.partition_keys))
            return dg.MaterializeResult()
        return _stage

    chain = [stage("first", []), stage("second", ["first"]), stage("third", ["second"])]
    job = dg.Definitions(assets=chain).resolve_implicit_global_asset_job_def()
    monkeypatch.setattr(launch, "job_named", lambda name: job)
    with dg.DagsterInstance.ephemeral(tempdir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SERIES, keys)
        storage = instance.event_log_storage
        real, reads = storage.get_dynamic_partitions, []
        monkeypatch.setattr(storage, "get_dynamic_partitions", lambda name: reads.append(name) or real(name))
        tags = {ASSET_PARTITION_RANGE_START_TAG: keys[2], ASSET_PARTITION_RANGE_END_TAG: keys[6]}
        assert launch.run_job("refresh", instance, tags=tags).success
        assert reads == [SERIES]
        assert seen == [keys[2:7]] * 9
        instance.add_dynamic_partitions(SERIES, ["2026-02-01-late"])
        assert "2026-02-01-late" in instance.get_dynamic_partitions(SERIES) and reads == [SERIES, SERIES]
