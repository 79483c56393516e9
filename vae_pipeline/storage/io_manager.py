"""Asset values are polars tables stored as Parquet, one file per asset and series.

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
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.domain.files import write_atomic
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import Warehouse


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer, compression="zstd", statistics=True)
    return buffer.getvalue()


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> None:
    """Parquet bytes written with `write_atomic`: a crash never leaves half a file."""
    write_atomic(path, parquet_bytes(frame))


def table_path(warehouse: Warehouse, key: dg.AssetKey, partition: str | None) -> Path:
    """Where an asset's (partition's) table is stored."""
    name = f"{partition}.parquet" if partition else "table.parquet"
    return warehouse.root.joinpath("tables", *key.path, name)


class ParquetTableIOManager(dg.ConfigurableIOManager):
    """Stores each asset (partition) as `<warehouse>/tables/<asset>/<series>.parquet`."""

    warehouse: Warehouse

    def _path(self, key: dg.AssetKey, partition: str | None) -> Path:
        return table_path(self.warehouse, key, partition)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | dict[str, pl.DataFrame]) -> None:
        if not context.has_asset_partitions:
            write_parquet_atomic(obj, self._path(context.asset_key, None))
            return
        expected = set(context.asset_partition_keys)
        if not isinstance(obj, dict) or set(obj) != expected:
            got = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
            raise dg.DagsterInvariantViolationError(
                f"{context.asset_key.to_user_string()} must return a table for each series of the run "
                f"({', '.join(sorted(expected))}), got {got}")
        for series, frame in obj.items():
            write_parquet_atomic(frame, self._path(context.asset_key, series))

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        key = context.asset_key
        if not context.has_asset_partitions:
            return pl.read_parquet(self._path(key, None))
        partitions = context.asset_partition_keys
        missing = [series for series in partitions if not self._path(key, series).exists()]
        if missing:
            raise dg.Failure(description=f"{key.to_user_string()} has not been materialized for series "
                                         f"{', '.join(missing)}: materialize it for them first")
        # each series' rows carry their series, so a roll-up can join on (series, id)
        return {series: _with_series(pl.read_parquet(self._path(key, series)), series) for series in partitions}


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
        paths = {stage: table_path(warehouse, dg.AssetKey(stage), series) for stage in columns}
        if series in in_run or not all(path.exists() for path in paths.values()):
            continue
        frames = {stage: pl.read_parquet(path) for stage, path in paths.items()}
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
