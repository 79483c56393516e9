"""Concurrency pools of the steps that load the machine (video decoding, bundling) and of the
DuckDB roll-up.

A `renders` step already decodes its videos on every core, so one at a time keeps a nightly
refresh and a backfill from decoding more videos at once than there are cores; a `bundles` step
packs on one core, so as many as there are cores. The roll-up into DuckDB has one writer at a
time: on a bucket home the database is the local cache of whichever machine runs it. A limit an operator set (UI, or
`dagster instance concurrency set`) is never overwritten.
"""

import os

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
