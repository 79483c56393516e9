"""`vae` as a new user runs it: the installed script, from any folder, with no setting."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META
from vae_pipeline_tests.services import free_port, graphql

VAE = Path(sys.executable).parent / "vae"


def bare_environ(**extra: str) -> dict[str, str]:
    """The environment with none of the pipeline's settings and no venv on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VAE_", "DAGSTER_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    # the code under test is the checkout these tests import (in a clone, the editable install's own)
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    return {**env, **extra}


def vae(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VAE), *args], cwd=cwd, env=bare_environ(**env), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("anywhere_runs")
    generate(root, META, series=1, episodes=2, seed=5, bad=False)
    return root


def test_build_works_from_another_folder_with_no_setting(small_runs, tmp_path):
    """Before: every stage failed on `meta/brief.schema.json` and the build said "up to date"."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = vae("build", "--runs", str(small_runs), "--out", "O", cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  failed: " not in done.stdout and "up to date" not in done.stdout
    assert "brief_bank ×1" in done.stdout and "episodes ×1" in done.stdout
    rows = (elsewhere / "O" / "episodes.jsonl").read_text().splitlines()
    assert len(rows) == 2
    # meta/ is the project's: the dataset's copy is byte for byte the project's brief schema
    assert (elsewhere / "O" / "meta" / "brief.schema.json").read_bytes() == (META / "brief.schema.json").read_bytes()
    # VAE_HOME is relative to the folder the command runs in: the state is kept there
    assert (elsewhere / ".vae" / "dagster" / "dagster.yaml").is_file()
    assert (elsewhere / ".vae" / "vae_warehouse.duckdb").is_file()
    again = vae("build", "--runs", str(small_runs), "--out", "O", cwd=elsewhere)
    assert again.returncode == 0 and "materialized: nothing (up to date)" in again.stdout, again.stdout


def test_sample_from_an_empty_folder_leaves_only_the_runs_it_was_asked_for(tmp_path):
    """Before: `vae sample` also made `.vae/dagster/dagster.yaml` in the folder it ran in, an
    instance no one asked for (it opens none)."""
    done = vae("sample", "--out", "runs", "--series", "1", "--episodes", "2", "--no-bad", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert any((tmp_path / "runs").rglob("series.json"))


@pytest.mark.parametrize("variant, names", [("postgres", ["DAGSTER_PG_URL"]),
                                             ("postgres-env", ["DAGSTER_PG_DB", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT",
                                                               "DAGSTER_PG_PASSWORD", "DAGSTER_PG_USER"])])
def test_a_postgres_instance_without_its_connection_is_one_line_naming_the_variables(small_runs, tmp_path, variant,
                                                                                   names):
    done = vae("build", "--runs", str(small_runs), "--out", "O", cwd=tmp_path, VAE_INSTANCE=variant)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(name in lines[0] for name in names) and "docs/deployment.md" in lines[0]
    assert "Traceback" not in done.stderr and "Stack Trace" not in done.stderr


def test_a_missing_meta_file_is_one_line_naming_the_file_and_the_setting(small_runs, tmp_path):
    meta = tmp_path / "meta"
    shutil.copytree(META, meta)
    (meta / "brief.schema.json").unlink()
    done = vae("build", "--runs", str(small_runs), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(meta / "brief.schema.json") in lines[0] and "VAE_META_DIR" in lines[0]
    assert "Traceback" not in done.stderr and "up to date" not in done.stdout

    (meta / "brief.schema.json").write_bytes((META / "brief.schema.json").read_bytes())
    for rubric in meta.glob("rubric-v*.json"):
        rubric.unlink()
    done = vae("build", "--runs", str(small_runs), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "rubric-v" in done.stderr and "VAE_META_DIR" in done.stderr


def test_a_build_whose_stages_failed_says_what_failed_never_up_to_date(tmp_path):
    meta, no_series = tmp_path / "meta", tmp_path / "runs"
    shutil.copytree(META, meta)
    no_series.mkdir()  # the unpartitioned stages are enough to fail
    with (meta / "brief-bank-v1.jsonl").open("a") as bank:
        bank.write("{not json\n")
    done = vae("build", "--runs", str(no_series), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "up to date" not in done.stdout
    summary = [line for line in done.stdout.splitlines() if line.startswith("failed: ")]
    assert any("brief-bank-v1.jsonl" in line and "not valid JSON" in line for line in summary), done.stdout
    # a second build retries what failed, and still does not call itself up to date
    again = vae("build", "--runs", str(no_series), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert again.returncode == 1 and "up to date" not in again.stdout, again.stdout


ASSET_NODES = "{ assetNodes { assetKey { path } } }"
DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }"


def test_ui_as_demo_prints_it_serves_the_code_location_without_the_venv_on_path(small_runs, tmp_path):
    """Before: `vae: error: [Errno 2] No such file or directory` (it exec'd `dagster` from PATH)."""
    port = free_port()
    log = (tmp_path / "ui.log").open("w+")
    ui = subprocess.Popen([str(VAE), "ui", "--runs", str(small_runs), "--out", "O", "--port", str(port)],
                          cwd=tmp_path, env=bare_environ(), stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        info = None
        while time.monotonic() < deadline and ui.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as reply:
                    info = (reply.status, json.loads(reply.read()))
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)
        log.seek(0)
        assert info is not None, f"the webserver never answered (exit {ui.poll()}):\n{log.read()[-3000:]}"
        assert info[0] == 200 and "dagster_webserver_version" in info[1]
        keys: set[str] = set()
        while time.monotonic() < deadline and not keys:  # the code location loads after the server starts
            nodes = graphql(port, ASSET_NODES)["assetNodes"]
            keys = {"/".join(node["assetKey"]["path"]) for node in nodes}
            time.sleep(0 if keys else 1)
        assert {"episodes", "labels", "dataset_rows", "hub_release"} <= keys, keys
        # the daemon (sensors, schedule, run queue) runs too and sends heartbeats
        healthy: dict[str, bool] = {}
        while time.monotonic() < deadline and not healthy.get("SENSOR"):
            statuses = graphql(port, DAEMONS)["instance"]["daemonHealth"]["allDaemonStatuses"]
            healthy = {s["daemonType"]: s["healthy"] for s in statuses}
            time.sleep(0 if healthy.get("SENSOR") else 1)
        assert healthy.get("SENSOR") and healthy.get("SCHEDULER"), healthy
    finally:
        if ui.poll() is None:
            os.killpg(ui.pid, signal.SIGINT)  # dagster dev stops its webserver and daemon on Ctrl-C
            try:
                ui.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(ui.pid, signal.SIGKILL)
                ui.wait()
        log.close()
    assert ui.returncode in (0, -signal.SIGINT, 130), ui.returncode


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_publish_without_runs_names_the_left_out_folders_from_any_folder_and_a_moved_dataset(tmp_path):
    """Before: `vae publish` without --runs ended in a KeyError traceback (VAE_RUNS_ROOT)."""
    built, elsewhere = tmp_path / "built", tmp_path / "elsewhere"
    elsewhere.mkdir()
    generate(built / "runs", META, series=1, episodes=2, seed=5)  # its bad episodes: the checks refuse
    (built / "runs" / "notes").mkdir()  # a folder that is no series: the plan and a refusal name it
    done = vae("build", "--runs", "runs", "--out", "dataset", cwd=built)
    assert done.returncode == 0, done.stdout + done.stderr
    left_out = "left out:\n  folder notes: no readable series.json"

    def refused_naming_the_folder(done: subprocess.CompletedProcess) -> None:
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
        assert done.stdout.startswith("publishing refused:") and left_out in done.stdout, done.stdout

    # in the build's folder, as the README says, then from another one with the build's home
    refused_naming_the_folder(vae("publish", "--dataset", "dataset", "--repo", "org/name", cwd=built))
    home = str(built / ".vae")
    refused_naming_the_folder(vae("publish", "--dataset", str(built / "dataset"), "--repo", "org/name",
                                  cwd=elsewhere, VAE_HOME=home))
    # another folder's own home never built: refused, naming the setting
    error = one_line_error(vae("publish", "--dataset", str(built / "dataset"), "--repo", "org/name", cwd=elsewhere))
    assert "VAE_HOME" in error and str(elsewhere / ".vae") in error and "holds no build" in error
    # the dataset moved: the home's build is still the one it was built from
    (built / "dataset").rename(tmp_path / "moved")
    refused_naming_the_folder(vae("publish", "--dataset", str(tmp_path / "moved"), "--repo", "org/name",
                                  cwd=elsewhere, VAE_HOME=home))
    # ... but not while the folder the build wrote is there: the home's state is that one's
    (built / "dataset").mkdir()
    error = one_line_error(vae("publish", "--dataset", str(tmp_path / "moved"), "--repo", "org/name",
                               cwd=elsewhere, VAE_HOME=home))
    assert str(built / "dataset") in error and "vae build --out" in error
    (built / "dataset").rmdir()
    # the runs root moved too: refused unless --runs names it
    (built / "runs").rename(tmp_path / "runs")
    error = one_line_error(vae("publish", "--dataset", str(tmp_path / "moved"), "--repo", "org/name",
                               cwd=elsewhere, VAE_HOME=home))
    assert str(built / "runs") in error and "--runs" in error
    refused_naming_the_folder(vae("publish", "--dataset", str(tmp_path / "moved"), "--repo", "org/name",
                                  "--runs", str(tmp_path / "runs"), cwd=elsewhere, VAE_HOME=home))


def test_vae_ui_takes_the_repository_and_observes_the_rubric_in_force(pipeline_env, tmp_path, monkeypatch):
    """Issue 29 item 4: `vae ui --repo` hands the repository to the code location (VAE_HUB_REPO
    in the environment `dagster dev` starts with), as `vae publish --repo` does; and each start
    records the rubric in force when it is not the one last observed."""
    import dagster as dg

    from vae_pipeline.cli import main

    (tmp_path / "runs").mkdir()
    monkeypatch.delenv("VAE_HUB_REPO", raising=False)
    started = []
    monkeypatch.setattr(os, "execv", lambda path, argv: started.append((argv, os.environ.get("VAE_HUB_REPO"))))
    base = ["ui", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "dataset")]
    before = dict(os.environ)
    for extra in (["--repo", "vae-lab/agent-episodes", "--rubric-version", "1.0"], ["--rubric-version", "1.0"], []):
        assert main([*base, *extra]) == 0
        os.environ.clear()  # each start from the environment the test began with (as from a shell)
        os.environ.update(before)
    assert [(argv[1:4], repo) for argv, repo in started] == [
        (["-m", "dagster", "dev"], "vae-lab/agent-episodes"), (["-m", "dagster", "dev"], ""),
        (["-m", "dagster", "dev"], "")]
    instance = dg.DagsterInstance.get()
    observed = instance.fetch_observations(dg.AssetKey("rubric_in_force"), limit=10).records  # newest first
    assert [r.event_log_entry.asset_observation.metadata["version"].value for r in observed] == ["1.2", "1.0"]
    assert len({r.event_log_entry.asset_observation.tags["dagster/data_version"] for r in observed}) == 2
