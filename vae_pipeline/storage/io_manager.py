"""Asset values are polars tables stored as Parquet, one file (or object) per asset and series.

A series-partitioned asset's value is a dict series -> table, over the series of its run (one,
or a range when a backfill or `vae build` covers many series in one run); an input from a
series-partitioned asset is such a dict too. A series whose table is missing fails the load,
naming the stage and the series: nothing is ever left out silently.

Only rows of parsed fields and counts are stored — never raw logs — so the pipeline's own
storage holds nothing that the scrub would have had to remove.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping

import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.domain.objects import (
    is_local,
    local_path,
    put_bytes,
    read_bytes,
)
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import Warehouse


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", statistics=True)
    return buffer.getvalue()


def read_table(path: UPath) -> pl.DataFrame:
    """A stored table, from disk (memory-mapped) or from a bucket (one GET)."""
    return pl.read_parquet(local_path(path) if is_local(path) else io.BytesIO(read_bytes(path)))


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
            put_bytes(self.warehouse.table(context.asset_key, None), parquet_bytes(obj))
            return
        expected = set(context.asset_partition_keys)
        if not isinstance(obj, dict) or set(obj) != expected:
            got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
            raise dg.DagsterInvariantViolationError(
                f"{context.asset_key.to_user_string()} must return a table for each series of the run "
                f"({', '.join(sorted(expected))}), got {got}")
        paths = self._get_paths_for_partitions(context)
        for series, frame in obj.items():
            self.dump_to_path(context, frame, paths[series])

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        key = context.asset_key
        if not context.has_asset_partitions:
            return read_table(self.warehouse.table(key, None))
        paths = self._get_paths_for_partitions(context)
        tables, missing = {}, []
        for series in context.asset_partition_keys:
            try:
                # each series' rows carry their series, so a roll-up can join on (series, id)
                tables[series] = _with_series(read_table(paths[series]), series)
            except FileNotFoundError:
                missing.append(series)
        if missing:
            raise dg.Failure(description=f"{key.to_user_string()} has not been materialized for series "
                                         f"{', '.join(missing)}: materialize it for them first")
        return tables


class ParquetTableIOManager(dg.ConfigurableIOManagerFactory):
    """The tables of every asset, in the warehouse's home (see `SeriesTables`)."""

    warehouse: Warehouse

    def create_io_manager(self, context: dg.InitResourceContext) -> SeriesTables:
        return SeriesTables(self.warehouse)


def other_series_tables(context: dg.AssetExecutionContext, warehouse: Warehouse, columns: Mapping[str, Iterable[str]],
                        ) -> tuple[dict[str, dict[str, pl.DataFrame]], list[str]]:
    """The stored tables of the stages in `columns` for every series outside this run that has
    them all, as series -> {stage: table}: what a check over the whole asset reads for the series
    its run did not cover (a run over one new series must not hide an earlier series' failure).
    Also, one line for each series whose stored tables lack a column the check reads (written by
    an older version of the code and not materialized since): the check cannot vouch for it."""
    in_run = set(context.partition_keys)
    tables, outdated = {}, []
    for series in context.instance.get_dynamic_partitions(SERIES):
        if series in in_run:
            continue
        try:
            frames = {stage: read_table(warehouse.table(dg.AssetKey(stage), series)) for stage in columns}
        except FileNotFoundError:
            continue
        lacking = [f"{stage}.{name}" for stage, names in columns.items() for name in names
                   if name not in frames[stage].columns]
        if lacking:
            outdated.append(f"{series}: its stored tables lack {', '.join(lacking)} (written by an older version); "
                            "materialize the series again")
        else:
            tables[series] = frames
    return tables, outdated


def series_tables(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Every series' table of a series-partitioned input, as one table (for a roll-up)."""
    return pl.concat(list(frames.values()), how="diagonal_relaxed") if frames else pl.DataFrame()


def _with_series(frame: pl.DataFrame, series: str) -> pl.DataFrame:
    return frame if "series" in frame.columns else frame.with_columns(series=pl.lit(series))
