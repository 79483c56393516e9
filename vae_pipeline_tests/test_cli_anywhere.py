"""`vae` as a new user runs it: the installed script, from any folder, with no setting."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META

VAE = Path(sys.executable).parent / "vae"


def bare_environ(**extra: str) -> dict[str, str]:
    """The environment with none of the pipeline's settings and no venv on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VAE_", "DAGSTER_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
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


def test_a_build_whose_stages_failed_says_what_failed_never_up_to_date(small_runs, tmp_path):
    meta = tmp_path / "meta"
    shutil.copytree(META, meta)
    with (meta / "brief-bank-v1.jsonl").open("a") as bank:
        bank.write("{not json\n")
    done = vae("build", "--runs", str(small_runs), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "up to date" not in done.stdout
    summary = [line for line in done.stdout.splitlines() if line.startswith("failed: ")]
    assert any("brief-bank-v1.jsonl" in line and "not valid JSON" in line for line in summary), done.stdout
    # a second build retries what failed, and still does not call itself up to date
    again = vae("build", "--runs", str(small_runs), "--out", "O", cwd=tmp_path, VAE_META_DIR=str(meta))
    assert again.returncode == 1 and "up to date" not in again.stdout, again.stdout
