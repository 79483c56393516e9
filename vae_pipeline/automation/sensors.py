"""Sensors: new series become partitions, and a refresh continues stage by stage.

While a `vae` command holds the writer lock (a `vae build` brings everything up to date), they
launch nothing: one writer at a time.
"""

import os

import dagster as dg

from vae_pipeline.automation.jobs import refresh_job
from vae_pipeline.automation.planner import (
    REFRESH_TAG,
    run_requests,
    series_changes,
    stale,
)
from vae_pipeline.engines.instance import writer_busy
from vae_pipeline.storage.partitions import SERIES, add_series
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, RunsRoot, ScrubSettings

WRITER_BUSY = "a vae command is writing (it brings everything up to date)"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]


@dg.sensor(job=refresh_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def new_series_sensor(context: dg.SensorEvaluationContext, runs_root: RunsRoot, project_meta: ProjectMeta,
                      scrub_settings: ScrubSettings, dataset_folder: DatasetFolder) -> dg.SensorResult | dg.SkipReason:
    """Adds a partition for every new series under the runs root and requests its first runs."""
    if writer_busy(dict(os.environ)):
        return dg.SkipReason(WRITER_BUSY)
    changes = series_changes(context.instance, runs_root, scrub_settings)
    for skipped in changes.skipped:
        context.log.warning(f"skipped folder {skipped.name}: {skipped.reason}")
    if not changes.added:
        return dg.SkipReason("no new series")
    add_series(context.instance, changes.added)
    new = set(changes.added)
    items = [item for item in stale(context.instance, runs_root, project_meta, scrub_settings, dataset_folder)
             if item.partition in new]
    return dg.SensorResult(run_requests=run_requests(items, context.instance.get_dynamic_partitions(SERIES)))


def continue_refresh(context: dg.RunStatusSensorContext, runs_root: RunsRoot, project_meta: ProjectMeta,
                     scrub_settings: ScrubSettings, dataset_folder: DatasetFolder):
    """Launch the next stage of a refresh once none of its runs is still in flight."""
    if context.dagster_run.tags.get(REFRESH_TAG) != "true":
        return dg.SkipReason("not a refresh run")
    if writer_busy(dict(os.environ)):
        return dg.SkipReason(WRITER_BUSY)
    in_flight = context.instance.get_run_records(
        dg.RunsFilter(statuses=IN_FLIGHT, tags={REFRESH_TAG: "true"}), limit=1)
    if in_flight:
        return dg.SkipReason("refresh runs still in flight")
    requests = run_requests(stale(context.instance, runs_root, project_meta, scrub_settings, dataset_folder),
                            context.instance.get_dynamic_partitions(SERIES))
    return requests or dg.SkipReason("everything is up to date")


@dg.run_status_sensor(run_status=dg.DagsterRunStatus.SUCCESS, request_job=refresh_job,
                      default_status=dg.DefaultSensorStatus.RUNNING)
def refresh_followup_sensor(context: dg.RunStatusSensorContext, runs_root: RunsRoot, project_meta: ProjectMeta,
                            scrub_settings: ScrubSettings, dataset_folder: DatasetFolder):
    """After a refresh run succeeds, the next stage (a failing publish check fails no run)."""
    return continue_refresh(context, runs_root, project_meta, scrub_settings, dataset_folder)
