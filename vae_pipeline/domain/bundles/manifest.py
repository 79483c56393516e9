"""An episode's manifest (`episodes/<date>/<id>.json`, contract 3) from its row and its bundle."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import polars as pl

AXES_COLUMNS = ("score_brief_fidelity", "score_composition", "score_typography", "score_motion",
                "score_craft", "score_engagement")
VERDICT_COLUMNS = ("label", "host_rule", "host_gates_failed", "positive_eligible", "defects_critical",
                   "defects_major", "defects_minor", "judge_model", "rubric_version", "host_rubric_version",
                   "rubric_sha256", "rehosted_at", "previous_final_label")
USAGE_COLUMNS = ("turns", "tool_calls", "subagent_tool_calls", "images_read", "renders", "snapshots", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_creation_tokens")


def manifest(row: dict, bundle_parts: dict) -> dict:
    """The manifest: identity, brief, verdict, usage, and the archive's files and scrub report."""
    verdict = {column: row.get(column) for column in VERDICT_COLUMNS}
    verdict["scores"] = {column.removeprefix("score_"): row.get(column) for column in AXES_COLUMNS}
    return {
        "id": row["id"],
        "series": row["series"],
        "brief": json.loads(row["brief"]),
        "verdict": verdict,
        "usage": {column: row.get(column) for column in USAGE_COLUMNS},
        "files": bundle_parts["files"],
        "archive_sha256": row["archive_sha256"],
        "excluded": bundle_parts["excluded"],
        "vendor_files": bundle_parts["vendor_files"],
        "redacted_keys": bundle_parts["redacted_keys"],
        "scrub": bundle_parts["scrub"],
        "slimmed": bundle_parts["slimmed"],
    }


def manifest_bytes(row: dict, bundle_parts: dict) -> bytes:
    return (json.dumps(manifest(row, bundle_parts), indent=2, ensure_ascii=False, default=list) + "\n").encode()


MADE_FROM = ("id", "series", "brief", "archive_sha256", "bundle_parts", *VERDICT_COLUMNS, *AXES_COLUMNS, *USAGE_COLUMNS)


@functools.cache
def _this_code() -> bytes:
    return Path(__file__).read_bytes()


def manifest_inputs(frame: pl.DataFrame) -> list[str]:
    """A digest, per row, of everything the row's manifest is made from (its MADE_FROM values and
    this module's code): equal digests, equal manifests, so a manifest written from the same ones
    need not be made again (a new series costs its own manifests, not every episode's). Two of
    Polars' row hashes (stable within a Polars version: after an upgrade every manifest is made
    once more, and rewritten only where its bytes differ), not a row's values turned to Python."""
    code = hashlib.sha256(_this_code()).hexdigest()[:16]
    made = frame.select(MADE_FROM)
    return [f"{code}{low:016x}{high:016x}" for low, high in zip(made.hash_rows(seed=0), made.hash_rows(seed=1),
                                                               strict=True)]
