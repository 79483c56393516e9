"""Benchmark: the leaderboard's Bradley–Terry fit and bootstrap vs the scikit-learn recipe.

    python benchmarks/bench_leaderboard.py [--models 12] [--briefs 168] [--samples 3] [--rounds 1000]
                                           [--sklearn-rounds 1000] [--seed 0]

The tool a user would otherwise reach for is the logistic-regression recipe of the public
chatbot-arena notebooks: `LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6)` on a
design matrix with +ln 10 for model a and −ln 10 for model b, the battles aggregated per ordered
pair of models into sample weights (wins, and here soft outcomes: Σ o as a win's weight, Σ 1 − o
as a loss's), ratings `400 · coef + 1000`, and bootstrap rounds that resample the battles with
replacement and refit. We aggregate its battles with numpy (bincount), not a pandas pivot, so
only its fits and resampling are timed.

The battles: `--models` actor models with random strengths, `--briefs` briefs, `--samples`
episodes of every model per brief; every pair of episodes of different models of a brief is
judged once by a pairwise judge (5 axes, soft outcomes), in a random order — the contract's
`pairwise` source — and every episode has judge scores on 6 axes (the `scores` source).

Timed, on the same battles, for the 5 pairwise axes and `overall`, `--rounds` rounds each:
  - ours: `rate()` per axis (full-data fit + every bootstrap round fitted at once);
  - sklearn: the recipe's full-data fit + `--sklearn-rounds` bootstrap fits per axis (its time is
    scaled to `--rounds` when fewer are run, and says so).
Prints both times, the ratio, and the largest rating difference between the two full-data fits
(goal: ≤ 0.05). Both run with BLAS/OpenMP limited to one thread (threadpoolctl, which
scikit-learn installs): on a shared 2-core machine scikit-learn's thread pools cost it ~3× more. Then times the whole leaderboard — `combine_orders` of the judgment lines and
`leaderboard()` for both sources, every axis and overall, `--rounds` rounds (goal: ≤ 10 s).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vae_pipeline.domain.leaderboard.ratings import (  # noqa: E402
    JUDGMENT_SCHEMA,
    OVERALL,
    PAIRWISE_AXES,
    CodedBattles,
    combine_orders,
    draw_briefs,
    leaderboard,
    pairwise_battles,
    rate,
)
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES  # noqa: E402


def make_input(models: int, briefs: int, samples: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(episodes with scores, judgment lines in long form) for a synthetic contest."""
    rng = np.random.default_rng(seed)
    names = [f"model-{i:02d}" for i in range(models)]
    strength = {axis: rng.normal(0, 0.6, models) for axis in (*PAIRWISE_AXES, *SCORE_AXES)}
    episode_rows = []
    for b in range(briefs):
        for m in range(models):
            for s in range(samples):
                episode_rows.append({"id": f"brief-{b:03d}-m{m:02d}-s{s}", "brief_id": f"brief-{b:03d}",
                                     "model": names[m], **{f"score_{a}": int(np.clip(round(6 + 1.5 * strength[a][m]
                                                                                        + rng.normal(0, 1.2)), 0, 10))
                                                            for a in SCORE_AXES}})
    episodes = pl.DataFrame(episode_rows)
    # every cross-model pair of a brief, judged once in a random order
    ids = episodes.select("id", "brief_id", "model").with_row_index("n")
    pairs = ids.join(ids, on="brief_id", suffix="_2").filter(
        (pl.col("n") < pl.col("n_2")) & (pl.col("model") != pl.col("model_2")))
    flip = rng.random(pairs.height) < 0.5
    first = np.where(flip, pairs["id_2"].to_numpy(), pairs["id"].to_numpy())
    second = np.where(flip, pairs["id"].to_numpy(), pairs["id_2"].to_numpy())
    model_index = {n: i for i, n in enumerate(names)}
    mi = pairs["model"].replace_strict(model_index, return_dtype=pl.Int64).to_numpy()
    mj = pairs["model_2"].replace_strict(model_index, return_dtype=pl.Int64).to_numpy()
    first_model = np.where(flip, mj, mi)
    second_model = np.where(flip, mi, mj)
    frames = []
    for axis in PAIRWISE_AXES:
        gap = strength[axis][first_model] - strength[axis][second_model]
        p = np.clip(1 / (1 + np.exp(-gap)) + 0.05 + rng.normal(0, 0.1, gap.size), 0, 1)
        frames.append(pl.DataFrame({
            "file": "batch.jsonl", "line": np.arange(gap.size), "first": first, "second": second,
            "brief_id": pairs["brief_id"], "model_first": np.array(names)[first_model],
            "model_second": np.array(names)[second_model], "reference": False, "ranked": True,
            "axis": axis, "p_first": p}))
    return episodes, pl.concat(frames).cast(JUDGMENT_SCHEMA)


def sklearn_fit(wins: np.ndarray) -> np.ndarray:
    """The arena recipe on per-pair sums: two weighted rows (win, loss) per ordered pair of models."""
    from sklearn.linear_model import LogisticRegression

    m = wins.shape[0]
    rows, y, weight = [], [], []
    for a in range(m):
        for b in range(m):
            if a == b:
                continue
            x = np.zeros(m)
            x[a], x[b] = math.log(10), -math.log(10)
            rows += [x, x]
            y += [1.0, 0.0]
            weight += [wins[a, b], wins[b, a]]  # as the recipe: every ordered pair, so each pair twice
    model = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6)
    model.fit(np.array(rows), np.array(y), sample_weight=np.array(weight))
    coef = model.coef_[0]
    return 400 * (coef - coef.mean()) + 1000


def pair_sums(a: np.ndarray, b: np.ndarray, o: np.ndarray, m: int) -> np.ndarray:
    sums = np.bincount(a * m + b, weights=o, minlength=m * m) + np.bincount(b * m + a, weights=1 - o, minlength=m * m)
    return sums.reshape(m, m)


def bench_fits(judgments: pl.DataFrame, rounds: int, sklearn_rounds: int | None, seed: int) -> None:
    """Ours vs the recipe per axis; `sklearn_rounds` None: ours alone (scikit-learn not installed)."""
    battles = pairwise_battles(combine_orders(judgments))
    coded = CodedBattles.of(battles)
    models = coded.models
    model_index = {n: i for i, n in enumerate(models)}
    draws = draw_briefs(len(coded.briefs), rounds, seed)
    ours_s, theirs_s, largest = 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    for axis in (*PAIRWISE_AXES, OVERALL):
        on_axis = battles if axis == OVERALL else battles.filter(pl.col("axis") == axis)
        start = time.perf_counter()
        ours = rate(coded.brief_sums(coded.mask(None if axis == OVERALL else axis)), models, draws)
        ours_s += time.perf_counter() - start
        print(f"  {axis:14s} {on_axis.height:>9,} battles; ours kept {ours.rounds_kept} rounds")
        if sklearn_rounds is None:
            continue
        a = on_axis["model_a"].replace_strict(model_index, return_dtype=pl.Int64).to_numpy()
        b = on_axis["model_b"].replace_strict(model_index, return_dtype=pl.Int64).to_numpy()
        o = on_axis["outcome"].to_numpy()
        start = time.perf_counter()
        full = sklearn_fit(pair_sums(a, b, o, len(models)))
        for _ in range(sklearn_rounds):
            pick = rng.integers(0, o.size, o.size)  # battles.sample(frac=1.0, replace=True)
            sklearn_fit(pair_sums(a[pick], b[pick], o[pick], len(models)))
        theirs_s += (time.perf_counter() - start) * (rounds + 1) / (sklearn_rounds + 1)
        largest = max(largest, float(np.max(np.abs(np.array(ours.rating) - full))))
    print(f"ours: {ours_s:.2f} s for {len(PAIRWISE_AXES) + 1} axes x ({rounds} rounds + full fit)")
    if sklearn_rounds is None:
        return
    scaled = "" if sklearn_rounds == rounds else f" (measured on {sklearn_rounds} rounds, scaled to {rounds})"
    print(f"sklearn: {theirs_s:.2f} s{scaled}")
    print(f"fit ratio sklearn / ours: {theirs_s / ours_s:.1f} (ours faster; goal >= 20)")
    print(f"largest rating difference vs sklearn: {largest:.4f} Elo points (goal <= 0.05)")


def single_threaded():
    """One BLAS/OpenMP thread for both fits (a no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--briefs", type=int, default=168)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--sklearn-rounds", type=int, default=1000)
    parser.add_argument("--no-sklearn", action="store_true", help="time ours alone")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    episodes, judgments = make_input(args.models, args.briefs, args.samples, args.seed)
    print(f"input: {args.models} models, {args.briefs} briefs, {args.samples} samples each: "
          f"{episodes.height:,} episodes, {judgments.height // len(PAIRWISE_AXES):,} judged pairs x "
          f"{len(PAIRWISE_AXES)} axes")
    with single_threaded():
        bench_fits(judgments, args.rounds, None if args.no_sklearn else args.sklearn_rounds, args.seed)
    start = time.perf_counter()
    table = leaderboard(episodes, combine_orders(judgments), rounds=args.rounds, seed=args.seed)
    seconds = time.perf_counter() - start
    print(f"whole leaderboard: {seconds:.2f} s for {table.height} rows (both sources, "
          f"{len(SCORE_AXES) + len(PAIRWISE_AXES) + 2} axes incl. overall, {args.rounds} rounds; goal <= 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
