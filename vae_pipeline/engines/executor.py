"""The executor of every job: in-process (the default) or Celery, chosen when a run starts.

The choice is run configuration (`execution: {config: {engine: celery}}`) or, when a run does not
say, `VAE_EXECUTOR` in the environment of the process that runs it (`vae build`, or the run worker
the webserver and the daemon launch), so one deployment setting moves every run to the workers.
The broker and result backend come from `VAE_CELERY_BROKER` / `VAE_CELERY_BACKEND` both here and
in `vae worker`, so the two always agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

import dagster as dg
from dagster._core.definitions.executor_definition import (
    _core_in_process_executor_creation,
    get_retries_config,
)
from dagster._core.execution.retries import RetryMode

from vae_pipeline.engines.collector import pace_for_a_run

if TYPE_CHECKING:  # dagster-celery (and Celery) are imported only by a run on the Celery engine
    from dagster_celery.executor import CeleryExecutor

ENGINES = ("in_process", "celery")
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
CELERY_POLL_SECONDS = 0.1


def engine_of(config: Mapping[str, object]) -> str:
    """The engine a run uses: its run config's, else `VAE_EXECUTOR`, else in-process."""
    engine = str(config.get("engine") or os.environ.get("VAE_EXECUTOR") or "in_process")
    if engine not in ENGINES:
        raise dg.DagsterInvalidConfigError(
            f"VAE_EXECUTOR={engine!r} is not an engine; use one of {', '.join(ENGINES)}", [], engine)
    return engine


def celery_executor_from_env(retries: RetryMode = RetryMode.DISABLED,
                             environ: Mapping[str, str] | None = None) -> CeleryExecutor:
    """A Celery executor with the broker and backend of the environment (the worker's app too).

    `VAE_CELERY_PREFIX` puts every broker and result key under a prefix, so deployments (or test
    runs) sharing one Redis never see each other's tasks.
    """
    from dagster_celery.config import DEFAULT_CONFIG
    from dagster_celery.executor import CeleryExecutor

    _register_step_task_once()
    env = os.environ if environ is None else environ
    broker = env.get("VAE_CELERY_BROKER") or DEFAULT_BROKER
    prefix = env.get("VAE_CELERY_PREFIX", "")
    transport = {**DEFAULT_CONFIG["broker_transport_options"], "global_keyprefix": prefix}
    config_source: dict[str, object] = {"broker_transport_options": transport}
    if prefix:
        config_source["result_backend_transport_options"] = {"global_keyprefix": prefix}
    return CeleryExecutor(retries=retries, broker=broker, backend=env.get("VAE_CELERY_BACKEND") or broker,
                          config_source=config_source)


def _register_step_task_once() -> None:
    """Make dagster-celery's `create_task(app)` register its step task once per Celery app.

    Its executor calls `create_task` for every step it submits (`_submit_task`), each time with a
    new closure under the one name `execute_plan`; Celery keeps the first and warns
    (a multi-line DuplicateTaskNameWarning) on the first build of every process. Handing back the
    task already registered is what Celery expects of a caller, and the task is the same code."""
    from dagster_celery import tasks
    from dagster_celery.config import TASK_EXECUTE_PLAN_NAME

    create = tasks.create_task
    if getattr(create, "registers_once", False):
        return

    def create_task(celery_app, **task_kwargs):
        registered = celery_app.tasks.get(TASK_EXECUTE_PLAN_NAME)
        return registered if registered is not None else create(celery_app, **task_kwargs)

    create_task.registers_once = True
    tasks.create_task = create_task


def _requirements(config: Mapping[str, object]) -> list[dg.ExecutorRequirement]:
    if engine_of(config) == "celery":
        return list(dg.multiple_process_executor_requirements())
    return []


@dg.executor(
    name="vae_executor",
    config_schema={
        "engine": dg.Field(dg.Enum("VaeEngine", [dg.EnumValue(e) for e in ENGINES]), is_required=False,
            description="in_process or celery; default: $VAE_EXECUTOR, else in_process"),
        "retries": get_retries_config(),
    },
    requirements=_requirements,
)
def vae_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Steps in the run's own process, or one Celery task per step on `vae worker`s."""
    config = init_context.executor_config
    if engine_of(config) == "celery":
        from dagster_celery import core_execution_loop

        # dagster-celery's loop sleeps this long between polls of its steps' results (1 s as
        # shipped): with steps of a second or two, that wait would be most of the overhead
        core_execution_loop.TICK_SECONDS = CELERY_POLL_SECONDS
        return celery_executor_from_env(RetryMode.from_config(config["retries"]))
    pace_for_a_run()  # this process is the run's own: its steps run here
    return _core_in_process_executor_creation({"retries": config["retries"]})
