"""The published row: contract 3's columns, in its order, with their types."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from vae_pipeline.domain.errors import BadInput

RANGES = pl.List(pl.List(pl.Float64))
JUDGE_FRAMES = pl.List(pl.Struct({"t_s": pl.Float64, "reason": pl.String}))

DATASET_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(), "brief_id": pl.String(), "sample": pl.String(), "series": pl.String(),
    "title": pl.String(), "family": pl.String(), "genre_id": pl.String(), "concept": pl.String(),
    "aspect": pl.String(), "duration_s": pl.Float64(), "difficulty": pl.String(),
    "task_type": pl.String(), "bank": pl.String(), "label": pl.String(), "host_rule": pl.String(),
    "host_gates_failed": pl.List(pl.String), "positive_eligible": pl.Boolean(),
    "score_brief_fidelity": pl.Int64(), "score_composition": pl.Int64(),
    "score_typography": pl.Int64(), "score_motion": pl.Int64(), "score_craft": pl.Int64(),
    "score_engagement": pl.Int64(), "defects_critical": pl.Int64(), "defects_major": pl.Int64(),
    "defects_minor": pl.Int64(), "turns": pl.Int64(), "tool_calls": pl.Int64(),
    "subagent_tool_calls": pl.Int64(), "images_read": pl.Int64(), "renders": pl.Int64(), "snapshots": pl.Int64(),
    "input_tokens": pl.Int64(), "output_tokens": pl.Int64(), "cache_read_tokens": pl.Int64(),
    "cache_creation_tokens": pl.Int64(), "harness_error": pl.Boolean(), "video_ok": pl.Boolean(),
    "video_duration_s": pl.Float64(), "video_aspect": pl.String(), "fps": pl.Float64(),
    "width": pl.Int64(), "height": pl.Int64(), "black_ranges": RANGES, "freeze_ranges": RANGES,
    "still": pl.Boolean(), "loop_seam": pl.Float64(), "judge_frames": JUDGE_FRAMES,
    "looked_at_final_render": pl.Boolean(), "judge_model": pl.String(),
    "rubric_version": pl.String(), "host_rubric_version": pl.String(),
    "rubric_sha256": pl.String(), "rehosted_at": pl.String(), "previous_final_label": pl.String(),
    "video": pl.String(), "archive": pl.String(), "archive_sha256": pl.String(),
    "brief": pl.String(), "benchmark_version": pl.String(), "actor_model_id": pl.String(),
    "harness_commit": pl.String(),
}  # fmt: skip
DATASET_COLUMNS = tuple(DATASET_SCHEMA)


def dataset_frame(table: pl.DataFrame) -> pl.DataFrame:
    """Contract 3's columns of `table`, in order; a column no stage has filled yet is null."""
    return table.select(
        pl.col(name).cast(dtype) if name in table.columns else pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in DATASET_SCHEMA.items()
    )


def load_withheld(path: Path) -> tuple[set[str], set[str], dict[str, str]]:
    """`meta/withheld.jsonl`: (episode ids, series ids, reasons) an operator leaves out on purpose.

    One object a line: `{"episode": ID, "reason": ...}` or `{"series": ID, "reason": ...}`.
    """
    episodes: set[str] = set()
    series: set[str] = set()
    reasons: dict[str, str] = {}
    if not path.exists():
        return episodes, series, reasons
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(path.name, f"line is not valid JSON ({exc.msg})", line=lineno) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise BadInput(path.name, "each line needs a non-empty 'reason'", line=lineno)
        if isinstance(entry.get("episode"), str):
            episodes.add(entry["episode"])
            reasons[entry["episode"]] = entry["reason"]
        elif isinstance(entry.get("series"), str):
            series.add(entry["series"])
            reasons[entry["series"]] = entry["reason"]
        else:
            raise BadInput(path.name, "each line names an 'episode' or a 'series'", line=lineno)
    return episodes, series, reasons


def publishable(table: pl.DataFrame, withheld_episodes: set[str], withheld_series: set[str]) -> pl.DataFrame:
    """The rows that are published: valid episodes of completed series, less what is withheld."""
    return table.filter(
        pl.col("valid")
        & (pl.col("series_status") == "completed")
        & ~pl.col("id").is_in(sorted(withheld_episodes))
        & ~pl.col("series").is_in(sorted(withheld_series))
    ).sort("id")

