"""The episode archive (contract 3, "The archive"): exclusions, slimming, scrub, tar.zst.

The archive is byte-reproducible: members sorted by path, mtime 0, uid/gid 0, empty owner
names, mode 0o644, GNU tar headers (no pax timestamps), one zstd frame at a fixed level, window
and worker count (zstd's multi-threaded output depends on the worker count, so it is fixed).

`out.mp4` stays in the archive: the contract's list of left-out files is closed, and the archive
is meant to hold the whole episode on its own; `videos/<id>.mp4` is the same bytes, published
for viewing. zstd passes the already-compressed video through at little cost.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import zstandard

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.scrub import ScrubConfig, is_text_member, scrub_text
from vae_pipeline.domain.slim import IMAGE_DIR, ImageStore, SlimStats, slim_member

# Level 12 with a 128 MiB long-distance window: request blobs repeat the conversation so far,
# which long-distance matching finds; level 12 keeps an episode of 100 MB under a few seconds.
# A 2^27 window is what every zstd decoder accepts without being told.
ZSTD_LEVEL = 12
ZSTD_WINDOW_LOG = 27
# A fixed worker count, never "all cores": zstd's output depends on the worker count, so a
# fixed one gives the same bytes on every machine (libzstd's own determinism tests check this).
ZSTD_THREADS = 2
VENDOR_DIR = "work/assets/vendor/"
NODE_MODULES_DIR = "work/node_modules/"


@dataclass(frozen=True)
class Bundle:
    """The archive and the manifest parts the contract asks of it."""

    archive: bytes
    archive_sha256: str
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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tar(members: Mapping[str, bytes]) -> bytes:
    """An uncompressed tar of the members, in path order, with every varying field fixed."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(members):
            data = members[path]
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def compress(data: bytes, level: int = ZSTD_LEVEL) -> bytes:
    """One zstd frame, long-distance matching over a 2^27 window, a fixed number of workers."""
    params = zstandard.ZstdCompressionParameters.from_level(
        level,
        source_size=len(data),
        window_log=ZSTD_WINDOW_LOG,
        enable_ldm=True,
        write_checksum=True,
        write_content_size=True,
        threads=ZSTD_THREADS,
    )
    return zstandard.ZstdCompressor(compression_params=params).compress(data)


def build_bundle(
    members: Mapping[str, bytes], *, config: ScrubConfig, zstd_level: int = ZSTD_LEVEL
) -> Bundle:
    """Build the episode's archive and manifest parts from its files (relative path -> bytes).

    Order: exclusions, then slimming of JSON/JSONL members, then the scrub of every text member
    (findings name lines of the input files), then the images, then the tar.zst.
    """
    kept: dict[str, bytes] = {}
    excluded, vendor_files = [], []
    for path in sorted(members):
        _check_member_path(path)
        reason = exclusion_reason(path)
        if reason is None:
            kept[path] = members[path]
            continue
        excluded.append({"path": path, "reason": reason})
        if reason == "vendored runtime":
            vendor_files.append({"name": path[len(VENDOR_DIR) :], "sha256": _sha256(members[path])})

    store = ImageStore()
    slim_stats = SlimStats()
    placeholders: Counter[str] = Counter()
    redacted: Counter[str] = Counter()
    findings = []
    archived: dict[str, bytes] = {}
    for path, data in kept.items():
        slimmed = slim_member(path, data, store)
        if slimmed.stats.bytes_before:
            slim_stats += slimmed.stats
        data = slimmed.data
        if is_text_member(path, data):
            result = scrub_text(data, path, config, line_map=slimmed.line_map)
            data = result.data
            placeholders.update(result.placeholders)
            redacted.update(result.redacted_by_kind)
            findings.extend(result.findings)
        archived[path] = data

    for path, data in store.files.items():
        if path in archived and archived[path] != data:
            raise BadInput(path, f"collides with a slimmed image under {IMAGE_DIR}/")
        archived[path] = data
    image_bytes = sum(len(data) for data in store.files.values())
    slim_stats += SlimStats(bytes_after=image_bytes)

    archive = compress(_tar(archived), zstd_level)
    return Bundle(
        archive=archive,
        archive_sha256=_sha256(archive),
        files=[{"path": p, "size": len(d), "sha256": _sha256(d)} for p, d in sorted(archived.items())],
        excluded=excluded,
        vendor_files=vendor_files,
        redacted_keys=sum(redacted.values()),
        scrub={
            "placeholders": dict(sorted(placeholders.items())),
            "redacted": dict(sorted(redacted.items())),
            "findings": [f.as_dict() for f in sorted(findings, key=lambda f: (f.file, f.line, f.kind))],
        },
        slimmed={
            "images": slim_stats.images,
            "bytes_before": slim_stats.bytes_before,
            "bytes_after": slim_stats.bytes_after,
            "stream_events_dropped": slim_stats.stream_events_dropped,
        },
    )

