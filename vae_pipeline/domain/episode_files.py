"""Reading an episode's files from a run folder or a zstd tar archive, safely.

An archive is streamed member by member and checked before anything is read from it: no
absolute or `..` names, no links, devices or FIFOs, no more than the size limit unpacked. Files
are read into memory (never extracted next to the input), so a hostile archive cannot write
anywhere; the runs root is only ever opened for reading.
"""

from __future__ import annotations

import stat
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import zstandard

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.series import ZSTD_MAGIC, EpisodeEntry

DEFAULT_SIZE_LIMIT = 4 * 1024**3


@dataclass
class EpisodeFiles:
    """The listing of an episode (every file and its size) and the bytes of the files asked for."""

    sizes: dict[str, int] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)


def read_episode_files(
    entry: EpisodeEntry,
    wanted: Callable[[str], bool],
    *,
    size_limit: int = DEFAULT_SIZE_LIMIT,
) -> EpisodeFiles:
    """List every file of the episode and read the ones `wanted` selects; raises BadInput."""
    reader = _archive_files if entry.is_archive else _folder_files
    files = EpisodeFiles()
    total = 0
    for name, size, read in reader(entry.path):
        total += size
        if total > size_limit:
            raise BadInput(name, f"archive unpacks past the size limit ({size_limit:,} bytes)")
        files.sizes[name] = size
        if wanted(name):
            files.data[name] = read()
    return files


Member = tuple[str, int, Callable[[], bytes]]


def _folder_files(root: Path) -> Iterator[Member]:
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise BadInput(name, "is a link or special file, not a regular file")
        yield name, path.stat().st_size, path.read_bytes


def _archive_files(path: Path) -> Iterator[Member]:
    archive = path.name
    with path.open("rb") as raw:
        if raw.read(4) != ZSTD_MAGIC:
            raise BadInput(archive, "is not a zstd archive (wrong magic bytes)")
        raw.seek(0)
        stream = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for index, member in enumerate(tar, start=1):
                    name = _checked_member_name(member, index, archive)
                    if member.isdir():
                        continue
                    handle = tar.extractfile(member)
                    yield name, member.size, handle.read
        except (tarfile.TarError, zstandard.ZstdError, EOFError, OSError) as exc:
            raise BadInput(archive, f"is not a readable zstd tar or is truncated ({type(exc).__name__})") from None


def _checked_member_name(member: tarfile.TarInfo, index: int, archive: str) -> str:
    """The member's normalised name, or BadInput; an unsafe name is never echoed (it may be a home path)."""
    pure = PurePosixPath(member.name)
    if member.name.startswith("/") or pure.is_absolute():
        raise BadInput(archive, f"archive member #{index} has an absolute path")
    if ".." in pure.parts:
        raise BadInput(archive, f"archive member #{index} has a path containing '..'")
    raw = pure.as_posix()
    if member.issym() or member.islnk():
        raise BadInput(raw, "archive member is a link")
    if member.ischr() or member.isblk():
        raise BadInput(raw, "archive member is a device")
    if member.isfifo():
        raise BadInput(raw, "archive member is a FIFO")
    if not (member.isreg() or member.isdir()):
        raise BadInput(raw, "archive member is not a regular file")
    return raw
