"""Reading an episode's files from a run folder or a zstd tar archive, safely and as a stream.

An archive is streamed member by member and checked before anything is read from it: no
absolute or `..` names, no links, devices or FIFOs, no more than the size limit unpacked. Files
are read (never extracted next to the input), so a hostile archive cannot write anywhere; the
runs root is only ever opened for reading. Nothing here holds more than the member being read.
"""

from __future__ import annotations

import stat
import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import zstandard

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import sha256_stream
from vae_pipeline.domain.episodes.series import ZSTD_MAGIC, EpisodeEntry, credential_name_reason, masked_name, name_credentials

DEFAULT_SIZE_LIMIT = 4 * 1024**3


@dataclass(frozen=True)
class SourceMember:
    """One file of an episode as it is listed: its path, its size, and how to open it.

    A run folder's file can be opened again later (`reopenable`); an archive member only while
    the listing stands on it, since the archive is read as one stream.
    """

    path: str
    size: int
    open: Callable[[], BinaryIO]
    reopenable: bool


@dataclass
class EpisodeFiles:
    """The listing of an episode (every file and its size), the bytes of the files asked for, and
    what the streamed files' readers made of them (or the BadInput they raised)."""

    sizes: dict[str, int] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    streamed: dict[str, object] = field(default_factory=dict)

    def read(self, name: str) -> object:
        """What the reader of streamed file `name` returned; raises the BadInput it raised."""
        outcome = self.streamed[name]
        if isinstance(outcome, BadInput):
            raise outcome
        return outcome


def episode_members(entry: EpisodeEntry, *, size_limit: int | None = DEFAULT_SIZE_LIMIT) -> Iterator[SourceMember]:
    """Every file of the episode, in listing order, checked as it comes (None: no size limit);
    raises BadInput. A file whose name holds a credential shape makes the episode invalid: its
    name is published (the manifest's files or excluded lists), the credential with it."""
    reader = _archive_members if entry.is_archive else _folder_members
    total = 0
    for member in reader(entry.path):
        kinds = name_credentials(member.path)
        if kinds:
            raise BadInput(masked_name(member.path), credential_name_reason("the file name", kinds))
        total += member.size
        if size_limit is not None and total > size_limit:
            raise BadInput(member.path, f"archive unpacks past the size limit ({size_limit:,} bytes)")
        yield member


def read_episode_files(
    entry: EpisodeEntry,
    wanted: Callable[[str], bool],
    *,
    size_limit: int = DEFAULT_SIZE_LIMIT,
    streamed: Mapping[str, Callable[[BinaryIO], object]] | None = None,
    max_file_bytes: int | None = None,
) -> EpisodeFiles:
    """List every file of the episode and read the ones `wanted` selects; raises BadInput, also
    (before reading it) for a wanted file larger than `max_file_bytes` (None: no such limit).

    A file `streamed` names is never held whole: its reader gets it as an open stream, and the
    BadInput it raises is kept for the caller to raise in its own order of checks."""
    files = EpisodeFiles()
    for member in episode_members(entry, size_limit=size_limit):
        files.sizes[member.path] = member.size
        if streamed and member.path in streamed:
            with member.open() as handle:
                try:
                    files.streamed[member.path] = streamed[member.path](handle)
                except BadInput as exc:
                    files.streamed[member.path] = exc
        elif wanted(member.path):
            if max_file_bytes is not None and member.size > max_file_bytes:
                raise BadInput(member.path, f"is larger than the line limit ({max_file_bytes:,} bytes, "
                                            "VAE_MAX_LINE_BYTES): not read")
            with member.open() as handle:
                files.data[member.path] = handle.read()
    return files


def archive_digests(path: Path) -> dict[str, tuple[int, str]]:
    """(size, sha256) of every member of a zstd tar, read in chunks; raises BadInput."""
    entry = EpisodeEntry(path.name, path.name, path, True)
    found = {}
    for member in episode_members(entry, size_limit=None):
        with member.open() as handle:
            found[member.path] = sha256_stream(handle)
    return found


def _folder_members(root: Path) -> Iterator[SourceMember]:
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise BadInput(name, "is a link or special file, not a regular file")
        yield SourceMember(name, path.stat().st_size, lambda path=path: path.open("rb"), reopenable=True)


def _archive_members(path: Path) -> Iterator[SourceMember]:
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
                    yield SourceMember(name, member.size, lambda member=member: tar.extractfile(member),
                                       reopenable=False)
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
