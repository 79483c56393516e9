"""Recovery without a person: runs whose process is gone are failed, and what they held is freed.

A run killed with its process (OOM, a reboot, SIGKILL) stays STARTED in the instance forever,
holding its pool slots — every later step of that pool then waits on it — and its planned check
evaluations. Every `vae` command reconciles first. A run is dead when

- it was launched by `vae` (tags `vae/host`, `vae/pid`, `vae/process_start`) on this host and
  that process no longer runs;
- it was launched by `vae` under the writer lock, and this command now holds that lock (the
  launcher released it, so it died — on any machine of a Postgres instance);
- on an embedded (SQLite, one machine) instance, it was launched by the webserver or the daemon
  and the run worker's PID, which Dagster records ("Started process for run"), is gone.

A dead run is reported failed (`report_run_failed`: its planned checks then resolve to "execution
failed", never to a result), and its slots and queued steps are freed
(`free_concurrency_slots_for_run`), as are the slots of any run that already finished.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg
from dagster._core.storage.dagster_run import FINISHED_STATUSES, NOT_FINISHED_STATUSES

from vae_pipeline.domain.processes import ProcessId, host_name, pid_running, this_process

HOST_TAG = "vae/host"
PID_TAG = "vae/pid"
START_TAG = "vae/process_start"
WRITER_TAG = "vae/writer"  # launched by a command holding the writer lock
STARTED_PROCESS = "Started process for run (pid: "  # Dagster's engine event in a run worker


def process_tags(writer: bool) -> dict[str, str]:
    """The tags naming the process that runs a run `vae` launches in this process."""
    me = this_process()
    tags = {HOST_TAG: me.host, PID_TAG: str(me.pid), START_TAG: me.start}
    if writer:
        tags[WRITER_TAG] = "true"
    return tags


@dataclass(frozen=True)
class Reconciled:
    failed_runs: list[str]  # runs marked failed, as "RUN_ID (why)"
    freed_runs: list[str]  # runs whose pool slots or queued steps were freed


def reconcile(instance: dg.DagsterInstance, *, holds_writer_lock: bool, local: bool) -> Reconciled:
    """Fail the runs whose process is gone and free what they and finished runs hold.

    `local`: the instance lives on this machine only (SQLite), so any run worker ran here."""
    me = this_process()
    failed = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=NOT_FINISHED_STATUSES)):
        run = record.dagster_run
        why = _why_dead(instance, run, me, holds_writer_lock, local)
        if why is not None:
            instance.report_run_failed(run, f"The run's process is gone ({why}); marked failed by vae on {me.host}.")
            failed.append(f"{run.run_id} ({why})")
    freed = _free_slots_of_finished_runs(instance)
    return Reconciled(failed, freed)


def _why_dead(instance: dg.DagsterInstance, run: dg.DagsterRun, me: ProcessId, holds_writer_lock: bool,
              local: bool) -> str | None:
    tags = run.tags
    if PID_TAG in tags:
        launcher = ProcessId(tags.get(HOST_TAG, ""), int(tags[PID_TAG]), tags.get(START_TAG, ""))
        if launcher == me:
            return None
        if launcher.host == host_name() and not launcher.running():
            return f"pid {launcher.pid} is not running"
        if holds_writer_lock and tags.get(WRITER_TAG) == "true":
            return f"pid {launcher.pid} on {launcher.host} released the writer lock"
        return None
    if local and run.status == dg.DagsterRunStatus.STARTED:
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            message = event.message or ""
            if message.startswith(STARTED_PROCESS):
                pid = int(message[len(STARTED_PROCESS):].split(")")[0])
                if not pid_running(pid):
                    return f"run worker pid {pid} is not running"
    return None


def _free_slots_of_finished_runs(instance: dg.DagsterInstance) -> list[str]:
    """Free the slots and queued steps of runs that finished (a run the pool still counts blocks
    every step of that pool). Runs the instance does not know are left alone."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    holders = set(storage.get_concurrency_run_ids())
    for pool in storage.get_concurrency_keys():
        holders.update(slot.run_id for slot in storage.get_concurrency_info(pool).claimed_slots)
    if not holders:
        return []
    finished = [record.dagster_run.run_id for record in instance.get_run_records(
        dg.RunsFilter(run_ids=sorted(holders), statuses=FINISHED_STATUSES))]
    for run_id in finished:
        storage.free_concurrency_slots_for_run(run_id)
    return finished
