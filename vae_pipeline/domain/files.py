"""Writing outputs so that a crash never leaves half a file where a good one was."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import BinaryIO

from vae_pipeline.domain.processes import host_mark, pid_running

CHUNK = 1 << 20
FILE_MODE = 0o644  # an ordinary file's mode: the dataset is published, the state is shared

# Every temp name the writers below make: `.NAME.HOST-PID-RANDOM.part` (`.old` for a folder being
# swapped out), HOST a mark of the writing host and PID its process, so a sweep can tell the
# leftovers of a killed writer from the files a live one is still writing.
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>[0-9]+)-[A-Za-z0-9_]{8}\.(?P<kind>part|old)$")


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.{host_mark()}-{os.getpid()}-"


@contextmanager
def atomic_writer(path: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write `path` through: a temp file in the same folder, fsynced and renamed into
    place when the block ends, removed if it raises; readers never see half a file.

    `durable=False` skips the fsyncs, for files whose caller makes them durable at once
    (`make_durable`; inside `noting_writes` the file is noted for it) or that check themselves on
    reading (a cache).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".part", dir=path.parent)
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
    elif (noted := _NOTED.get()) is not None:
        noted.append(path)


@contextmanager
def scratch_file(beside: Path) -> Iterator[Path]:
    """An empty temp file in `beside`'s folder, under the writers' temp names (a killed process's
    is swept), for another program to read what is written there; removed when the block ends."""
    beside.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(beside), suffix=".part", dir=beside.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextmanager
def replacing_folder(target: Path) -> Iterator[Path]:
    """A fresh staging folder beside `target` to fill; when the block ends it takes `target`'s place
    whole, and if the block fails it is removed and `target` is left as it was. So a set of files
    that belong together (frames and their labels) is never seen half old, half new: a crash
    while filling leaves the old folder; one between the two renames of the swap leaves it beside
    `target` under a dot-name, and never a mix."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=_temp_prefix(target), suffix=".part", dir=target.parent))
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


_NOTED: ContextVar[list[Path] | None] = ContextVar("vae_noted_writes", default=None)
# files: up to this many written without their fsyncs, each is fsynced; beyond, one os.sync()
SYNC_EACH_UP_TO = 256


@contextmanager
def noting_writes() -> Iterator[list[Path]]:
    """The files `atomic_writer(durable=False)` places in this context while inside, in order: what
    the caller then hands to `make_durable`."""
    noted: list[Path] = []
    token = _NOTED.set(noted)
    try:
        yield noted
    finally:
        _NOTED.reset(token)


def make_durable(paths: Iterable[Path]) -> None:
    """Put files placed without their fsyncs, and the renames that placed them, on disk. While they
    are few (SYNC_EACH_UP_TO), a fsync of each file and folder: `os.sync()` waits for every dirty
    page of the machine, another program's too (a harness writing its runs), so a new series'
    handful of pages would cost what others wrote; beyond, one `os.sync()` costs less than
    thousands of fsyncs (a rehost rewrites every page and manifest). A file removed since needs
    nothing."""
    files = list(dict.fromkeys(Path(p) for p in paths))
    if len(files) > SYNC_EACH_UP_TO:
        os.sync()
        return
    for file in files:
        try:
            fd = os.open(file, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for folder in dict.fromkeys(file.parent for file in files):
        try:
            _fsync_folder(folder)
        except FileNotFoundError:
            continue


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
    if target.exists() and os.path.samefile(source, target):
        return
    tmp = target.with_name(f"{_temp_prefix(target)}{secrets.token_hex(4)}.part")
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)
    # a rename onto another link of the same file does nothing and keeps both names (rename(2))
    tmp.unlink(missing_ok=True)


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
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".part", dir=path.parent)
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


SWEPT = "swept"  # under the home: `<host mark>.json`, the folders that host's last sweep found clean
RACY_NS = 2_000_000_000  # a folder changed this close to a sweep may change again within its clock's tick


def sweep_temp_files(root: Path, record: Path | None = None) -> list[Path]:
    """Remove what killed writers left under `root`: the temp names above whose writer ran on this
    host and is gone (a live writer's are kept; any other file is never touched). A folder swapped
    out (`.old`) whose target is missing — a kill between the two renames — is put back instead.
    Returns what was removed or put back.

    With `record` (this host's own file, outside `root`'s published part), only the folders
    changed since the last sweep are read: creating, removing or renaming an entry changes a
    folder's modification time, so a folder with the inode and time recorded when a sweep found
    it holding no temp name is not listed again (its subfolders are still visited). A folder
    changed within `RACY_NS` of that sweep, by the file system's own clock, is not recorded."""
    swept: list[Path] = []
    mark = host_mark()
    known, now = _sweep_record(record)
    clean: dict[str, list] = {}

    def visit(folder: str, rel: str) -> None:
        try:
            found = os.stat(folder)
        except OSError:
            return
        entry = known.get(rel)
        if isinstance(entry, list) and len(entry) == 3 and entry[:2] == [found.st_ino, found.st_mtime_ns] \
                and isinstance(entry[2], list) and all(isinstance(name, str) for name in entry[2]):
            clean[rel] = entry
            subfolders = entry[2]
        else:
            try:
                with os.scandir(folder) as scan:
                    children = list(scan)
            except OSError:
                return
            subfolders, holds_temp = [], False
            for child in children:
                match = TEMP_NAME.match(child.name)
                if match is None:
                    if child.is_dir(follow_symlinks=False):
                        subfolders.append(child.name)
                    continue
                if match["host"] != mark or pid_running(int(match["pid"])):
                    holds_temp = True
                    continue
                path = Path(child.path)
                target = path.with_name(match["name"])
                if match["kind"] == "old" and not target.exists():
                    os.rename(path, target)
                elif child.is_dir(follow_symlinks=False):
                    shutil.rmtree(path)
                else:
                    path.unlink()
                swept.append(path)
            if not holds_temp and now is not None and found.st_mtime_ns < now - RACY_NS:
                clean[rel] = [found.st_ino, found.st_mtime_ns, sorted(subfolders)]
        for name in sorted(subfolders):
            visit(os.path.join(folder, name), f"{rel}/{name}" if rel else name)

    visit(str(root), "")
    if record is not None:
        write_if_changed(record, json.dumps({"folders": clean}, separators=(",", ":")).encode(), durable=False)
    return swept


def _sweep_record(record: Path | None) -> tuple[dict[str, list], int | None]:
    """What the last sweep with `record` found clean, and the file system's time now (from a file
    written next to it, not this machine's clock: a shared home's server may keep another)."""
    if record is None:
        return {}, None
    record.parent.mkdir(parents=True, exist_ok=True)
    clock = record.with_name(f"{record.name}.clock")
    clock.write_bytes(b"")
    now = clock.stat().st_mtime_ns
    try:
        folders = json.loads(record.read_bytes())["folders"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}, now  # none yet, or unreadable: every folder is read
    return (folders if isinstance(folders, dict) else {}), now
