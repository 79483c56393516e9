"""Peak memory of packing one large episode, vs `tar -I zstd` of the same folder.

    python benchmarks/bench_memory.py [--node-modules-mb 1500] [--transcripts-mb 300] [--video-mb 100]

Writes one episode of ~2 GB to a temp folder — `work/node_modules/` of many real files (cheap
repeated bytes), transcripts (JSONL messages and request blobs with screenshots and planted
secrets, in files of up to 60 MB as the harness writes them), a 100 MB `out.mp4` — then packs
it with `build_bundle` in a child process and prints that process's peak RSS (ru_maxrss of the
child, which holds everything it ever read). Goal: under 400 MB. The same folder packed by
`tar -I 'zstd -12 --long=27'` is measured the same way, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_scrub import _line_pool, _screenshot  # noqa: E402

from vae_pipeline.domain.bundles.bundle import ZSTD_LEVEL, ZSTD_WINDOW_LOG  # noqa: E402
from vae_pipeline.sample.planted import planted_text, planted_values  # noqa: E402

GOAL_MB = 400
TRANSCRIPT_FILE_MB = 60  # the largest transcript file (messages.jsonl, session.jsonl)
BLOB_MB = 5  # one request blob


def _write_lines(path: Path, pool: list[bytes], planted: bytes, size: int, rng: random.Random) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        written = n = 0
        while written < size:
            line = planted if n % 5000 == 2500 else rng.choice(pool)
            out.write(line + b"\n")
            written += len(line) + 1
            n += 1


def generate_episode(folder: Path, node_modules_mb: float, transcripts_mb: float, video_mb: float) -> int:
    """Write the episode; return its size in bytes."""
    rng = random.Random(3)
    values = planted_values(rng)
    planted = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result",
                          "content": [{"type": "text", "text": planted_text(values)}]}]}}).encode()
    pool = _line_pool(rng, [_screenshot(rng) for _ in range(6)])
    left = int(transcripts_mb * 1e6)
    for name in ("messages.jsonl", "transcript/session.jsonl"):
        size = min(left, TRANSCRIPT_FILE_MB * 10**6)
        _write_lines(folder / name, pool, planted, size, rng)
        left -= size
    blob = 0
    while left > 0:  # request blobs: one JSON document each, no stream events
        size = min(left, BLOB_MB * 10**6)
        path = folder / f"transcript/api-request-blob/{blob}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines, total = [], 0
        while total < size:
            line = rng.choice(pool)
            if b"stream_event" not in line:
                lines.append(line)
                total += len(line) + 1
        path.write_bytes(b'{"model": "m", "messages": [' + b",".join(lines) + b"]}")
        left -= size
        blob += 1
    modules = folder / "work/node_modules"
    block = (bytes(range(256)) * 4096)[: 1 << 20]
    left, n = int(node_modules_mb * 1e6), 0
    while left > 0:
        size = min(left, rng.choice((20_000, 80_000, 250_000, 1_000_000)))
        path = modules / f"pkg-{n // 50}/lib/file-{n}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            out.write(f"// {n}\n".encode())
            for start in range(0, size, len(block)):
                out.write(block[: min(len(block), size - start)])
        left -= size
        n += 1
    (folder / "work/assets/vendor").mkdir(parents=True, exist_ok=True)
    (folder / "work/assets/vendor/three.module.js").write_bytes(block * 8)
    (folder / "work/index.html").write_text(f"<html><!-- {planted_text(values)} --></html>")
    (folder / "brief.json").write_text(json.dumps({"brief_id": "ui-product-014"}))
    with (folder / "out.mp4").open("wb") as out:
        for _ in range(int(video_mb)):
            out.write(rng.randbytes(10**6))
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def pack_child(folder: Path, target: Path) -> None:
    """In the child process: pack the folder as the `bundles` asset does, print what it made."""
    from vae_pipeline.domain.bundles.bundle import build_bundle
    from vae_pipeline.domain.episodes.episode_files import episode_members
    from vae_pipeline.domain.scrub.texts import ScrubConfig
    from vae_pipeline.domain.episodes.series import EpisodeEntry

    entry = EpisodeEntry(folder.name, folder.name, folder, False)
    bundle = build_bundle(episode_members(entry, size_limit=None), target, config=ScrubConfig(),
                          image_cache=target.parent / "image-cache")
    print(json.dumps({"archive_size": bundle.archive_size, "members": len(bundle.files),
                      "excluded": len(bundle.excluded), "findings": len(bundle.scrub["findings"])}))


def measured(command: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB of the largest process in the command's tree, its stdout)."""
    wrapper = ("import resource, subprocess, sys\n"
               "out = subprocess.run(sys.argv[1:], check=True, capture_output=True).stdout\n"
               "sys.stdout.buffer.write(out)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", wrapper, *command], check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    *output, peak_kb = result.stdout.strip().splitlines()
    return seconds, int(peak_kb) / 1024, "\n".join(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--node-modules-mb", type=float, default=1500)
    parser.add_argument("--transcripts-mb", type=float, default=300)
    parser.add_argument("--video-mb", type=float, default=100)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        pack_child(Path(args.child[0]), Path(args.child[1]))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        folder = root / "episode"
        start = time.perf_counter()
        size = generate_episode(folder, args.node_modules_mb, args.transcripts_mb, args.video_mb)
        files = sum(1 for p in folder.rglob("*") if p.is_file())
        print(f"episode: {size / 1e6:.0f} MB in {files} files (generated in {time.perf_counter() - start:.0f} s)")
        seconds, ours, output = measured([sys.executable, __file__, "--child", str(folder), str(root / "out/ep.tar.zst")])
        print(f"bundle: {seconds:6.1f} s, peak RSS {ours:6.0f} MB -> {output}")
        print(f"bundle peak RSS {ours:.0f} MB (goal < {GOAL_MB} MB): {'ok' if ours < GOAL_MB else 'OVER'}")
        if shutil.which("zstd") is None:
            print("zstd not installed (apt-get install -y zstd): tar comparison skipped")
            return
        compressor = f"zstd -{ZSTD_LEVEL} --long={ZSTD_WINDOW_LOG} -T{os.cpu_count()}"
        seconds, theirs, _ = measured(["tar", "-C", str(folder), "-I", compressor, "-cf", str(root / "tar.tar.zst"), "."])
        print(f"tar -I '{compressor}': {seconds:6.1f} s, peak RSS {theirs:6.0f} MB "
              f"-> {(root / 'tar.tar.zst').stat().st_size / 1e6:.0f} MB")
        print(f"peak RSS ratio bundle / tar+zstd: {ours / theirs:.2f}")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
