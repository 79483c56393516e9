"""Sample runs for the leaderboard (contract 4): several actor models on shared briefs, and a
pairwise judge's comparisons of their videos, planted from known true strengths.

The generator writes the episodes; this module plans them (which model, which brief, which
scores) and writes `series.json` of each contest series and `comparisons/`: both orders with a
position bias, some pairs in one order only, some against `ref:` videos, a few bad lines (each
recorded with its kind), and human votes. A test compares the pipeline's ranking with `truth`.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from vae_pipeline.domain.leaderboard.ratings import PAIRWISE_AXES
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES

# True strengths (natural log odds) of the sample's models: alpha best, gamma worst — except on
# `temporal`, where gamma beats beta.
STRENGTHS = {"vidgen-alpha": 1.2, "vidgen-beta": 0.0, "vidgen-gamma": -1.2}
TEMPORAL = {"vidgen-alpha": 1.2, "vidgen-beta": -1.2, "vidgen-gamma": 0.0}
FIRST_DAY = date(2026, 10, 21)  # the day of the sample's first series


def sample_day(offset: int) -> str:
    """The calendar day `offset` days after the sample's first (YYYY-MM-DD): series ids and their
    `created_at` name real days however many series are asked for (past October 31 into November)."""
    return (FIRST_DAY + timedelta(days=offset)).isoformat()


SERIES_PER_MODEL = {"vidgen-alpha": 2, "vidgen-beta": 1, "vidgen-gamma": 1}  # alpha: two samples a brief
POSITION_BIAS = 0.08  # added to p_first: the judge favours the video shown first
BAD_KINDS = ("not_json", "unknown_episode", "p_out_of_range", "different_briefs")


def strength(model: str, axis: str) -> float:
    return (TEMPORAL if axis == "temporal" else STRENGTHS)[model]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class ContestEpisode:
    series: str
    episode_id: str
    brief: dict
    model: str
    scores: dict[str, int]


@dataclass
class ContestPlan:
    series: dict[str, dict]  # series id -> series.json
    episodes: list[ContestEpisode]
    files: dict[str, str] = field(default_factory=dict)  # path under comparisons/ -> text
    bad_lines: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, kind)

    def truth(self, axis: str) -> list[str]:
        """The models from best to worst on `axis` (`overall`: the planted overall strengths)."""
        return sorted(STRENGTHS, key=lambda m: -strength(m, axis))

    def write(self, runs_root: Path) -> None:
        for folder in [runs_root / "comparisons", *(runs_root / series_id for series_id in self.series)]:
            if folder.exists():
                shutil.rmtree(folder)
        for series_id, info in self.series.items():
            path = runs_root / series_id / "series.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(info, indent=2) + "\n")
        for name, text in self.files.items():
            path = runs_root / "comparisons" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def plan_contest(briefs: list[dict], *, first_sample: int, first_day: int, seed: int, bad: bool = True) -> ContestPlan:
    """Contest series on `briefs` (shared by every model), samples from `s<first_sample>`, the first
    on the sample's day `first_day` (days after its first series')."""
    rng = random.Random(f"contest-{seed}")
    series: dict[str, dict] = {}
    episodes: list[ContestEpisode] = []
    number = first_sample
    for model, count in SERIES_PER_MODEL.items():
        for _ in range(count):
            sample = f"s{number}"
            day = sample_day(first_day + number - first_sample)
            series_id = f"{day}-{sample}"
            series[series_id] = {
                "series_id": series_id, "sample": sample, "status": "completed",
                "created_at": f"{day}T08:00:00Z",
                "actor": {"model": model, "effort": "high", "sdk": "0.2.174", "cli": "2.1.310"},
                "harness": {"version": "1.4.2", "commit": "3f9c2e1", "dirty": False},
                "benchmark_version": "1.2.0",
            }
            for brief in briefs:
                scores = {axis: max(0, min(10, round(6 + strength(model, axis) + rng.gauss(0, 1.2))))
                          for axis in SCORE_AXES}
                episodes.append(ContestEpisode(series_id, f"{brief['brief_id']}-{sample}", brief, model, scores))
            number += 1
    plan = ContestPlan(series, episodes)
    _judge(plan, rng, bad)
    return plan


def _judgment(rng: random.Random, first: ContestEpisode, second: ContestEpisode | None) -> dict:
    """One line: p_first from the true strengths (a reference video is as good as beta), plus the
    position bias and noise."""
    p_first = {}
    for axis in PAIRWISE_AXES:
        other = strength(second.model, axis) if second else strength("vidgen-beta", axis)
        p = _sigmoid(strength(first.model, axis) - other) + POSITION_BIAS + rng.gauss(0, 0.12)
        p_first[axis] = round(min(1.0, max(0.0, p)), 3)
    return {"first": first.episode_id, "second": second.episode_id if second else f"ref:{first.brief['brief_id']}",
            "judge_model": "pairjudge-2", "judged_at": "2026-10-28T10:00:00Z", "p_first": p_first}


def _judge(plan: ContestPlan, rng: random.Random, bad: bool) -> None:
    by_brief: dict[str, list[ContestEpisode]] = {}
    for episode in plan.episodes:
        by_brief.setdefault(episode.brief["brief_id"], []).append(episode)
    first_batch: list[str] = []
    second_batch: list[str] = []
    votes: list[str] = []
    for n, (brief_id, group) in enumerate(sorted(by_brief.items())):
        for i, x in enumerate(group):
            for y in group[i + 1:]:
                if x.model == y.model:
                    continue
                first_batch.append(json.dumps(_judgment(rng, x, y)))
                if (i + n) % 3:  # two pairs in three are judged in both orders, in the second batch
                    second_batch.append(json.dumps(_judgment(rng, y, x)))
                for axis in PAIRWISE_AXES[: 2 + n % 3]:
                    p = _sigmoid(strength(x.model, axis) - strength(y.model, axis))
                    votes_a = sum(rng.random() < p for _ in range(5))
                    votes.append(json.dumps({"a": x.episode_id, "b": y.episode_id, "axis": axis,
                                             "votes_a": votes_a, "votes_b": 5 - votes_a}))
        for x in {e.model: e for e in reversed(group)}.values():  # one episode a model against the reference
            second_batch.append(json.dumps(_judgment(rng, x, None)))
    if bad:
        briefs = sorted(by_brief)
        a, b = by_brief[briefs[0]][0], by_brief[briefs[1]][1]
        wrong = _judgment(rng, a, by_brief[briefs[0]][-1])
        wrong["p_first"]["craft"] = 1.4
        bad_lines = {
            "not_json": '{"first": "' + a.episode_id + '", "second": ',
            "unknown_episode": json.dumps({**_judgment(rng, a, None), "first": "no-such-brief-s1"}),
            "p_out_of_range": json.dumps(wrong),
            "different_briefs": json.dumps({**_judgment(rng, a, None), "second": b.episode_id}),
        }
        for kind in BAD_KINDS:
            position = 1 + rng.randrange(len(second_batch))
            second_batch.insert(position - 1, bad_lines[kind])
            # lines after this one moved down
            plan.bad_lines = [(f, line + (line >= position), k) for f, line, k in plan.bad_lines]
            plan.bad_lines.append(("batch-2.jsonl", position, kind))
        plan.bad_lines.sort()
    plan.files = {"batch-1.jsonl": "\n".join(first_batch) + "\n", "batch-2.jsonl": "\n".join(second_batch) + "\n",
                  "human/votes-1.jsonl": "\n".join(votes) + "\n"}
