"""Asset values are polars tables stored as Parquet, one file per asset and series.

Only rows of parsed fields and counts are stored — never raw logs — so the pipeline's own
storage holds nothing that the scrub would have had to remove.
"""

from __future__ import annotations

import io
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.domain.files import write_atomic
from vae_pipeline.resources import Warehouse


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> None:
    """Parquet bytes written with `write_atomic`: a crash never leaves half a file."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_atomic(path, buffer.getvalue())


def table_path(warehouse: Warehouse, key: dg.AssetKey, partition: str | None) -> Path:
    """Where an asset's (partition's) table is stored."""
    name = f"{partition}.parquet" if partition else "table.parquet"
    return warehouse.root.joinpath("tables", *key.path, name)


class ParquetTableIOManager(dg.ConfigurableIOManager):
    """Stores each asset (partition) as `<warehouse>/tables/<asset>/<series>.parquet`."""

    warehouse: Warehouse

    def _path(self, key: dg.AssetKey, partition: str | None) -> Path:
        return table_path(self.warehouse, key, partition)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        partition = context.asset_partition_key if context.has_asset_partitions else None
        write_parquet_atomic(obj, self._path(context.asset_key, partition))

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        key = context.asset_key
        if not context.has_asset_partitions:
            return pl.read_parquet(self._path(key, None))
        partitions = context.asset_partition_keys
        # each series' rows carry their series, so a roll-up can join on (series, id)
        frames = [_with_series(pl.read_parquet(path), k) for k in partitions
                  if (path := self._path(key, k)).exists()]
        if len(partitions) == 1 and not frames:
            raise FileNotFoundError(f"{key.to_user_string()} has not been materialized for {partitions[0]}")
        return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _with_series(frame: pl.DataFrame, series: str) -> pl.DataFrame:
    return frame if "series" in frame.columns else frame.with_columns(series=pl.lit(series))
