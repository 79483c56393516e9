"""The code location: every asset, check, job, sensor and schedule, with resources from the environment."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from vae_pipeline.assets import ASSETS, PUBLISH_CHECKS
from vae_pipeline.assets.hub_release import hub_release_spec
from vae_pipeline.assets.meta import rubric_in_force_asset
from vae_pipeline.automation.jobs import publish_checks_job, publish_job, refresh_job, rehost_job
from vae_pipeline.automation.schedules import nightly_refresh
from vae_pipeline.automation.sensors import new_series_sensor, refresh_followup_sensor
from vae_pipeline.engines.executor import vae_executor
from vae_pipeline.storage.io_manager import ParquetTableIOManager
from vae_pipeline.storage.resources import (
    DatasetFolder,
    HubRepo,
    ProjectMeta,
    RunsRoot,
    ScrubSettings,
    Warehouse,
)


def build_resources(text: Callable[[str], Any], number: Callable[[str], Any]) -> dict[str, Any]:
    """Every resource, each setting taken from its environment variable through `text`/`number`.

    The code location passes `dg.EnvVar` (resolved when a run starts); the CLI and the
    planner pass plain look-ups in `os.environ`.
    """
    warehouse = Warehouse(path=text("VAE_HOME"), scratch_path=text("VAE_SCRATCH"))
    return {
        "runs_root": RunsRoot(path=text("VAE_RUNS_ROOT"), max_unpacked_bytes=number("VAE_MAX_UNPACKED_BYTES"),
                              max_line_bytes=number("VAE_MAX_LINE_BYTES"), scratch_path=text("VAE_SCRATCH"),
                              shared_path=text("VAE_SHARED_INPUTS")),
        "project_meta": ProjectMeta(path=text("VAE_META_DIR"), rubric_version=text("VAE_RUBRIC_VERSION"),
                                    leaderboard_rounds=number("VAE_LEADERBOARD_ROUNDS"),
                                    leaderboard_seed=number("VAE_LEADERBOARD_SEED")),
        "warehouse": warehouse,
        "dataset_folder": DatasetFolder(path=text("VAE_DATASET_DIR")),
        "hub_repo": HubRepo(repo_id=text("VAE_HUB_REPO"), endpoint=text("VAE_HUB_ENDPOINT")),
        "scrub_settings": ScrubSettings(harness_hostname=text("VAE_HARNESS_HOSTNAME"),
                                        harness_user=text("VAE_HARNESS_USER")),
        "io_manager": ParquetTableIOManager(warehouse=warehouse),
    }


def resources_from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The same resources with the settings' current values (for the CLI and tests)."""
    return build_resources(lambda name: environ[name], lambda name: int(environ[name]))


defs = dg.Definitions(
    assets=[rubric_in_force_asset, *ASSETS, hub_release_spec],
    asset_checks=PUBLISH_CHECKS,
    jobs=[refresh_job, rehost_job, publish_checks_job, publish_job],
    sensors=[new_series_sensor, refresh_followup_sensor],
    schedules=[nightly_refresh],
    # settings come from the environment when a run starts (EnvVar), never at import
    resources=build_resources(dg.EnvVar, dg.EnvVar.int),
    executor=vae_executor,  # in-process unless VAE_EXECUTOR or the run config says celery
)
