"""The dataset card (README.md): front matter, the stats table and the families table (contract 3)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

LABEL_ORDER = ("PASS", "PASS_WITH_NITS", "FAIL")
# the columns of a published row the card reads (its stats, families and series): a caller with a
# table takes these alone, not every row's nested columns
CARD_COLUMNS = ("series", "sample", "brief_id", "family", "aspect", "label", "positive_eligible", "video_ok",
                "video_duration_s", "turns", "tool_calls", "images_read", "renders", "snapshots", "output_tokens",
                "cache_read_tokens")


def _n(value: int) -> str:
    return f"{value:,}"


def _total(rows: Sequence[dict], column: str) -> int:
    return sum(row.get(column) or 0 for row in rows)


def stats_rows(rows: Sequence[dict]) -> list[tuple[str, str]]:
    """The stats table's rows, in the contract's order and formats."""
    samples = Counter(row["sample"] for row in rows)
    videos = [row for row in rows if row.get("video_ok")]
    minutes = sum(row.get("video_duration_s") or 0.0 for row in videos) / 60
    labels = Counter(row.get("label") for row in rows)
    aspects = Counter(row["aspect"] for row in rows)
    return [
        ("Episodes", f"{_n(len(rows))} ({_n(len({row['brief_id'] for row in rows}))} briefs; samples "
                     + ", ".join(f"{k}: {_n(v)}" for k, v in sorted(samples.items())) + ")"),
        ("Videos delivered", f"{_n(len(videos))} ({minutes:,.1f} min of footage)"),
        ("Labels", ", ".join([f"{label} {_n(labels[label])}" for label in LABEL_ORDER]
                             + [f"unjudged {_n(labels[None])}"])),
        ("Positive-eligible (pass, no major defect, no failed gate)",
         _n(sum(1 for row in rows if row.get("positive_eligible")))),
        ("Agent turns / tool calls / images viewed",
         " / ".join(_n(_total(rows, c)) for c in ("turns", "tool_calls", "images_read"))),
        ("hyperframes render / snapshot calls",
         " / ".join(_n(_total(rows, c)) for c in ("renders", "snapshots"))),
        ("Actor tokens (output; cache read)",
         "; ".join(_n(_total(rows, c)) for c in ("output_tokens", "cache_read_tokens"))),
        ("Aspect ratios", ", ".join(f"{k} {_n(v)}" for k, v in
                                    sorted(aspects.items(), key=lambda kv: (-kv[1], kv[0])))),
    ]


def stats_table(rows: Sequence[dict]) -> str:
    lines = ["| | |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in stats_rows(rows)]
    return "\n".join(lines)


def families_table(rows: Sequence[dict]) -> str:
    families = Counter(row["family"] for row in rows)
    lines = ["| Family | Episodes |", "|---|---|"]
    lines += [f"| {family} | {_n(count)} |"
              for family, count in sorted(families.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines)


FRONT_MATTER = """---
pretty_name: Video agent episodes
license: cc-by-4.0
task_categories:
- text-to-video
tags:
- agents
- motion-graphics
- video-evaluation
configs:
- config_name: default
  data_files:
  - split: train
    path: data/episodes.parquet
- config_name: leaderboard
  data_files:
  - split: train
    path: data/leaderboard.parquet
- config_name: judge_agreement
  data_files:
  - split: train
    path: data/judge_agreement.parquet
---
"""


def render_card(rows: Sequence[dict], *, refreshed_at: str, rubric_version: str,
                series: Sequence[str], leaderboard: str) -> str:
    """The whole README.md of the dataset; `leaderboard` is the Leaderboard section's body."""
    return "\n".join([
        FRONT_MATTER,
        "# Video agent episodes",
        "",
        "Episodes of an AI coding agent making short motion-graphics videos from written briefs "
        "(HTML/CSS/JS rendered frame by frame to MP4 with HyperFrames), each graded by a "
        "vision-model judge and labelled by the host from the judge's answer and facts measured "
        "on the video.",
        "",
        f"Last refreshed: {refreshed_at} (UTC). Host rubric in force: v{rubric_version}. "
        f"Series: {', '.join(series) if series else 'none'}.",
        "",
        "## Stats",
        "",
        stats_table(rows),
        "",
        "## Families",
        "",
        families_table(rows),
        "",
        "## Leaderboard",
        "",
        leaderboard,
        "",
        "## Files",
        "",
        "- `episodes.jsonl` and `data/episodes.parquet`: one row per episode, sorted by id.",
        "- `videos/<id>.mp4`: the delivered video, byte-identical to the agent's output.",
        "- `episodes/<date>/<id>.tar.zst`: the scrubbed, slimmed episode; `<id>.json` is its "
        "manifest with the sha256 of every file.",
        "- `meta/`: brief banks, brief schema, the rubric in force and its archive, the actor prompt.",
        "- `data/leaderboard.parquet`, `data/judge_agreement.parquet` and `leaderboard.png`: the leaderboard.",
        "",
    ])
