"""Run every benchmark in one process, with modest sizes, and print each one's ratios at the end.

    python benchmarks/run_all.py [--only facts,scrub,bundles,parse,rehost,backfill,memory,review,leaderboard,scale] [--full]

  facts   bench_facts.py   renders step vs ffmpeg blackdetect+freezedetect and decode-only
  scrub   bench_scrub.py   scrub vs detect-secrets
  bundles bench_bundles.py the `bundles` step on 12 delivery-size episodes vs detect-secrets
                           and vs tar + zstd at the archives' level and window, cores at once
  parse   bench_parse.py   the `episodes` stage vs tar --zstd -xf + json.loads
  rehost  bench_rehost.py  a rehost of every label vs a full build (goal <= 5 %), HD clips
  memory  bench_memory.py  peak RSS packing a ~2 GB episode (goal < 400 MB) vs tar + zstd
  review  bench_review.py  the review site for 500 episodes, full and after one new series (<= 5 s, <= 1 s)
  leaderboard  bench_leaderboard.py  Bradley–Terry + bootstrap vs scikit-learn's arena recipe
  backfill bench_backfill.py runs created by a build and a rehost over many series (goal <= 10)
  scale   bench_scale.py   unchanged build, one new series, rehost and the review site's rewrites at N episodes

The sizes below keep the whole run under ~15 minutes on a 2-core machine; --full runs each
benchmark with its own defaults instead. An external tool that is missing (ffmpeg, zstd,
detect-secrets) skips only the comparison that needs it, with a line saying so; the rest of that
benchmark still runs (scikit-learn, for the leaderboard). Exit status: 0 when every benchmark ran, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

# name -> (module, argv for the modest run, patterns of the lines to repeat in the summary)
BENCHES: dict[str, tuple[str, list[str], list[str]]] = {
    "facts": ("bench_facts", ["--repeat", "2", "--instructions"],
              [r"^cpus: ", r"^best of ", r"^renders step ", r"^ranges: ", r"ffmpeg not found", r"^instructions on ",
               r"by library: ", r"valgrind not found",
               r"^analysis picture as ", r"^the 14 JPEGs from "]),
    "scrub": ("bench_scrub", ["--mb", "50", "--ds-mb", "2"],
              [r"^scrub: ", r"^detect-secrets: ", r"planted kinds caught", r"scrub / detect-secrets",
               r"^all ", r"not installed"]),
    "bundles": ("bench_bundles", ["--episodes", "12", "--ds-mb", "5"],
                [r"^cpus: ", r"^bundles, ", r"planted kinds caught", r"^detect-secrets 1", r"throughput: ",
                 r"^tar -I", r"bundles/tar time ratio", r"first build's floor", r"one episode at a time", r"not installed", r"^best of"]),
    "parse": ("bench_parse", ["--series", "3", "--episodes", "31", "--repeat", "3", "--big-mb", "20"],
              [r"^input: ", r"^parse( \(big transcripts\))?: ", r"parse ratio", r"naive comparison skipped",
               r"^  all "]),
    # delivery-size clips like the real harness (~3.5 s to generate one HD episode on 2 cores)
    "rehost": ("bench_rehost", ["--series", "3", "--episodes", "8", "--hd"],
               [r"^cpus: ", r"^best of \d+: ", r"rehost ratio", r"^  (full build|rehost to|rehost back|no-op build)",
                r"^    steps: ", r"^(ok|FAIL): ", r"WARNING failed run"]),
    "review": ("bench_review", ["--episodes", "500", "--repeat", "3"],
               [r"^sample: ", r"^best of \d+: ", r"incremental / full", r"^(ok|FAIL): "]),
    # scikit-learn's 1,000 rounds per axis take minutes: time 100 and scale (the line says so)
    "leaderboard": ("bench_leaderboard", ["--sklearn-rounds", "100"],
                    [r"^cpus: ", r"^input: ", r"^ours: ", r"^sklearn", r"fit ratio", r"largest rating difference",
                     r"^whole leaderboard"]),
    "memory": ("bench_memory", [], [r"^episode: ", r"^bundle peak RSS", r"^tar -I", r"peak RSS ratio", r"not installed"]),
    "backfill": ("bench_backfill", ["--series", "50"], [r"^cpus: ", r"^after ", r"^FAIL: "]),
    "scale": ("bench_scale", ["--episodes", "100", "--floor", "100"],
              [r"^cpus: ", r"^Dagster floor", r"^a ranged run over 5 partitions that fails", r"^N=\d+ results", r"^  (full build|unchanged|new series above|rehost|review site)",
               r"^FAIL "]),
}


class Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy, so the summary can quote the ratio lines."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.copy.write(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def call_main(main: Callable, module_file: str, argv: list[str]) -> int:
    """main(argv) when it takes argv; else main() with sys.argv set (argparse reads it)."""
    if inspect.signature(main).parameters:
        result = main(argv)
    else:
        saved = sys.argv
        sys.argv = [module_file, *argv]
        try:
            result = main()
        finally:
            sys.argv = saved
    return result if isinstance(result, int) else 0


def _option(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


# ------------------------------------------------------------ fallbacks when a tool is missing


def facts_without_ffmpeg(module, argv: list[str]) -> int:
    """bench_facts needs ffmpeg for everything it compares; time the step alone on the same clips."""
    repeat = int(_option(argv, "--repeat", "3"))
    workers = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        clips = module.make_clips(Path(tmp) / "clips", int(_option(argv, "--clips", "12")))
        jobs = [module.RenderJob(clip, partial(module.sample_times, brief=module.BRIEF), Path(tmp) / "frames" / clip.stem,
                                 module.JPEG_QUALITY) for clip in clips]
        seconds = min(module.timed(lambda: module.ours(jobs, workers))[0] for _ in range(repeat))
        print(f"renders step alone: {seconds:.2f} s for {len(clips)} clips (best of {repeat}; no ffmpeg to compare with)")
    return 0


def scrub_without_detect_secrets(module, argv: list[str]) -> int:
    """bench_scrub.main() with the detect-secrets comparison left out."""
    megabytes = float(_option(argv, "--mb", "100"))
    root = Path(tempfile.mkdtemp(prefix="bench-scrub-"))
    try:
        folder = root / "episode"
        values = module.generate_episode(folder, megabytes)
        module.bench_scrub(folder, values, module.write_table_texts(root, module.table_texts()))
    finally:
        shutil.rmtree(root)
    return 0


def run_one(name: str, argv: list[str]) -> tuple[int, str]:
    module_name = BENCHES[name][0]
    module = importlib.import_module(module_name)
    tee = Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        if name == "facts" and shutil.which("ffmpeg") is None:
            print("ffmpeg not found (apt-get install -y ffmpeg): facts vs ffmpeg comparison skipped")
            code = facts_without_ffmpeg(module, argv)
        elif name == "leaderboard" and importlib.util.find_spec("sklearn") is None:
            print("scikit-learn not installed (pip install -e '.[bench]'): leaderboard comparison skipped")
            code = call_main(module.main, module.__file__, [*argv, "--no-sklearn"])
        elif name == "scrub" and importlib.util.find_spec("detect_secrets") is None:
            print("detect-secrets not installed (pip install -e '.[bench]'): scrub vs detect-secrets "
                  "comparison skipped")
            code = scrub_without_detect_secrets(module, argv)
        else:
            code = call_main(module.main, module.__file__, argv)
    return code, tee.copy.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of " + ", ".join(BENCHES))
    parser.add_argument("--full", action="store_true", help="each benchmark's own default sizes")
    args = parser.parse_args(argv)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")

    started = time.perf_counter()
    outcomes: dict[str, tuple[str, float, str]] = {}
    for name in chosen:
        bench_argv = [] if args.full else BENCHES[name][1]
        print(f"\n======== {name}: {BENCHES[name][0]}.py {' '.join(bench_argv)}", flush=True)
        start = time.perf_counter()
        try:
            code, output = run_one(name, bench_argv)
            status = "ok" if code == 0 else f"exit {code}"
        except SystemExit as exc:  # argparse, or a benchmark that exits
            status, output = f"exit {exc.code}", ""
        except Exception:  # noqa: BLE001  one benchmark's failure must not stop the others
            traceback.print_exc()
            status, output = "error", ""
        outcomes[name] = (status, time.perf_counter() - start, output)
        sys.stdout.flush()

    print(f"\n======== summary ({time.perf_counter() - started:.0f} s in all)")
    for name, (status, seconds, output) in outcomes.items():
        print(f"{name} [{status}, {seconds:.0f} s]")
        patterns = [re.compile(p) for p in BENCHES[name][2]]
        for line in output.splitlines():
            if any(p.search(line) for p in patterns):
                print(f"  {line.strip()}")
    return 0 if all(status == "ok" for status, _, _ in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
