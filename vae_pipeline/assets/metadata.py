"""Metadata that a person reads in the Dagster UI."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import polars as pl


def markdown_table(frame: pl.DataFrame, columns: Sequence[str], limit: int = 20) -> dg.MarkdownMetadataValue:
    """The first `limit` rows of `columns` as a Markdown table."""
    shown = [c for c in columns if c in frame.columns]
    lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    for row in frame.head(limit).select(shown).iter_rows():
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    if frame.height > limit:
        lines.append(f"\n… and {frame.height - limit:,} more rows")
    return dg.MetadataValue.md("\n".join(lines))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value).replace("|", "\\|").replace("\n", " ")
