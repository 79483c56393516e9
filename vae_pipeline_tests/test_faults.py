"""Crash consistency and one writer at a time, with real processes: `vae build` killed with
SIGKILL (its whole process group, as the OOM killer or a reboot would) at a dozen points — by time
and at the first file of each stage — then a build that must finish within a bound and publish
the same bytes as a clean build; two builds at once on a fresh home (SQLite, and Postgres as from
two machines); a UI started together with a build.

Before the fix: a kill while `renders` held its slot made every later build busy-wait forever;
one at the first published archive made every later build fail in `review_site`
(`AttributeError: 'AssetCheckEvaluationPlanned' object has no attribute 'passed'`); `.part` files
stayed; two fresh builds left the SQLite instance with two alembic heads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from vae_pipeline.domain.files import TEMP_NAME
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META
from vae_pipeline_tests.dataset_bytes import published
from vae_pipeline_tests.services import free_port, graphql, postgres_database, query

VAE = Path(sys.executable).parent / "vae"
BOUND = 300  # seconds a build after a kill may take, at most
ASSET_NODES = "{ assetNodes { assetKey { path } } }"


def environ(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any pipeline setting, the home at `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAE_", "DAGSTER_"))}
    return {**env, "VAE_HOME": str(home), **extra}


def start_build(runs: Path, case: Path, env: dict[str, str], name: str = "build") -> subprocess.Popen:
    """`vae build` in a session of its own (so a kill of its group reaches all of it)."""
    log = (case / f"{name}.log").open("ab")
    return subprocess.Popen([str(VAE), "build", "--runs", str(runs), "--out", str(case / "dataset"),
                             "--summary", str(case / f"{name}.json")],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = BOUND) -> int | None:
    """The exit code, or None (and the group killed) if it ran past `timeout`."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def temp_leftovers(*roots: Path) -> list[str]:
    return [str(p) for root in roots for p in root.rglob("*") if TEMP_NAME.match(p.name) or p.name.endswith(".part")]


def checks_of(summary_file: Path) -> dict[str, str]:
    summary = json.loads(summary_file.read_text())
    return {f"{c['asset']}.{c['check']}": c["status"] for c in summary["checks"]}


def unfinished_runs(dagster_home: Path) -> list[str]:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        return [f"{r.run_id} {r.status.value}" for r in instance.get_runs()
                if r.status not in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("runs"), META, series=2, episodes=2, seed=3, bad=False).root


@pytest.fixture(scope="module")
def reference(runs, tmp_path_factory) -> dict:
    """One clean build: the bytes every recovered build must publish, its checks, its duration."""
    case = tmp_path_factory.mktemp("clean")
    started = time.monotonic()
    code = finish(start_build(runs, case, environ(case / "home")))
    seconds = time.monotonic() - started
    assert code == 0, (case / "build.log").read_text()[-3000:]
    checks = checks_of(case / "build.json")
    assert set(checks.values()) <= {"passed", "failed"}, checks
    return {"files": published(case / "dataset"), "checks": checks, "seconds": seconds}


@dataclass(frozen=True)
class KillPoint:
    """Where a kill lands: when a file matching `pattern` first appears under the case folder
    (home/ is VAE_HOME, dataset/ the published folder), or at `fraction` of a clean build's time."""

    pattern: str = ""
    fraction: float = 0.0

    def reached(self, case: Path, elapsed: float, clean_seconds: float, before: set[Path]) -> bool:
        """True once a matching file not in `before` (those of an earlier kill) is there, or the time is up."""
        if self.pattern:
            return any(path not in before for path in case.glob(self.pattern))
        return elapsed >= self.fraction * clean_seconds


KILLS = {
    "instance created": KillPoint("home/dagster/history/runs.db"),
    "episodes stored": KillPoint("home/tables/episodes/*.parquet"),
    "a bundle being written": KillPoint("home/bundles/*/.*.part"),
    "first frame (renders holds its slot)": KillPoint("home/frames/*/*/*.jpg"),
    "labels stored": KillPoint("home/tables/labels/*.parquet"),
    "first archive published": KillPoint("dataset/episodes/*/*.tar.zst"),
    "first video published": KillPoint("dataset/videos/*.mp4"),
    "rows published": KillPoint("dataset/episodes.jsonl"),
    "card written": KillPoint("dataset/README.md"),
    "review site written": KillPoint("home/review/index.html"),
    "at half a clean build's time": KillPoint(fraction=0.5),
}
TWICE = "a bundle being written, twice"  # two dead runs holding both `bundles` slots


@dataclass
class Outcome:
    name: str
    problems: list[str]


def kill_at(runs: Path, case: Path, env: dict[str, str], point: KillPoint, clean_seconds: float, name: str) -> str:
    """Start a build and SIGKILL its process group at `point`; a problem, or ''."""
    before = set(case.glob(point.pattern)) if point.pattern else set()
    proc = start_build(runs, case, env, name)
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < BOUND:
        if point.reached(case, time.monotonic() - started, clean_seconds, before):
            break
        time.sleep(0.01)
    if proc.poll() is not None:
        return f"{name}: the build ended (exit {proc.returncode}) before the kill point"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return ""


def kill_and_recover(runs: Path, case: Path, name: str, reference: dict) -> Outcome:
    """Kill a build at the point `name`, then build again: the problems with what that leaves."""
    case.mkdir()
    env = environ(case / "home")
    point = KILLS["a bundle being written"] if name == TWICE else KILLS[name]
    problems = [p for p in [kill_at(runs, case, env, point, reference["seconds"], "killed")] if p]
    if name == TWICE and not problems:
        problems += [p for p in [kill_at(runs, case, env, point, reference["seconds"], "killed-again")] if p]
    if problems:
        return Outcome(name, problems)
    code = finish(start_build(runs, case, env, "recovery"))
    log = (case / "recovery.log").read_text()
    if code != 0:
        return Outcome(name, [f"the build after the kill {'hung' if code is None else f'exited {code}'}: {log[-1500:]}"])
    files = published(case / "dataset")
    if files != reference["files"]:
        differ = sorted(k for k in files.keys() | reference["files"].keys() if files.get(k) != reference["files"].get(k))
        problems.append(f"published bytes differ from a clean build: {differ}")
    if checks_of(case / "recovery.json") != reference["checks"]:
        problems.append(f"checks {checks_of(case / 'recovery.json')} != {reference['checks']}")
    if leftovers := temp_leftovers(case / "dataset", case / "home"):
        problems.append(f"temp files left: {leftovers}")
    if left := unfinished_runs(case / "home" / "dagster"):
        problems.append(f"runs never finished: {left}")
    return Outcome(name, problems)


def test_every_kill_of_a_build_is_recovered_by_the_next_build(runs, reference, tmp_path, record_property):
    cases = [*KILLS, TWICE]
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda n: kill_and_recover(runs, tmp_path / f"case{n}", cases[n], reference),
                                 range(len(cases))))
    recovered = [o.name for o in outcomes if not o.problems]
    record_property("summary", f"kills recovered: {len(recovered)} of {len(cases)}")
    print(f"kills recovered: {len(recovered)} of {len(cases)}")
    assert len(recovered) == len(cases), "\n".join(f"{o.name}: {p}" for o in outcomes for p in o.problems)


def test_two_builds_at_once_on_a_fresh_home_make_one_instance_and_the_same_bytes(runs, reference, tmp_path):
    env = environ(tmp_path / "home")
    first_build, second_build = (start_build(runs, tmp_path, env, name) for name in ("one", "two"))
    codes = [finish(first_build), finish(second_build)]
    logs = [(tmp_path / f"{name}.log").read_text() for name in ("one", "two")]
    assert codes == [0, 0], logs
    assert "Traceback" not in "".join(logs) and "IntegrityError" not in "".join(logs), logs
    assert sum("waiting for another vae command writing to this home" in log for log in logs) == 1, logs
    assert published(tmp_path / "dataset") == reference["files"]
    # no check result goes missing from either summary
    assert checks_of(tmp_path / "one.json") == checks_of(tmp_path / "two.json") == reference["checks"]
    # one alembic head (two made every later command fail), and the second build found nothing to do
    with sqlite3.connect(tmp_path / "home" / "dagster" / "history" / "runs.db") as db:
        assert db.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    assert sum("materialized: nothing (up to date)" in log for log in logs) == 1, logs


def test_builds_from_two_machines_on_one_postgres_instance_take_turns(runs, reference, tmp_path):
    """Two homes (two machines' flocks, which cannot see each other) on one fresh Postgres
    instance: the advisory lock makes the second wait; one set of tables, one alembic head."""
    with postgres_database() as url:
        envs = [environ(tmp_path / f"home-{n}", VAE_INSTANCE="postgres", DAGSTER_PG_URL=url) for n in ("a", "b")]
        builds = [start_build(runs, tmp_path, env, name) for env, name in zip(envs, ("a", "b"))]
        codes = [finish(build) for build in builds]
        logs = [(tmp_path / f"{name}.log").read_text() for name in ("a", "b")]
        assert codes == [0, 0], logs
        assert "Traceback" not in "".join(logs), logs
        assert sum("on another machine or process of this Postgres instance" in log for log in logs) == 1, logs
        assert published(tmp_path / "dataset") == reference["files"]
        assert checks_of(tmp_path / "a.json") == checks_of(tmp_path / "b.json") == reference["checks"]
        assert query(url, "SELECT count(*) FROM alembic_version") == [(1,)]


def test_a_run_of_another_machine_is_failed_only_by_the_holder_of_the_writer_lock(tmp_path, monkeypatch):
    """On a Postgres instance a dead build's PID says nothing on another machine; the writer lock
    does: whoever holds it knows every other writer's run is dead. Its slot is freed with it."""
    from vae_pipeline.engines.instance import open_instance
    from vae_pipeline.engines.recovery import reconcile
    from vae_pipeline.engines.settings import apply_defaults

    with postgres_database() as url:
        for name, value in environ(tmp_path / "home", VAE_INSTANCE="postgres", DAGSTER_PG_URL=url).items():
            monkeypatch.setenv(name, value)
        apply_defaults()
        instance = open_instance()
        tags = {"vae/host": "another-machine", "vae/pid": "4242", "vae/process_start": "1", "vae/writer": "true"}
        run = instance.add_run(dg.DagsterRun(job_name="refresh", run_id="0f" * 16, status=dg.DagsterRunStatus.STARTED,
                                             tags=tags))
        assert instance.event_log_storage.claim_concurrency_slot("renders", run.run_id, "renders").is_claimed
        assert reconcile(instance, holds_writer_lock=False, local=False).failed_runs == []
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
        done = reconcile(instance, holds_writer_lock=True, local=False)
        assert done.failed_runs == [f"{run.run_id} (pid 4242 on another-machine released the writer lock)"]
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("renders").claimed_slots == []
        instance.dispose()


def test_a_ui_started_together_with_a_build(runs, reference, tmp_path):
    env = environ(tmp_path / "home")
    port = free_port()
    with (tmp_path / "ui.log").open("wb") as log:
        ui = subprocess.Popen([str(VAE), "ui", "--runs", str(runs), "--out", str(tmp_path / "dataset"),
                               "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
        try:
            build = start_build(runs, tmp_path, env)
            assert finish(build) == 0, (tmp_path / "build.log").read_text()
            deadline, keys = time.monotonic() + 180, set()
            while not keys and time.monotonic() < deadline and ui.poll() is None:
                try:
                    keys = {"/".join(n["assetKey"]["path"]) for n in graphql(port, ASSET_NODES)["assetNodes"]}
                except OSError:
                    time.sleep(1)
            assert {"episodes", "dataset_card"} <= keys, (tmp_path / "ui.log").read_text()[-3000:]
        finally:
            os.killpg(ui.pid, signal.SIGINT)
            if finish(ui, 60) is None:
                pass  # killed by finish
    text = (tmp_path / "ui.log").read_text()
    assert "already exists" not in text and "Traceback" not in text, text[-3000:]
    assert published(tmp_path / "dataset") == reference["files"]


def test_the_sweep_removes_only_what_a_dead_writer_of_this_host_left(tmp_path):
    from vae_pipeline.domain.files import sweep_temp_files, write_atomic
    from vae_pipeline.domain.processes import host_mark

    dead = subprocess.Popen(["true"])
    dead.wait()
    mine, gone, elsewhere = (f"{host_mark()}-{os.getpid()}", f"{host_mark()}-{dead.pid}", f"{host_mark('other')}-{dead.pid}")
    planted = {
        f"data/.episodes.parquet.{gone}-a1b2c3d4.part": "removed",  # a killed write
        f"frames/s1/.ep-1.{gone}-x_y9z8w7.part/f00.jpg": "removed",  # a killed folder swap, still staging
        f"frames/s1/.ep-2.{gone}-q1w2e3r4.old/f00.jpg": "put back",  # killed between its two renames
        f"data/.rows.parquet.{mine}-a1b2c3d4.part": "kept",  # this live process is writing it
        f"data/.rows.parquet.{elsewhere}-a1b2c3d4.part": "kept",  # another host's writer
        "data/.episodes.parquet.k2j4.part": "kept",  # not a name the pipeline makes
        "notes.part": "kept",
    }
    for name in planted:
        write_atomic(tmp_path / name, b"x")
    swept = sweep_temp_files(tmp_path)
    left = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert left == {name for name, fate in planted.items() if fate == "kept"} | {"frames/s1/ep-2/f00.jpg"}
    assert len(swept) == 3
    assert not temp_leftovers(tmp_path / "frames")


def test_a_check_planned_by_a_dead_run_is_not_evaluated_everywhere(pipeline_env):
    """Before: `review_site: AttributeError: 'AssetCheckEvaluationPlanned' object has no attribute
    'passed'`, and the asset never ran again, so its checks stayed planned for good."""
    from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationPlanned
    from dagster._core.events import DagsterEvent

    from vae_pipeline.assets.hub_release import failing_publish_checks
    from vae_pipeline.assets.review_site import latest_checks
    from vae_pipeline.cli.build import check_results
    from vae_pipeline.definitions import defs
    from vae_pipeline.engines.instance import open_instance
    from vae_pipeline.engines.recovery import reconcile
    from vae_pipeline.engines.settings import apply_defaults
    from vae_pipeline.storage.checks import unevaluated_partitions
    from vae_pipeline.storage.resources import Warehouse

    dead = subprocess.Popen(["true"])
    dead.wait()
    apply_defaults()
    instance = open_instance()
    tags = {"vae/host": socket.gethostname(), "vae/pid": str(dead.pid), "vae/process_start": "", "vae/writer": "true"}
    run = instance.add_run(dg.DagsterRun(job_name="refresh", run_id="1e" * 16, status=dg.DagsterRunStatus.STARTED,
                                         tags=tags))
    key = dg.AssetCheckKey(dg.AssetKey("dataset_card"), "no_bad_comparisons")
    instance.report_dagster_event(DagsterEvent(
        event_type_value=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED.value, job_name="refresh",
        event_specific_data=AssetCheckEvaluationPlanned(asset_key=key.asset_key, check_name=key.name)),
        run_id=run.run_id)
    summary = {(c["asset"], c["check"]): c for c in check_results(instance, defs)}
    assert summary["dataset_card", "no_bad_comparisons"]["status"] == "running"  # its process could be alive
    assert reconcile(instance, holds_writer_lock=False, local=True).failed_runs == [
        f"{run.run_id} (pid {dead.pid} is not running)"]
    summary = {(c["asset"], c["check"]): c for c in check_results(instance, defs)}
    assert summary["dataset_card", "no_bad_comparisons"] == {
        "asset": "dataset_card", "check": "no_bad_comparisons", "status": "not evaluated", "passed": None,
        "description": None}
    assert [c.passed for c in latest_checks(instance, Warehouse(path=os.environ["VAE_HOME"]))
            if c.name == "no_bad_comparisons"] == [None]
    assert "dataset_card.no_bad_comparisons: not evaluated; run `vae build` or `vae publish`" in \
        failing_publish_checks(instance)
    # the card must run again (with its checks): every partition and the unpartitioned asset
    assert unevaluated_partitions(instance, [key], ["s1", "s2"]) == {key.asset_key: {"s1", "s2", None}}
    instance.dispose()


def test_a_sweep_with_its_record_reads_only_the_folders_changed_since_and_never_misses_a_writer_that_died(
        tmp_path, monkeypatch):
    """The second sweep lists the folder a killed write changed and the one a live writer's temp
    kept from being recorded, not the 40 others; the live writer, killed since without its folder
    changing, has its temp removed all the same. A folder changed just before a sweep is read
    again by the next: a write within the same tick of its clock leaves its time as it was."""
    from vae_pipeline.domain import files
    from vae_pipeline.domain.processes import host_mark

    root, record = tmp_path / "home", tmp_path / "record" / "host.json"
    for n in range(40):
        (root / "frames" / f"s{n}" / "ep").mkdir(parents=True)
    (root / "videos").mkdir()
    live = subprocess.Popen(["sleep", "60"])
    (root / "videos" / f".a.mp4.{host_mark()}-{live.pid}-a1b2c3d4.part").write_bytes(b"x")
    past = time.time() - 60
    for folder in [p for p in root.rglob("*") if p.is_dir()] + [root]:
        os.utime(folder, (past, past))  # changed well before the sweep's clock
    listed = []
    scandir = os.scandir
    monkeypatch.setattr(files.os, "scandir", lambda path: listed.append(Path(path)) or scandir(path))
    assert files.sweep_temp_files(root, record) == []
    assert len(listed) == 1 + 1 + 40 * 2 + 1  # the first sweep reads every folder
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = root / "frames" / "s7" / "ep" / f".f00.jpg.{host_mark()}-{dead.pid}-q1w2e3r4.part"
    killed.write_bytes(b"x")
    live.kill()
    live.wait()
    listed.clear()
    swept = files.sweep_temp_files(root, record)
    assert sorted(swept) == sorted([killed, root / "videos" / f".a.mp4.{host_mark()}-{live.pid}-a1b2c3d4.part"])
    assert sorted(listed) == [root / "frames" / "s7" / "ep", root / "videos"]
    listed.clear()
    assert files.sweep_temp_files(root, record) == []
    assert sorted(listed) == [root / "frames" / "s7" / "ep", root / "videos"]  # changed just now: read again
    fresh = root / "frames" / "s7" / "ep"
    was = fresh.stat().st_mtime_ns
    late = fresh / f".f01.jpg.{host_mark()}-{dead.pid}-z9y8x7w6.part"
    late.write_bytes(b"x")
    os.utime(fresh, ns=(was, was))  # as if written in the tick the last sweep read the folder in
    assert files.sweep_temp_files(root, record) == [late]


def test_files_written_on_disk_inside_a_steps_scope_are_made_durable_together_on_leaving(tmp_path, monkeypatch):
    """A rehost rewrites every manifest: inside `uploads_in_background` each is renamed into place
    whole but not fsynced on the spot. Leaving the scope, also when the step failed, fsyncs each
    file and its folder while they are few (a new series' handful must not wait for every dirty
    page of the machine), and syncs once beyond SYNC_EACH_UP_TO; outside the scope a write is
    fsynced before it returns."""
    from upath import UPath

    from vae_pipeline.domain import files
    from vae_pipeline.domain.objects import put_bytes, uploads_in_background

    monkeypatch.setattr(files, "SYNC_EACH_UP_TO", 10)
    calls: list[str] = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync"))
    monkeypatch.setattr(os, "sync", lambda: calls.append("sync"))
    with uploads_in_background():
        for number in range(11):
            put_bytes(UPath(tmp_path / "many" / f"{number}.json"), b"{}\n")
        assert calls == []
    assert calls == ["sync"]
    assert sorted(p.name for p in (tmp_path / "many").iterdir()) == sorted(f"{n}.json" for n in range(11))
    calls.clear()
    with uploads_in_background():
        for number in range(10):
            put_bytes(UPath(tmp_path / "few" / f"{number % 5}" / f"{number}.json"), b"{}\n")
        assert calls == []
    assert calls == ["fsync"] * (10 + 5)  # each file, then each of the 5 folders
    calls.clear()
    with pytest.raises(RuntimeError), uploads_in_background():
        put_bytes(UPath(tmp_path / "half-done.json"), b"{}\n")
        raise RuntimeError("the step failed")
    assert calls == ["fsync", "fsync"]
    calls.clear()
    with uploads_in_background():
        put_bytes(UPath(tmp_path / "gone.json"), b"{}\n")
        (tmp_path / "gone.json").unlink()  # removed before the scope ends: nothing of it to sync
    assert calls == ["fsync"]  # its folder
    calls.clear()
    with uploads_in_background():
        pass
    assert calls == []  # nothing written: nothing to sync
    put_bytes(UPath(tmp_path / "alone.json"), b"{}\n")
    assert calls == ["fsync", "fsync"]  # the file, then its folder
