"""Benchmark: the `episodes` stage alone (parse + validate every episode), against a naive parser.

    python benchmarks/bench_parse.py [--series 4] [--episodes 31] [--repeat 3] [--big-mb 20] [--profile]

Generates a runs root with the project's generator (good episodes only; every third episode is a
`.tar.zst` archive), then times, with no Dagster involved:
  - ours: `parse_episode` over `episode_entries(...)` of every series, as the `episodes` asset
    does (listing, archive member checks, streaming decompression, brief schema validation,
    result.json type checks, message counting);
  - naive: what a user would write without the pipeline: `tar --zstd -xf` each archive into a
    temp dir, then `json.loads` brief.json, result.json and every line of messages.jsonl (no
    validation, no safety checks, no counting).
Reports episodes/s and MB/s of input (bytes on disk: archives compressed, folders as files), per
kind of entry and overall, and the time ratio ours / naive (< 1: ours is faster). The two are
timed interleaved, best of --repeat, after one untimed pass that warms the page cache.

The generator's episodes are small (messages.jsonl of a few KB), so their MB/s mostly measures
per-file and per-episode costs. A second measurement (--big-mb, 0 to skip) copies one generated
episode with messages.jsonl and transcript/session.jsonl replaced by --big-mb MB each of
transcript-like lines (from bench_scrub's line pool), once as a folder and once as an archive,
which is closer to a real run.

The generator draws each series' episodes from the brief banks without repeats, so --episodes is
capped at the number of briefs in meta/ (31 today); use --series for more volume.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vae_pipeline.domain.episodes.episode import parse_episode
from vae_pipeline.domain.episodes.json_schema import SchemaValidator
from vae_pipeline.domain.episodes.series import EpisodeEntry, discover_series, episode_entries
from vae_pipeline.sample.generator import generate, load_briefs

PROJECT = Path(__file__).resolve().parents[1]
META = PROJECT / "meta"


def entry_bytes(entry: EpisodeEntry) -> int:
    """Bytes on disk of an entry: the archive file, or every file of the run folder."""
    if entry.is_archive:
        return entry.path.stat().st_size
    return sum(p.stat().st_size for p in entry.path.rglob("*") if p.is_file())


def all_entries(runs: Path) -> list[tuple[str, EpisodeEntry]]:
    found, _ = discover_series(runs)
    return [(series.series_id, entry) for series in found for entry in episode_entries(series.path)[0]]


def parse_ours(runs: Path, briefs: SchemaValidator) -> dict[bool, float]:
    """The `episodes` stage's work for every series; seconds spent per kind (archive or not)."""
    spent = {False: 0.0, True: 0.0}
    found, _ = discover_series(runs)
    for series in found:
        entries, _ = episode_entries(series.path)
        for entry in entries:
            start = time.perf_counter()
            row = parse_episode(series.series_id, entry, briefs)
            spent[entry.is_archive] += time.perf_counter() - start
            if not row["valid"]:
                raise SystemExit(f"bench_parse: {entry.name} parsed as invalid: {row['error_file']}: "
                                 f"{row['error_reason']}")
    return spent


def _naive_read(folder: Path) -> int:
    json.loads((folder / "brief.json").read_bytes())
    json.loads((folder / "result.json").read_bytes())
    lines = 0
    with (folder / "messages.jsonl").open("rb") as fh:
        for line in fh:
            if line.strip():
                json.loads(line)
                lines += 1
    return lines


def parse_naive(entries: list[tuple[str, EpisodeEntry]], scratch: Path) -> dict[bool, float]:
    """`tar --zstd -xf` + json.loads of the three files, every line of messages.jsonl."""
    spent = {False: 0.0, True: 0.0}
    for _, entry in entries:
        start = time.perf_counter()
        if entry.is_archive:
            target = Path(tempfile.mkdtemp(dir=scratch))
            subprocess.run(["tar", "--zstd", "-xf", str(entry.path), "-C", str(target)], check=True)
            _naive_read(target)
            shutil.rmtree(target)
        else:
            _naive_read(entry.path)
        spent[entry.is_archive] += time.perf_counter() - start
    return spent


def _rate(count: int, size: int, seconds: float) -> str:
    if seconds <= 0:
        return "n/a"
    return f"{count / seconds:7.1f} episodes/s, {size / 1e6 / seconds:6.1f} MB/s"


def best(runs: list[dict[bool, float]]) -> dict[bool, float]:
    """Per kind, the fastest of the repeats (the least disturbed by other load)."""
    return {kind: min(r[kind] for r in runs) for kind in (False, True)}


def _transcript_lines(seed: int, fallback: bytes) -> list[bytes]:
    """Distinct transcript-like message lines (bench_scrub's pool, else the episode's own lines)."""
    try:
        import random

        from bench_scrub import _line_pool, _screenshot

        rng = random.Random(seed)
        return _line_pool(rng, [_screenshot(rng) for _ in range(6)])
    except ImportError:
        return [line for line in fallback.splitlines() if line.strip()]


def make_big(runs: Path, target: Path, megabytes: float, seed: int) -> Path:
    """A runs root of one series: a generated episode with big transcripts, as folder and archive."""
    import random
    import tarfile

    import zstandard

    found, _ = discover_series(runs)
    source = next(e for e in episode_entries(found[0].path)[0] if not e.is_archive)
    series = target / "2026-11-01-big"
    series.mkdir(parents=True)
    shutil.copyfile(found[0].path / "series.json", series / "series.json")
    brief_part = source.episode_id.rpartition("-")[0]
    folder = series / f"{brief_part}-big"
    shutil.copytree(source.path, folder)
    pool = _transcript_lines(seed, (source.path / "messages.jsonl").read_bytes())
    rng = random.Random(seed)
    lines, size = [], 0
    while size < megabytes * 1e6:
        lines.append(rng.choice(pool))
        size += len(lines[-1]) + 1
    big = b"\n".join(lines) + b"\n"
    (folder / "messages.jsonl").write_bytes(big)
    (folder / "transcript" / "session.jsonl").write_bytes(big)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            tar.add(path, arcname=path.relative_to(folder).as_posix())
    (series / f"{brief_part}-bigarc.tar.zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(buffer.getvalue()))
    return target


def run(runs: Path, repeat: int, profile: bool = False, label: str = "") -> dict[str, float]:
    entries = all_entries(runs)
    briefs = SchemaValidator.from_file(META / "brief.schema.json")
    counts = {kind: sum(1 for _, e in entries if e.is_archive == kind) for kind in (False, True)}
    sizes = {kind: sum(entry_bytes(e) for _, e in entries if e.is_archive == kind) for kind in (False, True)}
    print(f"input: {len(entries)} episodes ({counts[False]} folders {sizes[False] / 1e6:.1f} MB, "
          f"{counts[True]} archives {sizes[True] / 1e6:.1f} MB on disk)")
    has_tar_zstd = shutil.which("tar") is not None and shutil.which("zstd") is not None
    if not has_tar_zstd:
        print("tar or zstd not found (apt-get install -y zstd): naive comparison skipped, ours only")
    with tempfile.TemporaryDirectory(prefix="bench-parse-naive-") as tmp:
        scratch = Path(tmp)
        parse_ours(runs, briefs)  # warm the page cache and the imports, untimed
        if has_tar_zstd:
            parse_naive(entries, scratch)
        ours_runs, naive_runs = [], []
        for _ in range(repeat):  # interleaved, so background load hits both alike
            ours_runs.append(parse_ours(runs, briefs))
            if has_tar_zstd:
                naive_runs.append(parse_naive(entries, scratch))
    ours = best(ours_runs)
    total_n, total_b = len(entries), sum(sizes.values())
    result = {"episodes": total_n, "mb": total_b / 1e6, "ours_s": sum(ours.values())}
    print(f"ours  (parse_episode, best of {repeat}):")
    for kind, name in ((False, "folders "), (True, "archives")):
        print(f"  {name} {ours[kind]:6.3f} s  {_rate(counts[kind], sizes[kind], ours[kind])}")
    print(f"  all      {sum(ours.values()):6.3f} s  {_rate(total_n, total_b, sum(ours.values()))}")
    result["ours_eps"] = total_n / sum(ours.values())
    result["ours_mbps"] = total_b / 1e6 / sum(ours.values())
    if naive_runs:
        naive = best(naive_runs)
        print(f"naive (tar --zstd -xf + json.loads, best of {repeat}):")
        for kind, name in ((False, "folders "), (True, "archives")):
            print(f"  {name} {naive[kind]:6.3f} s  {_rate(counts[kind], sizes[kind], naive[kind])}")
        print(f"  all      {sum(naive.values()):6.3f} s  {_rate(total_n, total_b, sum(naive.values()))}")
        ratio = sum(ours.values()) / sum(naive.values())
        result.update(naive_s=sum(naive.values()), ratio=ratio)
        per_kind = ", ".join(f"{name} {ours[k] / naive[k]:.2f}" for k, name in ((False, "folders"), (True, "archives"))
                             if naive[k] > 0)
        print(f"parse ratio ours / naive{label}: {ratio:.2f} ({per_kind}; < 1 means ours is faster, "
              f"and ours also validates, checks members and counts)")
        print(f"parse{label}: ours {_rate(total_n, total_b, sum(ours.values())).replace('  ', ' ').strip()} | "
              f"naive {_rate(total_n, total_b, sum(naive.values())).replace('  ', ' ').strip()}")
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        parse_ours(runs, briefs)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print("\nprofile of one pass of ours (by own time):")
        print("\n".join(line for line in out.getvalue().splitlines()[4:30] if line.strip()))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=31, help="good episodes per series (at most the briefs in meta/)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--big-mb", type=float, default=20.0,
                        help="MB of messages.jsonl in the big-transcript episode (0: skip that measurement)")
    parser.add_argument("--runs", type=Path, help="parse this runs root instead of generating one")
    parser.add_argument("--profile", action="store_true", help="also cProfile one pass of ours")
    args = parser.parse_args(argv)
    print(f"cpus: {os.cpu_count()}")
    if args.runs:
        run(args.runs, args.repeat, args.profile)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        runs = Path(tmp) / "runs"
        episodes = min(args.episodes, len(load_briefs(META)))
        start = time.perf_counter()
        generate(runs, META, series=args.series, episodes=episodes, seed=args.seed, bad=False)
        print(f"generated {args.series} series x {episodes} good episodes in {time.perf_counter() - start:.1f} s")
        run(runs, args.repeat, args.profile)
        if args.big_mb > 0:
            big = make_big(runs, Path(tmp) / "big", args.big_mb, args.seed)
            print(f"\nbig transcripts: one episode with {args.big_mb:g} MB messages.jsonl "
                  f"(+ the same as transcript/session.jsonl), as a folder and as an archive")
            run(big, args.repeat, label=" (big transcripts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
