"""The latest result of an asset check, as everything that reports one reads it (the build
summary, the review site, the release's refusal), and what a check says by episode (its items).

Dagster records a check as PLANNED when its run starts and replaces that with the evaluation when
the check runs. A check whose run failed or was killed first stays PLANNED: that is "not
evaluated" (no pass, no failure), never an evaluation — its record's event is then the plan, not
a result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecord,
    AssetCheckExecutionRecordStatus,
)
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from upath import UPath

from vae_pipeline.domain.objects import read_bytes, remove, write_if_changed

PASSED, FAILED, NOT_EVALUATED, RUNNING = "passed", "failed", "not evaluated", "running"
ITEMS = "items"  # what a check says by episode, one `said_of` each: the review site links them
ITEMS_FILE, ITEMS_SHA256 = "items_file", "items_sha256"  # where all of them are, past ITEMS_IN_EVALUATION
ITEMS_IN_EVALUATION = 50
CHECK_ITEMS = "check-items"  # <home>/check-items/<asset>/<check>.json


@dataclass(frozen=True)
class CheckOutcome:
    status: str  # PASSED, FAILED, NOT_EVALUATED (never ran, or its run ended first) or RUNNING
    description: str | None  # the evaluation's description; None unless evaluated
    run_id: str | None  # the run of the latest record
    metadata: Mapping[str, object] = field(default_factory=dict)  # the evaluation's metadata
    timestamp: float | None = None  # when the latest record was written

    @property
    def passed(self) -> bool | None:
        """True or False when evaluated, None otherwise."""
        return {PASSED: True, FAILED: False}.get(self.status)


def _latest(instance: dg.DagsterInstance, keys: list[dg.AssetCheckKey]
            ) -> tuple[dict[dg.AssetCheckKey, CheckOutcome], dict[dg.AssetCheckKey, AssetCheckExecutionRecord]]:
    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    planned = sorted({r.run_id for r in records.values() if r.status == AssetCheckExecutionRecordStatus.PLANNED})
    unfinished = {record.dagster_run.run_id for record in instance.get_run_records(
        dg.RunsFilter(run_ids=planned, statuses=NOT_FINISHED_STATUSES))} if planned else set()
    outcomes = {}
    for key in keys:
        record = records.get(key)
        if record is None:
            outcomes[key] = CheckOutcome(NOT_EVALUATED, None, None)
        elif record.status == AssetCheckExecutionRecordStatus.PLANNED:
            outcomes[key] = CheckOutcome(RUNNING if record.run_id in unfinished else NOT_EVALUATED, None, record.run_id,
                                         timestamp=record.create_timestamp)
        else:
            evaluation = record.evaluation
            outcomes[key] = CheckOutcome(PASSED if evaluation.passed else FAILED, evaluation.description, record.run_id,
                                         evaluation.metadata or {}, record.event.timestamp)
    return outcomes, records


def check_outcomes(instance: dg.DagsterInstance, keys: Iterable[dg.AssetCheckKey]) -> dict[dg.AssetCheckKey, CheckOutcome]:
    """The latest outcome of each check in `keys` (two queries, not one per check)."""
    return _latest(instance, list(keys))[0]


def unevaluated_partitions(instance: dg.DagsterInstance, keys: Iterable[dg.AssetCheckKey],
                           partitions: list[str]) -> dict[dg.AssetKey, set[str | None]]:
    """The asset partitions whose checks a finished run planned and never evaluated (a run killed
    or failed after the asset, before its checks): they must run again, or the checks would stay
    unevaluated while the asset looks fresh. The partitions are the record's, else those of the
    run's partition or range tags, else every one (None stands for an unpartitioned asset)."""
    outcomes, records = _latest(instance, list(keys))
    stale: dict[dg.AssetKey, set[str | None]] = {}
    for key, outcome in outcomes.items():
        if outcome.status == NOT_EVALUATED and outcome.run_id is not None:
            record = records[key]
            stale.setdefault(key.asset_key, set()).update(
                [record.partition] if record.partition else _partitions_of_run(instance, record.run_id, partitions))
    return stale


def _partitions_of_run(instance: dg.DagsterInstance, run_id: str, partitions: list[str]) -> list[str | None]:
    run = instance.get_run_by_id(run_id)
    tags = run.tags if run else {}
    if tags.get(PARTITION_NAME_TAG) in partitions:
        return [tags[PARTITION_NAME_TAG]]
    first, last = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if first in partitions and last in partitions:
        return partitions[partitions.index(first):partitions.index(last) + 1] + [None]
    return [*partitions, None]


def items_folder(home: UPath, asset: dg.AssetKey) -> UPath:
    return home / CHECK_ITEMS / "/".join(asset.path)


def items_metadata(home: UPath, key: dg.AssetCheckKey, said: list[dict], listed: Mapping[str, dict]) -> dict:
    """The ITEMS entries of the evaluation of the check `key`: every item when there are at most
    ITEMS_IN_EVALUATION; past that, the first of them, and all of them in
    `check-items/<asset>/<check>.json` in the home, named with their sha256 (ITEMS_FILE,
    ITEMS_SHA256). Dagster stores an evaluation several times and everything that reports a check
    reads it back: 40,000 items in it cost seconds a build. `listed`: a listing of the asset's
    items folder, to remove a file this evaluation no longer names."""
    metadata = {ITEMS: dg.MetadataValue.json(said[:ITEMS_IN_EVALUATION])}
    name = f"{key.name}.json"
    path = items_folder(home, key.asset_key) / name
    if len(said) > ITEMS_IN_EVALUATION:
        data = json.dumps(said).encode()
        write_if_changed(path, data)
        metadata[ITEMS_FILE] = dg.MetadataValue.text(f"{CHECK_ITEMS}/{'/'.join(key.asset_key.path)}/{name}")
        metadata[ITEMS_SHA256] = dg.MetadataValue.text(hashlib.sha256(data).hexdigest())
    elif name in listed:
        remove(path)
    return metadata


def check_items(home: UPath, metadata: Mapping[str, object]) -> list[dict]:
    """Every item of an evaluation (`items_metadata`): those in its file when it still holds what
    the evaluation named (a later evaluation may have rewritten it, or it is gone), else those
    the evaluation itself holds."""
    inline = metadata.get(ITEMS)
    items = inline.value if isinstance(inline, dg.JsonMetadataValue) else []
    named, digest = metadata.get(ITEMS_FILE), metadata.get(ITEMS_SHA256)
    if not isinstance(named, dg.TextMetadataValue) or not isinstance(digest, dg.TextMetadataValue):
        return items
    try:
        data = read_bytes(home / named.value)
    except FileNotFoundError:
        return items
    return json.loads(data) if hashlib.sha256(data).hexdigest() == digest.value else items
