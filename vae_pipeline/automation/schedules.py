"""The nightly refresh: materialize what is stale or missing; the follow-up sensor carries it on."""

import dagster as dg

from vae_pipeline.automation.jobs import refresh_job
from vae_pipeline.automation.planner import run_requests, stale, sync_series
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, RunsRoot, ScrubSettings


@dg.schedule(cron_schedule="0 3 * * *", job=refresh_job, execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def nightly_refresh(context: dg.ScheduleEvaluationContext, runs_root: RunsRoot, project_meta: ProjectMeta,
                    scrub_settings: ScrubSettings, dataset_folder: DatasetFolder):
    """03:00 UTC: sync the series partitions with the runs root and launch the first stale stage."""
    changes = sync_series(context.instance, runs_root, scrub_settings)
    for skipped in changes.skipped:
        context.log.warning(f"skipped folder {skipped.name}: {skipped.reason}")
    requests = run_requests(stale(context.instance, runs_root, project_meta, scrub_settings, dataset_folder),
                            context.instance.get_dynamic_partitions(SERIES))
    return requests or dg.SkipReason("everything is up to date")
