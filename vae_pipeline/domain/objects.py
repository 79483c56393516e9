"""Where the pipeline's files live: a local folder or an `s3://bucket/prefix`, through one path
type (`UPath`, over fsspec and s3fs).

The stages call the same functions for both; what differs is how a write is made atomic. On
disk a temp file is renamed into place; on object storage a single PUT (or a multipart upload,
which appears whole when it completes) is atomic already. Creating a file only if it is absent
is a hard link on disk and `If-None-Match: *` on a bucket. Listings of a bucket are refreshed
before they are trusted (s3fs caches them). The endpoint, region and credentials are the AWS client's own
(the standard AWS variables or a profile), never a setting of this module; many files fetched at
once go through obstore's client, handed what botocore resolved (`get_objects`).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import tarfile
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import fsspec.asyn
import obstore
import obstore.exceptions
from obstore.store import S3Store
from upath import UPath

from vae_pipeline.domain.files import (
    CHUNK,
    create_new,
    link_or_copy,
    make_durable,
    replacing_folder,
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


def missing_bucket(url: str) -> str | None:
    """The bucket's name when `url` is an `s3://bucket/prefix` whose bucket does not exist (one
    HEAD request); None for a folder or an existing bucket."""
    if "://" not in url or is_local(location(url)):
        return None
    path = location(url)
    bucket = path.fs.split_path(path.path)[0]
    try:
        path.fs.call_s3("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return bucket
    return None


def is_local(path: UPath) -> bool:
    return location(path).protocol in LOCAL_PROTOCOLS


def local_path(path: UPath) -> Path:
    return Path(location(path).path)


def refreshed(path: UPath) -> UPath:
    """`path` with the client's cached listings of it dropped: what another writer added since is seen."""
    path = location(path)
    if not is_local(path):
        path.fs.invalidate_cache(path.path)
    return path


def head(path: UPath) -> dict | None:
    """What a bucket says of one object — `size` and `etag` — in one HEAD request (s3fs's own
    `info` lists the prefix after a miss, to look for a folder); None when there is none."""
    path = location(path)
    bucket, key, _ = path.fs.split_path(path.path)
    try:
        answer = path.fs.call_s3("head_object", Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None
    return {"size": answer["ContentLength"], "etag": answer["ETag"]}


class _RecentObjects:
    """The bytes of the small objects this process last wrote or read, by path with their MD5:
    what a listing's ETag (a single-part upload's MD5) shows a bucket still holds is not fetched
    again. Bounded; never trusted without that ETag."""

    LARGEST = 8 << 20
    TOTAL = 64 << 20

    def __init__(self):
        self._held: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def note(self, path: UPath, data: bytes) -> None:
        if len(data) > self.LARGEST:
            return
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
        with self._lock:
            self._drop(path.path)
            self._held[path.path] = (digest, data)
            self._size += len(data)
            while self._size > self.TOTAL:
                self._drop(next(iter(self._held)))

    def held(self, path: UPath, found: dict | None) -> bytes | None:
        """The bytes noted for `path` if the listing's entry `found` shows the bucket holds them."""
        if found is None:
            return None
        with self._lock:
            digest, data = self._held.get(path.path, (None, b""))
        tag = str(found.get("ETag") or "").strip('"')
        return data if digest is not None and tag == digest and found.get("size") == len(data) else None

    def _drop(self, key: str) -> None:
        old = self._held.pop(key, None)
        if old is not None:
            self._size -= len(old[1])


RECENT = _RecentObjects()


# one PUT below this size, parts of half of it above: s3fs's sizes, so an object's ETag (an MD5
# for one PUT) is what it was when s3fs wrote it, and one written whole is compared without a read
WHOLE_PUT_BELOW = 100 * 2**20


def put_bytes(path: UPath, data: bytes, *, kept: bool = True) -> str | None:
    """Write `data` at `path` whole: readers see the old bytes or the new, never half. The new
    object's ETag (None on disk). `kept`: noted in `RECENT`, for a read back in this process.

    Through obstore, as the input fetches (`get_objects`): a PUT costs its client a sixth of the
    CPU botocore's does (0.23 ms against 1.37 ms measured), and a build makes hundreds."""
    path = location(path)
    if is_local(path):
        unsynced = _UNSYNCED.get()
        write_atomic(local_path(path), data, durable=unsynced is None)
        if unsynced is not None:
            unsynced.append(path)
        return None
    bucket, key, _ = path.fs.split_path(path.path)
    try:
        answer = obstore.put(_store_of(path.fs, bucket), key, data, use_multipart=len(data) >= WHOLE_PUT_BELOW,
                             chunk_size=WHOLE_PUT_BELOW // 2)
    except (obstore.exceptions.BaseError, OSError) as exc:  # obstore's message holds the server's whole answer
        raise OSError(f"could not write {path.path} ({type(exc).__name__})") from None
    path.fs.invalidate_cache(path.path)  # s3fs's listings cached before this write are gone
    if kept:
        RECENT.note(path, data)
    return answer.get("e_tag") or etag(path)


_PENDING: ContextVar[tuple[ThreadPoolExecutor, list[Future]] | None] = ContextVar("vae_uploads", default=None)
_UNSYNCED: ContextVar[list[UPath] | None] = ContextVar("vae_unsynced", default=None)


@contextmanager
def uploads_in_background(workers: int = 8) -> Iterator[None]:
    """While inside, the uploads of `Mirror.publish`, `publish_folder`, `place_file` and
    `write_if_changed` to a bucket go to a pool of threads and the calls return at once, so a
    step's requests overlap its own work (and each other); on leaving, every upload has finished,
    and the first that failed is raised. On disk, the files `put_bytes` writes inside are made
    durable together on leaving (`make_durable`: a fsync each while they are few, one `os.sync()`
    for the many a rehost rewrites). A step leaves the scope before it records anything that names
    what it wrote."""
    if _PENDING.get() is not None:  # inside another scope: that one waits
        yield
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="vae-upload")
    futures: list[Future] = []
    unsynced: list[UPath] = []
    token, unsynced_token = _PENDING.set((pool, futures)), _UNSYNCED.set(unsynced)
    try:
        yield
    finally:
        _PENDING.reset(token)
        _UNSYNCED.reset(unsynced_token)
        pool.shutdown(wait=True)  # also when the body failed: no upload outlives the step
        make_durable(local_path(path) for path in unsynced)  # each was renamed into place whole; now on disk too
    for future in futures:
        future.result()


def _upload_soon(upload: Callable[[], object]) -> None:
    """`upload` now, or on the pool of the `uploads_in_background` scope this runs in."""
    pending = _PENDING.get()
    if pending is None:
        upload()
    else:
        pending[1].append(pending[0].submit(upload))


def put_file(path: UPath, source: Path) -> str | None:
    """Put a local file's bytes at `path` whole (a hard link or copy on disk, an upload on a
    bucket); the new object's ETag (None on disk). Not noted in `RECENT`: the file stays here
    (videos, frames and archives would push the tables out)."""
    path = location(path)
    if is_local(path):
        link_or_copy(source, local_path(path))
        return None
    return put_bytes(path, source.read_bytes(), kept=False)


def put_new(path: UPath, data: bytes) -> bool:
    """Create `path` only if nothing has that name yet; False if another writer got there first."""
    path = location(path)
    if is_local(path):
        return create_new(local_path(path), data)
    try:
        path.fs.pipe_file(path.path, data, mode="create")  # If-None-Match: *
    except FileExistsError:
        return False
    except OSError as exc:
        if refused_condition(exc):
            return False
        raise
    RECENT.note(path, data)
    return True


def refused_condition(exc: OSError) -> bool:
    """Whether the bucket refused a conditional write (412 Precondition Failed), told by the status
    and error code of the S3 answer s3fs translated (its `__cause__`), never by the message: Ceph's
    RGW sends none, and without the `Condition` element AWS adds, s3fs cannot tell an
    `If-None-Match` refusal from any other (`OSError: [Errno 22] None`)."""
    response = getattr(exc.__cause__, "response", None)
    if not isinstance(response, dict):
        return False
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status == 412 or response.get("Error", {}).get("Code") in ("PreconditionFailed", "412")


def etag(path: UPath) -> str | None:
    """The object's ETag (None on disk, or when it is absent)."""
    if is_local(path):
        return None
    found = head(path)
    return found["etag"] if found else None


def read_bytes(path: UPath, found: dict | None = None) -> bytes:
    """The file's bytes; on a bucket in one GET (s3fs's own `cat_file` first asks the size with a
    HEAD, and a file opened reads in ranged blocks), or none when `found` (its entry in a fresh
    listing) shows the bucket holds the bytes this process last wrote or read there."""
    path = location(path)
    if is_local(path):
        return local_path(path).read_bytes()
    data = RECENT.held(path, found)
    if data is None:
        data = path.fs.cat_file(path.path, max_concurrency=1)
        RECENT.note(path, data)
    return data


def exists(path: UPath) -> bool:
    """Whether the file (object) `path` is there, asked afresh."""
    path = location(path)
    return local_path(path).exists() if is_local(path) else head(path) is not None


def size_of(path: UPath, heads: dict[str, dict] | None = None) -> int:
    """The file's size (`heads`: a `heads_under` a folder holding `path`, read instead of a HEAD)."""
    path = location(path)
    if is_local(path):
        return local_path(path).stat().st_size
    found = _head_of(path, heads)
    if found is None:
        raise FileNotFoundError(path.path)
    return found["size"]


def write_if_changed(path: UPath, data: bytes, heads: dict[str, dict] | None = None) -> bool:
    """`put_bytes` unless `path` already holds `data` (its mtime or ETag then stays); True if
    written. `heads`: a `heads_under` a folder holding `path`, read instead of a HEAD."""
    path = location(path)
    if is_local(path):
        target = local_path(path)
        if target.exists() and target.read_bytes() == data:
            return False
        put_bytes(path, data)
    elif _same_bytes(_head_of(path, heads), len(data), lambda: hashlib.md5(data, usedforsecurity=False).hexdigest(),
                     lambda: hashlib.sha256(data).hexdigest(), path):
        return False
    else:
        _upload_soon(lambda: put_bytes(path, data))
    return True


def place_file(source: Path, target: UPath, heads: dict[str, dict] | None = None) -> bool:
    """Make `target` hold the local file `source`'s bytes; False when it already does (`heads`:
    a `heads_under` a folder holding it, read instead of asking of `target` alone)."""
    target = location(target)
    if same_file(target, source, heads):
        return False
    if is_local(target):
        put_file(target, source)
    else:
        _upload_soon(lambda: put_file(target, source))
    return True


def _same_bytes(found: dict | None, size: int, md5: Callable[[], str], sha256: Callable[[], str],
                path: UPath) -> bool:
    """Whether the object `found` (a `head`) holds bytes of this size and digest: a single-part
    upload's ETag is the MD5 of its bytes; a multipart one's is not, so its bytes are read."""
    if found is None or found["size"] != size:
        return False
    tag = found["etag"].strip('"')
    return tag == md5() if "-" not in tag else sha256_of(path) == sha256()


def known_bytes(path: UPath, expected: bytes, found: dict | None) -> bytes:
    """`path`'s bytes: `expected` itself when the listing's entry `found` shows the object holds
    them (size and ETag: no request), else read."""
    path = location(path)
    if found is not None and not is_local(path) and _same_bytes(
            _listed(found), len(expected), lambda: hashlib.md5(expected, usedforsecurity=False).hexdigest(),
            lambda: hashlib.sha256(expected).hexdigest(), path):
        return expected
    return read_bytes(path)


def readable_copy(path: UPath, local: Path | None, found: dict | None) -> UPath | Path:
    """Where to read `path`'s bytes: the local file `local` when the listing's entry `found` shows
    the object holds its bytes (size and ETag: no request), else `path` itself."""
    path = location(path)
    if local is None or found is None or is_local(path) or not local.is_file():
        return path
    return local if same_file(path, local, {path.path: _listed(found)}) else path


def sha256_of(path: UPath) -> str:
    with location(path).open("rb") as handle:
        return sha256_stream(handle)[1]


def same_file(target: UPath, source: Path, heads: dict[str, dict] | None = None) -> bool:
    """Whether `target` holds the bytes of the local file `source` (size, then content);
    `heads`: as for `write_if_changed`."""
    target = location(target)
    if is_local(target):
        where = local_path(target)
        return where.exists() and (where.samefile(source) or (
            where.stat().st_size == source.stat().st_size and sha256_of(target) == _sha256_local(source)))
    return _same_bytes(_head_of(target, heads), source.stat().st_size, lambda: _md5_local(source),
                       lambda: _sha256_local(source), target)


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
    (size, and ETag on a bucket), from a fresh listing (one paged LIST); empty if there is none.
    Under a prefix held by `listings_held`, the listing taken first there answers."""
    folder = location(folder)
    held = _HELD.answer(folder)
    if held is not None:
        return held
    folder = refreshed(folder)
    if is_local(folder) and not local_path(folder).is_dir():
        return {}
    found = _files_on_disk(folder.path) if is_local(folder) else folder.fs.find(folder.path, detail=True)
    files = {name[len(folder.path):].lstrip("/"): info for name, info in found.items() if info.get("type") == "file"}
    _HELD.keep(folder, files)
    return files


def _files_on_disk(root: str) -> dict[str, dict]:
    """The regular files under the folder `root` with what fsspec's local `find(detail=True)` says
    of each (a symlink is neither listed nor followed; a folder or file gone meanwhile is left
    out), by path, sorted: the same entries and facts from one `scandir` pass, at about half the
    cost of fsspec's walk (a listing of the dataset or a stage's tables is a roll-up's largest
    share at 10,000 episodes)."""
    found: dict[str, dict] = {}
    folders = [root]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            facts = entry.stat(follow_symlinks=False)
                            found[entry.path] = {
                                "name": entry.path, "size": facts.st_size, "type": "file", "created": facts.st_ctime,
                                "islink": False, "mode": facts.st_mode, "uid": facts.st_uid, "gid": facts.st_gid,
                                "mtime": facts.st_mtime, "ino": facts.st_ino, "nlink": facts.st_nlink}
                    except FileNotFoundError:
                        continue
        except OSError:
            continue
    return dict(sorted(found.items()))


class _HeldListings:
    """The listings taken under the bucket prefixes a unit of work holds (`listings_held`), by
    the folder listed: a folder listed again, or one inside it, is answered from them. Under a
    held folder on disk, each folder's `fingerprint`, computed once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._roots: dict[str, int] = {}  # held prefix -> how many holders
        self._taken: dict[str, dict[str, dict]] = {}  # folder listed -> its files
        self._by_top: dict[str, dict[str, dict[str, dict]]] = {}  # folder listed -> top folder -> its files
        self._fingerprints: dict[str, str] = {}  # folder on disk -> its fingerprint

    def hold(self, root: str) -> None:
        with self._lock:
            self._roots[root] = self._roots.get(root, 0) + 1

    def release(self, root: str) -> None:
        with self._lock:
            self._roots[root] -= 1
            if not self._roots[root]:
                del self._roots[root]
                self._taken = {folder: files for folder, files in self._taken.items() if not _under(folder, root)}
                self._by_top = {folder: tops for folder, tops in self._by_top.items() if folder in self._taken}
                self._fingerprints = {folder: value for folder, value in self._fingerprints.items()
                                      if not _under(folder, root)}

    def fingerprints(self, folders: list[str], compute: Callable[[list[str]], list[str]]) -> dict[str, str]:
        with self._lock:
            held = {folder for folder in folders if any(_under(folder, root) for root in self._roots)}
            known = {folder: self._fingerprints[folder] for folder in held if folder in self._fingerprints}
        missing = [folder for folder in folders if folder not in known]
        values = dict(zip(missing, compute(missing), strict=True)) if missing else {}
        with self._lock:
            self._fingerprints.update((folder, value) for folder, value in values.items() if folder in held)
        return {folder: known.get(folder) or values[folder] for folder in folders}

    def answer(self, folder: UPath) -> dict[str, dict] | None:
        if is_local(folder):
            return None
        path = folder.path.rstrip("/")
        with self._lock:
            for taken, files in self._taken.items():
                if _under(path, taken):
                    inner = path[len(taken):].strip("/")
                    if not inner:
                        return dict(files)
                    top, _, below = inner.partition("/")
                    # by top folder: a series of a root of thousands reads its own files, not all
                    within = self._by_top[taken].get(top, {})
                    return dict(within) if not below else \
                        {name[len(below) + 1:]: info for name, info in within.items() if name.startswith(f"{below}/")}
        return None

    def keep(self, folder: UPath, files: dict[str, dict]) -> None:
        if is_local(folder):
            return
        path = folder.path.rstrip("/")
        with self._lock:
            if any(_under(path, root) for root in self._roots):
                self._taken[path] = files
                tops: dict[str, dict[str, dict]] = {}
                for name, info in files.items():
                    top, _, rest = name.partition("/")
                    if rest:
                        tops.setdefault(top, {})[rest] = info
                self._by_top[path] = tops


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(f"{folder}/")


_HELD = _HeldListings()


@contextmanager
def listings_held(root: UPath | str) -> Iterator[None]:
    """While inside, the bucket prefix `root` is read as it was first listed: each folder under it
    listed once (a folder inside one listed before, not at all). For a prefix the pipeline only
    reads (the runs root) during one build or run: every step sees the same files, which the
    versions it records were computed from, in one LIST instead of one per step and purpose.
    On disk, each folder's `held_fingerprints` is taken once."""
    root = location(root)
    path = str(local_path(root)) if is_local(root) else root.path.rstrip("/")
    _HELD.hold(path)
    try:
        yield
    finally:
        _HELD.release(path)


def held_fingerprints(folders: list[Path], compute: Callable[[list[str]], list[str]]) -> dict[str, str]:
    """A fingerprint of each folder on disk, by its path: `compute(paths)` of those not known;
    under a folder `listings_held` holds, each taken once for the whole build or run (its planning
    rounds and steps see the runs root as first read, as on a bucket: a change made meanwhile is
    found by the next build)."""
    return _HELD.fingerprints([str(folder) for folder in folders], compute)


def fresh_listing(folder: UPath) -> dict[str, dict]:
    """`listing`, on a bucket as `bucket_listing`: for a caller that acts on the listing alone."""
    folder = location(folder)
    return listing(folder) if is_local(folder) else bucket_listing(folder)


def bucket_listing(folder: UPath) -> dict[str, dict]:
    """`listing` of a bucket prefix in ListObjectsV2 pages asked directly: one request for a
    prefix that holds nothing, where s3fs's `find` asks a HEAD and another LIST (and, unlike
    it, fills none of s3fs's caches of folders)."""
    bucket, key, _ = folder.fs.split_path(folder.path)
    prefix = f"{key.rstrip('/')}/" if key else ""
    files, token = {}, {}
    while True:
        page = folder.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, **token)
        for entry in page.get("Contents", []):
            if not entry["Key"].endswith("/"):
                files[entry["Key"][len(prefix):]] = {"name": f"{bucket}/{entry['Key']}", "type": "file",
                                                     "size": entry["Size"], "ETag": entry["ETag"]}
        if not page.get("IsTruncated"):
            return files
        token = {"ContinuationToken": page["NextContinuationToken"]}


FETCHES_AT_ONCE = 16  # connections at once, each kept idle 15 s at most (aiohttp's keep-alive too)
_STORES: dict[tuple, tuple[object, S3Store]] = {}  # (pid, botocore client's id, bucket) -> (that client, store)
_STORES_LOCK = threading.Lock()


def _store_of(fs, bucket: str) -> S3Store:
    """obstore's client for `bucket`, one per process and botocore client (whose settings it
    copies: a new one, as after a changed endpoint, gets a new store), its connections kept."""
    client = fs.s3
    key = (os.getpid(), id(client), bucket)
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = (client, _new_store(client, fs.loop, bucket))  # the client held: its id stays its own
        return _STORES[key][1]


def _new_store(client, loop, bucket: str) -> S3Store:
    """A client that goes where s3fs's botocore client goes, signing with its credentials: the
    endpoint, region and credentials botocore resolved (variables, profile, role), read from it,
    never from a setting of ours. A custom endpoint is asked in path style, which every
    S3-compatible server answers; AWS's own in virtual-hosted style."""
    endpoint = client.meta.endpoint_url
    host = urlsplit(endpoint).hostname or ""
    where = {"virtual_hosted_style_request": True} if host.endswith((".amazonaws.com", ".amazonaws.com.cn")) \
        else {"endpoint": endpoint}
    options = {"client_options": {"allow_http": endpoint.startswith("http:"), "pool_idle_timeout": "15s"},
               "region": client.meta.region_name or "us-east-1", **where}
    credentials = client._request_signer._credentials  # what botocore signs with; None when unsigned
    if credentials is None:
        return S3Store(bucket, skip_signature=True, **options)

    def current() -> dict:
        """Botocore's credentials now (refreshed by botocore when they expire), asked again in a while."""
        frozen = fsspec.asyn.sync(loop, credentials.get_frozen_credentials)
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key,
                **({"token": frozen.token} if frozen.token else {}),
                "expires_at": datetime.now(UTC) + timedelta(minutes=5)}

    return S3Store(bucket, credential_provider=current, **options)


def get_objects(fs, targets: dict[str, Path]) -> None:
    """GET each object of `targets` (`bucket/key` of s3fs `fs`) into its local file, many at once.

    Through obstore, not s3fs: a GET through botocore and aiohttp costs the client a few ms of CPU
    (signing, its event hooks, parsing every header), obstore's a quarter of that, and a build's
    input files are many and small. A missing object is a FileNotFoundError, as from s3fs, and any
    other failure an OSError; either names the bucket, not the object."""
    split = {path: fs.split_path(path)[:2] for path in targets}
    stores = {bucket: _store_of(fs, bucket) for bucket, _ in split.values()}

    async def fetch(path: str, target: Path, limit: asyncio.Semaphore) -> None:
        bucket, key = split[path]
        async with limit:
            try:
                answer = await obstore.get_async(stores[bucket], key)
                with target.open("wb") as out:
                    async for chunk in answer.stream(min_chunk_size=CHUNK):
                        out.write(chunk)
            # obstore's message holds the server's whole answer, and a runs root's names are input:
            # the bucket is named (a setting), the object is not
            except FileNotFoundError:
                raise FileNotFoundError(f"an object listed in bucket {bucket} is not there any more") from None
            except obstore.exceptions.BaseError as exc:
                raise OSError(f"the store failed a fetch from bucket {bucket} ({type(exc).__name__})") from None

    async def fetch_all() -> None:
        limit = asyncio.Semaphore(FETCHES_AT_ONCE)
        await asyncio.gather(*(fetch(path, target, limit) for path, target in targets.items()))

    asyncio.run(fetch_all())


def listed_identity(info: dict) -> str:
    """Which bytes a file of a `listing` holds, without reading them: its size and mtime and inode
    on disk (a write through a temp name gets a new inode), its size and ETag on a bucket."""
    return f"{info.get('size')}/{info.get('ETag') or (info.get('mtime'), info.get('ino'))}"


def identity_now(path: UPath) -> str | None:
    """`listed_identity` of a file on disk as a listing shows it now; None on a bucket, where an
    upload of this step may still be under way (its ETag is known once listed)."""
    path = location(path)
    return listed_identity(path.fs.info(path.path)) if is_local(path) else None


def files_under(folder: UPath) -> Iterator[tuple[str, UPath]]:
    """(relative name, path) of every file under `folder`, sorted."""
    folder = location(folder)
    for name in sorted(listing(folder)):
        yield name, folder / name


def put_tree(source: Path, folder: UPath) -> int:
    """Every file under the local folder `source` at the same name under `folder` (a bucket
    prefix), each of `source`'s top-level entries emptied there first, as a folder written anew
    replaces what it held; the number of files put."""
    folder = location(folder)
    count = 0
    for entry in sorted(source.iterdir()):
        target = refreshed(folder / entry.name)
        if target.fs.exists(target.path):
            target.fs.rm(target.path, recursive=True)
        files = sorted(p for p in entry.rglob("*") if p.is_file()) if entry.is_dir() else [entry]
        for file in files:
            put_file(folder / file.relative_to(source).as_posix(), file)
            count += 1
    return count


def heads_under(folder: UPath) -> dict[str, dict]:
    """What one fresh listing of the bucket prefix `folder` says of every object under it, as
    `head` answers by the object's path: one LIST instead of a HEAD per object (empty on disk)."""
    folder = location(folder)
    if is_local(folder):
        return {}
    return {(folder / name).path: _listed(info) for name, info in bucket_listing(folder).items()}


def _head_of(path: UPath, heads: dict[str, dict] | None) -> dict | None:
    return head(path) if heads is None else heads.get(path.path)


def remove(path: UPath) -> None:
    location(path).unlink(missing_ok=True)


def fingerprint_entries(folder: UPath) -> list[str]:
    """A line per file under a bucket prefix — name, size and ETag — for a version of what it
    holds (a bucket keeps no mtimes a writer set, and an ETag changes with the bytes)."""
    return [f"{name}\0{info.get('size')}\0{info.get('ETag')}\n" for name, info in sorted(listing(folder).items())]


PACKED = ".tar"  # a folder `Mirror.publish_folder` put on a bucket as one object
UNPACKED = ".unpacked"  # beside a fetched object's ETag: the ETag its folder was unpacked from
POINTER = ".current"  # `<name>.current`: the version of a folder in use, as earlier builds noted it


PACKS = ".packs"  # in a folder `Mirror.publish_tree` put on a bucket: `<pack>.tar`, files that go together


ROOT_PACK = ".root"  # the shared tar of the files `sync_where` selects at the root
ETAG_HEADER = "VAE.etag"  # a PAX header of a shared tar's member: the ETag its file was fetched with


def _packed(files: dict[str, Path], tags: dict[str, str] | None = None) -> bytes:
    """Files (by the name each takes) as one uncompressed tar (the frames are JPEGs), the same
    bytes for the same files: sorted, no times, owners or modes of this machine; with `tags`,
    each member carries the ETag of its file (a PAX header)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in sorted(files.items()):
            info = tarfile.TarInfo(name)
            if tags is not None:
                info.pax_headers = {ETAG_HEADER: tags[name] or ""}
            info.size, info.mode = path.stat().st_size, 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    return out.getvalue()


_SYNCS: dict[Path, threading.Lock] = {}
_SYNCS_LOCK = threading.Lock()


def _one_sync_at_a_time(folder: Path) -> threading.Lock:
    """The lock of a local folder's `Mirror.sync` in this process: a build fetching a series ahead
    and the step reading it may ask at once, and a sync removes the files it does not list
    (another's temp files too); the second then finds the files held and fetches nothing."""
    with _SYNCS_LOCK:
        return _SYNCS.setdefault(folder, threading.Lock())


class Mirror:
    """A local copy of a bucket prefix, kept fresh by ETag, for the code that needs real files
    (PyAV, tar, the review site's renderer); on disk it is the folder itself and costs nothing.

    Each machine has its own (in `VAE_SCRATCH`): nothing in it is trusted over the bucket — a
    file is fetched again when its ETag there differs from the one it was fetched with."""

    def __init__(self, remote: UPath, local: Path):
        self.remote = location(remote)
        self.local = local_path(self.remote) if is_local(self.remote) else local
        self._tags = self.local.parent / f"{self.local.name}.etags"

    @property
    def is_remote(self) -> bool:
        return not is_local(self.remote)

    def fetch_all(self, rels: list[str]) -> dict[str, Path]:
        """The local copy of each file of `rels`, from one listing per top folder they are in (not a
        HEAD each): the missing or changed ones downloaded together. By name."""
        self.fetch(rels)
        return {rel: self.local / rel for rel in rels}

    def fetch(self, rels: list[str]) -> None:
        """The files of `rels` here, as `fetch_all` brings them, for a reader that finds them by
        name (on disk nothing to do, not even a path made for each)."""
        if self.is_remote and rels:
            found_in: dict[str, dict] = {}
            for top in sorted({rel.split("/", 1)[0] for rel in rels}):
                listed = listing(self.remote / top)
                for rel in (r for r in rels if r.split("/", 1)[0] == top):
                    found = listed.get(rel[len(top) + 1:])
                    if found is None:
                        raise FileNotFoundError(f"{rel} is not in the bucket")
                    found_in[rel] = found
            self._download(found_in)

    def sync(self, rel: str = "", shared: UPath | None = None, local_only: tuple[str, ...] = ()) -> Path:
        """The local copy of every file under `rel`, made equal to the bucket's (files gone there
        are removed here, but those under the folders `local_only` names, this machine's own);
        the changed ones are downloaded together (through `shared`, see `_download`), and the
        packs `publish_tree` made unpacked in place."""
        folder = self.local / rel if rel else self.local
        if not self.is_remote:
            return folder
        with _one_sync_at_a_time(folder):
            return self._sync(folder, rel, shared, local_only)

    def _sync(self, folder: Path, rel: str, shared: UPath | None, local_only: tuple[str, ...]) -> Path:
        listed = listing(self.remote / rel if rel else self.remote)
        # a series' series.json may have come with the root's files: their object is looked in second
        self._download({f"{rel}/{name}" if rel else name: info for name, info in listed.items()},
                       [] if shared is None else list(dict.fromkeys([shared / f"{rel or ROOT_PACK}{PACKED}",
                                                                      shared / f"{ROOT_PACK}{PACKED}"])))
        kept = set(listed)
        for name, info in listed.items():
            if name.startswith(f"{PACKS}/") and name.endswith(PACKED):
                kept |= self._unpack_in_place(folder, f"{rel}/{name}" if rel else name, info.get("ETag"))
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                name = path.relative_to(folder).as_posix()
                if path.is_file() and name not in kept and not name.startswith(local_only):
                    path.unlink()
                    (self._tags / path.relative_to(self.local)).unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _unpack_in_place(self, folder: Path, rel: str, tag: str) -> set[str]:
        """Write the files of the pack `rel` (fetched with ETag `tag`) into `folder`, each through a
        temp name, unless they were written from the same object; their names."""
        marker = self._tags / f"{rel}{UNPACKED}"
        with tarfile.open(self.local / rel) as tar:
            members = [member for member in tar.getmembers() if member.isfile()]
            names = {member.name for member in members}
            if marker.is_file() and marker.read_text() == tag and all((folder / n).is_file() for n in names):
                return names
            for member in members:
                target = folder / tarfile.data_filter(member, str(folder)).name
                write_atomic(target, tar.extractfile(member).read(), durable=False)
        write_atomic(marker, tag.encode(), durable=False)
        return names

    def sync_where(self, wanted: Callable[[str], bool], shared: UPath | None = None) -> dict[str, dict]:
        """The local copy of every file `wanted` selects (by its name relative to the root) made
        equal to the bucket's from one fresh listing of the whole root (LIST pages, no request
        per file but the downloads): the changed ones downloaded together (through `shared`,
        see `_download`), the selected local ones the bucket no longer holds removed. The
        listing, by name (on disk: nothing to do, an empty one)."""
        if not self.is_remote:
            return {}
        listed = listing(self.remote)
        self._download({rel: info for rel, info in listed.items() if wanted(rel)},
                       [] if shared is None else [shared / f"{ROOT_PACK}{PACKED}"])
        for path in sorted(self.local.rglob("*")) if self.local.is_dir() else []:
            rel = path.relative_to(self.local).as_posix()
            if path.is_file() and wanted(rel) and rel not in listed:
                path.unlink()
                (self._tags / rel).unlink(missing_ok=True)
        return listed

    def fetch_folders(self, rels: list[str], under: str, listed: dict[str, dict] | None = None) -> None:
        """The local copy of each folder `publish_folder` made (all under the prefix `under`), from
        one listing of that prefix: the packed ones missing or changed here fetched together and
        unpacked; a folder saved file by file (before folders were packed) fetched file by file
        (on disk: nothing to do)."""
        if not self.is_remote or not rels:
            return
        listed = listing(self.remote / under) if listed is None else listed
        wanted = {rel[len(under) + 1:] for rel in rels}
        packed = {name: info for name, info in listed.items()
                  if name.endswith(PACKED) and name[: -len(PACKED)] in wanted}
        loose_folders = wanted - {name[: -len(PACKED)] for name in packed}
        loose = {name: info for name, info in listed.items() if name.rsplit("/", 1)[0] in loose_folders}
        self._download({f"{under}/{name}": info for name, info in {**packed, **loose}.items()})
        for name, info in packed.items():
            self._unpack(f"{under}/{name[: -len(PACKED)]}", info.get("ETag"))

    def sync_folders(self, under: str) -> None:
        """Every folder `publish_folder` made under the prefix `under`, here (one listing)."""
        if not self.is_remote:
            return
        listed = listing(self.remote / under)
        folders = {name[: -len(PACKED)] for name in listed if name.endswith(PACKED)}
        folders |= {name.rsplit("/", 1)[0] for name in listed if "/" in name and not name.endswith((PACKED, POINTER))}
        self.fetch_folders([f"{under}/{folder}" for folder in sorted(folders)], under, listed)

    def _unpack(self, rel: str, tag: str) -> None:
        """Unpack `<rel>.tar` into the folder `rel` unless it was unpacked from the same object."""
        marker = self._tags / f"{rel}{UNPACKED}"
        if (self.local / rel).is_dir() and marker.is_file() and marker.read_text() == tag:
            return
        with replacing_folder(self.local / rel) as staging, tarfile.open(self.local / f"{rel}{PACKED}") as tar:
            tar.extractall(staging, filter="data")
        write_atomic(marker, tag.encode(), durable=False)

    def _download(self, listed: dict[str, dict], shared: list[UPath] = ()) -> None:
        """Fetch the files (by name relative to the root, with their entries in a listing of the
        bucket) whose local copy is missing or was fetched with another ETag: into temp names,
        concurrently, then each renamed into place with its ETag noted.

        With `shared` (objects in a prefix every machine reaches, the first these files'), the
        machine that fetches them first leaves them all in the first as one tar; a machine
        lacking them takes those whose ETag is still the bucket's from these objects (a GET
        each, until none is missing) and fetches only the rest, then leaves the tar anew: each
        file is fetched from its own place once, whichever machine needs it."""
        tags = {rel: info.get("ETag") for rel, info in listed.items()}
        stale = {rel: tag for rel, tag in tags.items() if not self._holds(rel, tag)}
        for pack in shared:
            if stale:
                stale = self._take_shared(pack, stale)
        if stale:
            self._fetch(stale, {rel: listed[rel].get("size") for rel in stale})
            if shared:
                put_bytes(shared[0], _packed({rel: self.local / rel for rel in tags}, tags), kept=False)

    def _take_shared(self, shared: UPath, stale: dict[str, str]) -> dict[str, str]:
        """Write the files of `stale` that the tar `shared` holds with the same ETag into place
        (a file whose ETag is an MD5 only if its bytes have it); those it does not."""
        try:
            data = shared.fs.cat_file(shared.path, max_concurrency=1)
        except FileNotFoundError:
            return stale
        left = dict(stale)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                rel, tag = member.name, member.pax_headers.get(ETAG_HEADER)
                if not member.isfile() or left.get(rel) != tag:
                    continue
                body = tar.extractfile(member).read()
                plain = (tag or "").strip('"')
                if len(plain) == 32 and hashlib.md5(body, usedforsecurity=False).hexdigest() != plain:
                    continue  # not the bytes the tag names: fetched from its place
                try:
                    target = self.local / tarfile.data_filter(member, str(self.local)).name
                except tarfile.FilterError:
                    continue
                write_atomic(target, body, durable=False)
                write_atomic(self._tags / rel, tag.encode(), durable=False)
                del left[rel]
        return left

    def _fetch(self, stale: dict[str, str], sizes: dict[str, int | None]) -> None:
        """Download the files of `stale` from their places (see `_download`). A file that comes
        other than its listed size (a fetch cut short) fails the fetch and is not kept: noted with
        the whole file's ETag, it would be trusted until the object changed (a series.json cut in
        two reads as no series)."""
        temps = {rel: self.local / f"{rel}.{uuid.uuid4().hex[:8]}.fetching" for rel in stale}
        for folder in {temp.parent for temp in temps.values()} | {(self._tags / rel).parent for rel in stale}:
            folder.mkdir(parents=True, exist_ok=True)
        try:
            get_objects(self.remote.fs, {f"{self.remote.path}/{rel}": temps[rel] for rel in stale})
            cut = [rel for rel in stale if sizes[rel] is not None and temps[rel].stat().st_size != sizes[rel]]
            if cut:  # counted, not named: the names are input
                raise OSError(f"{len(cut)} fetched file(s) came other than the size the bucket lists (a fetch cut "
                              "short): fetched again next time")
            for rel, tag in stale.items():
                os.replace(temps[rel], self.local / rel)
                # written in place, not through a temp file: a torn note never equals a tag, so at
                # worst the file is fetched again (a series' files are many and small)
                (self._tags / rel).write_bytes(tag.encode())
        finally:
            for temp in temps.values():
                temp.unlink(missing_ok=True)

    def _holds(self, rel: str, tag: str) -> bool:
        sidecar = self._tags / rel
        return (self.local / rel).is_file() and sidecar.is_file() and sidecar.read_text() == tag

    def listed(self, rel: str) -> dict[str, dict]:
        """What one listing of the folder `rel` finds on the bucket, by name relative to the root
        (for `publish` and `publish_folder` of several files there; on disk: nothing)."""
        if not self.is_remote:
            return {}
        return {f"{rel}/{name}": info for name, info in bucket_listing(self.remote / rel).items()}

    def listed_for(self, top: str, series: list[str]) -> dict[str, dict]:
        """`listed` of `<top>/<series>` for one series, of `<top>` for a run over several (one
        listing for the run, not one a series)."""
        return self.listed(f"{top}/{series[0]}") if len(series) == 1 else self.listed(top)

    def holds(self, rel: str, listed: dict[str, dict]) -> bool:
        """Whether the root holds the file `rel`, alone or in the folder `publish_folder` packed it
        in, by `listed` (a `listed` of its folder's parent) on a bucket; on disk, asked."""
        if not self.is_remote:
            return (self.local / rel).is_file()
        return rel in listed or f"{rel.rsplit('/', 1)[0]}{PACKED}" in listed

    def publish(self, path: Path, listed: dict[str, dict] | None = None) -> str:
        """Upload a file written in the local copy to its place on the bucket, unless that
        already holds its bytes (asked with a HEAD, or found in `listed`, a `listed` of its
        folder); its name relative to the root."""
        rel = path.relative_to(self.local).as_posix()
        if self.is_remote:
            _upload_soon(lambda: self._publish_now(path, rel, listed))
        return rel

    def _publish_now(self, path: Path, rel: str, listed: dict[str, dict] | None) -> None:
        target = self.remote / rel
        found = head(target) if listed is None else _listed(listed.get(rel))
        same = _same_bytes(found, path.stat().st_size, lambda: _md5_local(path), lambda: _sha256_local(path), target)
        tag = found["etag"] if same else put_file(target, path)
        if tag:
            write_atomic(self._tags / rel, tag.encode(), durable=False)

    def publish_tree(self, folder: Path, pack_of: Callable[[str], str | None] = lambda name: None,
                     local_only: tuple[str, ...] = ()) -> None:
        """Make the bucket's copy of a local folder equal to it: the files whose bytes it does
        not hold uploaded, the objects no longer here removed (on disk: nothing to do).

        Files `pack_of` names a pack for (by their name in the folder) go as one tar a pack,
        `.packs/<pack>.tar` (one PUT when one of them changed, not one a file), which `sync`
        unpacks; files under the `local_only` prefixes (a cache of this machine) stay here."""
        if not self.is_remote:
            return
        rel = folder.relative_to(self.local).as_posix()
        there = bucket_listing(self.remote / rel)
        files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
        here, packs = {}, {}
        for name, path in files.items():
            if name.startswith(f"{PACKS}/") or name.startswith(local_only):
                continue
            pack = pack_of(name)
            if pack is None:
                here[name] = path
            else:
                packs.setdefault(pack, {})[name] = path
        for pack, members in packs.items():
            packed = folder / PACKS / f"{pack}{PACKED}"
            write_if_changed(packed, _packed(members))
            here[f"{PACKS}/{pack}{PACKED}"] = packed
        changed = {name: path for name, path in here.items()
                   if not _same_bytes(_listed(there.get(name)), path.stat().st_size, lambda p=path: _md5_local(p),
                                      lambda p=path: _sha256_local(p), self.remote / rel / name)}
        self._upload({f"{rel}/{name}": path for name, path in changed.items()})
        for name in sorted(set(there) - set(here)):
            remove(self.remote / rel / name)
        for pack in packs:  # this copy holds every pack's files already
            name = f"{PACKS}/{pack}{PACKED}"
            tag = (self._tags / rel / name).read_text() if name in changed else there[name].get("ETag", "")
            write_atomic(self._tags / rel / f"{name}{UNPACKED}", tag.encode(), durable=False)
        for stale in (folder / PACKS).glob(f"*{PACKED}") if (folder / PACKS).is_dir() else []:
            if stale.name[: -len(PACKED)] not in packs:
                stale.unlink()

    def _upload(self, files: dict[str, Path]) -> None:
        """Upload local files to names relative to the root, concurrently, each a single PUT; a
        file uploaded from its own place in the local copy is noted as fetched (a single-part
        upload's ETag is the MD5 of its bytes; where a store says otherwise, it is fetched again)."""
        if not files:
            return
        data = {rel: path.read_bytes() for rel, path in files.items()}
        self.remote.fs.pipe({(self.remote / rel).path: body for rel, body in data.items()})
        for rel, path in files.items():
            if path == self.local / rel:
                tag = f'"{hashlib.md5(data[rel], usedforsecurity=False).hexdigest()}"'
                write_atomic(self._tags / rel, tag.encode(), durable=False)

    def versioned(self, rel: str, version: str) -> str:
        """The name to make a folder of files that belong together under (see `publish_folder`):
        the name itself on disk, `<name>@<version>` on a bucket."""
        return f"{rel}@{version}" if self.is_remote else rel

    def publish_folder(self, folder: Path, listed: dict[str, dict] | None = None) -> str:
        """Make a local folder of files that belong together (frames and their labels), made
        under its `versioned` name, part of the root; the name to read it by.

        On disk it was swapped into place whole already. On a bucket, where nothing can be
        renamed, the folder goes as one object, `<name>@<version>.tar` (one PUT, not one a file;
        none when `listed`, a `listed` of its parent, shows it there already). Readers go by the
        version the renders table names (`fetch_folders`), so they never see half of one save and
        half of another."""
        rel = folder.relative_to(self.local).as_posix()
        if not self.is_remote:
            return rel
        packed = self.local / f"{rel}{PACKED}"
        write_atomic(packed, _packed({path.relative_to(folder).as_posix(): path
                                      for path in folder.rglob("*") if path.is_file()}), durable=False)

        def upload() -> None:
            if listed is None:
                self._upload({f"{rel}{PACKED}": packed})
            else:
                self._publish_now(packed, f"{rel}{PACKED}", listed)
            write_atomic(self._tags / f"{rel}{UNPACKED}", (self._tags / f"{rel}{PACKED}").read_bytes(), durable=False)

        _upload_soon(upload)
        return rel


def _listed(info: dict | None) -> dict | None:
    """A listing's entry as a `head` answer."""
    return {"size": info.get("size"), "etag": info.get("ETag", "")} if info else None
