"""The scrub's keyword prefilter: Hyperscan against Aho-Corasick (pyahocorasick, ahocorasick-rs).

    python benchmarks/bench_prefilter.py [--mb 30] [--repeat 3]

Scans the transcript files of a generated episode (`bench_scrub.py`'s) for every keyword of the
rule table, without regard to case, each library giving where every keyword occurs, and prints
MB/s (best of --repeat) and the number of hits, which must agree. Aho-Corasick scans a lowered
copy (its automata match bytes as they are); Hyperscan matches case-free itself.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scrub import generate_episode  # noqa: E402
from vae_pipeline.domain.scrub.prefilter import Prefilter  # noqa: E402
from vae_pipeline.domain.scrub.texts import kind_specs  # noqa: E402


def scanners(keywords: list[bytes]) -> dict[str, Callable[[bytes], int]]:
    import ahocorasick
    import ahocorasick_rs

    automaton = ahocorasick.Automaton()
    for i, keyword in enumerate(keywords):
        automaton.add_word(keyword.decode("latin-1"), i)
    automaton.make_automaton()
    rust = ahocorasick_rs.BytesAhoCorasick(keywords)
    hyperscan = Prefilter(keywords)
    return {
        "pyahocorasick (lowered copy)": lambda d: sum(1 for _ in automaton.iter(d.lower().decode("latin-1"))),
        "ahocorasick-rs (lowered copy)": lambda d: len(rust.find_matches_as_indexes(d.lower(), overlapping=True)),
        "hyperscan (Prefilter)": lambda d: sum(map(len, hyperscan.hits(d).values())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-prefilter-"))
    try:
        generate_episode(root, args.mb)
        texts = [p.read_bytes() for p in sorted(root.rglob("*.json*"))]
        size = sum(map(len, texts))
        keywords = sorted({k.lower().encode() for spec in kind_specs() for k in spec.get("keywords", ())})
        print(f"{len(keywords)} keywords of {len(kind_specs())} rows over {size / 1e6:.1f} MB")
        for name, scan in scanners(keywords).items():
            best, hits = float("inf"), 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                hits = sum(scan(d) for d in texts)
                best = min(best, time.perf_counter() - start)
            print(f"  {name:30s} {size / 1e6 / best:8.1f} MB/s  {hits} hits")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
