"""What is stale: one rule, used by the assets (to record), the CLI, the schedule and the sensors.

Every materialization records `vae/inputs`: a fingerprint of the asset's code version, the
data versions of its upstream assets as they were when it ran (for a series-partitioned
upstream feeding an unpartitioned asset, the versions of every series), and — for the assets
that read files — the version of those files. An asset partition is **stale** when it was
never materialized or when the fingerprint it would record now differs from the one it
recorded. Each asset's data version is a hash of what it produced, so an upstream that re-ran
and produced the same thing makes nothing downstream stale.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import dagster as dg
import polars as pl

from vae_pipeline.domain.table_versions import content_version, rows_version
from vae_pipeline.storage.partitions import SERIES, partitions_read_once

INPUTS_KEY = "vae/inputs"
SOURCE_KEY = "vae/source"
VERSION_KEY = "vae/version"  # a series partition's own data version (a ranged run has one Dagster data version)
UPSTREAM_KEY = "vae/upstream"  # the versions of the same series' upstream stages this partition was made from

# asset key -> f(partition_key or None) giving the version of the files the asset reads
SourceVersions = dict[dg.AssetKey, Callable[[str | None], str]]


@dataclass(frozen=True)
class StaleItem:
    key: dg.AssetKey
    partition: str | None
    reason: str  # "missing", "inputs or code changed", or "upstream stale"
    waits_on: frozenset[tuple[dg.AssetKey, str | None]] = frozenset()  # stale upstream partitions


@dataclass(frozen=True)
class Recorded:
    """What the staleness rule reads of a series partition's latest materialization (`_plain`):
    a plain record, since building Dagster's event object for each of 12,500 partitions costs a
    build about 0.3 s, every time an instance is opened."""

    partition: str | None
    tags: dict[str, str]
    metadata: dict[str, object]  # the recorded versions (_RECORDED), as plain values


Latest = Callable[[dg.AssetKey, str | None], dg.AssetMaterialization | Recorded | None]


def recorded_value(event: dg.AssetMaterialization | Recorded, key: str) -> object:
    """A value the materialization `event` recorded under `key` (None when it has none)."""
    value = (event.metadata or {}).get(key)
    return getattr(value, "value", value)


def latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey,
                           partition: str | None = None) -> dg.AssetMaterialization | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].asset_materialization if records else None


# What the staleness rule reads of a materialization, by instance and event storage id (an event
# never changes): a process reads each event once, not once per asset step and planning pass.
_RECORDED = (VERSION_KEY, INPUTS_KEY, UPSTREAM_KEY, SOURCE_KEY)
_SEEN: weakref.WeakKeyDictionary[dg.DagsterInstance, dict[int, Recorded]] = \
    weakref.WeakKeyDictionary()
RECORDED_VERSIONS = "vae/recorded_versions/{key}"  # the instance's key-value store: see `_remembered`
# How many events of an asset this process fetched may be missing from its stored value (see
# `_Stored`) before it is written again. The value is every partition's entry as one JSON
# (0.1 s to read and write at 2,500 series), and a run adds an event to each of its assets after
# every step: the next process fetches the few it lacks, in one query, and writes them.
STORE_LAG = 32


@dataclass
class _Stored:
    """An asset's stored recorded versions as this process last read or wrote them, with the
    entries it fetched since (`behind` of them not in the store)."""

    entries: dict[int, dict]
    behind: int = 0


_STORED: weakref.WeakKeyDictionary[dg.DagsterInstance, dict[dg.AssetKey, _Stored]] = weakref.WeakKeyDictionary()


def _plain(event: dg.AssetMaterialization, run_id: str) -> dict:
    """The parts of a materialization the staleness rule reads (not the previews and run tables),
    as JSON, with the run that made it."""
    return {"run": run_id, "partition": event.partition, "tags": dict(event.tags or {}),
            "metadata": {k: getattr(v, "value", v) for k, v in (event.metadata or {}).items() if k in _RECORDED}}


def _recorded_of(plain: dict) -> Recorded:
    return Recorded(partition=plain["partition"], tags=plain["tags"], metadata=plain["metadata"])


def _remembered(instance: dg.DagsterInstance, key: dg.AssetKey, wanted: set[int]) -> dict[int, dict]:
    """The recorded versions of the events `wanted` that an earlier process read, from the
    instance's key-value store (one value an asset): a build reads back only the events added
    since, not every partition's. An entry counts only while the run that made its event exists:
    SQLite gives a deleted run's storage ids to the next events, and those belong to a new run."""
    stored = instance.run_storage.get_cursor_values({RECORDED_VERSIONS.format(key=key.to_user_string())})
    try:
        entries = {int(storage_id): plain for storage_id, plain in
                   json.loads(next(iter(stored.values()), "{}")).items() if int(storage_id) in wanted}
    except (ValueError, TypeError, AttributeError):
        return {}  # not what this code writes: read the events again
    runs = {plain.get("run") for plain in entries.values() if isinstance(plain, dict)}
    existing = set(instance.get_run_ids(dg.RunsFilter(run_ids=sorted(r for r in runs if isinstance(r, str))))) \
        if runs else set()
    return {storage_id: plain for storage_id, plain in entries.items()
            if isinstance(plain, dict) and plain.get("run") in existing}


def latest_by_partition(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, Recorded]:
    """The latest materialization of every partition of `key` (its versions, see `_plain`): one
    query for the storage ids; the events no process has read yet fetched, and what they record
    kept for the next process (see `_remembered`). The stored value is read once a process; the
    events added later (by this process's runs) are fetched, and written when more than
    STORE_LAG are missing from it."""
    ids = instance.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
    if not ids:
        return {}
    seen = _SEEN.setdefault(instance, {})
    current = set(ids.values())
    unread = current - set(seen)
    if unread:
        stored = _STORED.setdefault(instance, {})
        first = key not in stored
        if first:
            stored[key] = _Stored(_remembered(instance, key, current))
        store = stored[key]
        seen.update((storage_id, _recorded_of(store.entries[storage_id])) for storage_id in unread & set(store.entries))
        missing = sorted(unread - set(store.entries))
        if missing:
            records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, storage_ids=missing),
                                                      limit=len(missing)).records
            store.entries.update((record.storage_id, _plain(record.asset_materialization, record.run_id))
                                 for record in records)
            seen.update((record.storage_id, _recorded_of(store.entries[record.storage_id])) for record in records)
            store.behind += len(records)
        if store.behind > (0 if first else STORE_LAG):
            store.entries = {storage_id: plain for storage_id, plain in store.entries.items() if storage_id in current}
            instance.run_storage.set_cursor_values({RECORDED_VERSIONS.format(key=key.to_user_string()):
                                                    json.dumps(store.entries, sort_keys=True)})
            store.behind = 0
    return {partition: seen[storage_id] for partition, storage_id in ids.items() if storage_id in seen}


def cached_latest(instance: dg.DagsterInstance) -> Latest:
    """A look-up of latest materializations that asks the instance once per asset."""
    partitioned: dict[dg.AssetKey, dict[str, Recorded]] = {}
    unpartitioned: dict[dg.AssetKey, dg.AssetMaterialization | None] = {}

    def latest(key: dg.AssetKey, partition: str | None) -> dg.AssetMaterialization | Recorded | None:
        if partition is not None:
            if key not in partitioned:
                partitioned[key] = latest_by_partition(instance, key)
            return partitioned[key].get(partition)
        if key not in unpartitioned:
            unpartitioned[key] = latest_materialization(instance, key)
        return unpartitioned[key]

    return latest


def _version(event: dg.AssetMaterialization | Recorded | None) -> str:
    if event is None:
        return "missing"
    own = recorded_value(event, VERSION_KEY)
    if own is not None:
        return own
    return (event.tags or {}).get("dagster/data_version", "unversioned")


def frame_version(frame: pl.DataFrame, *extra: object) -> dg.DataVersion:
    """The data version of a table an asset produced (`rows_version`)."""
    return dg.DataVersion(rows_version(frame, *extra))


def inputs_fingerprint(instance: dg.DagsterInstance, spec: dg.AssetSpec, partition: str | None,
                       partitions: Iterable[str], source: str | None, latest: Latest | None = None) -> str:
    """The fingerprint `spec` would record if it were materialized now for `partition`.

    `latest` looks up an asset partition's latest materialization (default: ask the instance;
    the planner passes a cached look-up)."""
    latest = latest or (lambda key, part: latest_materialization(instance, key, part))
    parts: list[object] = [spec.code_version or "", source or ""]
    for dep in sorted(spec.deps, key=lambda d: d.asset_key.to_user_string()):
        parts.append(_upstream_version(latest, dep.asset_key, partition, partitions))
    return content_version(*parts)


def _upstream_version(latest: Latest, key: dg.AssetKey, partition: str | None, partitions: Iterable[str]) -> object:
    """An upstream's data version: its own, the same series', or every series' for a roll-up."""
    newest = latest(key, None)
    if newest is None:
        return "missing"
    if newest.partition is None:
        return _version(newest)
    if partition is not None:
        return _version(latest(key, partition))
    return [(p, _version(latest(key, p))) for p in sorted(partitions)]


def written_source(source: str | None, folder: str) -> str:
    """The source version of an asset that writes into the dataset folder: its own (if any) and
    which folder it writes (`DatasetFolder.source`)."""
    return content_version(source or "", folder)


def record_metadata(context: dg.AssetExecutionContext, source: str | None = None,
                    latest: Latest | None = None) -> dict[str, str]:
    """The metadata an unpartitioned asset adds to its materialization so that staleness can be
    judged later (`latest`: a look-up of upstream materializations the step already holds)."""
    spec = context.assets_def.get_asset_spec(context.asset_key)
    partitions = context.instance.get_dynamic_partitions(SERIES)
    meta = {INPUTS_KEY: inputs_fingerprint(context.instance, spec, None, partitions, source,
                                           latest or cached_latest(context.instance))}
    if source is not None:
        meta[SOURCE_KEY] = source
    return meta


def series_output(context: dg.AssetExecutionContext, frames: dict[str, pl.DataFrame],
                  metadata: dict[str, dict], sources: dict[str, str] | None = None,
                  unversioned: tuple[str, ...] = ()) -> dg.Output:
    """The output of a series-partitioned asset over the run's series (one, or a range).

    Each series' materialization gets its own metadata: what a person reads, its data version
    (`vae/version`, a hash of its rows and source), the fingerprint of its inputs and the versions
    of the same series' upstream stages it was made from (`vae/upstream`). Columns in
    `unversioned` (a timestamp) do not count in the data version."""
    spec = context.assets_def.get_asset_spec(context.asset_key)
    partitions = context.instance.get_dynamic_partitions(SERIES)
    latest = cached_latest(context.instance)
    with partitions_read_once(context.instance):
        for series, frame in frames.items():
            source = (sources or {}).get(series)
            upstream = {dep.asset_key.to_user_string(): _upstream_version(latest, dep.asset_key, series, partitions)
                        for dep in spec.deps}
            context.add_asset_metadata({
                **metadata[series],
                VERSION_KEY: rows_version(frame.drop(unversioned), source or ""),
                INPUTS_KEY: inputs_fingerprint(context.instance, spec, series, partitions, source, latest),
                UPSTREAM_KEY: dg.MetadataValue.json(upstream),
                **({SOURCE_KEY: source} if source is not None else {}),
            }, partition_key=series)
    return dg.Output(frames)


def outdated_stages(instance: dg.DagsterInstance, partitions: list[str], stages: list[dg.AssetKey],
                    latest: Latest | None = None) -> list[str]:
    """Each series stage that is missing, or was made from an older version of the same series'
    upstream stages than the latest (e.g. labels older than its episodes), as "series: why"."""
    latest = latest or cached_latest(instance)
    current: dict[tuple[str, str], object] = {}  # (upstream, series) -> its version now, shared by the stages

    def now(name: str, series: str) -> object:
        if (name, series) not in current:
            current[name, series] = _upstream_version(latest, dg.AssetKey.from_user_string(name), series, partitions)
        return current[name, series]

    problems = []
    for series in partitions:
        for stage in stages:
            event = latest(stage, series)
            if event is None:
                problems.append(f"{series}: {stage.to_user_string()} has not been materialized")
                continue
            recorded = recorded_value(event, UPSTREAM_KEY) or {}
            older = sorted(name for name, version in recorded.items() if now(name, series) != version)
            if older:
                problems.append(f"{series}: {stage.to_user_string()} is older than its {', '.join(older)}")
    return problems


CHECKS_NOT_EVALUATED = "checks not evaluated"


def stale_items(instance: dg.DagsterInstance, specs: list[dg.AssetSpec], sources: SourceVersions,
                partitions: list[str], unchecked: dict[dg.AssetKey, set[str | None]] | None = None,
                ) -> list[StaleItem]:
    """Every asset partition that must be (re)materialized, in dependency order.

    An asset partition whose upstream is itself stale is listed with reason `upstream stale`: its
    own verdict waits until the upstream has run (its data version may not change). One that is
    otherwise fresh but in `unchecked` (its checks were planned by a run that ended before them,
    see `storage.checks.unevaluated_partitions`) is listed with reason `checks not evaluated`.
    """
    latest = cached_latest(instance)
    stale: list[StaleItem] = []
    pending: set[tuple[dg.AssetKey, str | None]] = set()
    for spec in _topological(specs):
        keys = list(partitions) if spec.partitions_def is not None else [None]
        for partition in keys:
            waits_on = frozenset(
                (dep.asset_key, part) for dep in spec.deps
                for part in ([partition, None] if partition is not None else [None, *partitions])
                if (dep.asset_key, part) in pending)
            if waits_on:
                reason = "upstream stale"
            else:
                reason = _stale_reason(instance, latest, spec, partition, partitions, sources)
                if not reason and partition in (unchecked or {}).get(spec.key, ()):
                    reason = CHECKS_NOT_EVALUATED
            if reason:
                stale.append(StaleItem(spec.key, partition, reason, waits_on))
                pending.add((spec.key, partition))
    return stale


def _stale_reason(instance, latest: Latest, spec, partition, partitions, sources) -> str | None:
    event = latest(spec.key, partition)
    if event is None:
        return "missing"
    recorded = recorded_value(event, INPUTS_KEY)
    source = sources[spec.key](partition) if spec.key in sources else None
    now = inputs_fingerprint(instance, spec, partition, partitions, source, latest)
    if recorded is None or recorded != now:
        return "inputs or code changed"
    return None


def _topological(specs: list[dg.AssetSpec]) -> list[dg.AssetSpec]:
    by_key = {spec.key: spec for spec in specs}
    ordered: list[dg.AssetSpec] = []
    seen: set[dg.AssetKey] = set()

    def visit(spec: dg.AssetSpec) -> None:
        if spec.key in seen:
            return
        seen.add(spec.key)
        for dep in sorted(spec.deps, key=lambda d: d.asset_key.to_user_string()):  # a set: its order varies by process
            if dep.asset_key in by_key:
                visit(by_key[dep.asset_key])
        ordered.append(spec)

    for spec in sorted(specs, key=lambda s: s.key.to_user_string()):
        visit(spec)
    return ordered
