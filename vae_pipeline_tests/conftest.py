"""Shared fixtures: sample runs from the project's own generator, an isolated pipeline home, and
(object_store.py) an S3 server with buckets of its own; a reader's decoding of JSON escapes."""

import os
import re
import shutil
from pathlib import Path

import pytest

from vae_pipeline.sample.generator import SampleRun, generate

pytest_plugins = ["vae_pipeline_tests.object_store"]  # s3_endpoint, s3_environ, s3_client, make_bucket

PROJECT = Path(__file__).resolve().parent.parent
META = PROJECT / "meta"


MEMORY = Path("/dev/shm")  # a tmpfs on Linux


def pytest_configure(config):
    """The tests' temp folders (pytest's numbered `pytest-of-USER/pytest-N`) in memory, where the
    machine has a tmpfs: every build fsyncs what it writes and its SQLite instance commits each
    event, and with both workers building on one shared disk those waits were most of the suite's
    wall time (the same files and the same fsync calls; a SIGKILL, what the fault tests do, loses
    nothing either way). An explicit --basetemp or PYTEST_DEBUG_TEMPROOT wins."""
    if config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return  # also every xdist worker: its basetemp is a folder of the controller's
    if os.access(MEMORY, os.W_OK) and f" {MEMORY} tmpfs " in Path("/proc/mounts").read_text():
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY)


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory) -> SampleRun:
    """Two completed series and a running one, with every kind of bad episode in the first."""
    return generate(tmp_path_factory.mktemp("runs"), META, series=3, episodes=6, seed=11)


def isolate(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Every setting pointing into `root`: pipeline home, Dagster instance, dataset, meta copy."""
    meta = root / "meta"
    shutil.copytree(META, meta)
    paths = {"home": root / "home", "dataset": root / "dataset", "meta": meta}
    monkeypatch.setenv("VAE_HOME", str(paths["home"]))
    monkeypatch.setenv("DAGSTER_HOME", str(paths["home"] / "dagster"))
    monkeypatch.setenv("VAE_META_DIR", str(meta))
    monkeypatch.setenv("VAE_DATASET_DIR", str(paths["dataset"]))
    monkeypatch.setenv("VAE_RUBRIC_VERSION", "latest")
    monkeypatch.setenv("VAE_RUNS_ROOT", str(root / "unset"))
    monkeypatch.delenv("DAGSTER_EVENT_BATCH_SIZE", raising=False)  # a Postgres build sets it in os.environ
    return paths


@pytest.fixture
def pipeline_env(tmp_path, monkeypatch) -> dict[str, Path]:
    return isolate(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def built_once(sample_runs, tmp_path_factory):
    """One `vae build` of the sample runs, shared by a module's read-only tests."""
    from vae_pipeline.cli.build import build

    root = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        runs = copy_runs(sample_runs, root / "runs")
        before = {p.relative_to(runs).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in runs.rglob("*")}
        summary = build(runs, paths["dataset"])
        yield {**paths, "runs": runs, "runs_before": before, "summary": summary}


def copy_runs(sample: SampleRun, dest: Path) -> Path:
    """A private copy of the sample runs, for tests that change them."""
    shutil.copytree(sample.root, dest, symlinks=True)
    return dest


_READER_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def read_json_escapes(raw: bytes) -> bytes:
    """A reader's decoding of JSON escapes (the tests' own), other bytes left as they are."""
    def char(m: re.Match[bytes]) -> bytes:
        code, simple = m.group(1), m.group(2)
        return chr(int(code, 16)).encode("utf-8", "surrogatepass") if code else _READER_ESCAPES[simple.decode()].encode()
    return re.sub(rb'\\(?:u([0-9A-Fa-f]{4})|(["\\/bfnrt]))', char, raw)


# The files that take longest, longest first (measured on the whole suite, `--durations`): with
# `--dist loadfile` a file stays on one worker, so the two workers end together only if no long
# file starts last. The other files keep their order after these (pyproject: --no-loadscope-reorder,
# which would otherwise put the files with the most tests first, whatever their time).
SLOWEST_FIRST = ["test_faults.py", "test_object_storage.py", "test_ui_console.py", "test_scale_out.py",
                 "test_build.py", "test_review_browser.py", "test_cli_anywhere.py", "test_ranged_runs.py",
                 "test_leaderboard_build.py", "test_automation.py"]


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order


def pytest_terminal_summary(terminalreporter):
    """Print the counts tests record with `record_property("summary", ...)` (kills recovered...),
    after the run; xdist brings the properties back from its workers."""
    lines = [value for reports in terminalreporter.stats.values() for report in reports
             if getattr(report, "when", None) == "call"
             for name, value in getattr(report, "user_properties", ()) if name == "summary"]
    if lines:
        terminalreporter.section("counts")
        for line in lines:
            terminalreporter.write_line(line)
