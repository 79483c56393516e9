"""Concurrency pools of the steps that load the machine (video decoding, bundling) and of the
DuckDB roll-up.

A `renders` step already decodes its videos on every core, so one at a time keeps a nightly
refresh and a backfill from decoding more videos at once than there are cores; a `bundles` step
packs on one core, so as many as there are cores. The roll-up into DuckDB has one writer at a
time: on a bucket home the database is the local cache of whichever machine runs it. A limit an operator set (UI, or
`dagster instance concurrency set`) is never overwritten.

The pools count steps across every machine; `MachineSlots` is each machine's own limit: the
`vae worker`s sharing a machine run at most one step per core between them.
"""

import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import IO

import dagster as dg

RENDERS = "renders"
BUNDLES = "bundles"
WAREHOUSE = "warehouse"


def default_pool_limits(cores: int) -> dict[str, int]:
    return {RENDERS: 1, BUNDLES: cores, WAREHOUSE: 1}


def ensure_pool_limits(instance: dg.DagsterInstance) -> None:
    """Give each pool its default limit unless it has one set on purpose."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    chosen = {pool.name for pool in storage.get_pool_limits() if not pool.from_default}
    for pool, limit in default_pool_limits(os.cpu_count() or 1).items():
        if pool not in chosen:
            storage.set_concurrency_slots(pool, limit)


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity: what a container's cpuset leaves it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class MachineSlots:
    """At most `count` holders at once among all the processes of this machine: a slot is an
    exclusive flock on one of `count` files in `folder` (the system's temp folder by default, which
    every worker of the machine sees). A holder that dies frees its slot: the kernel drops its lock."""

    def __init__(self, count: int, folder: Path | None = None) -> None:
        self.count = max(1, count)
        self.folder = folder or Path(tempfile.gettempdir()) / "vae-step-slots"
        self._held: IO[str] | None = None

    def acquire(self, poll_s: float = 0.05) -> None:
        """Wait for a free slot and hold it (one at a time per process)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        while self._held is None:
            for number in range(self.count):
                handle = open(self.folder / f"slot-{number}", "a", encoding="utf-8")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    handle.close()
                    continue
                self._held = handle
                return
            time.sleep(poll_s)

    def release(self) -> None:
        if self._held is not None:
            fcntl.flock(self._held, fcntl.LOCK_UN)
            self._held.close()
            self._held = None
