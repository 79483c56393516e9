"""The leaderboard as people read it: Markdown tables (card, UI, terminal) and the chart."""

from __future__ import annotations

import io
from collections.abc import Sequence
from importlib.metadata import version

import polars as pl
from PIL import Image

from vae_pipeline.domain.leaderboard.ratings import (
    BUCKETS,
    OVERALL,
    PAIRWISE_AXES,
    SOURCES,
    ranked_version,
    unranked_series,
)
from vae_pipeline.domain.table_versions import content_version, rows_version
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES

AXES_OF = {"scores": (*SCORE_AXES, OVERALL), "pairwise": (*PAIRWISE_AXES, OVERALL)}


def shown_ranks(rows: Sequence[dict]) -> list[str]:
    """Each row's rank as people read it: a rank two rows share reads `=2`, no rank `–`."""
    ranks = [row["rank"] for row in rows]
    return ["–" if rank is None else f"={rank}" if ranks.count(rank) > 1 else str(rank) for rank in ranks]


def axis_table(rows: Sequence[dict]) -> str:
    """rank, model, rating (integer), interval `lo–hi`, battles; a shared rank reads `=2`."""
    lines = ["| rank | model | rating | interval | battles |", "|---|---|---|---|---|"]
    for row, rank in zip(rows, shown_ranks(rows), strict=True):
        rating = "–" if row["rating"] is None else f"{row['rating']:.0f}"
        interval = "–" if row["lo"] is None else f"{row['lo']:.0f}–{row['hi']:.0f}"
        lines.append(f"| {rank} | {row['model']} | {rating} | "
                     f"{interval} | {row['battles']:,} |")
    notes = sorted({row["note"] for row in rows if row["note"]})
    return "\n".join(lines + ([""] + [f"_{note}_" for note in notes] if notes else []))


def text_table(rows: Sequence[dict]) -> str:
    """The same columns as `axis_table`, aligned for a terminal."""
    cells = [("rank", "model", "rating", "interval", "battles")] + [(
        rank, row["model"], "–" if row["rating"] is None else f"{row['rating']:.0f}",
        "–" if row["lo"] is None else f"{row['lo']:.0f}–{row['hi']:.0f}", f"{row['battles']:,}")
        for row, rank in zip(rows, shown_ranks(rows), strict=True)]
    widths = [max(len(line[i]) for line in cells) for i in range(5)]
    lines = ["  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
             for line in cells]
    notes = sorted({row["note"] for row in rows if row["note"]})
    return "\n".join(lines + notes)


def axes_in(table: pl.DataFrame, source: str) -> list[str]:
    present = set(table.filter(pl.col("source") == source)["axis"])
    return [axis for axis in AXES_OF[source] if axis in present]


def rows_of(table: pl.DataFrame, source: str, axis: str) -> list[dict]:
    return table.filter((pl.col("source") == source) & (pl.col("axis") == axis)).to_dicts()


def agreement_table(agreement: pl.DataFrame) -> str:
    lines = ["| axis | confidence | lines | agreement | order consistency | position bias |",
             "|---|---|---|---|---|---|"]
    for row in agreement.iter_rows(named=True):
        lines.append(f"| {row['axis']} | {row['bucket']} | {row['lines']:,} | {_share(row['agreement'])} | "
                     f"{_share(row['order_consistency'])} | {_signed(row['position_bias'])} |")
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.3f}"


def version_lines(entrants: pl.DataFrame) -> list[str]:
    """Which benchmark minor version is ranked, and each published series that is not, with why."""
    version = ranked_version(entrants)
    lines = [f"Ranked within benchmark version {version} (series.json `benchmark_version` {version}.x): runs "
             "compare within one minor version, the newest." if version else
             "No series is ranked: none is of a benchmark version that can be ranked."]
    unranked = unranked_series(entrants)
    if unranked:
        lines += ["", "Not ranked:", ""] + [
            f"- {row['series']} ({row['model'] or 'no model'}, benchmark {row['benchmark_version'] or 'none'}): "
            f"{row['reason']}" for row in unranked]
    return lines


def leaderboard_section(table: pl.DataFrame, agreement: pl.DataFrame, entrants: pl.DataFrame) -> str:
    """The card's `## Leaderboard` section (without its heading)."""
    versions = ["", *version_lines(entrants)] if entrants.height else []
    if not table.height:
        return "\n".join([("No leaderboard yet: it needs at least two actor models (series.json `actor.model`) "
                           "judged on the same briefs."), *versions])
    parts = ["Actor models ranked by Bradley–Terry ratings on the Elo scale (mean 1000; 400 points is "
             "10 : 1 odds) with 95 % bootstrap intervals over briefs; models whose intervals overlap share a "
             "rank (`=2`). Source `scores`: the judge's scores of two episodes of the same brief; source "
             "`pairwise`: a pairwise judge's preferences, both orders combined. Tables: "
             "`data/leaderboard.parquet` (config `leaderboard`), `data/judge_agreement.parquet` "
             "(config `judge_agreement`).", *versions, "",
             "![Ratings with their intervals, one panel per axis](leaderboard.png)"]
    for source in SOURCES:
        for axis in axes_in(table, source):
            parts += ["", f"### {source} · {axis}", "", axis_table(rows_of(table, source, axis))]
    if agreement.height:
        parts += ["", "### Pairwise judge vs people", "",
                  "Share of human-vote lines where the judge picks the side people preferred, by the judge's "
                  f"confidence |p − 0.5| ({', '.join(BUCKETS)}); order consistency: pairs judged in both orders "
                  "that pick the same winner both times; position bias: mean p_first − 0.5.", "",
                  agreement_table(agreement)]
    return "\n".join(parts)


CHART_OF = "vae-chart-of"  # the chart's PNG text entry naming what it shows (`chart_key`)
CHART_STYLE = "1"  # change it with the drawing below: the charts drawn before are then drawn again


def chart_key(table: pl.DataFrame) -> str:
    """What a chart of `table` shows: the table's rows, the drawing's style and matplotlib's version."""
    return content_version(rows_version(table), CHART_STYLE, version("matplotlib"))


def drawn_from(chart: bytes) -> str | None:
    """The `chart_key` a chart names (None: no chart of `leaderboard_chart`, or unreadable)."""
    try:
        with Image.open(io.BytesIO(chart)) as image:
            return image.text.get(CHART_OF) if image.format == "PNG" else None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def chart_of(table: pl.DataFrame, drawn: bytes | None) -> bytes:
    """The chart of `table`: `drawn` (the one in the dataset folder) when it names the same
    `chart_key`, else drawn anew. A build whose ratings did not move (a new series that is not
    ranked, one model and no contest) then neither imports matplotlib nor draws: 0.4-0.6 s."""
    key = chart_key(table)
    if drawn is not None and drawn_from(drawn) == key:
        return drawn
    return leaderboard_chart(table, key)


def leaderboard_chart(table: pl.DataFrame, key: str) -> bytes:
    """PNG: one panel per source and axis, each model's rating as a dot with its interval as a bar;
    `key` (`chart_key`) kept in its text entry CHART_OF.

    Drawn on a bare `Figure` (Agg, no pyplot: no display, no global figures), imported here:
    matplotlib is a fifth of every `vae` command's imports and only this draws."""
    from matplotlib.figure import Figure

    panels = [(source, axis) for source in SOURCES for axis in axes_in(table, source)]
    columns = max((len(axes_in(table, s)) for s in SOURCES), default=1) or 1
    sources = [s for s in SOURCES if axes_in(table, s)] or ["scores"]
    figure = Figure(figsize=(2.6 * columns, 0.45 * _models(table) + 2.2 * len(sources)))
    grid = figure.subplots(len(sources), columns, squeeze=False, sharex=False)
    for ax in grid.flat:
        ax.set_visible(False)
    for source_index, source in enumerate(sources):
        for axis_index, axis in enumerate(axes_in(table, source)):
            ax = grid[source_index][axis_index]
            ax.set_visible(True)
            rows = [r for r in rows_of(table, source, axis) if r["rating"] is not None]
            rows.sort(key=lambda r: r["rating"])
            ys = range(len(rows))
            # a bound equal to the rating may come out a hair past it (rounding): an empty bar, not an error
            lower = [max(r["rating"] - (r["lo"] if r["lo"] is not None else r["rating"]), 0.0) for r in rows]
            upper = [max((r["hi"] if r["hi"] is not None else r["rating"]) - r["rating"], 0.0) for r in rows]
            ax.errorbar([r["rating"] for r in rows], list(ys), xerr=[lower, upper], fmt="o", color="#1f4e79",
                        ecolor="#7fa7cf", elinewidth=3, capsize=0)
            ax.set_yticks(list(ys), [r["model"] for r in rows], fontsize=7)
            ax.axvline(1000, color="#bbbbbb", linewidth=0.8, zorder=0)
            ax.set_title(f"{source} · {axis}", fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            if not rows:
                ax.text(0.5, 0.5, "no rating", transform=ax.transAxes, ha="center", fontsize=7)
    if not panels:
        grid[0][0].set_visible(True)
        grid[0][0].text(0.5, 0.5, "no leaderboard yet", ha="center")
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=110, metadata={"Software": None, CHART_OF: key})
    return out.getvalue()


def _models(table: pl.DataFrame) -> int:
    return table["model"].n_unique() if table.height else 1
