"""Benchmark: a full build with the Celery executor and one `vae worker` vs in-process (goal: <= 15 % overhead).

    python benchmarks/bench_celery.py [--series 2] [--episodes 4] [--hd] [--repeat 1] [--seed 0]

In a temp dir, generates a runs root with the project's generator (good episodes only; --hd for
delivery-size clips), then times `vae_pipeline.cli.build` of the same runs twice per repeat, each
on a fresh SQLite instance and dataset folder:
  1. in-process (the default engine);
  2. VAE_EXECUTOR=celery, every step a Celery task run by one `vae worker` (started before the
     timing, as a deployment's workers are; its concurrency is the number of cores), through
     Redis at VAE_CELERY_BROKER (default redis://127.0.0.1:6379/0) under a key prefix of its own.
Keeps the fastest of each, prints both and the overhead (celery / in-process - 1), and checks
that both builds wrote the same dataset bytes (the contract's clock readings aside: the card's
refresh time and `rehosted_at`). Two cores cannot
show a speed-up: the goal is that distributing the steps costs little.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dagster as dg  # imported before the first timing
import redis

from vae_pipeline.cli.build import build
from vae_pipeline.cli.common import settings
from vae_pipeline.engines.executor import DEFAULT_BROKER
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.dataset_bytes import published

PROJECT = Path(__file__).resolve().parents[1]
VAE = Path(sys.executable).parent / "vae"


def timed_build(runs: Path, root: Path, engine: str, prefix: str) -> tuple[float, Path]:
    """One build on a fresh instance under `root`; with celery, a worker serves it."""
    out = root / "dataset"
    env = {"VAE_HOME": str(root / "home"), "DAGSTER_HOME": str(root / "home" / "dagster"),
           "VAE_META_DIR": str(PROJECT / "meta"), "VAE_EXECUTOR": engine, "VAE_CELERY_PREFIX": prefix}
    with settings(**env):
        worker = None
        if engine == "celery":
            log = root / "worker.log"
            worker = subprocess.Popen([str(VAE), "worker", "--runs", str(runs), "--out", str(out), "--name",
                                       f"bench-{os.getpid()}"], env=dict(os.environ), stdout=log.open("wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True)
            while b" ready." not in log.read_bytes():
                if worker.poll() is not None:
                    raise SystemExit(f"vae worker exited:\n{log.read_text()[-2000:]}")
                time.sleep(0.2)
        try:
            started = time.perf_counter()
            summary = build(runs, out)
            seconds = time.perf_counter() - started
        finally:
            if worker is not None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(60)
    if summary["failed_runs"]:
        raise SystemExit(f"{engine} build failed: {summary['failed_runs']}")
    return seconds, out


def main() -> int:
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hd", action="store_true", help="delivery-size clips")
    args = parser.parse_args()
    broker = os.environ.get("VAE_CELERY_BROKER") or DEFAULT_BROKER
    prefix = f"vae-bench-{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(broker)
    with tempfile.TemporaryDirectory(prefix="bench-celery-") as tmp:
        tmp = Path(tmp)
        runs = generate(tmp / "runs", PROJECT / "meta", series=args.series, episodes=args.episodes,
                        seed=args.seed, bad=False, hd=args.hd)
        print(f"{len(runs.episodes)} episodes in {len(runs.series)} series ({'HD' if args.hd else 'small'} clips), "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        best: dict[str, float] = {}
        outs: dict[str, Path] = {}
        try:
            for repeat in range(args.repeat):
                for engine in ("in_process", "celery"):
                    seconds, outs[engine] = timed_build(runs.root, tmp / f"{engine}-{repeat}", engine, prefix)
                    best[engine] = min(best.get(engine, seconds), seconds)
                    print(f"  {engine}: {seconds:.2f} s", flush=True)
        finally:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
        same = published(outs["in_process"]) == published(outs["celery"])
    overhead = best["celery"] / best["in_process"] - 1
    print(f"in-process {best['in_process']:.2f} s, celery (1 worker) {best['celery']:.2f} s: "
          f"overhead {overhead:+.1%} (goal <= 15 %) {'✓' if overhead <= 0.15 else '✗'}; "
          f"same dataset bytes: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
