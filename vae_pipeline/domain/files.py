"""Writing outputs so that a crash never leaves half a file where a good one was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temp name in the same folder, flush to disk, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_version(paths: list[Path]) -> str:
    """A version of a few small files from their names and bytes."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes() if path.exists() else b"<absent>")
    return digest.hexdigest()[:24]
