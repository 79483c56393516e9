"""Benchmark: the sample build with its state on an S3 server vs on disk (goal: <= 1.5x), the
requests it makes of the server, and the build on disk against an earlier checkout of the code
(goal: <= 1.05x).

    python benchmarks/bench_object_storage.py [--repeat 3] [--baseline PATH] [--server uvicorn|werkzeug]

Generates the sample runs (`vae demo`'s: 3 series of 6 episodes and the contest; good episodes
only, since a bucket holds no links or special files, and no drifted label, so every build
writes the same bytes), then times, alternately and each in a
fresh process on a fresh SQLite instance:
  1. `disk`: VAE_HOME, runs root and dataset folder on disk;
  2. `bucket`: all three as `s3://bucket/…` on moto's S3 server (its own process on 127.0.0.1;
     moto's app under uvicorn, which keeps connections alive as a real store does, or with
     `--server werkzeug` `moto_server` itself, which closes each one), the runs uploaded before
     the timing; only the scratch folder on disk;
  3. with `--baseline PATH` (a checkout of an earlier commit, e.g. `git worktree add`), `disk`
     with that checkout's code.
Keeps the fastest of each, prints the times and ratios, the steps the bucket build spent longest
on beyond the disk build, and the S3 server's own CPU time (it runs on the same cores as the
build, which a real object store does not), and checks that every
build wrote the same dataset bytes (the card's refresh time aside).

Then counts requests: a first build and an unchanged second build on a fresh prefix, through a
counting proxy in front of the server (`vae_pipeline_tests/request_counter.py`), by method,
status, kind (LIST, ranged GET, conditional PUT, HEAD 404s) and by the Dagster step that made
them (from the instance's step events: the build runs one step at a time). The goals: a first
build in at most 10 requests per episode plus one GET per input file, a second build in at most
25 requests.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
REFRESHED = re.compile(rb"Last refreshed: [^(]*\(UTC\)")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

ONE_BUILD = """
import json, sys, time
from pathlib import Path
from vae_pipeline.cli.build import build
where = [arg if "://" in arg else Path(arg) for arg in sys.argv[1:3]]
started = time.perf_counter()
summary = build(*where)
print(json.dumps({"seconds": time.perf_counter() - started, "failed": summary["failed_runs"]}))
"""
# moto's S3 app served as a real store serves it: connections kept alive between requests.
# (`moto_server` runs it on Werkzeug's development server, which closes every connection: each
# request then costs a TCP connection and a server thread, on both sides of the same cores.)
MOTO_KEEP_ALIVE = """
import sys, uvicorn
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
uvicorn.run(DomainDispatcherApplication(create_backend_app), host="127.0.0.1", port=int(sys.argv[1]),
            interface="wsgi", log_level="warning")
"""
# after a counted build: the time window of every step it ran (one at a time), for the counts per step
STEP_WINDOWS = """
import dagster as dg
from vae_pipeline_tests.request_counter import step_windows
with dg.DagsterInstance.get() as instance:
    print(json.dumps(step_windows(instance)))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def timed(code: Path, runs: str, out: str, env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """One build in a process of its own, with the code under `code`: its seconds (imports
    excluded), and the seconds of each step (by step key, from the instance once it is done)."""
    done = subprocess.run([sys.executable, "-c", ONE_BUILD + STEP_WINDOWS, runs, out],
                          env={**env, "PYTHONPATH": f"{code}{os.pathsep}{PROJECT}"},
                          capture_output=True, text=True, check=True, cwd=Path(env["VAE_SCRATCH"]).parent)
    lines = done.stdout.strip().splitlines()
    result, windows = json.loads(lines[-2]), json.loads(lines[-1])
    assert result["failed"] == [], result["failed"]
    steps: dict[str, float] = {}
    for start, end, step in windows:
        steps[step] = steps.get(step, 0.0) + end - start
    return result["seconds"], steps


def step_gaps(bucket: dict[str, float], disk: dict[str, float]) -> str:
    """The steps the bucket build spent longest on beyond the disk build, and all the others."""
    gaps = sorted(((bucket.get(step, 0.0) - disk.get(step, 0.0), step) for step in set(bucket) | set(disk)),
                  reverse=True)
    shown = ", ".join(f"{step} {gap:+.2f} s ({disk.get(step, 0.0):.2f} -> {bucket.get(step, 0.0):.2f})"
                      for gap, step in gaps[:5])
    rest = sum(gap for gap, _ in gaps[5:])
    return f"{shown}; every other step {rest:+.2f} s; all steps {sum(disk.values()):.2f} -> {sum(bucket.values()):.2f} s"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settings(root: Path, home: str, dataset: str) -> dict[str, str]:
    root.mkdir(parents=True)
    return {**os.environ, "VAE_HOME": home, "VAE_DATASET_DIR": dataset, "VAE_SCRATCH": str(root / "scratch"),
            "DAGSTER_HOME": str(root / "dagster"), "VAE_META_DIR": str(PROJECT / "meta"),
            "VAE_INSTANCE": "sqlite", "VAE_EXECUTOR": ""}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return {**files, "README.md": REFRESHED.sub(b"-", files["README.md"])}


def bucket_bytes(fs, prefix: str) -> dict[str, bytes]:
    files = {name[len(prefix) + 1:]: fs.cat_file(name) for name in sorted(fs.find(prefix))}
    return {**files, "README.md": REFRESHED.sub(b"-", files["README.md"])}


def counted(proxy, env: dict[str, str], what: str, log: Path | None = None) -> int:
    """A build through the proxy: its requests printed by method, status, kind and step (and with
    `log`, one JSON line each appended there); their number."""
    from vae_pipeline_tests.request_counter import step_of, by_stage, summary

    proxy.taken()
    done = subprocess.run([sys.executable, "-c", ONE_BUILD + STEP_WINDOWS, "s3://bench/runs", env["VAE_DATASET_DIR"]],
                          env={**env, "PYTHONPATH": str(PROJECT), "AWS_ENDPOINT_URL": proxy.endpoint},
                          capture_output=True, text=True, cwd=Path(env["VAE_SCRATCH"]).parent)
    if done.returncode:
        sys.exit(f"{what} failed:\n{done.stderr[-4000:]}")
    requests = proxy.taken()
    lines = done.stdout.strip().splitlines()
    result, windows = json.loads(lines[-2]), json.loads(lines[-1])
    assert result["failed"] == [], result["failed"]
    print(f"{what}: {len(requests)} requests in {result['seconds']:.2f} s (through the proxy)")
    for name, counter in summary(requests).items():
        print(f"  by {name}: " + ", ".join(f"{key} {n}" for key, n in counter.most_common()))
    print("  by step: " + ", ".join(f"{key} {n}" for key, n in by_stage(requests, windows).most_common()))
    if log is not None:
        with log.open("a") as out:
            for request in requests:
                out.write(json.dumps({"build": what, "step": step_of(request, windows), "kind": request.kind,
                                      "status": request.status, "path": request.path}) + "\n")
    return len(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (0: count the requests only)")
    parser.add_argument("--baseline", type=Path, help="a checkout of the earlier code, to time on disk too")
    parser.add_argument("--requests-log", type=Path, help="write every counted request (build, step, kind, status, "
                        "path) to this file, one JSON line each")
    parser.add_argument("--server", choices=("uvicorn", "werkzeug"), default="uvicorn",
                        help="serve moto's S3 app with keep-alive connections (uvicorn, as a real store does) "
                        "or with `moto_server` (Werkzeug: a new connection per request)")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT))
    from vae_pipeline.sample.generator import generate

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    aws = {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    os.environ.update(aws)
    command = [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)] \
        if args.server == "werkzeug" else [sys.executable, "-c", MOTO_KEEP_ALIVE, str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                fs.mkdir("bench")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with tempfile.TemporaryDirectory(prefix="vae-bench-s3-") as tmp:
            scratch = Path(tmp)
            # no stored host label drifts: none is rehosted (with a time) at build time, so every
            # build writes the same bytes
            sample = generate(scratch / "runs", PROJECT / "meta", series=3, episodes=6, seed=0, bad=False,
                              contest=True, drifted=0)
            fs.put(f"{sample.root}/", "bench/runs", recursive=True)
            best: dict[str, float] = {}
            steps_of_best: dict[str, dict[str, float]] = {}
            outputs: dict[str, dict[str, bytes]] = {}
            modes = ["disk", "bucket"] + (["baseline"] if args.baseline else [])
            for round_number in range(args.repeat):
                for mode in modes:
                    root = scratch / f"{mode}-{round_number}"
                    if mode == "bucket":
                        prefix = f"bench/{round_number}"
                        env = settings(root, f"s3://{prefix}/home", f"s3://{prefix}/dataset")
                        server_cpu = cpu_seconds(server.pid)
                        seconds, steps = timed(PROJECT, "s3://bench/runs", env["VAE_DATASET_DIR"], env)
                        print(f"  the S3 server's own CPU time during that build: "
                              f"{cpu_seconds(server.pid) - server_cpu:.1f} s (on the same cores)")
                        outputs[mode] = bucket_bytes(fs, f"{prefix}/dataset")
                    else:
                        env = settings(root, str(root / "home"), str(root / "dataset"))
                        seconds, steps = timed(args.baseline if mode == "baseline" else PROJECT, str(sample.root),
                                        env["VAE_DATASET_DIR"], env)
                        outputs[mode] = folder_bytes(root / "dataset")
                    if seconds < best.get(mode, float("inf")):
                        steps_of_best[mode] = steps
                    best[mode] = min(best.get(mode, seconds), seconds)
                    print(f"round {round_number + 1}: {mode} {seconds:.2f} s", flush=True)
            if args.repeat:  # --repeat 0: the request counts alone
                load = os.getloadavg()[0]
                print(f"best of {args.repeat}: " + ", ".join(f"{mode} {best[mode]:.2f} s" for mode in modes)
                      + f" (load average {load:.1f} on {os.cpu_count()} cpus)")
                differing = sorted({name for mode in modes for name in set(outputs[mode]) | set(outputs["disk"])
                                    if outputs[mode].get(name) != outputs["disk"].get(name)})
                print(f"same dataset bytes in every build: {not differing}"
                      + (f" (differ: {', '.join(differing[:10])})" if differing else ""))
                ratio = best["bucket"] / best["disk"]
                print(f"where the bucket's best build spent longer, by step: "
                      f"{step_gaps(steps_of_best['bucket'], steps_of_best['disk'])}")
                print(f"bucket / disk: {ratio:.2f} (goal <= 1.5 {'✓' if ratio <= 1.5 else '✗'}; "
                      "the machine is shared: the ratio is noisy)")
                if args.baseline:
                    local = best["disk"] / best["baseline"]
                    print(f"disk / earlier code on disk: {local:.2f} (goal <= 1.05 {'✓' if local <= 1.05 else '✗'})")
            from vae_pipeline_tests.request_counter import CountingProxy

            episodes = len(sample.episodes)
            inputs = len(fs.find("bench/runs"))
            env = settings(scratch / "counted", "s3://bench/counted/home", "s3://bench/counted/dataset")
            with CountingProxy(endpoint) as proxy:
                first = counted(proxy, env, "first build", args.requests_log)
                second = counted(proxy, env, "unchanged second build", args.requests_log)
            budget = 10 * episodes + inputs
            print(f"first build: {first} requests for {episodes} episodes and {inputs} input files: "
                  f"{(first - inputs) / episodes:.1f} per episode beyond one GET per input file "
                  f"(goal <= {budget} in all {'✓' if first <= budget else '✗'})")
            print(f"unchanged second build: {second} requests (goal <= 25 {'✓' if second <= 25 else '✗'})")
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
