"""Benchmark: the review site for 500 episodes, in full and after one new series (goals: <= 5 s
and <= 1 s).

    python benchmarks/bench_review.py [--episodes 500] [--per-series 25] [--repeat 3] [--seed 0]

In a temp dir (own VAE_HOME, DAGSTER_HOME, dataset folder), generates one series of sample
episodes (every video variant) and builds it once with `vae build`, so its rows, staged videos,
frames and contact sheets are real. Its rows are then cloned into --episodes rows over series of
--per-series episodes, each clone pointing at the same staged clip and frames: no video is
decoded again. Times, best of --repeat:
  1. full: the episode table read from Parquet and every page rendered into an empty folder;
  2. incremental: the same plus one new series of --per-series episodes (its pages and the
     index are rendered; the others are left as they are).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

from vae_pipeline.domain.review_site import CheckResult, SiteInputs, render_site
from vae_pipeline.domain.rubric import load_rubric, rubric_in_force

PROJECT = Path(__file__).resolve().parents[1]
META = PROJECT / "meta"
GOAL_FULL_S, GOAL_INCREMENTAL_S = 5.0, 1.0


def build_sample(root: Path, seed: int) -> Path:
    """One series of real episodes, built: the pipeline's home holding its rows, clips and frames."""
    os.environ.update({"VAE_HOME": str(root / "home"), "DAGSTER_HOME": str(root / "home" / "dagster"),
                       "VAE_META_DIR": str(META), "VAE_RUBRIC_VERSION": "latest"})
    from vae_pipeline.cli.build import build
    from vae_pipeline.sample.generator import VARIANTS, generate

    generate(root / "runs", META, series=1, episodes=len(VARIANTS), seed=seed, bad=False)
    build(root / "runs", root / "dataset")
    return root / "home"


def cloned_rows(table: pl.DataFrame, episodes: int, per_series: int) -> pl.DataFrame:
    """`episodes` rows over series of `per_series`, cloned from `table` (same clips and frames)."""
    base = table.filter(pl.col("valid")).to_dicts()
    rows = []
    for number in range(episodes):
        row = dict(base[number % len(base)])
        row["series"] = f"bench-{number // per_series:03d}-s1"
        row["id"] = f"{row['id']}-{number:04d}"
        rows.append(row)
    return pl.DataFrame(rows, schema=table.schema)


def site_inputs(rows: list[dict]) -> SiteInputs:
    checks = [CheckResult("no_invalid_episodes", "No invalid episode in a published series", True, "all valid")]
    return SiteInputs(rows=rows, published={r["id"] for r in rows}, withheld={}, checks=checks, history={},
                      rubric=load_rubric(rubric_in_force(META)))


def timed_render(table_path: Path, home: Path, out: Path) -> tuple[float, object]:
    started = time.perf_counter()
    rows = pl.read_parquet(table_path).to_dicts()
    report = render_site(site_inputs(rows), home, out)
    return time.perf_counter() - started, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--per-series", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")  # Dagster's beta and preview notices, once per build
    root = Path(tempfile.mkdtemp(prefix="bench-review-"))
    saved = dict(os.environ)
    try:
        started = time.perf_counter()
        home = build_sample(root, args.seed)
        table = pl.read_parquet(home / "tables" / "episode_table" / "table.parquet")
        print(f"sample: {table.filter(pl.col('valid')).height} episodes built in {time.perf_counter() - started:.1f} s "
              f"(cpus: {os.cpu_count()}, load {os.getloadavg()[0]:.1f})")
        everything = cloned_rows(table, args.episodes + args.per_series, args.per_series)
        before = everything.head(args.episodes)
        before_path, after_path = root / "before.parquet", root / "after.parquet"
        before.write_parquet(before_path)
        everything.write_parquet(after_path)
        print(f"site: {before.height} episodes in {before['series'].n_unique()} series, "
              f"then {args.per_series} more in one new series")
        full_times, incremental_times = [], []
        for _ in range(args.repeat):
            out = home / "review-bench"
            shutil.rmtree(out, ignore_errors=True)
            seconds, report = timed_render(before_path, home, out)
            full_times.append(seconds)
            assert len(report.series_rendered) == before["series"].n_unique(), report.series_rendered
            seconds, report = timed_render(after_path, home, out)
            incremental_times.append(seconds)
            assert len(report.series_rendered) == 1, report.series_rendered
            pages = sum(1 for _ in out.rglob("*.html"))
        full, incremental = min(full_times), min(incremental_times)
        print(f"best of {args.repeat}: full site {full:.2f} s ({args.episodes} episodes, {pages} pages at the end); "
              f"after one new series {incremental:.2f} s")
        print(f"incremental / full ratio: {incremental / full:.3f}")
        ok_full, ok_incremental = full <= GOAL_FULL_S, incremental <= GOAL_INCREMENTAL_S
        print(f"{'ok' if ok_full and ok_incremental else 'FAIL'}: full {full:.2f} s (goal <= {GOAL_FULL_S:g} s "
              f"{'✓' if ok_full else '✗'}), incremental {incremental:.2f} s (goal <= {GOAL_INCREMENTAL_S:g} s "
              f"{'✓' if ok_incremental else '✗'})")
        return 0 if ok_full and ok_incremental else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
