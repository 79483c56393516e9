"""Benchmark: the review site, a transcript page for every log member included, for 500
delivery-size episodes with session and subagent logs, in full and after one new series (goals:
<= 60 s, <= 2 MB of HTML per page, and one new series, which renders only its own pages and the
index, <= 3 s).

    python benchmarks/bench_review.py [--episodes 500] [--per-series 25] [--repeat 1] [--seed 0]
                                      [--turns 60] [--session-turns 180] [--no-hd]

In a temp dir (own VAE_HOME, DAGSTER_HOME, dataset folder), generates one series of sample
episodes (every video variant; `hd`: delivery-size clips and ~25 MB of request logs each), gives
every run folder a long messages.jsonl in the CLI's shapes (`--turns` responses, ~4 lines each,
a subagent, screenshots) and a session log in the session-log form (`--session-turns` responses:
~600 KB, as in a real episode) with its subagent's own log, and builds it once with `vae build`,
so its rows, staged videos, frames, contact sheets and staged archives are real. Its rows are then cloned into --episodes rows over
series of --per-series episodes, each clone pointing at the same staged clip, frames and archive:
every clone's archive is read and its transcript rendered again. Times, best of --repeat:
  1. full: the episode table read from Parquet and every page rendered into an empty folder;
  2. incremental: the same plus one new series of --per-series episodes (its pages and the
     index are rendered; the others are left as they are).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

from vae_pipeline.domain.review.site import CheckResult, SiteInputs, render_site
from vae_pipeline.domain.verdicts.rubric import load_rubric, rubric_in_force

PROJECT = Path(__file__).resolve().parents[1]
META = PROJECT / "meta"
GOAL_FULL_S, GOAL_INCREMENTAL_S, GOAL_PAGE_BYTES = 60.0, 3.0, 2 * 1024 * 1024


def build_sample(root: Path, seed: int, hd: bool, turns: int, session_turns: int) -> tuple[Path, int]:
    """One series of real episodes, built: the pipeline's home holding its rows, clips, frames and
    archives; and the mean bytes of logs (messages.jsonl and transcript/) of a run folder."""
    os.environ.update({"VAE_HOME": str(root / "home"), "DAGSTER_HOME": str(root / "home" / "dagster"),
                       "VAE_META_DIR": str(META), "VAE_RUBRIC_VERSION": "latest"})
    from vae_pipeline.cli.build import build
    from vae_pipeline.sample.generator import VARIANTS, generate
    from vae_pipeline.sample.planted import planted_text, planted_values
    from vae_pipeline_tests.long_transcript import long_messages, plant_long_episode, session_form

    sample = generate(root / "runs", META, series=1, episodes=len(VARIANTS), seed=seed, bad=False, hd=hd)
    folders = [root / "runs" / p.series / p.episode_id for p in sample.episodes if not p.archive]
    for number, folder in enumerate(folders):
        secrets = planted_text(planted_values(random.Random(number)))
        plant_long_episode(folder, turns, "/home/bench", secrets)
        shutil.rmtree(folder / "transcript" / "subagents", ignore_errors=True)
        for name, data in session_form(long_messages(session_turns, "/home/bench", secrets, seed=number)[0],
                                       "/home/bench").items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    logs = [sum(f.stat().st_size for f in [folder / "messages.jsonl", *(folder / "transcript").rglob("*")]
                if f.is_file()) for folder in folders]
    build(root / "runs", root / "dataset")
    return root / "home", sum(logs) // max(len(logs), 1)


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


def site_inputs(rows: pl.DataFrame) -> SiteInputs:
    checks = [CheckResult("no_invalid_episodes", "No invalid episode in a published series", True, "all valid")]
    return SiteInputs(rows=rows, published=set(rows["id"]), withheld={}, checks=checks, history={},
                      rubric=load_rubric(rubric_in_force(META)))


def timed_render(table_path: Path, home: Path, out: Path) -> tuple[float, float, object]:
    """Wall-clock and CPU seconds (this process's: on a machine others load, what the work costs)."""
    started, cpu = time.perf_counter(), time.process_time()
    rows = pl.read_parquet(table_path)
    report = render_site(site_inputs(rows), home, out)
    return time.perf_counter() - started, time.process_time() - cpu, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--per-series", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--turns", type=int, default=60,
                        help="responses of each messages.jsonl (contract 1 example: 44 turns, 27 tool calls)")
    parser.add_argument("--session-turns", type=int, default=180,
                        help="responses of each transcript/session.jsonl (180: ~600 KB, as in a real episode)")
    parser.add_argument("--no-hd", action="store_true", help="thumbnail clips and small request logs")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")  # Dagster's beta and preview notices, once per build
    root = Path(tempfile.mkdtemp(prefix="bench-review-"))
    saved = dict(os.environ)
    try:
        started = time.perf_counter()
        home, log_bytes = build_sample(root, args.seed, not args.no_hd, args.turns, args.session_turns)
        table = pl.read_parquet(home / "tables" / "episode_table" / "table.parquet")
        valid = table.filter(pl.col("valid"))
        print(f"sample: {valid.height} episodes built in {time.perf_counter() - started:.1f} s "
              f"(cpus: {os.cpu_count()}, load {os.getloadavg()[0]:.1f}); logs of a run folder "
              f"{log_bytes / 1e6:.1f} MB on average, staged archives {valid['archive_size'].mean() / 1e6:.1f} MB")
        everything = cloned_rows(table, args.episodes + args.per_series, args.per_series)
        before = everything.head(args.episodes)
        before_path, after_path = root / "before.parquet", root / "after.parquet"
        before.write_parquet(before_path)
        everything.write_parquet(after_path)
        print(f"site: {before.height} episodes in {before['series'].n_unique()} series, "
              f"then {args.per_series} more in one new series")
        full_times, incremental_times, full_cpu, incremental_cpu = [], [], [], []
        for _ in range(args.repeat):
            out = home / "review-bench"
            shutil.rmtree(out, ignore_errors=True)
            seconds, cpu, report = timed_render(before_path, home, out)
            full_times.append(seconds)
            full_cpu.append(cpu)
            assert len(report.series_rendered) == before["series"].n_unique(), report.series_rendered
            seconds, cpu, report = timed_render(after_path, home, out)
            incremental_times.append(seconds)
            incremental_cpu.append(cpu)
            assert len(report.series_rendered) == 1, report.series_rendered
            pages = [p.stat().st_size for p in out.rglob("*.html")]
            transcripts = [p.stat().st_size for p in out.rglob("*.html") if p.parent.parent.parent.name == "episodes"
                           and p.parent.name != "invalid"]
            site_bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        full, incremental = min(full_times), min(incremental_times)
        print(f"best of {args.repeat}: full site {full:.2f} s ({args.episodes} episodes, {len(pages)} pages at the end, "
              f"{len(transcripts)} of them transcript pages, {site_bytes / 1e6:.0f} MB); "
              f"after one new series {incremental:.2f} s")
        print(f"CPU time of this process: full {min(full_cpu):.2f} s, after one new series {min(incremental_cpu):.2f} s "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus)")
        print(f"transcript pages: largest {max(transcripts) / 1e6:.2f} MB, mean {sum(transcripts) / len(transcripts) / 1e6:.2f} MB;"
              f" largest page of all {max(pages) / 1e6:.2f} MB")
        print(f"incremental / full ratio: {incremental / full:.3f}")
        ok_full, ok_incremental = full <= GOAL_FULL_S, incremental <= GOAL_INCREMENTAL_S
        ok_pages = max(pages) <= GOAL_PAGE_BYTES
        ok = ok_full and ok_incremental and ok_pages
        print(f"{'ok' if ok else 'FAIL'}: full {full:.2f} s (goal <= {GOAL_FULL_S:g} s {'✓' if ok_full else '✗'}), "
              f"incremental {incremental:.2f} s (goal <= {GOAL_INCREMENTAL_S:g} s {'✓' if ok_incremental else '✗'}), "
              f"largest page {max(pages) / 1e6:.2f} MB (goal <= 2 MiB {'✓' if ok_pages else '✗'})")
        return 0 if ok else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
