"""Benchmark: a rehost of every label against a full build of the same runs (goal: <= 5 %).

    python benchmarks/bench_rehost.py [--series 3] [--episodes 12] [--repeat 2] [--seed 0] [--hd] [--profile]

In a temp dir (own VAE_HOME, DAGSTER_HOME, dataset folder and a copy of meta/), generates a runs
root with the project's generator (good episodes only; with --hd, delivery-size clips like the
real harness: 1920x1080 / 1080x1920 / 1080x1080 at 30 fps, instead of thumbnails), then times
`vae_pipeline.cli.build`:
  1. full build on a fresh instance (rubric in force: the newest in meta/);
  2. rehost: the same runs with `rubric_version="1.0"` (only `rubric`, `labels` and what is
     downstream of them may re-materialize);
  3. switching back to the latest rubric (a rehost too);
  4. a no-op build (nothing stale), the floor of any build.
The four builds are repeated --repeat times, each time on a fresh instance and dataset folder,
and the fastest of each is kept (the least disturbed by other load on the machine).
Prints the seconds and the ratios rehost / full build, and fails (exit 1) when a rehost
materialized any of episodes, renders, verdicts or bundles. For each build it also prints where
the time went: per asset (Dagster step durations, summed over partitions), the per-run overhead
of `execute_in_process` outside the steps, and the staleness planning between stages.

Dagster and the package are imported before the first timing, so no build pays the import.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg

PROJECT = Path(__file__).resolve().parents[1]
META = PROJECT / "meta"
UPSTREAM_OF_LABELS = ("episodes", "renders", "verdicts", "bundles")


@dataclass
class Timing:
    """Where one build's wall time went."""

    total: float = 0.0
    cpu: float = 0.0  # the process's CPU time, all threads
    runs: list[tuple[str | None, list[str], float, float]] = field(default_factory=list)  # partition, assets, wall, steps
    steps: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # step key -> seconds, summed
    planning: list[float] = field(default_factory=list)

    def report(self, name: str) -> None:
        run_wall = sum(r[2] for r in self.runs)
        step_sum = sum(r[3] for r in self.runs)
        plan = sum(self.planning)
        print(f"  {name}: {self.total:.2f} s = steps {step_sum:.2f} s + run overhead {run_wall - step_sum:.2f} s "
              f"({len(self.runs)} execute_in_process runs, {(run_wall - step_sum) / max(len(self.runs), 1):.2f} s each) "
              f"+ staleness planning {plan:.2f} s ({len(self.planning)} rounds) + other {self.total - run_wall - plan:.2f} s")
        if self.steps:
            top = sorted(self.steps.items(), key=lambda kv: -kv[1])
            print("    steps: " + ", ".join(f"{k} {v:.2f}" for k, v in top))


@contextlib.contextmanager
def instrumented(timing: Timing):
    """Time every `execute_in_process` (and its steps) and every staleness pass of `build`."""
    from vae_pipeline.automation import planner
    from vae_pipeline.cli import build

    original_execute = dg.JobDefinition.execute_in_process
    original_stale = planner.stale
    # build() calls `stale` through the name it imported from the planner
    holders = [m for m in (planner, build) if getattr(m, "stale", None) is original_stale]

    def execute(self, *args, **kwargs):
        start = time.perf_counter()
        result = original_execute(self, *args, **kwargs)
        wall = time.perf_counter() - start
        steps = 0.0
        for event in result.all_events:
            if event.event_type_value == "STEP_SUCCESS":
                seconds = event.event_specific_data.duration_ms / 1000
                timing.steps[event.step_key] += seconds
                steps += seconds
        keys = [k.to_user_string() for k in kwargs.get("asset_selection") or []]
        timing.runs.append(((kwargs.get("tags") or {}).get("dagster/asset_partition_range_start"), keys, wall, steps))
        return result

    def stale(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original_stale(*args, **kwargs)
        finally:
            timing.planning.append(time.perf_counter() - start)

    dg.JobDefinition.execute_in_process = execute
    for module in holders:
        module.stale = stale
    try:
        yield timing
    finally:
        dg.JobDefinition.execute_in_process = original_execute
        for module in holders:
            module.stale = original_stale


def timed_build(runs: Path, out: Path, rubric_version: str | None, profile: bool = False,
                dump: Path | None = None) -> tuple[dict, Timing]:
    """One `build`, timed (wall and this process's CPU time); with `profile`, its cProfile printed,
    or written to `dump`."""
    from vae_pipeline.cli.build import build

    timing = Timing()
    profiler = cProfile.Profile() if profile or dump else None
    quiet = io.StringIO()  # build() prints a line per stage
    with instrumented(timing), contextlib.redirect_stdout(quiet):
        start, cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        summary = build(runs, out, rubric_version=rubric_version)
        if profiler:
            profiler.disable()
        timing.total = time.perf_counter() - start
        timing.cpu = time.process_time() - cpu
    if dump:
        profiler.dump_stats(dump)
    elif profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        print("\n".join(text.getvalue().splitlines()[4:40]))
    return summary, timing


def counts(summary: dict) -> str:
    return ", ".join(f"{k} x{len(v)}" for k, v in summary["materialized"].items()) or "nothing"


def check_rehost(name: str, summary: dict) -> list[str]:
    wrong = [k for k in UPSTREAM_OF_LABELS if summary["materialized"].get(k)]
    problems = [f"{name} materialized {k} {summary['materialized'][k]}" for k in wrong]
    if "labels" not in summary["materialized"]:
        problems.append(f"{name} did not re-materialize labels")
    return problems


@contextlib.contextmanager
def isolated_env(root: Path, meta: Path):
    """Every setting pointing into `root`; os.environ restored afterwards (build() writes to it)."""
    saved = dict(os.environ)
    home = root / "home"
    os.environ.update({
        "VAE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "VAE_META_DIR": str(meta),
        "VAE_RUBRIC_VERSION": "latest", "VAE_HARNESS_HOSTNAME": "", "VAE_HARNESS_USER": "",
        "VAE_MAX_UNPACKED_BYTES": str(4 * 1024**3),
    })
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=12, help="good episodes per series")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="full build + rehosts, each time on a fresh instance")
    parser.add_argument("--rubric", default="1.0", help="archived rubric version to rehost with")
    parser.add_argument("--hd", action="store_true",
                        help="delivery-size clips (1920x1080 / 1080x1920 / 1080x1080, 30 fps) instead of thumbnails")
    parser.add_argument("--profile", action="store_true", help="cProfile the full build and the rehost")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)

    from vae_pipeline.definitions import defs  # noqa: F401  (import cost outside the timings)
    from vae_pipeline.sample.generator import generate

    root = Path(tempfile.mkdtemp(prefix="bench-rehost-"))
    try:
        meta = root / "meta"
        shutil.copytree(META, meta)
        with isolated_env(root, meta):
            runs = root / "runs"
            start = time.perf_counter()
            sample = generate(runs, meta, series=args.series, episodes=args.episodes, seed=args.seed, bad=False,
                              hd=args.hd)
            print(f"cpus: {os.cpu_count()}; generated {len(sample.episodes)} {'HD' if args.hd else 'thumbnail'} "
                  f"episodes in {len(sample.series)} series in {time.perf_counter() - start:.1f} s")
            names = ("full build", f"rehost to {args.rubric}", "rehost back to latest", "no-op build")
            versions = dict(zip(names, (None, args.rubric, "latest", None)))
            builds: dict[str, tuple[dict, Timing]] = {}  # the fastest of the repeats, per build
            problems: list[str] = []
            for attempt in range(1, args.repeat + 1):
                home = root / f"home-{attempt}"  # a fresh instance for every full build
                os.environ.update({"VAE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")})
                out = root / f"dataset-{attempt}"
                for name in names:
                    profile = args.profile and attempt == 1 and name in names[:2]
                    summary, timing = timed_build(runs, out, versions[name], profile)
                    if name not in builds or timing.total < builds[name][1].total:
                        builds[name] = (summary, timing)
                    print(f"{'#' + str(attempt) + ' ' + name:>25}: {timing.total:6.2f} s  materialized {counts(summary)}")
                    for failed in summary["failed_runs"]:
                        print(f"{'':>27}WARNING failed run {failed['partition'] or 'all series'} "
                              f"{failed['assets']}: {failed['error']}")
                    if name.startswith("rehost"):
                        problems += check_rehost(f"#{attempt} {name}", summary)
                    elif name == "no-op build" and summary["materialized"]:
                        problems.append(f"#{attempt} no-op build materialized {counts(summary)}")
            best = {name: builds[name][1].total for name in names}
            full, rehost, back, noop = (best[n] for n in names)
            print(f"best of {args.repeat}: " + ", ".join(f"{n} {best[n]:.2f} s" for n in names))
            print(f"rehost ratio rehost / full build: {rehost / full:.1%} (to {args.rubric}), "
                  f"{back / full:.1%} (back to latest); goal <= 5 %; no-op build {noop / full:.1%}")
            print(f"where the time went (the fastest of {args.repeat} of each):")
            for name, (_, timing) in builds.items():
                timing.report(name)
            for problem in problems:
                print(f"FAIL: {problem}")
            if not problems:
                print("ok: the rehosts materialized no episodes, renders, verdicts or bundles; the no-op build nothing")
            return 1 if problems else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
