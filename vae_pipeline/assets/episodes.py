"""`episodes`: every episode of a series, parsed and validated (contract 1)."""

from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.assets.metadata import markdown_table, with_run_table
from vae_pipeline.assets.scrub_settings import replacements_source, scrub_config
from vae_pipeline.domain.episodes.episode import parse_episode
from vae_pipeline.domain.errors import BadInput, reading, unforeseen
from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.episodes.json_schema import SchemaValidator
from vae_pipeline.domain.episodes.provenance import series_facts
from vae_pipeline.domain.episodes.series import (
    episode_entries,
    read_series_json,
)
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.partitions import SERIES_BACKFILL, series_partitions
from vae_pipeline.storage.resources import ProjectMeta, RunsRoot, ScrubSettings
from vae_pipeline.storage.versions import series_output

EPISODES_SCHEMA = {
    "id": pl.String, "series": pl.String, "series_status": pl.String, "source": pl.String,
    "is_archive": pl.Boolean, "valid": pl.Boolean, "error_file": pl.String, "error_line": pl.Int64,
    "error_reason": pl.String, "warnings": pl.List(pl.String), "sample": pl.String,
    "brief_id": pl.String, "title": pl.String, "family": pl.String, "genre_id": pl.String,
    "concept": pl.String, "aspect": pl.String, "duration_s": pl.Float64, "difficulty": pl.String,
    "task_type": pl.String, "bank": pl.String, "loop": pl.Boolean, "brief": pl.String,
    "result_status": pl.String, "started_at": pl.String, "date": pl.String, "turns": pl.Int64,
    "tool_calls": pl.Int64, "subagent_tool_calls": pl.Int64, "images_read": pl.Int64, "renders": pl.Int64, "snapshots": pl.Int64,
    "input_tokens": pl.Int64, "output_tokens": pl.Int64, "cache_read_tokens": pl.Int64,
    "cache_creation_tokens": pl.Int64, "harness_error": pl.Boolean,
    "looked_at_final_render": pl.Boolean, "delivered": pl.Boolean, "judged": pl.Boolean,
    "actor_model_id": pl.String, "claude_code_version": pl.String, "actor_tools": pl.List(pl.String),
    "request_shape_sha256": pl.String, "benchmark_version": pl.String, "harness_commit": pl.String,
    "harness_dirty": pl.Boolean, "actor_cli": pl.String, "actor_model": pl.String,
}  # fmt: skip

PREVIEW = ("id", "valid", "error_file", "error_line", "error_reason", "family", "aspect", "turns",
           "tool_calls", "renders", "delivered", "judged")


def parse_series(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings,
                 series_id: str, series_dir: Path) -> tuple[pl.DataFrame, str]:
    """Every episode row of one series (its files in `series_dir`), and the version of the files read."""
    briefs = SchemaValidator.from_file(project_meta.required("brief.schema.json"))
    entries, _ = episode_entries(series_dir)
    scrub = scrub_config(scrub_settings)
    try:
        with reading("series.json"):
            info, unreadable = read_series_json(series_dir / "series.json", scrub), None
    except BadInput as exc:
        # the series' episodes are reported invalid; the other series go on
        info, unreadable = {"status": None}, exc
    rows, seen = [], set()
    provenance = series_facts(info)
    for entry in entries:
        row = parse_episode(series_id, entry, briefs, scrub=scrub, size_limit=runs_root.max_unpacked_bytes,
                            max_line_bytes=runs_root.max_line_bytes)
        if unreadable is not None:
            row.update(valid=False, error_file=unreadable.file, error_line=unreadable.line,
                       error_reason=scrub_line(f"the series' series.json: {unreadable.reason}", scrub))
        if row["valid"] and row["id"] in seen:
            row.update(valid=False, error_file=row["source"], error_line=None,
                       error_reason="duplicate episode id (a folder and an archive of the same run?)")
        seen.add(row["id"])
        row.update(series_status=info["status"], **provenance)
        rows.append(_fitting(row))
    frame = pl.DataFrame(rows, schema=EPISODES_SCHEMA)
    return frame.sort("id"), episodes_source(runs_root, project_meta, scrub_settings, series_id)


def _fitting(row: dict) -> dict:
    """The row, or the episode made invalid when a value does not fit its column: one such row
    must not fail the table of every series."""
    try:
        pl.DataFrame([row], schema=EPISODES_SCHEMA)
        return row
    except Exception as exc:  # noqa: BLE001 — whatever it is, it is this row's
        bad = unforeseen(exc, row["source"])
        invalid = dict.fromkeys(EPISODES_SCHEMA)
        invalid.update({k: row[k] for k in ("id", "series", "series_status", "source", "is_archive")},
                       valid=False, warnings=[], error_file=bad.file, error_reason=bad.reason)
        return invalid


def episodes_sources(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings,
                     series_ids: list[str]) -> dict[str, str]:
    """The version of what `episodes` reads of each series: the series' files, the brief schema,
    the scrub's settings (the folders fingerprinted at once: in parallel for many)."""
    schema, scrub = files_version([project_meta.root / "brief.schema.json"]), replacements_source(scrub_settings)
    return {series_id: content_version(fingerprint, schema, scrub)
            for series_id, fingerprint in runs_root.fingerprints(series_ids).items()}


def episodes_source(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings,
                    series_id: str) -> str:
    return episodes_sources(runs_root, project_meta, scrub_settings, [series_id])[series_id]


@dg.asset(partitions_def=series_partitions, backfill_policy=SERIES_BACKFILL, code_version="episodes-3",
          group_name="series", kinds={"polars", "parquet"})
def episodes(context: dg.AssetExecutionContext, runs_root: RunsRoot, project_meta: ProjectMeta,
             scrub_settings: ScrubSettings) -> dg.Output[dict[str, pl.DataFrame]]:
    """Every episode of each series — run folder or archive — parsed, counted and validated."""
    frames, metadata, sources = {}, {}, {}
    for series, series_dir in runs_root.series_dirs(context.partition_keys):
        frame, sources[series] = parse_series(runs_root, project_meta, scrub_settings, series, series_dir)
        invalid = frame.filter(~pl.col("valid"))
        for row in invalid.iter_rows(named=True):
            where = row["error_file"] + (f":{row['error_line']}" if row["error_line"] is not None else "")
            context.log.warning(f"invalid episode {row['id']}: {where}: {row['error_reason']}")
        frames[series] = frame
        metadata[series] = {
            "episodes": frame.height,
            "valid": frame.height - invalid.height,
            "invalid": invalid.height,
            "series_status": (frame["series_status"][0] or "unknown") if frame.height else "empty",
            "warnings": int(frame["warnings"].list.len().sum() or 0),
            "preview": markdown_table(frame, PREVIEW),
        }
    return series_output(context, frames, with_run_table(metadata), sources)
