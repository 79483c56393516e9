"""The shared deployment on the real services: a Postgres instance that `vae build`, the webserver
and the daemon use at once, and a build whose steps run in a `vae worker` on Celery (Redis)."""

import contextlib
import inspect
import io
import json
import multiprocessing
import os
import sys
import time
import warnings
from pathlib import Path

import dagster as dg
import pytest
from dagster_postgres.event_log import PostgresEventLogStorage

from vae_pipeline.cli.build import build
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.executor import celery_executor_from_env
from vae_pipeline.engines.pools import MachineSlots
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META, isolate
from vae_pipeline_tests.dataset_bytes import published
from vae_pipeline_tests.services import (
    answers,
    free_port,
    graphql,
    postgres_database,
    process,
    query,
    redis_prefix,
    wait_for,
)

# a Celery build warns of nothing: its step task is registered once
pytestmark = pytest.mark.filterwarnings("error::celery.exceptions.DuplicateTaskNameWarning")

BIN = Path(sys.executable).parent
PARTITIONED = {"episodes", "renders", "verdicts", "labels", "bundles"}  # README's asset table
UNPARTITIONED = {"brief_bank", "rubric", "dataset_meta", "episode_table", "dataset_rows", "dataset_episodes",
                 "dataset_card", "review_site", "entrants", "pairwise_judgments", "human_votes", "leaderboard",
                 "judge_agreement"}  # hub_release only in the publish job


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory):
    """Two series of one good episode: the engines, not the data, are under test. No stored host
    label drifts, so no label is rehosted at build time and two builds write the same bytes."""
    return generate(tmp_path_factory.mktemp("runs"), META, series=2, episodes=1, seed=23, bad=False, drifted=0)


def expected_materializations(series) -> set[tuple[str, str | None]]:
    return {(key, s) for key in PARTITIONED for s in series} | {(key, None) for key in UNPARTITIONED}


@pytest.fixture(scope="module")
def postgres_build(small_runs, tmp_path_factory):
    """`vae build` (in-process) on a new Postgres instance while its webserver and daemon run."""
    root = tmp_path_factory.mktemp("pg")
    with postgres_database() as url, pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        monkeypatch.setenv("VAE_INSTANCE", "postgres")
        monkeypatch.setenv("DAGSTER_PG_URL", url)
        monkeypatch.delenv("VAE_EXECUTOR", raising=False)
        monkeypatch.setenv("VAE_RUNS_ROOT", str(small_runs.root))
        monkeypatch.setenv("VAE_DATASET_DIR", str(paths["dataset"]))
        env = apply_defaults(dict(os.environ))  # DAGSTER_HOME/dagster.yaml is the Postgres variant from here on
        batches: list[list[tuple[str, str, str | None]]] = []  # what Dagster handed the event log at once
        store_batch = PostgresEventLogStorage.store_event_batch

        def recorded(storage, events):
            batches.append([(e.get_dagster_event().event_type_value, e.get_dagster_event().asset_key.to_user_string(),
                             e.get_dagster_event().partition) for e in events])
            return store_batch(storage, events)

        monkeypatch.setattr(PostgresEventLogStorage, "store_event_batch", recorded)
        port = free_port()
        workspace = str(PROJECT_ROOT / "workspace.yaml")
        web_log, daemon_log = root / "webserver.log", root / "daemon.log"
        with process([str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
                     env, web_log) as web, \
                process([str(BIN / "dagster-daemon"), "run", "-w", workspace], env, daemon_log) as daemon:
            wait_for(lambda: answers(f"http://127.0.0.1:{port}/server_info"), "webserver", web, web_log)
            started = time.time()
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                summary = build(small_runs.root, paths["dataset"])
            finished = time.time()
            # both still serving after the build, and the webserver lists the build's runs
            seen = graphql(port, "{ runsOrError { ... on Runs { results { runId status } } } }")
            assert web.poll() is None and daemon.poll() is None
            yield {**paths, "url": url, "summary": summary, "started": started, "finished": finished, "batches": batches,
                   "webserver_runs": seen["runsOrError"]["results"],
                   "runs_printed": sum(line.startswith("[stage ") for line in printed.getvalue().splitlines())}


def test_a_ranged_run_on_postgres_hands_its_series_materializations_to_the_event_log_together(postgres_build,
                                                                                              small_runs):
    """`vae` turns Dagster's event batches on for the Postgres instances: a series stage's
    materializations over the run's series reach the event log in one batch (one INSERT there)."""
    together = {}
    for batch in postgres_build["batches"]:
        if {kind for kind, _, _ in batch} == {"ASSET_MATERIALIZATION"}:
            together.setdefault(batch[0][1], []).append(sorted(partition for _, _, partition in batch))
    assert {key: parts for key, parts in together.items() if key in PARTITIONED} == \
        {key: [sorted(small_runs.series)] for key in PARTITIONED}


def test_build_on_postgres_stores_runs_and_materializations_there(postgres_build, small_runs):
    assert postgres_build["summary"]["failed_runs"] == []
    url = postgres_build["url"]
    materialized = query(url, "SELECT asset_key, partition FROM event_logs "
                              "WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
    keys = {(json.loads(key)[0], partition) for key, partition in materialized}
    assert keys == expected_materializations(small_runs.series)
    runs = query(url, "SELECT run_id, status FROM runs")
    assert runs and {status for _, status in runs} >= {"SUCCESS"}
    # nothing of the instance's storage went to SQLite files under DAGSTER_HOME
    home = postgres_build["home"] / "dagster"
    assert not list(home.rglob("*.db"))


def test_celery_build_runs_every_step_in_the_worker_and_writes_the_same_bytes(postgres_build, small_runs,
                                                                               tmp_path, monkeypatch):
    paths = isolate(tmp_path, monkeypatch)
    with postgres_database() as url, redis_prefix() as prefix:
        monkeypatch.setenv("VAE_INSTANCE", "postgres")
        monkeypatch.setenv("DAGSTER_PG_URL", url)
        monkeypatch.setenv("VAE_CELERY_PREFIX", prefix)
        monkeypatch.setenv("VAE_EXECUTOR", "celery")
        worker_log = tmp_path / "worker.log"
        name = f"vae-test-{os.getpid()}"
        command = [str(BIN / "vae"), "worker", "--runs", str(small_runs.root), "--out", str(paths["dataset"]),
                   "--name", name, "--concurrency", "2"]
        with process(command, dict(os.environ), worker_log) as worker:
            wait_for(lambda: b" ready." in worker_log.read_bytes(), "vae worker", worker, worker_log)
            summary = build(small_runs.root, paths["dataset"])
            assert worker.poll() is None
        assert summary["failed_runs"] == []
        with dg.DagsterInstance.get() as instance:
            records = instance.get_run_records()
            assert records
            for record in records:
                events = [e for e in instance.all_logs(record.dagster_run.run_id) if e.is_dagster_event]
                starts = [e for e in events if e.dagster_event.event_type_value == "STEP_START"]
                in_worker = {e.step_key for e in events if e.dagster_event.event_type_value == "ENGINE_EVENT"
                             and e.message.endswith(f"Executing steps {e.step_key} in celery worker")
                             and e.dagster_event.engine_event_data.metadata["Celery worker"].text.startswith(f"{name}@")}
                assert starts and {e.step_key for e in starts} == in_worker, record.dagster_run.run_id
                assert os.getpid() not in {e.dagster_event.pid for e in starts}  # not in the build's process
            materialized = {(m.asset_key.to_user_string(), m.partition)
                            for r in records for m in _materializations(instance, r.dagster_run.run_id)}
        assert materialized == expected_materializations(small_runs.series)
    assert published(paths["dataset"]) == published(postgres_build["dataset"])


def _materializations(instance: dg.DagsterInstance, run_id: str) -> list[dg.AssetMaterialization]:
    return [e.asset_materialization for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)]


def test_the_executor_submits_every_step_without_registering_its_task_again():
    """Before: dagster-celery's `_submit_task` calls `create_task(app)` for every step, and from the
    second one Celery printed a multi-line DuplicateTaskNameWarning on every first build."""
    from dagster_celery import executor as upstream
    from dagster_celery import tasks
    from dagster_celery.make_app import make_app

    assert "create_task(app)" in inspect.getsource(upstream._submit_task)  # what each step submission calls
    app = make_app(celery_executor_from_env().app_args())  # as the execution loop makes it, once a run
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # each submission: the step task, then its signature (which registers a task still pending)
        signatures = [tasks.create_task(app).si(execute_step_args_packed={}, executable_dict={}) for _ in range(3)]
    assert [signature.task for signature in signatures] == ["execute_plan"] * 3
    assert tasks.create_task(app) is app.tasks["execute_plan"]


def _hold_a_slot(folder: str, log: str, die: bool) -> None:
    slots = MachineSlots(2, Path(folder))
    slots.acquire(poll_s=0.01)
    with open(log, "a") as out:
        out.write(f"start {time.monotonic()}\n")
    if die:
        os._exit(0)  # killed holding its slot: the kernel frees it
    time.sleep(0.4)
    with open(log, "a") as out:
        out.write(f"end {time.monotonic()}\n")
    slots.release()


def test_workers_sharing_a_two_core_machine_run_at_most_two_steps_at_once(tmp_path):
    """Before: two `vae worker`s on a 2-core machine each took one step per core, four at once.
    Every pool process of every worker takes one of the machine's slots (one per core) for a step."""
    folder, log = tmp_path / "slots", tmp_path / "log"
    context = multiprocessing.get_context("fork")
    dead = context.Process(target=_hold_a_slot, args=(str(folder), str(log), True))
    dead.start()
    dead.join(60)
    holders = [context.Process(target=_hold_a_slot, args=(str(folder), str(log), False)) for _ in range(5)]
    for holder in holders:
        holder.start()
    for holder in holders:
        holder.join(120)
    assert [holder.exitcode for holder in holders] == [0] * 5
    events = sorted((float(at), kind) for kind, at in (line.split() for line in log.read_text().splitlines()))
    running, most = 0, 0
    for _, kind in events[1:]:  # after the one that died holding a slot
        running += 1 if kind == "start" else -1
        most = max(most, running)
    assert [kind for _, kind in events].count("start") == 6 and most == 2


# Last in the module: the daemon's heartbeats come every 30 s, and the tests above run while it
# beats, so this one rarely waits.
def test_webserver_and_daemon_work_on_the_same_instance_during_the_build(postgres_build):
    url = postgres_build["url"]
    statuses = dict(query(url, "SELECT run_id, status FROM runs"))
    launched_by_daemon = {run_id for run_id, in query(
        url, "SELECT run_id FROM run_tags WHERE key IN ('dagster/sensor_name', 'dagster/schedule_name')")}
    build_runs = set(statuses) - launched_by_daemon
    seen = {run["runId"]: run["status"] for run in postgres_build["webserver_runs"]}
    assert len(build_runs) == postgres_build["runs_printed"] > 0  # one run per line the build printed
    assert build_runs <= set(seen)
    assert {run_id: seen[run_id] for run_id in build_runs} == {run_id: statuses[run_id] for run_id in build_runs}
    # the daemon, started before the build, keeps beating in Postgres once the build has started
    deadline = time.monotonic() + 120
    while True:
        beats = {daemon_type: json.loads(body)["timestamp"]
                 for daemon_type, body in query(url, "SELECT daemon_type, body FROM daemon_heartbeats")}
        fresh = {daemon_type for daemon_type, ts in beats.items() if ts >= postgres_build["started"]}
        if {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR"} <= fresh or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR"} <= fresh, beats
