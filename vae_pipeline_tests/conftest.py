"""Shared fixtures: sample runs from the project's own generator, and an isolated pipeline home."""

import shutil
from pathlib import Path

import pytest

from vae_pipeline.sample.generator import SampleRun, generate

PROJECT = Path(__file__).resolve().parent.parent
META = PROJECT / "meta"


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory) -> SampleRun:
    """Two completed series and a running one, with every kind of bad episode in the first."""
    return generate(tmp_path_factory.mktemp("runs"), META, series=3, episodes=6, seed=11)


@pytest.fixture
def pipeline_env(tmp_path, monkeypatch) -> dict[str, Path]:
    """Every setting pointing into tmp_path: pipeline home, Dagster instance, dataset, meta copy."""
    meta = tmp_path / "meta"
    shutil.copytree(META, meta)
    paths = {"home": tmp_path / "home", "dataset": tmp_path / "dataset", "meta": meta}
    monkeypatch.setenv("VAE_HOME", str(paths["home"]))
    monkeypatch.setenv("DAGSTER_HOME", str(paths["home"] / "dagster"))
    monkeypatch.setenv("VAE_META_DIR", str(meta))
    monkeypatch.setenv("VAE_DATASET_DIR", str(paths["dataset"]))
    monkeypatch.setenv("VAE_RUBRIC_VERSION", "latest")
    monkeypatch.setenv("VAE_RUNS_ROOT", str(tmp_path / "unset"))
    return paths


def copy_runs(sample: SampleRun, dest: Path) -> Path:
    """A private copy of the sample runs, for tests that change them."""
    shutil.copytree(sample.root, dest, symlinks=True)
    return dest
