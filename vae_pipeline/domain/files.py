"""Writing outputs so that a crash never leaves half a file where a good one was."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write through a temp file in the same folder, fsync it, rename: readers never see half.

    `durable=False` skips the fsyncs, for many small files the caller makes durable at once
    (`os.sync()`) before recording that they were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_folder(path.parent)


@contextmanager
def replacing_folder(target: Path) -> Iterator[Path]:
    """A fresh staging folder beside `target` to fill; when the block ends it takes `target`'s place
    whole, and if the block fails it is removed and `target` is left as it was. So a set of files
    that belong together (frames and their labels) is never seen half old, half new: a crash
    while filling leaves the old folder; one between the two renames of the swap leaves it beside
    `target` under a dot-name, and never a mix."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    try:
        yield staging
        old = staging.with_suffix(".old")
        moved = target.exists()
        if moved:
            os.rename(target, old)
        try:
            os.rename(staging, target)
        except BaseException:
            if moved:
                os.rename(old, target)
            raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if moved:
        shutil.rmtree(old)
    _fsync_folder(target.parent)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_if_changed(path: Path, data: bytes, *, durable: bool = True) -> bool:
    """`write_atomic` unless the file already holds `data` (its mtime then stays); True if written."""
    if path.exists() and path.read_bytes() == data:
        return False
    write_atomic(path, data, durable=durable)
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
