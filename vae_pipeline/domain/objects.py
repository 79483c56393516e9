"""Where the pipeline's files live: a local folder or an `s3://bucket/prefix`, through one path
type (`UPath`, over fsspec and s3fs).

The stages call the same functions for both; what differs is how a write is made atomic. On
disk a temp file is renamed into place; on object storage a single PUT (or a multipart upload,
which appears whole when it completes) is atomic already. Creating a file only if it is absent
is a hard link on disk and `If-None-Match: *` on a bucket; replacing a pointer only if nobody
else did is `If-Match` with the ETag read before. Listings of a bucket are refreshed before they
are trusted (s3fs caches them). The endpoint, region and credentials are the AWS client's own
(the standard AWS variables or a profile): they never pass through this module.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from upath import UPath

from vae_pipeline.domain.files import (
    CHUNK,
    atomic_writer,
    create_new,
    link_or_copy,
    sha256_stream,
    write_atomic,
)

LOCAL_PROTOCOLS = ("", "file", "local")


def location(url: str | Path) -> UPath:
    """The folder or bucket prefix `url` names (`s3://bucket/prefix` or a path); a UPath as it is."""
    return url if isinstance(url, UPath) else UPath(url)


def absolute(url: str | Path) -> str:
    """A folder setting made absolute against the current folder; a bucket URL as it is."""
    url = str(url)
    return url if "://" in url else str(Path(url).resolve())


def scratch_root(setting: str, home: str) -> Path:
    """This machine's own working folder: VAE_SCRATCH, else `<home>/scratch` for a local home,
    else a temp folder named after the bucket URL (each machine has its own)."""
    if setting:
        return Path(setting)
    if "://" not in home:
        return Path(home) / "scratch"
    return Path(tempfile.gettempdir()) / f"vae-scratch-{hashlib.sha256(home.encode()).hexdigest()[:12]}"


def machine_folder(home: str, scratch: str = "") -> Path:
    """Where this machine keeps what belongs to it beside a home: the home itself on disk, its
    scratch folder for a bucket home (locks, the embedded instance)."""
    return Path(home) if "://" not in home else scratch_root(scratch, home)


def is_local(path: UPath) -> bool:
    path = location(path)
    return path.protocol in LOCAL_PROTOCOLS


def local_path(path: UPath) -> Path:
    path = location(path)
    return Path(path.path)


def refreshed(path: UPath) -> UPath:
    """`path` with the client's cached listings of it dropped: what another writer added since is seen."""
    path = location(path)
    if not is_local(path):
        path.fs.invalidate_cache(path.path)
    return path


def put_bytes(path: UPath, data: bytes) -> None:
    """Write `data` at `path` whole: readers see the old bytes or the new, never half."""
    path = location(path)
    if is_local(path):
        write_atomic(local_path(path), data)
    else:
        path.fs.pipe_file(path.path, data)


def put_file(path: UPath, source: Path) -> None:
    """Put a local file's bytes at `path` whole (a hard link or copy on disk, an upload on a bucket)."""
    path = location(path)
    if is_local(path):
        link_or_copy(source, local_path(path))
    else:
        path.fs.put_file(str(source), path.path)


def put_new(path: UPath, data: bytes) -> bool:
    """Create `path` only if nothing has that name yet; False if another writer got there first."""
    path = location(path)
    if is_local(path):
        return create_new(local_path(path), data)
    try:
        path.fs.pipe_file(path.path, data, mode="create")  # If-None-Match: *
    except FileExistsError:
        return False
    return True


def etag(path: UPath) -> str | None:
    """The object's ETag (None on disk, or when it is absent)."""
    path = location(path)
    if is_local(path):
        return None
    try:
        return path.fs.info(path.path, refresh=True).get("ETag")
    except FileNotFoundError:
        return None


def put_if_match(path: UPath, data: bytes, expected: str | None) -> bool:
    """Replace `path` only if it still holds what was read before: ETag `expected`, or absent when
    `expected` is None; False if another writer replaced it in between (`If-Match` / `If-None-Match`).
    On disk the pointer's writer holds the series (one run per series at a time), so a plain
    atomic write is the same."""
    path = location(path)
    if is_local(path):
        put_bytes(path, data)
        return True
    if expected is None:
        return put_new(path, data)
    try:
        path.fs.pipe_file(path.path, data, IfMatch=expected)
    except OSError as exc:
        if "pre-condition" in str(exc).lower() or "precondition" in str(exc).lower():
            return False
        raise
    return True


def read_bytes(path: UPath) -> bytes:
    path = location(path)
    return path.read_bytes()


def exists(path: UPath) -> bool:
    path = location(path)
    return refreshed(path).exists()


def size_of(path: UPath) -> int:
    path = location(path)
    return refreshed(path).stat().st_size


def write_if_changed(path: UPath, data: bytes) -> bool:
    """`put_bytes` unless `path` already holds `data` (its mtime or ETag then stays); True if written."""
    path = location(path)
    if holds(path, data):
        return False
    put_bytes(path, data)
    return True


def holds(path: UPath, data: bytes) -> bool:
    """Whether `path` holds exactly `data` (size first, then the bytes or a single-part upload's ETag)."""
    path = location(path)
    try:
        if size_of(path) != len(data):
            return False
    except FileNotFoundError:
        return False
    tag = etag(path)
    if tag and "-" not in tag:  # a single-part upload's ETag is the MD5 of its bytes
        return tag.strip('"') == hashlib.md5(data, usedforsecurity=False).hexdigest()
    return path.read_bytes() == data


def sha256_of(path: UPath) -> str:
    path = location(path)
    with path.open("rb") as handle:
        return sha256_stream(handle)[1]


def same_file(target: UPath, source: Path) -> bool:
    """Whether `target` holds the bytes of the local file `source` (size, then content)."""
    target = location(target)
    try:
        if size_of(target) != source.stat().st_size:
            return False
    except FileNotFoundError:
        return False
    if is_local(target):
        return local_path(target).samefile(source) or sha256_of(target) == _sha256_local(source)
    tag = etag(target)
    if tag and "-" not in tag:
        return tag.strip('"') == _md5_local(source)
    return sha256_of(target) == _sha256_local(source)


def _sha256_local(path: Path) -> str:
    with path.open("rb") as handle:
        return sha256_stream(handle)[1]


def _md5_local(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def listing(folder: UPath) -> dict[str, dict]:
    """Every file under `folder` by its name relative to it, with what the store says of it
    (size, and ETag on a bucket), from a fresh listing; empty if there is none."""
    folder = location(folder)
    fs = refreshed(folder).fs
    if not fs.exists(folder.path):
        return {}
    return {name[len(folder.path):].lstrip("/"): info for name, info in fs.find(folder.path, detail=True).items()
            if info.get("type") == "file"}


def files_under(folder: UPath) -> Iterator[tuple[str, UPath]]:
    """(relative name, path) of every file under `folder`, sorted."""
    folder = location(folder)
    for name in sorted(listing(folder)):
        yield name, folder / name


def remove(path: UPath) -> None:
    path = location(path)
    path.unlink(missing_ok=True)


def listed_folders(folder: UPath) -> list[str]:
    """The names of the folders (common prefixes) directly under a bucket prefix, fresh."""
    folder = location(folder)
    return sorted(Path(info["name"]).name for info in refreshed(folder).fs.ls(folder.path, detail=True)
                  if info.get("type") == "directory")


def fingerprint_entries(folder: UPath) -> list[str]:
    """A line per file under a bucket prefix — name, size and ETag — for a version of what it
    holds (a bucket keeps no mtimes a writer set, and an ETag changes with the bytes)."""
    folder = location(folder)
    return [f"{name}\0{info.get('size')}\0{info.get('ETag')}\n" for name, info in sorted(listing(folder).items())]


class Mirror:
    """A local copy of a bucket prefix, kept fresh by ETag, for the code that needs real files
    (PyAV, tar, the review site's renderer); on disk it is the folder itself and costs nothing.

    Each machine has its own (in `VAE_SCRATCH`): nothing in it is trusted over the bucket — a
    file is fetched again when its ETag there differs from the one it was fetched with."""

    def __init__(self, remote: UPath, local: Path):
        self.remote = remote
        self.local = local_path(remote) if is_local(remote) else local
        self._tags = self.local.parent / f"{self.local.name}.etags"

    @property
    def is_remote(self) -> bool:
        return not is_local(self.remote)

    def path(self, rel: str) -> Path:
        return self.local / rel

    def fetch(self, rel: str, tag: str | None = None) -> Path:
        """The local copy of `rel`, downloaded if missing or changed (`tag`: its ETag, if known)."""
        target = self.local / rel
        if not self.is_remote:
            return target
        tag = tag or etag(self.remote / rel)
        if tag is None:
            raise FileNotFoundError(f"{rel} is not in {self.remote.name or 'the bucket'}")
        sidecar = self._tags / rel
        if target.is_file() and sidecar.is_file() and sidecar.read_text() == tag:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with (self.remote / rel).open("rb") as source, atomic_writer(target, durable=False) as handle:
            for chunk in iter(lambda: source.read(CHUNK), b""):
                handle.write(chunk)
        write_atomic(sidecar, tag.encode(), durable=False)
        return target

    def sync(self, rel: str = "") -> Path:
        """The local copy of every file under `rel`, made equal to the bucket's (files gone there
        are removed here)."""
        folder = self.local / rel if rel else self.local
        if not self.is_remote:
            return folder
        prefix = (self.remote / rel) if rel else self.remote
        listed = {name: info.get("ETag") for name, info in listing(prefix).items()}
        for name, tag in sorted(listed.items()):
            self.fetch(f"{rel}/{name}" if rel else name, tag)
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                if path.is_file() and path.relative_to(folder).as_posix() not in listed:
                    path.unlink()
                    (self._tags / path.relative_to(self.local)).unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def publish(self, path: Path, rel: str | None = None) -> str:
        """Upload a file written in the local copy to its place on the bucket (`rel`, by default
        the same name), unless that already holds its bytes; its name relative to the root."""
        rel = rel or path.relative_to(self.local).as_posix()
        if self.is_remote:
            if not same_file(self.remote / rel, path):
                put_file(self.remote / rel, path)
            tag = etag(self.remote / rel)
            if tag:
                write_atomic(self._tags / rel, tag.encode(), durable=False)
        return rel

    def publish_tree(self, folder: Path) -> None:
        """Upload every file under a local folder whose bytes the bucket does not hold yet, and
        remove the objects under it that are no longer here (on disk: nothing to do)."""
        if not self.is_remote:
            return
        rel = folder.relative_to(self.local).as_posix()
        stale = set(listing(self.remote / rel))
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.publish(path)
                stale.discard(path.relative_to(folder).as_posix())
        for name in sorted(stale):
            remove(self.remote / rel / name)

    def publish_folder(self, folder: Path, version: str) -> str:
        """Make a local folder of files that belong together (frames and their labels) part of
        the root; the name to read it by.

        On disk it was swapped into place whole already. On a bucket, where nothing can be
        renamed, its files go to new keys under `<name>@<version>/` and the pointer
        `<name>.current` names that version, replaced only if no other writer replaced it since
        it was read (`If-Match`): readers that follow the pointer, or the table naming the
        version, never see half of one save and half of another."""
        rel = folder.relative_to(self.local).as_posix()
        if not self.is_remote:
            return rel
        versioned = f"{rel}@{version}"
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.publish(path, f"{versioned}/{path.relative_to(folder).as_posix()}")
        pointer = self.remote / f"{rel}.current"
        while True:
            seen = etag(pointer)
            if seen is not None and read_bytes(pointer).decode() == version:
                break
            if put_if_match(pointer, version.encode(), seen):
                break
        return versioned

