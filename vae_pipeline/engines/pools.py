"""Concurrency pools of the steps that load the machine: video decoding and bundling.

A `renders` step already decodes its videos on every core, so one at a time keeps a nightly
refresh and a backfill from decoding more videos at once than there are cores; a `bundles` step
packs on one core, so as many as there are cores. A limit an operator set (UI, or
`dagster instance concurrency set`) is never overwritten.
"""

import os

import dagster as dg

RENDERS = "renders"
BUNDLES = "bundles"


def default_pool_limits(cores: int) -> dict[str, int]:
    return {RENDERS: 1, BUNDLES: cores}


def ensure_pool_limits(instance: dg.DagsterInstance) -> None:
    """Give each pool its default limit unless it has one set on purpose."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    chosen = {pool.name for pool in storage.get_pool_limits() if not pool.from_default}
    for pool, limit in default_pool_limits(os.cpu_count() or 1).items():
        if pool not in chosen:
            storage.set_concurrency_slots(pool, limit)
