"""`vae leaderboard`: the latest leaderboard as text tables."""

from __future__ import annotations

import argparse
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.cli.common import CliError, recovered_instance, say, settings
from vae_pipeline.domain.leaderboard.ratings import OVERALL, SOURCES
from vae_pipeline.domain.leaderboard.tables import rows_of, text_table
from vae_pipeline.storage.versions import latest_materialization


def latest_leaderboard() -> pl.DataFrame:
    """The table the last materialization of `leaderboard` wrote."""
    with settings() as env:
        event = latest_materialization(recovered_instance(env), dg.AssetKey("leaderboard"))
    if event is None:
        raise CliError("no leaderboard has been materialized yet: run `vae build` first")
    entry = event.metadata.get("parquet")
    path = Path(entry.value) if entry is not None else None
    if path is None or not path.is_file():
        raise CliError(f"the last leaderboard's table {path} is gone: run `vae build` again")
    return pl.read_parquet(path)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    table = latest_leaderboard()
    sources = [args.source] if args.source else [s for s in SOURCES if s in set(table["source"])]
    shown = 0
    for source in sources:
        for axis in ([args.axis] if args.axis else [OVERALL]):
            rows = rows_of(table, source, axis)
            if rows:
                say(f"{source} · {axis} (rank, 95 % interval; models whose intervals overlap share a rank: =2)")
                say(text_table(rows) + "\n")
                shown += 1
    if not shown:
        raise CliError("no leaderboard rows for that source and axis" if table.height else
                       "the leaderboard is empty: it needs two actor models judged on the same briefs")
    return 0
