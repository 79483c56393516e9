"""The leaderboard (contract 4): Bradley–Terry ratings of actor models per axis, with intervals.

Everything here is pure: comparison lines in, tables out. The fit works on sufficient
statistics — per brief, the sum of outcomes of every ordered pair of models — so a bootstrap
round is one matrix product (briefs drawn × per-brief sums) and every round is fitted at once
by a vectorised Newton method (all rounds' small Hessians solved in one batched call).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.provenance import minor_version
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES
from vae_pipeline.domain.episodes.strict_json import loads

PAIRWISE_AXES = ("engagement", "prompt_intent", "composition", "temporal", "craft")
OVERALL = "overall"
SOURCES = ("scores", "pairwise")
EVALUATION = "evaluation.json"
REFERENCE_PREFIX = "ref:"
ELO_MEAN = 1000.0
ELO_SCALE = 400.0 / math.log(10.0)  # a 400-point gap is 10 : 1 odds
BUCKETS = ("< 0.25", "0.25 – 0.40", "≥ 0.40")
ALL_BUCKET = "all"
DEFAULT_ROUNDS = 1000

LEADERBOARD_SCHEMA = {
    "source": pl.String, "axis": pl.String, "model": pl.String, "rating": pl.Float64, "lo": pl.Float64,
    "hi": pl.Float64, "rank": pl.Int64, "battles": pl.Int64, "briefs": pl.Int64, "wins": pl.Int64,
    "losses": pl.Int64, "ties": pl.Int64, "vs_reference": pl.Float64, "rounds_kept": pl.Int64,
    "note": pl.String,
}  # fmt: skip
AGREEMENT_SCHEMA = {
    "axis": pl.String, "bucket": pl.String, "lines": pl.Int64, "agreement": pl.Float64,
    "order_consistency": pl.Float64, "position_bias": pl.Float64,
}  # fmt: skip
JUDGMENT_SCHEMA = {
    "file": pl.String, "line": pl.Int64, "first": pl.String, "second": pl.String, "brief_id": pl.String,
    "model_first": pl.String, "model_second": pl.String, "reference": pl.Boolean, "ranked": pl.Boolean,
    "axis": pl.String, "p_first": pl.Float64,
}  # fmt: skip
VOTE_SCHEMA = {"file": pl.String, "line": pl.Int64, "a": pl.String, "b": pl.String, "axis": pl.String,
               "votes_a": pl.Int64, "votes_b": pl.Int64}
BAD_LINE_SCHEMA = {"file": pl.String, "line": pl.Int64, "reason": pl.String}


@dataclass(frozen=True)
class Entrant:
    """A published episode as the leaderboard sees it."""

    brief_id: str
    model: str
    ranked: bool  # its series is ranked and it is not a harness error


@dataclass(frozen=True)
class BadLine:
    """A comparisons line that was skipped. `reason` never quotes a value of the line."""

    file: str
    line: int
    reason: str


class _Bad(Exception):
    pass


def ranked_series(path: Path) -> list[str] | None:
    """The series `meta/evaluation.json` lists, or None when there is no such file (raises BadInput)."""
    if not path.exists():
        return None
    value = loads(path.read_bytes(), EVALUATION)
    listed = value.get("series") if isinstance(value, dict) else None
    if not isinstance(listed, list) or not all(isinstance(s, str) for s in listed):
        raise BadInput(EVALUATION, "must be an object whose 'series' is a list of series ids")
    return listed


# ---------------------------------------------------------------- who is ranked

NOT_LISTED = f"its series is not listed in meta/{EVALUATION}"
NO_MODEL = "its series.json names no actor.model"
HARNESS_ERROR = "harness error"
NO_VERSION = "its series.json has no benchmark_version MAJOR.MINOR.PATCH"


def _version_name(minor: tuple[int, int]) -> str:
    return f"{minor[0]}.{minor[1]}"


def rank_within_minor_version(frame: pl.DataFrame, listed: list[str] | None) -> pl.DataFrame:
    """`frame` (series, model, harness_error, benchmark_version) with `not_ranked`, the reason an
    entrant is not ranked (null when it is), and `ranked`. Runs compare within one benchmark minor
    version: of the entrants that would be ranked, those of the newest minor version are."""
    def first_reason(row: dict) -> str | None:
        if listed is not None and row["series"] not in listed:
            return NOT_LISTED
        if row["model"] is None:
            return NO_MODEL
        return HARNESS_ERROR if row["harness_error"] else None

    reasons = [first_reason(row) for row in frame.iter_rows(named=True)]
    minors = [minor_version(v) for v in frame["benchmark_version"]]
    newest = max((m for m, reason in zip(minors, reasons) if m and reason is None), default=None)
    for i, (minor, version) in enumerate(zip(minors, frame["benchmark_version"])):
        if reasons[i] is None and minor is None:
            reasons[i] = NO_VERSION
        elif reasons[i] is None and minor != newest:
            reasons[i] = (f"benchmark {version}: the leaderboard ranks benchmark {_version_name(newest)}, "
                          "the newest minor version")
    return frame.with_columns(not_ranked=pl.Series(reasons, dtype=pl.String)).with_columns(
        ranked=pl.col("not_ranked").is_null())


def ranked_version(entrants: pl.DataFrame) -> str | None:
    """The benchmark minor version (`1.2`) the leaderboard ranks; None when nobody is ranked."""
    minors = {minor_version(v) for v in entrants.filter("ranked")["benchmark_version"]} if entrants.height else set()
    return _version_name(minors.pop()) if len(minors) == 1 and None not in minors else None


def unranked_series(entrants: pl.DataFrame) -> list[dict]:
    """Each published series not ranked for a reason of its own (not listed, no model, another or
    no benchmark version): series, model, benchmark_version, reason."""
    if not entrants.height:
        return []
    series = entrants.filter(pl.col("not_ranked").is_not_null() & (pl.col("not_ranked") != HARNESS_ERROR))
    return series.select("series", "model", "benchmark_version", reason="not_ranked").unique().sort(
        "series").to_dicts()


# ---------------------------------------------------------------- reading comparison lines


def _json_object(text: str) -> dict:
    try:
        value = loads(text, "")
    except BadInput as exc:
        raise _Bad(exc.reason) from None
    if not isinstance(value, dict):
        raise _Bad("not a JSON object")
    return value


def _pair(first: object, second: object, entrants: dict[str, Entrant], names: tuple[str, str]) -> tuple[str, bool]:
    """The brief of a valid pair and whether `second` is a reference video; raises _Bad."""
    if not isinstance(first, str) or not isinstance(second, str):
        raise _Bad(f"'{names[0]}' and '{names[1]}' must be strings")
    if first not in entrants:
        raise _Bad(f"'{names[0]}' is not a published episode")
    brief = entrants[first].brief_id
    if second.startswith(REFERENCE_PREFIX):
        if second.removeprefix(REFERENCE_PREFIX) != brief:
            raise _Bad(f"'{names[1]}' is the reference of a different brief")
        return brief, True
    if second not in entrants:
        raise _Bad(f"'{names[1]}' is not a published episode")
    if entrants[second].brief_id != brief:
        raise _Bad("the two episodes are of different briefs")
    if entrants[second].model == entrants[first].model:
        raise _Bad("the two episodes are of the same model")
    return brief, False


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _lines(files: Iterable[tuple[str, str]]) -> Iterator[tuple[str, int, str]]:
    """(file name, line number, line) of every non-blank line of `(file name, text)` batches."""
    for name, text in files:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield name, lineno, line


def read_judgments(files: Iterable[tuple[str, str]], entrants: dict[str, Entrant]) -> tuple[pl.DataFrame, list[BadLine]]:
    """Every valid judgment of `(file name, text)` batches, one row per line and axis, and the bad lines."""
    rows: list[tuple] = []
    bad: list[BadLine] = []
    for name, lineno, line in _lines(files):
        try:
            value = _json_object(line)
            brief, reference = _pair(value.get("first"), value.get("second"), entrants, ("first", "second"))
            p_first = value.get("p_first")
            if not isinstance(p_first, dict) or not p_first:
                raise _Bad("'p_first' must be an object of axis probabilities")
            if any(axis not in PAIRWISE_AXES for axis in p_first):
                raise _Bad(f"'p_first' has an unknown axis (axes: {', '.join(PAIRWISE_AXES)})")
            for axis, p in p_first.items():
                if not _is_number(p) or not 0.0 <= p <= 1.0:
                    raise _Bad(f"'p_first.{axis}' is not a probability in [0, 1]")
        except _Bad as exc:
            bad.append(BadLine(name, lineno, str(exc)))
            continue
        first = entrants[value["first"]]
        second = None if reference else entrants[value["second"]]
        ranked = first.ranked and (second is None or second.ranked)
        for axis, p in p_first.items():
            rows.append((name, lineno, value["first"], value["second"], brief, first.model,
                         second.model if second else None, reference, ranked, axis, float(p)))
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA, orient="row"), bad


def read_votes(files: Iterable[tuple[str, str]], entrants: dict[str, Entrant]) -> tuple[pl.DataFrame, list[BadLine]]:
    """Human votes (`comparisons/human/*.jsonl`): one row per valid line, and the bad lines."""
    rows: list[tuple] = []
    bad: list[BadLine] = []
    for name, lineno, line in _lines(files):
        try:
            value = _json_object(line)
            _pair(value.get("a"), value.get("b"), entrants, ("a", "b"))
            if value.get("axis") not in PAIRWISE_AXES:
                raise _Bad(f"'axis' is not one of {', '.join(PAIRWISE_AXES)}")
            for key in ("votes_a", "votes_b"):
                votes = value.get(key)
                if not isinstance(votes, int) or isinstance(votes, bool) or votes < 0:
                    raise _Bad(f"'{key}' must be a count (an integer ≥ 0)")
        except _Bad as exc:
            bad.append(BadLine(name, lineno, str(exc)))
            continue
        rows.append((name, lineno, value["a"], value["b"], value["axis"], value["votes_a"], value["votes_b"]))
    return pl.DataFrame(rows, schema=VOTE_SCHEMA, orient="row"), bad


def bad_lines_frame(bad: Sequence[BadLine]) -> pl.DataFrame:
    return pl.DataFrame([(b.file, b.line, b.reason) for b in bad], schema=BAD_LINE_SCHEMA, orient="row")


# ---------------------------------------------------------------- combining the two orders


def combine_orders(judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per unordered pair {x, y} and axis: `p_x` (the mean over both orders, from x's
    side), whether it was judged in both orders and whether the orders agree.

    x is the lesser id, except that a reference video is always y.
    """
    flipped = (pl.col("second").str.starts_with(REFERENCE_PREFIX).not_()) & (pl.col("second") < pl.col("first"))
    sided = judgments.with_columns(
        x=pl.when(flipped).then(pl.col("second")).otherwise(pl.col("first")),
        y=pl.when(flipped).then(pl.col("first")).otherwise(pl.col("second")),
        model_x=pl.when(flipped).then(pl.col("model_second")).otherwise(pl.col("model_first")),
        model_y=pl.when(flipped).then(pl.col("model_first")).otherwise(pl.col("model_second")),
        x_first=~flipped,
        p_x=pl.when(flipped).then(1.0 - pl.col("p_first")).otherwise(pl.col("p_first")),
    )
    combined = sided.group_by("x", "y", "axis").agg(
        pl.col("brief_id", "model_x", "model_y", "reference", "ranked").first(),
        pl.col("p_x").mean(),
        pl.col("p_x").filter(pl.col("x_first")).mean().alias("p_x_first"),
        pl.col("p_x").filter(~pl.col("x_first")).mean().alias("p_y_first"),
        pl.len().alias("judgments"),
    )
    swapped = pl.col("p_x_first").is_not_null() & pl.col("p_y_first").is_not_null()
    consistent = swapped & (((pl.col("p_x_first") > 0.5) & (pl.col("p_y_first") > 0.5))
                            | ((pl.col("p_x_first") < 0.5) & (pl.col("p_y_first") < 0.5)))
    return combined.with_columns(swapped=swapped, consistent=consistent).sort("x", "y", "axis")


# ---------------------------------------------------------------- battles


BATTLE_SCHEMA = {"brief_id": pl.String, "axis": pl.String, "model_a": pl.String, "model_b": pl.String,
                 "outcome": pl.Float64, "reference": pl.Boolean}


def score_battles(episodes: pl.DataFrame) -> pl.DataFrame:
    """Source `scores`: every pair of judged, ranked episodes of one brief from different models,
    per score axis; the outcome for a is 1, 0 or 0.5 as its score is higher, lower or equal.

    `episodes` has id, brief_id, model and `score_<axis>` columns.
    """
    judged = episodes.filter(pl.all_horizontal(pl.col(f"score_{a}").is_not_null() for a in SCORE_AXES))
    pairs = judged.join(judged, on="brief_id", suffix="_b").filter(
        (pl.col("id") < pl.col("id_b")) & (pl.col("model") != pl.col("model_b")))
    parts = [pairs.select(
        "brief_id", axis=pl.lit(axis), model_a=pl.col("model"), model_b=pl.col("model_b"),
        outcome=pl.when(pl.col(f"score_{axis}") > pl.col(f"score_{axis}_b")).then(1.0)
        .when(pl.col(f"score_{axis}") < pl.col(f"score_{axis}_b")).then(0.0).otherwise(0.5),
        reference=pl.lit(False)) for axis in SCORE_AXES]
    return pl.concat(parts).cast(BATTLE_SCHEMA) if parts else pl.DataFrame(schema=BATTLE_SCHEMA)


def pairwise_battles(combined: pl.DataFrame) -> pl.DataFrame:
    """Source `pairwise`: every combined pair of ranked episodes (and of a ranked episode and a
    reference video, kept apart by `reference`); the outcome is `p_x`, a soft outcome."""
    return combined.filter("ranked").select(
        "brief_id", "axis", model_a="model_x", model_b="model_y", outcome="p_x", reference="reference",
    ).cast(BATTLE_SCHEMA)


# ---------------------------------------------------------------- Bradley–Terry


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _log_likelihood(wins: np.ndarray, theta: np.ndarray) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    return np.einsum("rij,rij->r", wins, _log_sigmoid(diff))


def strongly_connected(wins: np.ndarray) -> np.ndarray:
    """Per round (wins: rounds × M × M), whether every model reaches every other along arrows
    x → y where x's outcomes against y sum to more than 0 (boolean transitive closure by squaring)."""
    m = wins.shape[-1]
    reach = (wins > 0) | np.eye(m, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(max(m, 2))))):
        reach = np.einsum("rij,rjk->rik", reach.astype(np.float32), reach.astype(np.float32)) > 0
    return reach.all(axis=(1, 2))


def fit_bradley_terry(wins: np.ndarray, start: np.ndarray | None = None, tol: float = 1e-10,
                      max_iter: int = 100) -> np.ndarray:
    """Maximum-likelihood strengths θ (natural log, mean 0) for every round at once.

    `wins[r, i, j]` is the sum of i's outcomes against j in round r (soft outcomes allowed); each
    round must be strongly connected. Newton's method on the concave log-likelihood from `start`
    (default 0; the bootstrap starts from the full-data fit), with the step halved for a round
    whose likelihood would fall.
    """
    rounds, m, _ = wins.shape
    battles = wins + wins.transpose(0, 2, 1)
    theta = np.zeros((rounds, m)) if start is None else np.broadcast_to(start, (rounds, m)).copy()
    ones = np.full((m, m), 1.0 / m)
    active = np.arange(rounds)
    likelihood = _log_likelihood(wins, theta)
    for _ in range(max_iter):
        if active.size == 0:
            break
        w, n, t = wins[active], battles[active], theta[active]
        prob = 1.0 / (1.0 + np.exp(-(t[:, :, None] - t[:, None, :])))
        grad = (w - n * prob).sum(axis=2)
        weight = n * prob * (1.0 - prob)
        hessian = weight.sum(axis=2)[:, :, None] * np.eye(m) - weight + ones
        step = np.linalg.solve(hessian, grad[:, :, None])[:, :, 0]
        before = likelihood[active]
        scale = np.ones(active.size)
        for _ in range(30):
            after = _log_likelihood(w, t + scale[:, None] * step)
            worse = after < before - 1e-12 * np.abs(before)
            if not worse.any():
                break
            scale[worse] *= 0.5
        else:
            after = _log_likelihood(w, t + scale[:, None] * step)
        new = t + scale[:, None] * step
        theta[active] = new - new.mean(axis=1, keepdims=True)
        likelihood[active] = after
        done = (np.abs(grad).max(axis=1) < tol) | (np.abs(scale[:, None] * step).max(axis=1) < tol)
        active = active[~done]
    return theta


def elo(theta: np.ndarray) -> np.ndarray:
    """The Elo-scale rating: mean 1000, 400 points for 10 : 1 odds."""
    return ELO_MEAN + ELO_SCALE * (theta - theta.mean(axis=-1, keepdims=True))


def _not_connected_note(wins: np.ndarray, models: Sequence[str]) -> str:
    """Why a full-data graph is not strongly connected: a model without battles, or a group
    that never beat any model outside it."""
    battles = wins + wins.T
    lonely = [models[i] for i in range(len(models)) if battles[i].sum() == 0]
    if lonely:
        return f"no rating: {', '.join(lonely)} has no battle on this axis"
    reach = (wins > 0) | np.eye(len(models), dtype=bool)
    for _ in range(len(models)):
        reach = (reach.astype(int) @ reach.astype(int)) > 0
    for i in range(len(models)):
        group = [j for j in range(len(models)) if reach[i, j] and reach[j, i]]
        outside = [j for j in range(len(models)) if j not in group]
        if outside and not reach[i, outside].any():
            return (f"no rating: the 'has beaten' graph is not strongly connected "
                    f"({', '.join(models[j] for j in group)} never beat {', '.join(models[j] for j in outside)})")
    return "no rating: the 'has beaten' graph is not strongly connected"


@dataclass(frozen=True)
class Ratings:
    """One axis' ratings: full-data rating, bootstrap interval and rank per model (None when the
    MLE does not exist), how many rounds were kept, and why there is no rating."""

    models: list[str]
    rating: list[float | None]
    lo: list[float | None]
    hi: list[float | None]
    rank: list[int | None]
    rounds_kept: int
    note: str | None


@dataclass(frozen=True)
class CodedBattles:
    """One source's battles as integer codes (models and briefs sorted), for fast per-axis sums."""

    models: list[str]
    briefs: list[str]
    axes: list[str]
    a: np.ndarray  # model index of side a
    b: np.ndarray
    brief: np.ndarray
    axis: np.ndarray
    outcome: np.ndarray  # for a
    reference: np.ndarray  # bool: b is a reference video (never rated)

    @classmethod
    def of(cls, battles: pl.DataFrame) -> CodedBattles:
        contests = battles.filter(~pl.col("reference"))
        models = sorted(pl.concat([contests["model_a"], contests["model_b"]]).unique().to_list())
        briefs = sorted(contests["brief_id"].unique().to_list())
        axes = sorted(battles["axis"].unique().to_list())
        kept = battles.filter(pl.col("model_a").is_in(models))  # references of models that never met another

        def codes(column: str, names: list[str]) -> np.ndarray:
            index = {name: i for i, name in enumerate(names)}
            return kept[column].replace_strict(index, default=-1, return_dtype=pl.Int64).to_numpy()

        return cls(models, briefs, axes, codes("model_a", models), codes("model_b", models),
                   codes("brief_id", briefs), codes("axis", axes), kept["outcome"].to_numpy(),
                   kept["reference"].to_numpy())

    def mask(self, axis: str | None) -> np.ndarray:
        """Rated battles of `axis` (None: every axis)."""
        chosen = ~self.reference
        return chosen & (self.axis == self.axes.index(axis)) if axis is not None else chosen

    def brief_sums(self, mask: np.ndarray) -> np.ndarray:
        """Per brief, `sums[b, i, j]` = the sum of model i's outcomes against model j."""
        m, n = len(self.models), len(self.briefs)
        a, b, brief, o = self.a[mask], self.b[mask], self.brief[mask], self.outcome[mask]
        flat = np.bincount((brief * m + a) * m + b, weights=o, minlength=n * m * m)
        flat += np.bincount((brief * m + b) * m + a, weights=1.0 - o, minlength=n * m * m)
        return flat.reshape(n, m, m)

    def counts(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Per model: battles, distinct briefs, wins, losses, ties (outcome above, below, at 0.5)."""
        m = len(self.models)
        a, b, brief, o = self.a[mask], self.b[mask], self.brief[mask], self.outcome[mask]
        model = np.concatenate([a, b])
        mine = np.concatenate([o, 1.0 - o])
        met = np.bincount(np.concatenate([brief, brief]) * m + model, minlength=len(self.briefs) * m)
        return {"battles": np.bincount(model, minlength=m), "briefs": (met.reshape(-1, m) > 0).sum(axis=0),
                "wins": np.bincount(model, weights=mine > 0.5, minlength=m).astype(int),
                "losses": np.bincount(model, weights=mine < 0.5, minlength=m).astype(int),
                "ties": np.bincount(model, weights=mine == 0.5, minlength=m).astype(int)}

    def vs_reference(self, axis: str | None) -> list[float | None]:
        """Per model, the mean outcome against reference videos on `axis` (None: every axis)."""
        mask = self.reference & ((self.axis == self.axes.index(axis)) if axis is not None else True)
        m = len(self.models)
        total = np.bincount(self.a[mask], weights=self.outcome[mask], minlength=m)
        count = np.bincount(self.a[mask], minlength=m)
        return [float(total[i] / count[i]) if count[i] else None for i in range(m)]


def draw_briefs(n_briefs: int, rounds: int, seed: int) -> np.ndarray:
    """How often each brief is drawn in each bootstrap round (rounds × briefs), seeded."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_briefs, np.full(n_briefs, 1.0 / n_briefs), size=rounds).astype(float)


def rate(sums: np.ndarray, models: Sequence[str], draws: np.ndarray) -> Ratings:
    """Ratings of `models` from per-brief sums, with intervals from the bootstrap `draws`."""
    total = sums.sum(axis=0)[None]
    m = len(models)
    empty = [None] * m
    if m < 2:
        return Ratings(list(models), empty, empty, empty, empty, 0, "no rating: fewer than two models")
    if not strongly_connected(total)[0]:
        return Ratings(list(models), empty, empty, empty, empty, 0, _not_connected_note(total[0], models))
    theta = fit_bradley_terry(total)
    rating = elo(theta)[0]
    drawn = np.einsum("rb,bij->rij", draws, sums)
    kept = drawn[strongly_connected(drawn)]
    if kept.shape[0] == 0:
        return Ratings(list(models), rating.tolist(), empty, empty, empty, 0,
                       "no interval: every bootstrap round was discarded (not strongly connected)")
    boot = elo(fit_bradley_terry(kept, start=theta[0]))
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    rank = [1 + int(np.sum(lo > hi[i])) for i in range(m)]
    return Ratings(list(models), rating.tolist(), lo.tolist(), hi.tolist(), rank, int(kept.shape[0]), None)


# ---------------------------------------------------------------- the leaderboard table


def source_rows(source: str, axes: Sequence[str], battles: pl.DataFrame, rounds: int, seed: int) -> list[dict]:
    """Every axis of one source and `overall` (all axes' battles pooled); reference battles give
    `vs_reference` (pairwise source) and never enter the ratings."""
    coded = CodedBattles.of(battles)
    if not coded.models:
        return []
    draws = draw_briefs(len(coded.briefs), rounds, seed)
    rows = []
    for axis in (*axes, OVERALL):
        chosen = None if axis == OVERALL else axis
        if chosen is not None and chosen not in coded.axes:
            mask = np.zeros(coded.a.size, dtype=bool)
            vs_reference = [None] * len(coded.models)
        else:
            mask = coded.mask(chosen)
            vs_reference = coded.vs_reference(chosen)
        ratings = rate(coded.brief_sums(mask), coded.models, draws)
        counts = coded.counts(mask)
        for i, model in enumerate(coded.models):
            rows.append({
                "source": source, "axis": axis, "model": model, "rating": ratings.rating[i], "lo": ratings.lo[i],
                "hi": ratings.hi[i], "rank": ratings.rank[i], **{k: int(v[i]) for k, v in counts.items()},
                "vs_reference": vs_reference[i] if source == "pairwise" else None,
                "rounds_kept": ratings.rounds_kept, "note": ratings.note,
            })
    return rows


def leaderboard(episodes: pl.DataFrame, combined: pl.DataFrame, *, rounds: int = DEFAULT_ROUNDS,
                seed: int = 0) -> pl.DataFrame:
    """`data/leaderboard.parquet`: one row per source, axis and model.

    `episodes`: the ranked episodes (id, brief_id, model, score_<axis>); `combined`: the
    output of `combine_orders`.
    """
    rows = source_rows("scores", SCORE_AXES, score_battles(episodes), rounds, seed)
    rows += source_rows("pairwise", PAIRWISE_AXES, pairwise_battles(combined), rounds, seed)
    table = pl.DataFrame(rows, schema=LEADERBOARD_SCHEMA)
    return table.sort(["source", "axis", "rank", "rating", "model"], descending=[False, False, False, True, False],
                      nulls_last=True)


# ---------------------------------------------------------------- judge agreement


def _judged_votes(combined: pl.DataFrame, votes: pl.DataFrame) -> pl.DataFrame:
    """Each human-vote line joined with the combined p of its pair from a's side (`p_a`), with
    the judge's confidence bucket and whether its pick is the people's; undecided lines dropped."""
    pairs = combined.select("x", "y", "axis", "p_x")
    same = votes.join(pairs, left_on=["a", "b", "axis"], right_on=["x", "y", "axis"]).with_columns(p_a="p_x")
    swapped = votes.join(pairs, left_on=["b", "a", "axis"], right_on=["x", "y", "axis"]).with_columns(
        p_a=1.0 - pl.col("p_x"))
    confidence = (pl.col("p_a") - 0.5).abs()
    return pl.concat([same, swapped]).filter((pl.col("p_a") != 0.5) & (pl.col("votes_a") != pl.col("votes_b"))).select(
        "axis",
        bucket=pl.when(confidence < 0.25).then(pl.lit(BUCKETS[0])).when(confidence < 0.40).then(pl.lit(BUCKETS[1]))
        .otherwise(pl.lit(BUCKETS[2])),
        agree=(pl.col("p_a") > 0.5) == (pl.col("votes_a") > pl.col("votes_b")),
    )


def judge_agreement(judgments: pl.DataFrame, combined: pl.DataFrame, votes: pl.DataFrame) -> pl.DataFrame:
    """`data/judge_agreement.parquet`: per axis and confidence bucket, the share of human-vote
    lines where the judge's pick is the people's; order consistency and position bias per axis."""
    judged = _judged_votes(combined, votes)
    rows = []
    for axis in PAIRWISE_AXES:
        swapped = combined.filter((pl.col("axis") == axis) & pl.col("swapped"))
        consistency = swapped["consistent"].mean() if swapped.height else None
        lines = judgments.filter(pl.col("axis") == axis)
        bias = float(lines["p_first"].mean() - 0.5) if lines.height else None
        on_axis = judged.filter(pl.col("axis") == axis)
        for bucket in (*BUCKETS, ALL_BUCKET):
            agree = on_axis if bucket == ALL_BUCKET else on_axis.filter(pl.col("bucket") == bucket)
            rows.append({"axis": axis, "bucket": bucket, "lines": agree.height,
                         "agreement": agree["agree"].mean() if agree.height else None,
                         "order_consistency": consistency, "position_bias": bias})
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)
