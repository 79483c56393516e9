"""The episode archive (contract 3, "The archive"): exclusions, slimming, scrub, tar.zst.

The archive is byte-reproducible: members sorted by path, mtime 0, uid/gid 0, empty owner
names, mode 0o644, GNU tar headers (no pax timestamps), one zstd frame at a fixed level and
window, compressed in zstd's multi-threaded mode, whose output is the same for any number of
worker threads (1 or 16), so the bytes do not depend on the machine's cores.

Memory stays bounded whatever the episode's size: each member is read once, as a stream; a
text member is slimmed on its own and spooled to a temp file (the images it moves out must be
known before the tar reaches `images/`), then read back and scrubbed once every member's user
names are known, its result spooled in turn; binary members of a run folder are copied straight
from the input into the tar (images but for their metadata, which is stripped); left-out files
are never read except
the vendored runtimes, hashed in chunks; the tar is compressed as it is written, into a temp
file renamed into place.

`out.mp4` stays in the archive: the contract's list of left-out files is closed, and the archive
is meant to hold the whole episode on its own; `videos/<id>.mp4` is the same bytes, published
for viewing. zstd passes the already-compressed video through at little cost.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import tarfile
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import zstandard

from vae_pipeline.domain.episodes.episode_files import SourceMember
from vae_pipeline.domain.episodes.series import SCRUBBED_NAME_REASON, masked_name, scrub_names
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import CHUNK, atomic_writer, sha256_stream
from vae_pipeline.domain.bundles.image_bytes import image_format, strip_metadata
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig, is_text_member, learn_user_names, scrub_text
from vae_pipeline.domain.bundles.slim import IMAGE_DIR, ImageStore, SlimStats, slim_member

# Level 12 with a 128 MiB long-distance window: request blobs repeat the conversation so far,
# which long-distance matching finds; level 12 keeps an episode of 100 MB under a few seconds.
# A 2^27 window is what every zstd decoder accepts without being told.
ZSTD_LEVEL = 12
ZSTD_WINDOW_LOG = 27
VENDOR_DIR = "work/assets/vendor/"
NODE_MODULES_DIR = "work/node_modules/"
# is_text_member decides from a member's first 64 KiB
TEXT_SNIFF_BYTES = 65536
# an image member is read whole to strip its metadata: a larger one is refused, not read
IMAGE_MEMBER_LIMIT = 64 << 20
_TAR_RECORD = tarfile.RECORDSIZE
_TAR_BLOCK = tarfile.BLOCKSIZE


@dataclass(frozen=True)
class Bundle:
    """The archive (written to a file) and the manifest parts the contract asks of it."""

    archive: Path
    archive_sha256: str
    archive_size: int
    files: list[dict]  # every archive member: {path, size, sha256}, sorted by path
    excluded: list[dict]  # {path, reason}, sorted by path
    vendor_files: list[dict]  # {name, sha256}: name is the path under work/assets/vendor/
    redacted_keys: int
    scrub: dict  # {"placeholders": {kind: n}, "redacted": {kind: n}, "findings": [...]}
    slimmed: dict  # {images, bytes_before, bytes_after, stream_events_dropped}


def exclusion_reason(path: str) -> str | None:
    """Why the contract leaves a member out of the archive, or None to keep it."""
    name = PurePosixPath(path).name
    if path.startswith(VENDOR_DIR):
        return "vendored runtime"
    if path.startswith(NODE_MODULES_DIR):
        return "node_modules"
    if name == ".env" or name.endswith(".env") or name.startswith(".env."):
        return "env file"
    return None


def _check_member_path(path: str) -> None:
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or "\\" in path or ".." in parts or "." in parts:
        raise BadInput(path if not path.startswith("/") else "<absolute path>", "unsafe member path")


@dataclass(frozen=True)
class _Pending:
    """An archive member waiting for the tar: its size and where its bytes are."""

    size: int
    chunks: Callable[[], Iterator[bytes]]  # yields exactly `size` bytes


def _tar_header(path: str, size: int) -> bytes:
    """The member's GNU tar header with every varying field fixed (long names included)."""
    info = tarfile.TarInfo(path)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(tarfile.GNU_FORMAT, tarfile.ENCODING, "surrogateescape")


def _padding(size: int, unit: int) -> int:
    return -size % unit


def _tar_size(headers: dict[str, bytes], pending: dict[str, _Pending]) -> int:
    """What `tarfile` writes: headers, data padded to blocks, two empty blocks, a whole record."""
    size = sum(len(headers[path]) + p.size + _padding(p.size, _TAR_BLOCK) for path, p in pending.items())
    size += 2 * _TAR_BLOCK
    return size + _padding(size, _TAR_RECORD)


class _HashingFile:
    """Writes through to a file, hashing and counting what passes."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.digest, self.size = handle, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


_PARAMETER_NAMES = (
    "format", "compression_level", "window_log", "hash_log", "chain_log", "search_log", "min_match",
    "target_length", "strategy", "write_content_size", "write_checksum", "write_dict_id", "job_size",
    "overlap_log", "force_max_window", "enable_ldm", "ldm_hash_log", "ldm_min_match", "ldm_bucket_size_log",
    "ldm_hash_rate_log", "threads",
)  # fmt: skip
_compressors = threading.local()


def _compressor(level: int, source_size: int, threads: int) -> zstandard.ZstdCompressor:
    """One zstd frame, long-distance matching over a 2^27 window, multi-threaded mode.

    Setting up a multi-threaded context with this window costs more than compressing a
    delivery-size episode, so each thread keeps one per set of parameters (frames are
    independent: a reused context gives the same bytes).
    """
    params = zstandard.ZstdCompressionParameters.from_level(
        level,
        source_size=source_size,
        window_log=ZSTD_WINDOW_LOG,
        enable_ldm=True,
        write_checksum=True,
        write_content_size=True,
        threads=max(threads, 1),  # >= 1: the same bytes for any count (0 would be another format)
    )
    key = tuple(getattr(params, name) for name in _PARAMETER_NAMES)
    kept = _compressors.__dict__.setdefault("by_parameters", {})
    if key not in kept:
        kept[key] = zstandard.ZstdCompressor(compression_params=params)
    return kept[key]


def _copy_chunks(opener: Callable[[], BinaryIO], size: int, path: str) -> Iterator[bytes]:
    """Exactly `size` bytes of a member opened again, in chunks."""
    left = size
    with opener() as handle:
        while left:
            chunk = handle.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
        if left or handle.read(1):
            raise BadInput(path, "changed while the archive was written")


class _Spool:
    """Processed members in one anonymous temp file, read back when the tar is written."""

    def __init__(self, folder: Path) -> None:
        self.file = tempfile.TemporaryFile(dir=folder)
        self.end = 0

    def add(self, *parts: bytes, rest: BinaryIO | None = None) -> _Pending:
        """Append the parts, then the rest of a stream in chunks; the pending member they make."""
        offset = self.end
        for part in parts:
            self.file.write(part)
            self.end += len(part)
        for chunk in iter(lambda: rest.read(CHUNK), b"") if rest is not None else ():
            self.file.write(chunk)
            self.end += len(chunk)
        size = self.end - offset
        return _Pending(size, lambda: self._read(offset, size))

    def _read(self, offset: int, size: int) -> Iterator[bytes]:
        self.file.seek(offset)
        while size:
            chunk = self.file.read(min(CHUNK, size))
            size -= len(chunk)
            yield chunk
        self.file.seek(self.end)


class _Packer:
    """Reads an episode's members once each and remembers what goes into the archive."""

    def __init__(self, config: ScrubConfig, store: ImageStore, spool: _Spool) -> None:
        self.config, self.store, self.spool = config, store, spool
        self.pending: dict[str, _Pending] = {}
        self.excluded: list[dict] = []
        self.vendor_files: list[dict] = []
        self.slim_stats = SlimStats()
        self.placeholders: Counter[str] = Counter()
        self.redacted: Counter[str] = Counter()
        self.findings: list = []
        self.user_names: set[str] = set()  # of every home directory the episode's text names
        self.unscrubbed: dict[str, tuple[_Pending, list[int] | None]] = {}  # slimmed text, its line map

    def add(self, member: SourceMember) -> None:
        path = member.path
        _check_member_path(path)
        reason = exclusion_reason(path)
        if reason is not None:
            self.excluded.append({"path": path, "reason": reason})
            if reason == "vendored runtime":
                with member.open() as handle:
                    self.vendor_files.append({"name": path[len(VENDOR_DIR) :], "sha256": sha256_stream(handle)[1]})
            return
        with member.open() as handle:
            if is_text_member(path):  # by its extension: read whole at once
                self._text(path, handle.read())
                return
            head = handle.read(TEXT_SNIFF_BYTES)
            if is_text_member(path, head):
                self._text(path, head + handle.read())
            elif image_format(head):  # its text chunks and EXIF are not archived
                if member.size > IMAGE_MEMBER_LIMIT:
                    raise BadInput(path, f"image larger than {IMAGE_MEMBER_LIMIT >> 20} MiB: its metadata is not "
                                         "stripped in memory, so it is not archived")
                self.pending[path] = self.spool.add(strip_metadata(head + handle.read()))
            elif member.reopenable:
                self.pending[path] = _Pending(member.size, lambda: _copy_chunks(member.open, member.size, path))
            else:
                self.pending[path] = self.spool.add(head, rest=handle)

    def _text(self, path: str, data: bytes) -> None:
        """Slim (JSON/JSONL) and spool; learn the user names the member's home directories give."""
        slimmed = slim_member(path, data, self.store)
        if slimmed.stats.bytes_before:
            self.slim_stats += slimmed.stats
        self.user_names.update(learn_user_names(slimmed.data))
        self.unscrubbed[path] = (self.spool.add(slimmed.data), slimmed.line_map)

    def scrub_texts(self) -> None:
        """Scrub every text member with every user name met in the episode (contract 3: the
        names of any of its files apply to all); findings name lines of the input file, by the
        name it is archived under."""
        config = self.config.with_usernames(self.user_names)
        for path, (slimmed, line_map) in self.unscrubbed.items():
            result = scrub_text(_joined(slimmed), scrub_line(path, config), config, line_map=line_map)
            self.placeholders.update(result.placeholders)
            self.redacted.update(result.redacted_by_kind)
            self.findings.extend(result.findings)
            self.pending[path] = self.spool.add(result.data)
        self.unscrubbed.clear()

    def name_members(self) -> None:
        """Every member, excluded file and vendored runtime under its name scrubbed with every user
        name met in the episode (a name is input: it reaches the archive, the manifest and the
        tables). A name holding what the scrub reports (a user name as a word, an e-mail), or two
        files whose names scrub to the same one, make the episode bad input."""
        config = self.config.with_usernames(self.user_names)
        paths = [*self.pending, *(entry["path"] for entry in self.excluded)]
        names = [entry["name"] for entry in self.vendor_files]
        scrubbed = scrub_names([*paths, *names], config)
        for path, (_, reported) in zip(paths, scrubbed):
            if reported:
                raise BadInput(masked_name(path, config), f"the file name {SCRUBBED_NAME_REASON}")
        shown = dict(zip(paths, (name for name, _ in scrubbed)))
        named: dict[str, _Pending] = {}
        for path, pending in self.pending.items():
            if shown[path] in named:
                raise BadInput(shown[path], "two files have this name once the scrub has replaced home paths, "
                                            "host or user names in them; rename one")
            named[shown[path]] = pending
        self.pending = named
        self.excluded = [{**entry, "path": shown[entry["path"]]} for entry in self.excluded]
        self.vendor_files = [{**entry, "name": name} for entry, (name, _) in
                             zip(self.vendor_files, scrubbed[len(paths):])]

    def add_images(self) -> None:
        for path, data in self.store.files.items():
            if path in self.pending and _joined(self.pending[path]) != data:
                raise BadInput(path, f"collides with a slimmed image under {IMAGE_DIR}/")
            self.pending[path] = _Pending(len(data), lambda data=data: iter((data,)))
        self.slim_stats += SlimStats(bytes_after=sum(len(data) for data in self.store.files.values()))


def _joined(pending: _Pending) -> bytes:
    return b"".join(pending.chunks())


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    return getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; other C libraries lack it


def _release_freed_memory() -> None:
    """Hand the heap that reading and scrubbing freed back to the system (glibc keeps it
    otherwise) before the compressor allocates its window: the two peaks then do not add up."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _write_tar(out: BinaryIO, headers: dict[str, bytes], pending: dict[str, _Pending], tar_size: int) -> list[dict]:
    """Write the tar in path order, padded to `tar_size`; return every member's {path, size, sha256}."""
    files, written = [], 0
    for path in sorted(pending):
        header = headers[path]
        out.write(header)
        digest, size = hashlib.sha256(), 0
        for chunk in pending[path].chunks():
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
        if size != pending[path].size:
            raise BadInput(path, "changed while the archive was written")
        out.write(b"\0" * _padding(size, _TAR_BLOCK))
        written += len(header) + size + _padding(size, _TAR_BLOCK)
        files.append({"path": path, "size": size, "sha256": digest.hexdigest()})
    out.write(b"\0" * (tar_size - written))
    return files


def build_bundle(
    members: Iterable[SourceMember],
    target: Path,
    *,
    config: ScrubConfig,
    zstd_level: int = ZSTD_LEVEL,
    threads: int = 1,
    image_cache: Path | None = None,
) -> Bundle:
    """Pack an episode's files into `target` (written atomically) and return the manifest parts.

    Order: exclusions, then slimming of JSON/JSONL members, then the scrub of every text member
    with the user names learnt from all of them (findings name lines of the input files), then
    the images, then every name through the same scrub, then the tar.zst. `threads` is
    zstd's worker count (any count gives the same bytes); `image_cache` is the folder of
    slimmed images shared by every build.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    store = ImageStore(cache=image_cache)
    spool = _Spool(target.parent)
    with spool.file:
        packer = _Packer(config, store, spool)
        for member in members:
            packer.add(member)
        packer.scrub_texts()
        packer.add_images()
        packer.name_members()
        headers = {path: _tar_header(path, p.size) for path, p in packer.pending.items()}
        tar_size = _tar_size(headers, packer.pending)
        _release_freed_memory()
        with atomic_writer(target) as handle:
            hashed = _HashingFile(handle)
            tar = _compressor(zstd_level, tar_size, threads).stream_writer(hashed, size=tar_size, closefd=False)
            files = _write_tar(tar, headers, packer.pending, tar_size)
            tar.close()  # ends the frame; not on an error, which would hide it behind zstd's own
    return Bundle(
        archive=target,
        archive_sha256=hashed.digest.hexdigest(),
        archive_size=hashed.size,
        files=files,
        excluded=sorted(packer.excluded, key=lambda e: e["path"]),
        vendor_files=sorted(packer.vendor_files, key=lambda v: v["name"]),
        redacted_keys=sum(packer.redacted.values()),
        scrub={
            "placeholders": dict(sorted(packer.placeholders.items())),
            "redacted": dict(sorted(packer.redacted.items())),
            "findings": [f.as_dict() for f in sorted(packer.findings, key=lambda f: (f.file, f.line, f.kind))],
        },
        slimmed={
            "images": packer.slim_stats.images,
            "bytes_before": packer.slim_stats.bytes_before,
            "bytes_after": packer.slim_stats.bytes_after,
            "stream_events_dropped": packer.slim_stats.stream_events_dropped,
        },
    )
