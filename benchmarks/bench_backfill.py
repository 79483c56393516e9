"""Benchmark: a build over many small series — Dagster runs created and wall time (goal: <= 10 runs).

    python benchmarks/bench_backfill.py [--series 200] [--episodes 1] [--before CHECKOUT]

In a temp dir, generates `--series` series of `--episodes` good thumbnail episodes each with the
project's generator, then times `vae build` over them on a fresh instance, each in its own
process: this checkout (ranged runs: each stage over every series in one run), and, with
`--before`, another checkout of the project (e.g. `git archive main | tar -x -C /tmp/main`,
which runs one Dagster run per series and stage) on the same runs. It then rehosts every series
(`--rubric-version 1.0`) with each. Prints, for each: runs created, wall time, and the ratios
after / before measured in this one run. Fails (exit 1) when the ranged build creates more than
10 runs or its dataset rows differ from the other checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

PROJECT = Path(__file__).resolve().parents[1]
GOAL_RUNS = 10


def timed_build(checkout: Path, runs: Path, home: Path, out: Path, *extra: str) -> tuple[float, int]:
    """`vae build` with `checkout`'s code in a process of its own; (seconds, runs in the instance)."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "VAE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"),
           "VAE_META_DIR": str(checkout / "meta")}
    code = "import sys; from vae_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, "build", "--runs", str(runs), "--out", str(out), *extra],
                   env=env, cwd=checkout, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        return seconds, instance.get_runs_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--episodes", type=int, default=1, help="good episodes per series")
    parser.add_argument("--before", type=Path, help="another checkout of the project to compare with")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(PROJECT))
    from vae_pipeline.sample.generator import generate

    root = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    try:
        runs = root / "runs"
        start = time.perf_counter()
        sample = generate(runs, PROJECT / "meta", series=args.series, episodes=args.episodes, seed=0, bad=False)
        print(f"cpus: {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; generated {len(sample.episodes)} episodes "
              f"in {len(sample.series)} series in {time.perf_counter() - start:.1f} s")
        checkouts = {"after (this checkout)": PROJECT}
        if args.before:
            checkouts["before (" + str(args.before) + ")"] = args.before.resolve()
        results: dict[str, dict[str, tuple[float, int]]] = {}
        for name, checkout in checkouts.items():
            home, out = root / f"home-{len(results)}", root / f"dataset-{len(results)}"
            full = timed_build(checkout, runs, home, out)
            total_before_rehost = full[1]
            rehost_s, total = timed_build(checkout, runs, home, out, "--rubric-version", "1.0")
            results[name] = {"build": full, "rehost": (rehost_s, total - total_before_rehost)}
            print(f"{name}: build {full[0]:.1f} s, {full[1]} runs; rehost of every series {rehost_s:.1f} s, "
                  f"{total - total_before_rehost} runs")
        after = results["after (this checkout)"]
        problems = [f"{what} created {after[what][1]} runs (goal <= {GOAL_RUNS})" for what in after
                    if after[what][1] > GOAL_RUNS]
        if args.before:
            before = next(v for k, v in results.items() if k.startswith("before"))
            for what in ("build", "rehost"):
                print(f"{what}: runs {before[what][1]} -> {after[what][1]}; wall time after / before "
                      f"{after[what][0] / before[what][0]:.2f} ({before[what][0]:.1f} s -> {after[what][0]:.1f} s)")
            rows = [(root / f"dataset-{i}" / "episodes.jsonl").read_bytes() for i in range(2)]
            if _without_times(rows[0]) != _without_times(rows[1]):
                problems.append("episodes.jsonl differs between the two checkouts")
        for problem in problems:
            print(f"FAIL: {problem}")
        return 1 if problems else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _without_times(rows: bytes) -> list[dict]:
    """The rows without the times a rehost stamps (they differ between two builds)."""
    return [{k: v for k, v in json.loads(line).items() if k != "rehosted_at"} for line in rows.splitlines()]


if __name__ == "__main__":
    sys.exit(main())
