"""The Celery app `vae worker` serves (its `-A` target), with dagster-celery's step task.

Built when the worker starts, from the same environment variables as the executor
(`vae_pipeline.engines.executor.celery_executor_from_env`), so both talk to one broker and queue. The
code location is loaded here too, before the worker forks its pool, so no step pays the import.
The workers sharing a machine share its cores: a step starts once one is free (`MachineSlots`).
"""

from celery.signals import task_postrun, task_prerun
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from vae_pipeline.cli.launch import job_named
from vae_pipeline.engines.executor import celery_executor_from_env
from vae_pipeline.engines.pools import MachineSlots, machine_cores

app = make_app(celery_executor_from_env().app_args())
execute_plan = create_task(app)
job_named("refresh")

# every worker on this machine together runs at most one step per core: a step waits for a core
# (each pool process holds at most one slot, freed when its step ends or the process dies)
STEP_SLOTS = MachineSlots(machine_cores())
task_prerun.connect(lambda **_: STEP_SLOTS.acquire(), weak=False)
task_postrun.connect(lambda **_: STEP_SLOTS.release(), weak=False)
