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

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import dagster as dg
import polars as pl

from vae_pipeline.partitions import SERIES

INPUTS_KEY = "vae/inputs"
SOURCE_KEY = "vae/source"

# asset key -> f(partition_key or None) giving the version of the files the asset reads
SourceVersions = dict[dg.AssetKey, Callable[[str | None], str]]


@dataclass(frozen=True)
class StaleItem:
    key: dg.AssetKey
    partition: str | None
    reason: str  # "missing", "inputs or code changed", or "upstream stale"
    waits_on: frozenset[tuple[dg.AssetKey, str | None]] = frozenset()  # stale upstream partitions


Latest = Callable[[dg.AssetKey, str | None], dg.AssetMaterialization | None]


def latest_materialization(instance: dg.DagsterInstance, key: dg.AssetKey,
                           partition: str | None = None) -> dg.AssetMaterialization | None:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].asset_materialization if records else None


def _version(event: dg.AssetMaterialization | None) -> str:
    if event is None:
        return "missing"
    return (event.tags or {}).get("dagster/data_version", "unversioned")


def content_version(*parts: object) -> str:
    """A data version from the values an asset produced (or any stable description of them)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def frame_version(frame: pl.DataFrame, *extra: object) -> dg.DataVersion:
    """The data version of a table an asset produced (plus anything else that identifies it)."""
    return dg.DataVersion(content_version(frame.write_ndjson().encode(), *extra))


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


def record_metadata(context: dg.AssetExecutionContext, source: str | None = None) -> dict[str, str]:
    """The metadata an asset adds to its materialization so that staleness can be judged later."""
    spec = context.assets_def.get_asset_spec(context.asset_key)
    partitions = context.instance.get_dynamic_partitions(SERIES)
    partition = context.partition_key if context.has_partition_key else None
    meta = {INPUTS_KEY: inputs_fingerprint(context.instance, spec, partition, partitions, source)}
    if source is not None:
        meta[SOURCE_KEY] = source
    return meta


def stale_items(instance: dg.DagsterInstance, specs: list[dg.AssetSpec], sources: SourceVersions,
                partitions: list[str]) -> list[StaleItem]:
    """Every asset partition that must be (re)materialized, in dependency order.

    An asset partition whose upstream is itself stale is listed with reason `upstream stale`: its
    own verdict waits until the upstream has run (its data version may not change).
    """
    cache: dict[tuple[dg.AssetKey, str | None], dg.AssetMaterialization | None] = {}

    def latest(key: dg.AssetKey, partition: str | None) -> dg.AssetMaterialization | None:
        if (key, partition) not in cache:
            cache[key, partition] = latest_materialization(instance, key, partition)
        return cache[key, partition]

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
            if reason:
                stale.append(StaleItem(spec.key, partition, reason, waits_on))
                pending.add((spec.key, partition))
    return stale


def _stale_reason(instance, latest: Latest, spec, partition, partitions, sources) -> str | None:
    event = latest(spec.key, partition)
    if event is None:
        return "missing"
    recorded = (event.metadata or {}).get(INPUTS_KEY)
    source = sources[spec.key](partition) if spec.key in sources else None
    now = inputs_fingerprint(instance, spec, partition, partitions, source, latest)
    if recorded is None or getattr(recorded, "value", recorded) != now:
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
        for dep in spec.deps:
            if dep.asset_key in by_key:
                visit(by_key[dep.asset_key])
        ordered.append(spec)

    for spec in sorted(specs, key=lambda s: s.key.to_user_string()):
        visit(spec)
    return ordered
