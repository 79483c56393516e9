"""`bundles`: every valid episode scrubbed, slimmed and packed as a reproducible tar.zst."""

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
import polars as pl

from vae_pipeline.assets.metadata import markdown_table, with_run_table
from vae_pipeline.assets.scrub_settings import scrub_config, scrub_source
from vae_pipeline.domain.bundles.bundle import build_bundle
from vae_pipeline.domain.errors import BadInput, reading
from vae_pipeline.domain.objects import uploads_in_background
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig
from vae_pipeline.engines.collector import held_objects_frozen
from vae_pipeline.storage.io_manager import stored_series
from vae_pipeline.storage.partitions import SERIES_BACKFILL, series_partitions
from vae_pipeline.storage.resources import (
    ProjectMeta,
    RunsRoot,
    ScrubSettings,
    Warehouse,
)
from vae_pipeline.storage.versions import series_output

FINDING = pl.Struct({"file": pl.String, "line": pl.Int64, "kind": pl.String, "sha256s": pl.List(pl.String),
                     "allowed": pl.Boolean})
# slimmed images by content, shared by every build on this machine (an image is encoded once
# there); a cache, never read as the truth: on a bucket home each machine keeps its own
IMAGE_CACHE_DIR = "image-cache"
BUNDLES_SCHEMA = {
    "id": pl.String, "bundle_error": pl.String, "archive": pl.String, "archive_sha256": pl.String,
    "archive_size": pl.Int64, "staged_archive": pl.String, "redacted_keys": pl.Int64,
    "findings": pl.List(FINDING), "blocking_findings": pl.Int64, "bundle_parts": pl.String,
}  # fmt: skip


def bundle_episode(runs_root: RunsRoot, warehouse: Warehouse, row: dict, config: ScrubConfig,
                   zstd_threads: int = 1, listed: dict[str, dict] | None = None) -> dict:
    out = dict.fromkeys(BUNDLES_SCHEMA)
    out["id"] = row["id"]
    staged = warehouse.root / "bundles" / row["series"] / f"{row['id']}.tar.zst"
    try:
        with reading(row["source"]):
            bundle = build_bundle(runs_root.members(row), staged, config=config, threads=zstd_threads,
                                  image_cache=warehouse.root / IMAGE_CACHE_DIR)
    except BadInput as exc:  # any error: this episode is left out, the others go on
        # the row names the episode's folder or archive as the file: a member's name stays in the reason
        out["bundle_error"] = scrub_line(exc.reason if exc.file == row["source"] else str(exc), config)
        return out
    parts = {"files": bundle.files, "excluded": bundle.excluded, "vendor_files": bundle.vendor_files,
             "redacted_keys": bundle.redacted_keys, "scrub": bundle.scrub, "slimmed": bundle.slimmed}
    findings = bundle.scrub["findings"]
    out.update(archive=f"episodes/{row['date']}/{row['id']}.tar.zst", archive_sha256=bundle.archive_sha256,
               archive_size=bundle.archive_size, staged_archive=warehouse.mirror.publish(staged, listed),
               redacted_keys=bundle.redacted_keys, findings=findings,
               blocking_findings=sum(1 for f in findings if not f["allowed"]),
               bundle_parts=json.dumps(parts, sort_keys=True))
    return out


def bundle_rows(runs_root: RunsRoot, warehouse: Warehouse, rows: list[dict], config: ScrubConfig,
                workers: int, zstd_threads: int = 1, listed: dict[str, dict] | None = None) -> Iterator[dict]:
    """`bundle_episode` of every row, `workers` episodes at a time, results in row order
    (`listed`: what the home's folder of their archives holds, from one listing).

    Threads: image encoding, zstd, hashing and reading release the GIL (finding image blocks
    and the scrub do not: two threads are ~1.2x one with the image cache filled), and the
    slimmed-image cache is shared. Each episode's zstd runs one worker thread by
    default: with episodes on every core, more only add their buffers' memory (a second one
    costs ~65 MB at a 2^27 window), and `bench_bundles.py` measures no gain (same bytes either way).
    While it runs, what the process held before is frozen for the garbage collector: parsing
    logs allocates enough to set off a full collection, which would walk every object of
    Dagster's and the imports' (~0.2 CPU s, a tenth of a first build); given back after, or at
    the end of the build that runs it (`held_objects_frozen`).
    """
    # the process's long-lived objects (Dagster's, the imports') out of the collector's walks
    with held_objects_frozen(), ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="bundle") as pool:
        yield from pool.map(lambda row: bundle_episode(runs_root, warehouse, row, config, zstd_threads, listed), rows)


@dg.asset(partitions_def=series_partitions, backfill_policy=SERIES_BACKFILL, code_version="bundles-3",
          group_name="series", kinds={"zstd"}, pool="bundles", deps=["episodes"])  # vae_pipeline.engines.pools
def bundles(context: dg.AssetExecutionContext, runs_root: RunsRoot, project_meta: ProjectMeta,
            warehouse: Warehouse, scrub_settings: ScrubSettings) -> dg.Output[dict[str, pl.DataFrame]]:
    """The scrubbed, slimmed, byte-reproducible archive of every valid episode, and its manifest parts."""
    keys = list(context.partition_keys)
    episodes = stored_series(warehouse, "episodes", keys)
    config = scrub_config(scrub_settings, project_meta)
    source = scrub_source(project_meta, scrub_settings)
    frames, metadata = {}, {}
    listed = warehouse.mirror.listed_for("bundles", keys)  # what the home holds already: not a HEAD a file
    with uploads_in_background():  # each archive goes up while the next is made
        for series in keys:
            frames[series], metadata[series] = bundle_series(context, runs_root, warehouse, config,
                                                             episodes[series], listed)
    return series_output(context, frames, with_run_table(metadata), dict.fromkeys(frames, source))


def bundle_series(context: dg.AssetExecutionContext, runs_root: RunsRoot, warehouse: Warehouse,
                  config: ScrubConfig, episodes: pl.DataFrame, listed: dict[str, dict]) -> tuple[pl.DataFrame, dict]:
    """One series' archives, and what its materialization shows."""
    valid = episodes.filter(pl.col("valid")).to_dicts()
    if valid:
        runs_root.series_dir(valid[0]["series"])  # its files here (fetched when the runs root is a bucket)
    rows = []
    for number, row in enumerate(bundle_rows(runs_root, warehouse, valid, config, os.cpu_count() or 1,
                                             listed=listed), start=1):
        rows.append(row)
        if number % 10 == 0:
            context.log.info(f"bundled {number} of {len(valid)} episodes")
    frame = pl.DataFrame(rows, schema=BUNDLES_SCHEMA)
    findings = frame.select("id", "findings").explode("findings").unnest("findings").drop_nulls("kind")
    return frame, {
        "archives": frame.filter(pl.col("bundle_error").is_null()).height,
        "bytes": int(frame["archive_size"].sum() or 0),
        "redacted_keys": int(frame["redacted_keys"].sum() or 0),
        "blocking_findings": int(frame["blocking_findings"].sum() or 0),
        "findings": markdown_table(findings, ("id", "file", "line", "kind", "allowed")),
        "preview": markdown_table(frame, ("id", "archive", "archive_size", "redacted_keys", "blocking_findings",
                                          "bundle_error")),
    }
