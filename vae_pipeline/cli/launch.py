"""Run a job of the code location from a command (`vae build`, `vae publish`), on the engine configured.

In-process (the default) runs the job in this process with `execute_in_process`, which ignores
the job's executor. Any other engine needs the executor, so the run goes through the instance
with `execute_job` and a reconstructable job: the steps of a Celery run are tasks that
`vae worker`s pick up, and they rebuild the job from its module and name.
"""

from collections.abc import Mapping, Sequence

import dagster as dg

from vae_pipeline.engines.executor import engine_of
from vae_pipeline.engines.recovery import process_tags
from vae_pipeline.storage.partitions import partitions_read_once


def job_named(name: str) -> dg.JobDefinition:
    """The code location's job `name` (what a worker reconstructs a run's job with)."""
    from vae_pipeline.definitions import defs

    return defs.resolve_job_def(name)


def run_job(name: str, instance: dg.DagsterInstance, *, asset_selection: Sequence[dg.AssetKey] | None = None,
            partition_key: str | None = None, tags: Mapping[str, str] | None = None, run_config: Mapping | None = None,
            ) -> dg.ExecuteInProcessResult | dg.JobExecutionResult:
    """One run of job `name`; the result has `success`, `run_id`, `all_events` and the materializations.

    A run over a range of partitions takes Dagster's range tags (`dagster/asset_partition_range_start`
    and `_end`) in `tags`; every run also gets the tags naming this process, so that a later
    command can tell whether it died (`engines.recovery`). The engine is `run_config`'s
    `execution.config.engine`, else `VAE_EXECUTOR`, else in-process.
    """
    run_tags = {**(tags or {}), **process_tags(writer=True)}  # every command launching runs holds the writer lock
    config = dict(run_config or {})
    if engine_of(config.get("execution", {}).get("config", {})) == "in_process":
        config.pop("execution", None)  # execute_in_process takes no executor config
        # Dagster reads every series again each time a step asks for a partition key or range
        # (3.5 ms a read at 2,500 series): the series are added before a run, never by one
        with partitions_read_once(instance):
            return job_named(name).execute_in_process(
                instance=instance, partition_key=partition_key, asset_selection=asset_selection,
                tags=run_tags, run_config=config, raise_on_error=False)
    if partition_key is not None:
        run_tags["dagster/partition"] = partition_key
    job = dg.build_reconstructable_job(__name__, job_named.__name__, reconstructable_args=(name,))
    return dg.execute_job(job, instance, run_config=config, tags=run_tags, asset_selection=asset_selection,
                          raise_on_error=False)
