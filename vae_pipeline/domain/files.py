"""Writing outputs so that a crash never leaves half a file where a good one was."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20
FILE_MODE = 0o644  # an ordinary file's mode: the dataset is published, the state is shared


@contextmanager
def atomic_writer(path: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write `path` through: a temp file in the same folder, fsynced and renamed into
    place when the block ends, removed if it raises; readers never see half a file.

    `durable=False` skips the fsyncs, for files whose caller makes them durable at once
    (`os.sync()`) or that check themselves on reading (a cache).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes the file private; what we write is read by others
        with os.fdopen(fd, "wb") as handle:
            yield handle
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


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write `data` to `path` through `atomic_writer`."""
    with atomic_writer(path, durable=durable) as handle:
        handle.write(data)


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


def sha256_stream(handle: BinaryIO) -> tuple[int, str]:
    """(bytes read, sha256) of a stream, read in 1 MiB chunks."""
    digest, total = hashlib.sha256(), 0
    for chunk in iter(lambda: handle.read(CHUNK), b""):
        digest.update(chunk)
        total += len(chunk)
    return total, digest.hexdigest()


def sha256_file(path: Path) -> str:
    with Path(path).open("rb") as fh:
        return sha256_stream(fh)[1]


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
