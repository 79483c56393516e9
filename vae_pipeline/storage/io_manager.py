"""Asset values are polars tables stored as Parquet, one file (or object) per asset and series.

A series-partitioned asset's value is a dict series -> table, over the series of its run (one,
or a range when a backfill or `vae build` covers many series in one run); an input from a
series-partitioned asset is such a dict too. A series whose table is missing fails the load,
naming the stage and the series: nothing is ever left out silently.

Only rows of parsed fields and counts are stored — never raw logs — so the pipeline's own
storage holds nothing that the scrub would have had to remove.

The pipeline's own assets name their upstream assets in `deps` and read these tables with
`stored_table` and `stored_series`, not as inputs: Dagster stores two events for every input a
step loads (`LOADED_INPUT`, `STEP_INPUT`), each a SQLite transaction of its own, 56 of the 200
a new series' run stored. The lineage, and the staleness and data versions that follow it, are
the same either way; an asset of a user's own can still take them as inputs.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Mapping, Sequence

import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.domain.objects import (
    is_local,
    listed_identity,
    listing,
    local_path,
    put_bytes,
    read_bytes,
    uploads_in_background,
)
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import Warehouse


def parquet_bytes(frame: pl.DataFrame, compression: str = "zstd") -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression=compression, statistics=True)
    return buffer.getvalue()


def read_table(path: UPath, found: dict | None = None) -> pl.DataFrame:
    """A stored table, from disk (memory-mapped) or from a bucket (one GET, or none when `found`,
    its entry in a fresh listing, shows it holds what this process last wrote or read there)."""
    return pl.read_parquet(local_path(path) if is_local(path) else io.BytesIO(read_bytes(path, found)))


class ReadOnce:
    """The unpartitioned tables this process last read from disk, by path, with the identity of
    the file read (size, mtime and inode: a write through a temp name gets a new inode): the
    roll-ups downstream of `episode_table` each load it (10,000 rows and 112 columns, 84 MB and
    0.07-0.15 s a read at 10,000 episodes), and `vae build` runs their steps in one process.
    A file replaced since is read again; Polars tables are never changed in place, so one read
    serves every step. Only what was read is kept, never a table as written: a step gets the
    types a read gives."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[tuple[int, int, int], pl.DataFrame]] = {}

    def read(self, path: UPath) -> pl.DataFrame:
        file = str(local_path(path))
        facts = os.stat(file)
        identity = (facts.st_size, facts.st_mtime_ns, facts.st_ino)
        kept = self._tables.get(file)
        if kept is not None and kept[0] == identity:
            return kept[1]
        table = read_table(path)
        self._tables[file] = (identity, table)
        return table


READ_ONCE = ReadOnce()
_FILE = "__vae_file__"  # the column a multi-file read names each row's file in


def read_tables(paths: Mapping[str, UPath], found: Mapping[str, dict] | None = None,
                ) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Many stored tables (by key), and the keys whose file is missing.

    A series' table is small, and one read costs mostly the call: on disk, the files with the same
    schema (read from their footers) are read in one multi-file read, which Polars spreads over
    the cores, and each key's rows taken back out by file (in their order; a file's columns and
    types as a read of it alone gives them, since only files of one schema are read together). On
    a bucket, a read each (`found`: a key's entry in a fresh listing, as `read_table` takes)."""
    found = found or {}
    tables: dict[str, pl.DataFrame] = {}
    missing: list[str] = []
    together: dict[tuple, list[str]] = {}  # a schema -> the keys of the local files that have it
    for key, path in paths.items():
        try:
            if is_local(path) and len(paths) > 1:
                schema = pl.read_parquet_schema(local_path(path))
                if _FILE not in schema:
                    together.setdefault(tuple(schema.items()), []).append(key)
                    continue
            tables[key] = read_table(path, found.get(key))
        except FileNotFoundError:
            missing.append(key)
    for keys in together.values():
        files = [str(local_path(paths[key])) for key in keys]
        try:
            whole = pl.read_parquet(files, include_file_paths=_FILE, glob=False, hive_partitioning=False)
        except (OSError, pl.exceptions.PolarsError):  # one replaced or removed since its schema was read:
            # each alone, as it is now (a file that cannot be read fails as a read of it alone does)
            for key in keys:
                try:
                    tables[key] = read_table(paths[key])
                except FileNotFoundError:
                    missing.append(key)
            continue
        by_file = whole.partition_by(_FILE, as_dict=True, include_key=False)
        empty = whole.clear().drop(_FILE)
        for key, file in zip(keys, files, strict=True):
            tables[key] = by_file.get((file,), empty)
    return {key: tables[key] for key in paths if key in tables}, [key for key in paths if key in missing]


class SeriesTables(dg.UPathIOManager):
    """`<home>/tables/<asset>/<series>.parquet` (`table.parquet` unpartitioned), on disk or a bucket.

    Dagster's UPath IO manager stores one partition per output; a ranged run (a single-run
    backfill, `vae build`) returns many, so writing takes every series of the run's dict."""

    extension = ".parquet"

    def __init__(self, warehouse: Warehouse):
        super().__init__(base_path=warehouse.home / "tables")
        self.warehouse = warehouse

    def dump_to_path(self, context: dg.OutputContext, obj: pl.DataFrame, path: UPath) -> None:
        put_bytes(path, parquet_bytes(obj))

    def load_from_path(self, context: dg.InputContext, path: UPath) -> pl.DataFrame:
        return read_table(path)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | dict[str, pl.DataFrame]) -> None:
        if not context.has_asset_partitions:
            data = parquet_bytes(obj)
            tag = put_bytes(self.warehouse.table(context.asset_key, None), data)
            if tag is not None:  # on a bucket: which bytes this materialization stored
                context.add_output_metadata({STORED_ETAG: tag.strip('"'), STORED_SIZE: len(data)})
            return
        expected = set(context.asset_partition_keys)
        if not isinstance(obj, dict) or set(obj) != expected:
            got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
            raise dg.DagsterInvariantViolationError(
                f"{context.asset_key.to_user_string()} must return a table for each series of the run "
                f"({', '.join(sorted(expected))}), got {got}")
        paths = self._get_paths_for_partitions(context)
        with uploads_in_background():  # on disk, a ranged run's tables are synced once, not each
            for series, frame in obj.items():
                self.dump_to_path(context, frame, paths[series])

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        if not context.has_asset_partitions:  # the instance is asked only on a bucket
            instance = None if is_local(self.warehouse.home) else context.instance
            return stored_table(self.warehouse, context.asset_key, instance)
        return stored_series(self.warehouse, context.asset_key, context.asset_partition_keys)


STORED_ETAG, STORED_SIZE = "vae/etag", "vae/bytes"  # an unpartitioned table's object, as its materialization stored it


def _recorded_object(instance: dg.DagsterInstance | None, key: dg.AssetKey) -> dict | None:
    """The ETag and size the asset's latest materialization recorded of its stored table, as a
    listing's entry: a table this process wrote or read with those bytes is not fetched again
    (the steps of a run in one process read each table from memory, not once per step). None
    when nothing was recorded (an earlier build's)."""
    if instance is None:
        return None
    event = instance.get_latest_materialization_event(key)
    metadata = event.asset_materialization.metadata if event is not None and event.asset_materialization else {}
    tag, size = metadata.get(STORED_ETAG), metadata.get(STORED_SIZE)
    return None if tag is None or size is None else {"ETag": tag.value, "size": size.value}


def stored_table(warehouse: Warehouse, asset: dg.AssetKey | str, instance: dg.DagsterInstance | None,
                 ) -> pl.DataFrame:
    """An unpartitioned asset's stored table. On disk the file is read where it is, once a process
    (`ReadOnce`; `instance` is not asked); on a bucket it is not fetched when the asset's latest
    materialization (in `instance`) recorded the bytes this process holds."""
    key = dg.AssetKey.from_coercible(asset)
    path = warehouse.table(key, None)
    return READ_ONCE.read(path) if is_local(path) else read_table(path, _recorded_object(instance, key))


def stored_series(warehouse: Warehouse, asset: dg.AssetKey | str, series: Sequence[str],
                  ) -> dict[str, pl.DataFrame]:
    """A series-partitioned asset's stored tables of `series` (series -> table, each row with its
    series, so a roll-up can join on (series, id)). A series whose table is missing fails, naming
    the asset and the series: nothing is left out silently."""
    key = dg.AssetKey.from_coercible(asset)
    # several series from a bucket: one listing, and only the tables this process does not hold
    listed = listing(warehouse.home.joinpath("tables", *key.path)) \
        if len(series) > 1 and not is_local(warehouse.home) else {}
    tables, missing = read_tables({s: warehouse.table(key, s) for s in series},
                                  {s: listed[f"{s}.parquet"] for s in series if f"{s}.parquet" in listed})
    if missing:
        raise dg.Failure(description=f"{key.to_user_string()} has not been materialized for series "
                                     f"{', '.join(missing)}: materialize it for them first")
    return {s: _with_series(table, s) for s, table in tables.items()}


class ParquetTableIOManager(dg.ConfigurableIOManagerFactory):
    """The tables of every asset, in the warehouse's home (see `SeriesTables`)."""

    warehouse: Warehouse

    def create_io_manager(self, context: dg.InitResourceContext) -> SeriesTables:
        return SeriesTables(self.warehouse)


ROLLUPS = "rollups"  # under the home: what each reader of every series' tables read last time
# how many series a roll-up's copy may be behind (read from their own files, or gone) before it is
# written again: a new series a night costs reading its files again for a few nights, not a
# rewrite of every series' rows each night
COPY_LAG = 32
_SOURCE = "_source"  # the stored file each row came from: size and mtime/inode on disk, ETag on a bucket


def stored_series_tables(warehouse: Warehouse, reader: str, stages: Mapping[str, Iterable[str] | None],
                         series: Iterable[str]) -> tuple[dict[str, pl.DataFrame], dict[str, list[str]]]:
    """Every series' stored table of each stage, as one table per stage (each row with its
    `series`, the rows sorted by series, a series' own rows in their order), and per series the
    stages whose file is missing or lacks a column of `stages` (None: every column is kept).

    Reading N series costs one listing per stage and the files that changed since `reader` last
    read them: `rollups/<reader>/<stage>.parquet` keeps the rows read, each with the identity of
    its file (size and mtime/inode, or ETag), so a file replaced since is read again and the rows
    of a series no longer asked for are dropped. A series whose file lacks a column, or that has no
    rows, is not kept and is read every time. The copy is written whole (readers never see half
    of it) when it is more than COPY_LAG series behind; one lost or stale copy only costs reading
    again."""
    wanted = list(dict.fromkeys(series))
    tables, faults = {}, {}
    for stage, columns in stages.items():
        folder = warehouse.home / "tables" / stage
        found = listing(folder)
        sources = {s: listed_identity(found[f"{s}.parquet"]) for s in wanted if f"{s}.parquet" in found}
        for s in wanted:
            if s not in sources:
                faults.setdefault(s, []).append(f"{stage} missing")
        copy = warehouse.home / ROLLUPS / reader / f"{stage}.parquet"
        try:
            kept = read_table(copy)
            kept.select("series", _SOURCE)
        except Exception:  # noqa: BLE001 — a copy that cannot be read costs reading the files again
            kept = None
        known = dict(kept.select("series", _SOURCE).unique().iter_rows()) if kept is not None else {}
        fresh = [s for s in sources if known.get(s) != sources[s]]
        unchanged = set(sources) - set(fresh)
        parts = [] if kept is None else [kept.filter(pl.col("series").is_in(sorted(unchanged)))]
        read, gone = read_tables({s: folder / f"{s}.parquet" for s in fresh},
                                 {s: found[f"{s}.parquet"] for s in fresh})
        for s in gone:
            faults.setdefault(s, []).append(f"{stage} missing")
        for s, frame in read.items():
            lacking = [c for c in columns or () if c not in frame.columns]
            if lacking:
                faults.setdefault(s, []).append(f"{stage}." + f", {stage}.".join(lacking))
                continue
            frame = _with_series(frame.select(*columns) if columns is not None else frame, s)
            parts.append(frame.with_columns(pl.lit(sources[s], pl.String).alias(_SOURCE)))
        table = pl.concat(parts, how="diagonal_relaxed").sort("series", maintain_order=True) if parts \
            else pl.DataFrame(schema={"series": pl.String, _SOURCE: pl.String})
        # a series with no rows leaves its columns but no identity: it is read again next time
        behind = len(set(known) - set(sources)) + sum(1 for p in parts[1 if kept is not None else 0:] if p.height)
        if kept is None or behind > COPY_LAG:
            put_bytes(copy, parquet_bytes(table, "lz4"))  # a cache rewritten whole: written fast, not small
        tables[stage] = table.drop(_SOURCE)
    return tables, faults


def other_series_tables(context: dg.AssetExecutionContext, warehouse: Warehouse, columns: Mapping[str, Iterable[str]],
                        ) -> tuple[dict[str, pl.DataFrame], list[str], list[str]]:
    """The stored tables of the stages in `columns` (those columns and `series`, sorted by series)
    for every series outside this run that has them all, one table per stage, and those series:
    what a check over the whole asset reads for the series its run did not cover (a run over one
    new series must not hide an earlier series' failure), checked in one pass, not one a series.
    Also, one line for each series whose stored tables lack a column the check reads (written by
    an older version of the code and not materialized since): the check cannot vouch for it. Only
    the files changed since the asset's last check are read (`stored_series_tables`); the run's
    own series too, so that the next run over other series finds them read (a build of every
    series reads them all once)."""
    every = context.instance.get_dynamic_partitions(SERIES)
    in_run = set(context.partition_keys)
    others = [s for s in every if s not in in_run]
    stages = {stage: tuple(names) for stage, names in columns.items()}
    reader = f"{context.asset_key.to_user_string()}-checks"
    tables, faults = stored_series_tables(warehouse, reader, stages, every)
    complete, outdated = [], []
    for series in others:
        problems = faults.get(series, [])
        if any(p.endswith(" missing") for p in problems):
            continue
        if problems:
            outdated.append(f"{series}: its stored tables lack {', '.join(problems)} (written by an older version); "
                            "materialize the series again")
            continue
        complete.append(series)
    # (a stage no series has a file of is a table of `series` alone)
    return {stage: tables[stage].filter(pl.col("series").is_in(complete))
            .select(c for c in dict.fromkeys(("series", *stages[stage])) if c in tables[stage].columns)
            for stage in stages}, complete, outdated


def with_run_tables(own: Mapping[str, pl.DataFrame], others: pl.DataFrame) -> pl.DataFrame:
    """This run's tables of a stage (series -> table) and the other series' (`other_series_tables`)
    as one table with `series`, sorted by series (a series' rows in their order)."""
    frames = [_with_series(frame, series) for series, frame in own.items()]
    return pl.concat([others, *frames], how="diagonal_relaxed").sort("series", maintain_order=True)


def _with_series(frame: pl.DataFrame, series: str) -> pl.DataFrame:
    return frame if "series" in frame.columns else frame.with_columns(series=pl.lit(series))
