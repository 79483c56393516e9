"""A version of each series folder's input from its files' names, sizes and mtimes (no content
read): what every build, sensor tick and planning pass compares to find what changed.

A runs root of 10,000 episodes holds ~340,000 entries; a stat of each is most of an unchanged
build's time, and the kernel's share of it splits across cores. So a root of many series is
fingerprinted by one child process per core, each taking a share of the series: this file run
as a script by the same Python, isolated (`-I -S`), so a child imports the standard library and
nothing else — not the parent's main module, as multiprocessing's children do.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PARALLEL_FROM = 500  # series: below, starting the children costs more than they save


def series_fingerprint(series_path: Path | str) -> str:
    """A version of a series' input: any added, removed, resized or rewritten file changes it.

    A line per entry (path, size, mtime in ns, mode; a symlink listed, never followed) in the
    order of the paths' parts, as sorted `Path`s give them: each folder's entries by name, each
    followed by what it holds."""
    lines: list[str] = []

    def walk(folder: str, prefix: str) -> None:
        try:
            with os.scandir(folder) as found:
                children = sorted(found, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in children:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            path = prefix + entry.name
            lines.append(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_mode}\n")
            if entry.is_dir(follow_symlinks=False):
                walk(entry.path, path + "/")

    walk(str(series_path), "")
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:24]


def series_fingerprints(paths: list[Path] | list[str], *, parallel_from: int = PARALLEL_FROM) -> list[str]:
    """`series_fingerprint` of each folder, in order: from `parallel_from` folders on, by one child
    process per core (a share a child does not answer, this process takes)."""
    folders = [str(path) for path in paths]
    workers = min(os.cpu_count() or 1, 8)
    if len(folders) < parallel_from or workers < 2:
        return [series_fingerprint(folder) for folder in folders]
    shares = [folders[i * len(folders) // workers:(i + 1) * len(folders) // workers] for i in range(workers)]
    with ThreadPoolExecutor(workers) as pool:
        return [value for share in pool.map(_in_child, shares) for value in share]


def _in_child(folders: list[str]) -> list[str]:
    """The folders' fingerprints from a child process (this file as a script), or from this
    process when the child cannot start or does not answer one line a folder."""
    try:
        done = subprocess.run([sys.executable, "-I", "-S", __file__], input=b"\0".join(map(os.fsencode, folders)),
                              capture_output=True, check=False)
        values = done.stdout.decode().split()
        if done.returncode == 0 and len(values) == len(folders):
            return values
    except OSError:
        pass
    return [series_fingerprint(folder) for folder in folders]


if __name__ == "__main__":  # a child of `series_fingerprints`: NUL-separated folders in, a line each out
    sys.stdout.write("".join(f"{series_fingerprint(folder)}\n"
                             for folder in map(os.fsdecode, sys.stdin.buffer.read().split(b"\0")) if folder))
