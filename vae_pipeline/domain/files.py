"""Writing outputs so that a crash never leaves half a file where a good one was."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temp file in the same folder, fsync it, rename: readers never see half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_if_changed(path: Path, data: bytes) -> bool:
    """`write_atomic` unless the file already holds `data` (its mtime then stays); True if written."""
    if path.exists() and path.read_bytes() == data:
        return False
    write_atomic(path, data)
    return True


def link_or_copy(source: Path, target: Path) -> None:
    """Put `source`'s bytes at `target` — a hard link where the file system allows, else a copy —
    through a temp name, so `target` is never half there. `source` is only read."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


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


def create_new(path: Path, data: bytes) -> bool:
    """Write `path` only if no file has that name yet (False if one has): the bytes go to a temp
    file first, then are linked under the name, which fails if another writer got there first.
    Two processes can never both create, nor overwrite, the same file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)
