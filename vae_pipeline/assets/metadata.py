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


# The end of every publish check's description. Dagster shows them as non-blocking (a blocking
# check fails the run it is in, and these must not fail a build or a rehost): it is the release
# that refuses.
REFUSES_THE_RELEASE = ". A publish check: while it fails, the release is refused (no run fails)."


def problem_list(head: str, problems: list[str], way_out: str, limit: int = 25) -> str:
    """A failing check's description: `head` (the count first), one problem a line (the first
    `limit`), then the way out."""
    shown = [f"- {problem}" for problem in problems[:limit]]
    if len(problems) > limit:
        shown.append(f"- and {len(problems) - limit} more")
    return "\n".join([head, *shown, way_out])


RUN_SERIES_KEY = "series_in_this_run"


def with_run_table(metadata: dict[str, dict], counts: dict[str, dict[str, int]] | None = None) -> dict[str, dict]:
    """Each series' metadata plus a table of every series the run covered (series, counts).

    The asset's page shows the latest materialization, which is one series of a ranged run:
    the table says what the run did to the others. `counts` defaults to each series' whole
    numbers in its metadata."""
    counts = counts or {series: {k: v for k, v in entries.items() if type(v) is int}
                        for series, entries in metadata.items()}
    columns = list(dict.fromkeys(name for series_counts in counts.values() for name in series_counts))
    frame = pl.DataFrame([{"series": series, **{c: counts[series].get(c, 0) for c in columns}}
                          for series in sorted(counts)], schema={"series": pl.String, **dict.fromkeys(columns, pl.Int64)})
    table = markdown_table(frame, ["series", *columns], limit=200)
    return {series: {**entries, RUN_SERIES_KEY: table} for series, entries in metadata.items()}
