"""A rubric switch made where the UI runs, launched as a backfill of the `rehost` job over every
series, executed by the real daemon: one run, every label rehosted, the backfill successful and
the release still blocked. And the same rehost launched from the asset graph."""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster_graphql.test.utils import execute_dagster_graphql

from vae_pipeline.automation.planner import failed_only_on_checks
from vae_pipeline.cli.build import build, check_results
from vae_pipeline.cli.publish import publish
from vae_pipeline.definitions import defs
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline_tests.conftest import copy_runs
from vae_pipeline_tests.test_ranged_runs import labels_rows, plant_rubric_flips

WORKSPACE = PROJECT_ROOT / "workspace.yaml"
# What the UI sends for Jobs → rehost → Materialize all → All partitions, as a backfill.
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on PartitionSetNotFoundError { message }
  }
}
"""
DAEMON_WITH_SHORT_TICKS = """
import sys
import dagster._daemon.controller
dagster._daemon.controller.DEFAULT_DAEMON_INTERVAL_SECONDS = 3
from dagster._daemon.cli import main
sys.argv[0] = "dagster-daemon"
sys.exit(main())
"""
FINISHED = {BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED_FAILED,
            BulkActionStatus.FAILED, BulkActionStatus.CANCELED}


def launch_backfill(instance: dg.DagsterInstance, params: dict) -> str:
    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(WORKSPACE)])) as workspace:
        result = execute_dagster_graphql(workspace.create_request_context(), LAUNCH_BACKFILL,
                                         variables={"params": params})
    launched = result.data["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def launch_rehost_backfill(instance: dg.DagsterInstance) -> str:
    selector = {"partitionSetName": "rehost_partition_set",
                "repositorySelector": {"repositoryLocationName": "vae_pipeline", "repositoryName": "__repository__"}}
    return launch_backfill(instance, {"selector": selector, "allPartitions": True})


def run_daemon_until_done(instance: dg.DagsterInstance, backfill_id: str, env: dict[str, str],
                          log: Path, timeout_s: float = 400) -> BulkActionStatus:
    """`dagster-daemon run` on the instance until the backfill has finished (bounded).

    The daemon's backfill loop waits 30 s between iterations, and an asset backfill needs one per
    stage; the test's daemon ticks every 3 s instead (the constant Dagster reads), nothing else
    changed: it is the `dagster-daemon` entry point, in a process of its own."""
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-c", DAEMON_WITH_SHORT_TICKS, "run", "-w", str(WORKSPACE)],
                                   env=env, stdout=out, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                backfill = instance.get_backfill(backfill_id)
                in_flight = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id},
                                                            statuses=[dg.DagsterRunStatus.QUEUED,
                                                                      dg.DagsterRunStatus.STARTING,
                                                                      dg.DagsterRunStatus.STARTED]))
                if backfill.status in FINISHED and not in_flight:
                    return backfill.status
                time.sleep(2)
            raise AssertionError(f"backfill not finished after {timeout_s} s:\n{log.read_text()[-4000:]}")
        finally:
            process.terminate()
            process.wait(30)


def test_a_ui_backfill_of_rehost_under_another_rubric_rehosts_every_series(sample_runs, pipeline_env, tmp_path):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    planted = plant_rubric_flips(sample_runs, runs)
    build(runs, pipeline_env["dataset"])  # under the newest rubric, 1.2
    instance = dg.DagsterInstance.get()
    blocked = {c["check"] for c in check_results(instance, defs) if c["passed"] is False}
    assert "no_invalid_episodes" in blocked  # the sample runs hold bad episodes in a completed series

    # the UI restarted with rubric 1.0: the daemon (and the runs it launches) see VAE_RUBRIC_VERSION=1.0
    env = apply_defaults({**os.environ, "VAE_RUNS_ROOT": str(runs.resolve()), "VAE_RUBRIC_VERSION": "1.0"})
    backfill_id = launch_rehost_backfill(instance)
    status = run_daemon_until_done(instance, backfill_id, env, tmp_path / "daemon.log")

    # item 10: the rehost did its work, so the backfill ends successful
    assert status == BulkActionStatus.COMPLETED_SUCCESS, (tmp_path / "daemon.log").read_text()[-4000:]
    backfill_runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    # issue 10 / item 12: every series in one run, the roll-up once in it
    assert [run.status for run in backfill_runs] == [dg.DagsterRunStatus.SUCCESS]
    materialized = [(e.asset_key.to_user_string(), e.partition) for e in
                    (r.asset_materialization for r in instance.fetch_materializations(
                        dg.AssetRecordsFilter(asset_key=dg.AssetKey("labels")), limit=100).records)
                    if e is not None]
    assert len({p for key, p in materialized}) == len(sample_runs.series)
    for key in ("episode_table", "dataset_rows", "dataset_episodes", "dataset_card", "rubric"):
        events = instance.get_records_for_run(backfill_runs[0].run_id,
                                              of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        assert sum(1 for e in events if e.asset_key == dg.AssetKey(key)) == 1, key

    # item 9: every label under rubric 1.0, and the planted episodes relabelled as worked out by hand
    after = labels_rows(pipeline_env["home"])
    assert {row["host_rubric_version"] for row in after.values()} == {"1.0"}
    assert {i: after[i]["label"] for i in planted} == {i: later for i, (_, later) in planted.items()}
    rows = (pipeline_env["dataset"] / "episodes.jsonl").read_text()
    assert '"host_rubric_version":"1.2"' not in rows and '"host_rubric_version":"1.0"' in rows

    # the release stays blocked: the checks' latest results still fail, and publish refuses
    assert "no_invalid_episodes" in {c["check"] for c in check_results(instance, defs) if c["passed"] is False}
    published, text = publish(pipeline_env["dataset"], "org/name")
    assert not published and "publishing refused" in text and "no_invalid_episodes" in text


# What the asset graph sends for `rubric` and everything downstream of it but the release,
# selected and materialized over all partitions: an asset backfill, not a job's.
REHOST_ASSETS = ("rubric", "dataset_meta", "labels", "episode_table", "dataset_rows", "dataset_episodes",
                 "dataset_card", "review_site")


def test_an_asset_backfill_from_the_graph_rehosts_every_series_and_stops_at_the_blocking_checks(
        sample_runs, pipeline_env, tmp_path):
    """The other way a user rehosts from the UI: in the asset graph. The labels of every series are
    recomputed in one run and the rows rewritten; the blocking checks on `dataset_episodes` come
    with the selection, so the roll-up's run fails on them alone (the release stays blocked) and
    the backfill ends failed, saying why — the `rehost` job is the path that ends green."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    planted = plant_rubric_flips(sample_runs, runs)
    build(runs, pipeline_env["dataset"])
    instance = dg.DagsterInstance.get()
    env = apply_defaults({**os.environ, "VAE_RUNS_ROOT": str(runs.resolve()), "VAE_RUBRIC_VERSION": "1.0"})
    backfill_id = launch_backfill(instance, {"assetSelection": [{"path": [key]} for key in REHOST_ASSETS],
                                             "allPartitions": True})
    status = run_daemon_until_done(instance, backfill_id, env, tmp_path / "daemon.log")

    assert status == BulkActionStatus.COMPLETED_FAILED, (tmp_path / "daemon.log").read_text()[-4000:]
    backfill_runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    labelled = [r for r in backfill_runs if r.asset_selection == {dg.AssetKey("labels")}]
    assert len(labelled) == 1 and labelled[0].status == dg.DagsterRunStatus.SUCCESS
    assert (labelled[0].tags["dagster/asset_partition_range_start"],
            labelled[0].tags["dagster/asset_partition_range_end"]) == (min(sample_runs.series), max(sample_runs.series))
    failed = [r for r in backfill_runs if r.status == dg.DagsterRunStatus.FAILURE]
    assert [dg.AssetKey("dataset_rows") in r.asset_selection for r in failed] == [True]
    assert failed_only_on_checks(instance, failed[0].run_id)
    written = {e.asset_key.to_user_string() for e in instance.get_records_for_run(
        failed[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records}
    assert {"episode_table", "dataset_rows", "dataset_episodes"} <= written and "review_site" not in written

    after = labels_rows(pipeline_env["home"])
    assert {row["host_rubric_version"] for row in after.values()} == {"1.0"}
    assert {i: after[i]["label"] for i in planted} == {i: later for i, (_, later) in planted.items()}
    rows = (pipeline_env["dataset"] / "episodes.jsonl").read_text()
    assert '"host_rubric_version":"1.2"' not in rows and '"host_rubric_version":"1.0"' in rows
    published, text = publish(pipeline_env["dataset"], "org/name")
    assert not published and "no_invalid_episodes" in text
