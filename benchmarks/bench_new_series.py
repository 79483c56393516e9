"""Benchmark: one new series on a built dataset, and where its time goes without a profiler.

    python benchmarks/bench_new_series.py KEPT [--rounds 2] [--pace python,build] [--dirty-mb M]
        [--time MODULE:FUNCTION,...]

KEPT is a size's folder that `bench_scale.py --episodes N --keep` left (`<kept>/N`: runs/, held/,
home/, dataset/, meta/). Its held-back series goes back into the runs (the kept state has built
it), its home and dataset folder are copied aside once (`KEPT/state/`), and one more completed
series of 4 good thumbnail episodes, with series and episode ids no run holds, is generated once
(`KEPT/new-series/`). Each round, for each collector pace in turn, restores the copy (rsync, then
`sync`: the restore's writes are on disk before any build) and, in a new process, runs two
unchanged builds and the new series' build, and prints:
  - the new series' time above the second unchanged build, and in all;
  - the collector's time and number of collections in that build;
  - the wall time summed inside the functions a new series' roll-ups spend it in (`TIMED`).
No profiler: cProfile inflates the pipeline's Python-heavy code several times over. `--time`
times more functions (a module's function, or a class's method as `MODULE:Class.method`, looked
up by name when called).
`--pace python` keeps Python's default collector pace (700 new objects), `build` the build's
(engines/collector.py); `--pace python,build` takes turns between them. `--dirty-mb M` writes M MB
to a file beside the runs just before the new series' build and leaves it to the kernel, as a
harness writing its runs on the same machine would: a build that waits for every dirty page of
the machine pays for them. Needs `rsync`.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

PACES = ("python", "build")
NEW_SERIES_DAY = "2099-01-01"  # after every series the generator dates
NEW_SUFFIX = "z9"  # the new episodes' ids end in it, where the generator's end in s<N>
# module -> the functions timed in it (wall time summed over a build)
TIMED = {
    "vae_pipeline.assets.dataset": ("outdated_stages", "stage_tables", "join_stages", "store_in_duckdb"),
    "vae_pipeline.assets.leaderboard": ("actor_models", "stage_tables", "leaderboard_table", "chart_of"),
    "vae_pipeline.assets.dataset_episodes": ("_listed", "_made_before"),
    "vae_pipeline.assets.review_site": ("render_site", "label_history"),
    "vae_pipeline.assets.publish_checks": ("published_rows",),
    "vae_pipeline.storage.versions": ("latest_by_partition", "inputs_fingerprint"),
}


def prepare(kept: Path) -> tuple[Path, Path, Path]:
    """(the size's folder, the copy of its state, the new series' own folder), made once."""
    from vae_pipeline.sample import generator

    folders = [p for p in kept.iterdir() if (p / "runs").is_dir() and (p / "home").is_dir()] if kept.is_dir() else []
    if len(folders) != 1:
        raise SystemExit(f"{kept}: no size folder with runs/ and home/ as bench_scale.py --keep leaves")
    root = folders[0]
    for series in sorted((root / "held").iterdir()) if (root / "held").is_dir() else []:
        series.rename(root / "runs" / series.name)  # built by the kept state's new-series build
    state = kept / "state"
    if not state.is_dir():
        shutil.copytree(root / "home", state / "home", symlinks=True)
        shutil.copytree(root / "dataset", state / "dataset", symlinks=True)
    new = kept / "new-series"
    if not new.is_dir():
        plan = generator.EpisodePlan

        def renamed(series, episode_id, *args, **kwargs):
            return plan(series, f"{episode_id.rsplit('-', 1)[0]}-{NEW_SUFFIX}", *args, **kwargs)

        saved = generator.EpisodePlan, generator.sample_day
        generator.EpisodePlan, generator.sample_day = renamed, lambda index: NEW_SERIES_DAY
        try:
            generator.generate(new, root / "meta", series=1, episodes=4, seed=7, bad=False, drifted=0)
        finally:
            generator.EpisodePlan, generator.sample_day = saved
    return root, state, next(p for p in new.iterdir() if p.is_dir())  # the series' own folder


def timed(name: str, fn, totals: dict[str, float]):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - start
    return wrapper


def one_round(root: Path, state: Path, new: Path, pace: str, timed_too: dict[str, tuple[str, ...]],
              dirty_mb: int) -> dict:
    """In this process (a new one): restore, two unchanged builds, the new series' build."""
    from bench_rehost import isolated_env, timed_build

    from vae_pipeline.engines import collector

    for part in ("home", "dataset"):
        subprocess.run(["rsync", "-a", "--delete", f"{state / part}/", f"{root / part}/"], check=True)
    os.sync()  # the restore's writes are on disk before any build: a build's own sync does not pay for them
    if pace == "python":
        collector.BUILD_PACE = gc.get_threshold()
    collections = {"seconds": 0.0, "count": 0, "start": 0.0}

    def count(phase: str, _info: dict) -> None:
        if phase == "start":
            collections["start"] = time.perf_counter()
        else:
            collections["seconds"] += time.perf_counter() - collections["start"]
            collections["count"] += 1

    totals: dict[str, float] = defaultdict(float)
    with isolated_env(root, root / "meta"):
        runs, out = root / "runs", root / "dataset"
        unchanged = [timed_build(runs, out, None)[1].total for _ in range(2)]
        for module_name in TIMED.keys() | timed_too.keys():
            names = TIMED.get(module_name, ()) + timed_too.get(module_name, ())
            module = importlib.import_module(module_name)
            short = module_name.rsplit(".", 1)[-1]
            for name in names:  # a function, or a class's method as Class.method
                owner = functools.reduce(getattr, name.split(".")[:-1], module)
                attribute = name.rsplit(".", 1)[-1]
                setattr(owner, attribute, timed(f"{short}.{name}", getattr(owner, attribute), totals))
        target = runs / new.name
        shutil.copytree(new, target)
        other_writer = root / "other-writer.bin"  # another program's writes, not yet on disk (--dirty-mb)
        with other_writer.open("wb") as handle:
            for _ in range(dirty_mb):
                handle.write(os.urandom(1 << 20))
        gc.callbacks.append(count)
        try:
            summary, timing = timed_build(runs, out, None)
        finally:
            gc.callbacks.remove(count)
            shutil.rmtree(target)
            other_writer.unlink()
    if summary["failed_runs"] or summary["materialized"].get("labels") != [new.name]:
        raise SystemExit(f"the new series' build did not label {new.name}: {summary}")
    return {"pace": pace, "unchanged": unchanged[-1], "new": timing.total, "steps": timing.steps,
            "collector": collections["seconds"], "collections": collections["count"], "inside": dict(totals)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kept", type=Path, help="a folder bench_scale.py --keep left")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pace", default="build", help="python, build, or both comma-separated (taking turns)")
    parser.add_argument("--time", default="", help="more functions to time: MODULE:FUNCTION, comma-separated")
    parser.add_argument("--dirty-mb", type=int, default=0,
                        help="MB another program wrote just before the new series' build, not yet on disk")
    parser.add_argument("--child", choices=PACES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paces = args.pace.split(",")
    timed_too: dict[str, tuple[str, ...]] = defaultdict(tuple)
    for entry in filter(None, args.time.split(",")):
        module_name, _, name = entry.partition(":")
        timed_too[module_name] += (name,)
    if shutil.which("rsync") is None or any(p not in PACES for p in paces):
        raise SystemExit("needs rsync (apt-get install rsync) and --pace of " + ", ".join(PACES))
    root, state, new = prepare(args.kept)
    if args.child:
        print(json.dumps(one_round(root, state, new, args.child, dict(timed_too), args.dirty_mb)))
        return 0
    results = []
    for round_number in range(1, args.rounds + 1):
        for pace in paces:
            done = subprocess.run([sys.executable, __file__, str(args.kept), "--child", pace, "--time", args.time,
                                   "--dirty-mb", str(args.dirty_mb)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"round {round_number} ({pace}) failed: {done.stderr[-2000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            above = result["new"] - result["unchanged"]
            print(f"round {round_number}, {pace} pace: new series {above:.2f} s above the unchanged build "
                  f"({result['new']:.2f} s in all; unchanged {result['unchanged']:.2f} s); collector "
                  f"{result['collector']:.2f} s in {result['collections']} collections", flush=True)
            steps = sorted(result["steps"].items(), key=lambda kv: -kv[1])
            print("  steps: " + ", ".join(f"{k} {v:.2f}" for k, v in steps))
            inside = sorted(result["inside"].items(), key=lambda kv: -kv[1])
            print("  inside: " + ", ".join(f"{k} {v:.2f}" for k, v in inside if v >= 0.01))
    for pace in paces:
        above = sorted(r["new"] - r["unchanged"] for r in results if r["pace"] == pace)
        print(f"{pace} pace: new series above the unchanged build {', '.join(f'{a:.2f}' for a in above)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
