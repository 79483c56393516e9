"""A stand-in for the Hugging Face Hub's HTTP API, so tests drive the real `HfApi` client end to end.

A real HTTP server on 127.0.0.1 (random port, served from background threads, stopped by
`close()` or at the latest after `max_lifetime_s`; bodies and the request log are capped)
serving exactly the routes `huggingface_hub` 2.4 calls to plan and commit a dataset with the
legacy LFS protocol (set `HF_HUB_DISABLE_XET`: Xet's CAS protocol is not stood in):

    GET  /api/datasets/{ns}/{name}/revision/{rev}             repo info (the revision's sha)
    GET  /api/datasets/{ns}/{name}/tree/{rev}[/{path}]        tree listing, Link-paginated
    POST /api/repos/create                                    create repo (+ initial .gitattributes commit)
    POST /api/validate-yaml                                   README front-matter check before a commit
    POST /api/datasets/{ns}/{name}/preupload/{rev}            regular or LFS, per file
    POST /datasets/{ns}/{name}.git/info/lfs/objects/batch     LFS batch (upload + verify actions)
    PUT  /_lfs/upload/{ns}/{name}/{oid}?sig=...               "presigned" LFS upload
    POST /_lfs/verify/{ns}/{name}/{oid}                       LFS verify
    POST /api/datasets/{ns}/{name}/commit/{rev}               ndjson commit (optionally a PR)

It keeps the repositories in memory (files, commits with parents, refs, PRs, LFS objects) and
CHECKS what the client sends, answering like the Hub and listing each breach in `violations`:
the Authorization header carries the token; the commit is the client's ndjson (header with
summary and optional parentCommit, then file / lfsFile / deletedFile lines, each path once);
regular files match the size and sample announced at preupload and were announced as regular;
LFS objects are uploaded with the announced sha256 and size, verified, and committed only once
stored. A parentCommit that is not the branch head gets the Hub's 412. Every request is recorded
in `requests` (the Authorization header itself is kept out of the record).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub refuses regular files above 10 MiB
MAX_BODY = 64 * 1024 * 1024
MAX_REQUESTS = 10_000
LFS_MEDIA_TYPE = "application/vnd.git-lfs+json"
CONCURRENT_COMMIT = "A commit has happened since. Please refresh and try again."
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
Answer = tuple[int, Any, dict[str, str]]  # status, JSON body (None: empty), extra headers
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT_OID = re.compile(r"^[0-9a-f]{7,40}$")
# A subset of the .gitattributes the Hub puts in a new dataset repository.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (
        "*.7z", "*.arrow", "*.bin", "*.gz", "*.parquet", "*.tar", "*.tar.*", "*.zip", "*.zst",
        "*.png", "*.jpg", "*.jpeg", "*.webp", "*.mp3", "*.wav", "*.mp4", "*.webm",
    )
)


def git_blob_oid(content: bytes) -> str:
    """The id git gives a blob: what the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass(frozen=True)
class Blob:
    """A file at a commit: regular (`content`) or an LFS pointer (`lfs_sha256`)."""

    size: int
    content: bytes | None = None
    lfs_sha256: str | None = None

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.lfs_sha256}\nsize {self.size}\n".encode()

    @property
    def oid(self) -> str:
        return git_blob_oid(self.content if self.content is not None else self.pointer)


@dataclass(frozen=True)
class Commit:
    oid: str
    parents: tuple[str, ...]
    summary: str
    files: dict[str, Blob]


@dataclass(frozen=True)
class PullRequest:
    num: int
    ref: str
    base: str
    commit: str


@dataclass
class Repo:
    repo_id: str
    visibility: str
    commits: dict[str, Commit] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    lfs: dict[str, bytes] = field(default_factory=dict)  # verified objects by sha256
    uploaded: dict[str, bytes] = field(default_factory=dict)  # PUT but not yet verified
    batch: dict[str, tuple[int, str]] = field(default_factory=dict)  # oid -> (announced size, upload sig)
    announced: dict[str, tuple[str, int, bytes]] = field(default_factory=dict)  # path -> (mode, size, sample)
    prs: list[PullRequest] = field(default_factory=list)


@dataclass(frozen=True)
class Recorded:
    """One request as received. `authorized`: the Authorization header carried the token."""

    method: str
    route: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    authorized: bool
    body: Any  # parsed JSON, the list of ndjson lines of a commit, or the byte count of an upload
    status: int


class _Reply(Exception):
    """Ends a request with an HTTP answer; `violation` when the client broke the protocol."""

    def __init__(self, status: int, message: str, *, code: str | None = None, violation: bool = False):
        super().__init__(message)
        self.status, self.message, self.code, self.violation = status, message, code, violation


class HubStandin:
    """The server and its in-memory Hub. Use as a context manager, or call `close()`."""

    def __init__(self, token: str, *, page_size: int = 1000, max_lifetime_s: float = 300.0):
        self.token = token
        self.page_size = page_size
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self._repos: dict[str, Repo] = {}
        self._faults: list[tuple[str, int, str]] = []
        self._counter = 0
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.hub = self  # type: ignore[attr-defined]
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._watchdog = threading.Timer(max_lifetime_s, self.close)
        self._watchdog.daemon = True
        self._watchdog.start()

    def __enter__(self) -> HubStandin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving; safe to call twice (teardown, then the watchdog)."""
        self._watchdog.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    # ---- what tests look at and do behind the client's back ------------------------------------

    def routes(self, since: int = 0) -> list[str]:
        """The route names of the requests from index `since` on."""
        with self._lock:
            return [r.route for r in self.requests[since:]]

    def recorded(self, route: str, since: int = 0) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests[since:] if r.route == route]

    def exists(self, repo_id: str) -> bool:
        with self._lock:
            return repo_id in self._repos

    def head(self, repo_id: str, ref: str = "main") -> str:
        with self._lock:
            return self._repos[repo_id].refs[ref]

    def commit(self, repo_id: str, oid: str) -> Commit:
        with self._lock:
            return self._repos[repo_id].commits[oid]

    def files(self, repo_id: str, ref: str = "main") -> dict[str, bytes]:
        """The content of every file at `ref`, LFS objects resolved."""
        with self._lock:
            repo = self._repos[repo_id]
            snapshot = repo.commits[repo.refs[ref]].files
            return {
                p: b.content if b.content is not None else repo.lfs[b.lfs_sha256 or ""] for p, b in snapshot.items()
            }

    def visibility(self, repo_id: str) -> str:
        with self._lock:
            return self._repos[repo_id].visibility

    def pull_requests(self, repo_id: str) -> list[PullRequest]:
        with self._lock:
            return list(self._repos[repo_id].prs)

    def create(self, repo_id: str) -> None:
        """Another party creates `repo_id`."""
        with self._lock:
            self._new_repo(repo_id, "public")

    def push(self, repo_id: str, files: dict[str, bytes], summary: str = "someone else's commit") -> str:
        """Another party commits regular files to main; returns the new head."""
        with self._lock:
            repo = self._repos[repo_id]
            head = repo.refs["main"]
            snapshot = dict(repo.commits[head].files) | {p: Blob(len(c), content=c) for p, c in files.items()}
            oid = self._add_commit(repo, (head,), summary, snapshot)
            repo.refs["main"] = oid
            return oid

    def fail_next(self, route: str, status: int, message: str) -> None:
        """Answer the next request to `route` with `status` and `message` (a misbehaving server or proxy)."""
        with self._lock:
            self._faults.append((route, status, message))

    # ---- request handling ----------------------------------------------------------------------

    def _handle(self, handler: _Handler, method: str) -> None:
        url = urlsplit(handler.path)
        query = dict(parse_qsl(url.query))
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        route, args = _route(method, parts)
        auth = handler.headers.get("Authorization")
        authorized = auth == f"Bearer {self.token}"
        headers = {k: v for k, v in handler.headers.items() if k.lower() != "authorization"}
        status, payload, extra, body, raw = 500, b"", {}, None, b""
        try:
            raw = _read_body(handler)
            with self._lock:
                if len(self.requests) >= MAX_REQUESTS:
                    raise _Reply(400, f"more than {MAX_REQUESTS} requests", violation=True)
                for i, (fault_route, fault_status, fault_message) in enumerate(self._faults):
                    if fault_route == route:
                        del self._faults[i]
                        raise _Reply(fault_status, fault_message)
                if route == "unknown":
                    raise _Reply(501, f"the stand-in does not serve {method} {url.path}", violation=True)
                if auth is not None and not authorized:
                    raise _Reply(401, INVALID_CREDENTIALS, violation=True)
                if route not in {"repo_info", "tree", "lfs_upload"} and not authorized:
                    raise _Reply(401, f"{route} needs the token in the Authorization header", violation=True)
                body = _parse_body(route, raw, handler.headers.get("Content-Type", ""))
                status, answer, extra = getattr(self, f"_{route}")(*args, query=query, body=body, raw=raw)
                payload = json.dumps(answer).encode() if answer is not None else b""
        except _Reply as reply:
            status = reply.status
            payload = json.dumps({"error": reply.message}).encode()
            extra = {"X-Error-Message": reply.message} | ({"X-Error-Code": reply.code} if reply.code else {})
            handler.close_connection = reply.status == 413  # the unread body would poison the next request
            if reply.violation:
                with self._lock:
                    self.violations.append(f"{method} {url.path}: {reply.message}")
        with self._lock:
            if len(self.requests) < MAX_REQUESTS:
                recorded_body = len(raw) if route == "lfs_upload" else body
                self.requests.append(
                    Recorded(method, route, url.path, query, headers, authorized, recorded_body, status)
                )
        handler.send_response(status)
        content_type = LFS_MEDIA_TYPE if route == "lfs_batch" and status == 200 else "application/json"
        for name, value in {"Content-Type": content_type, **extra}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _repo_info(self, repo_id: str, rev: str, **_: Any) -> Answer:
        repo = self._repo(repo_id)
        oid = self._resolve(repo, rev)
        siblings = [{"rfilename": p} for p in sorted(repo.commits[oid].files)]
        return 200, {"id": repo_id, "sha": oid, "private": repo.visibility == "private", "siblings": siblings}, {}

    def _tree(self, repo_id: str, rev: str, path: str, *, query: dict[str, str], **_: Any) -> Answer:
        repo = self._repo(repo_id)
        snapshot = repo.commits[self._resolve(repo, rev)].files
        prefix = f"{path}/" if path else ""
        recursive = query.get("recursive", "false").lower() in {"true", "1"}
        entries: dict[str, dict[str, Any]] = {}
        for file_path, blob in snapshot.items():
            if not file_path.startswith(prefix):
                continue
            rest = file_path[len(prefix):].split("/")
            for depth in range(1, len(rest)):
                folder = prefix + "/".join(rest[:depth])
                entries[folder] = {"type": "directory", "oid": git_blob_oid(folder.encode()), "size": 0, "path": folder}
                if not recursive:
                    break
            if recursive or len(rest) == 1:
                entry: dict[str, Any] = {"type": "file", "oid": blob.oid, "size": blob.size, "path": file_path}
                if blob.lfs_sha256:
                    entry["lfs"] = {"oid": blob.lfs_sha256, "size": blob.size, "pointerSize": len(blob.pointer)}
                entries[file_path] = entry
        if path and not entries:
            raise _Reply(404, f"{path} does not exist at {rev}", code="EntryNotFound")
        listing = [entries[k] for k in sorted(entries)]
        start = int(query.get("cursor", "0"))
        page = listing[start : start + self.page_size]
        extra = {}
        if start + self.page_size < len(listing):
            encoded = f"/api/datasets/{repo_id}/tree/{quote(rev, safe='')}"
            encoded += f"/{quote(path, safe='')}" if path else ""
            following = f"{self.endpoint}{encoded}?recursive={str(recursive).lower()}&cursor={start + self.page_size}"
            extra["Link"] = f'<{following}>; rel="next"'
        return 200, page, extra

    def _create_repo(self, *, body: dict[str, Any], **_: Any) -> Answer:
        if body.get("type") != "dataset":
            raise _Reply(400, f"expected a dataset repository, got type {body.get('type')!r}", violation=True)
        if not isinstance(body.get("name"), str) or not isinstance(body.get("organization"), str):
            raise _Reply(400, "create needs name and organization", violation=True)
        if body.get("visibility", "public") not in {"public", "private"}:
            raise _Reply(400, f"bad visibility {body.get('visibility')!r}", violation=True)
        repo_id = f"{body['organization']}/{body['name']}"
        url = f"{self.endpoint}/datasets/{repo_id}"
        if repo_id in self._repos:
            raise _Reply(409, "You already created this dataset repo")
        self._new_repo(repo_id, body.get("visibility", "public"))
        return 200, {"url": url, "name": repo_id}, {}

    def _validate_yaml(self, *, body: dict[str, Any], **_: Any) -> Answer:
        if body.get("repoType") != "dataset" or not isinstance(body.get("content"), str):
            raise _Reply(400, "validate-yaml needs the card content and repoType 'dataset'", violation=True)
        return 200, {"errors": [], "warnings": []}, {}

    def _preupload(self, repo_id: str, rev: str, *, body: dict[str, Any], **_: Any) -> Answer:
        repo = self._repo(repo_id)
        snapshot = repo.commits[self._resolve(repo, rev)].files
        answers = []
        for item in body.get("files") or []:
            path, size, sample = item.get("path"), item.get("size"), _b64(item.get("sample"))
            if not isinstance(path, str) or not isinstance(size, int) or sample is None or len(sample) > 512:
                raise _Reply(400, f"malformed preupload entry {item!r:.200}", violation=True)
            mode = "lfs" if size >= LFS_THRESHOLD or b"\0" in sample or self._lfs_tracked(snapshot, path) else "regular"
            repo.announced[path] = (mode, size, sample)
            existing = snapshot.get(path)
            remote_oid = None if existing is None else (existing.lfs_sha256 or existing.oid)
            answers.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": remote_oid})
        if not answers:
            raise _Reply(400, "preupload without files", violation=True)
        return 200, {"files": answers, "commitOid": repo.refs.get(rev)}, {}

    def _lfs_batch(self, repo_id: str, *, body: dict[str, Any], **_: Any) -> Answer:
        repo = self._repo(repo_id)
        transfers = body.get("transfers") or []
        if body.get("operation") != "upload" or body.get("hash_algo") != "sha256" or "basic" not in transfers:
            raise _Reply(422, "LFS batch must be an sha256 upload offering the basic transfer", violation=True)
        objects = []
        for obj in body.get("objects") or []:
            oid, size = obj.get("oid"), obj.get("size")
            if not isinstance(oid, str) or not _SHA256.match(oid) or not isinstance(size, int):
                raise _Reply(422, f"malformed LFS object {obj!r:.200}", violation=True)
            if oid in repo.lfs:
                objects.append({"oid": oid, "size": size, "authenticated": True})
                continue
            # the same object announced twice (two files with equal bytes) gets one grant, as on the Hub
            sig = repo.batch[oid][1] if oid in repo.batch else secrets.token_hex(8)
            repo.batch[oid] = (size, sig)
            objects.append(
                {
                    "oid": oid,
                    "size": size,
                    "authenticated": True,
                    "actions": {
                        "upload": {"href": f"{self.endpoint}/_lfs/upload/{repo_id}/{oid}?sig={sig}", "header": {}},
                        "verify": {"href": f"{self.endpoint}/_lfs/verify/{repo_id}/{oid}", "header": {}},
                    },
                }
            )
        return 200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}, {}

    def _lfs_upload(self, repo_id: str, oid: str, *, query: dict[str, str], raw: bytes, **_: Any) -> Answer:
        repo = self._repo(repo_id)
        size, sig = repo.batch.get(oid, (None, None))
        if sig is None or query.get("sig") != sig:
            raise _Reply(403, f"upload of {oid} was not granted by an LFS batch", violation=True)
        if len(raw) != size or hashlib.sha256(raw).hexdigest() != oid:
            raise _Reply(400, f"uploaded bytes do not match the announced sha256 {oid} and size {size}", violation=True)
        repo.uploaded[oid] = raw
        return 200, None, {}

    def _lfs_verify(self, repo_id: str, oid: str, *, body: dict[str, Any], **_: Any) -> Answer:
        repo = self._repo(repo_id)
        content = repo.uploaded.pop(oid, None)
        if content is None and oid in repo.lfs:  # a second upload of an object already verified
            content = repo.lfs[oid]
        if content is None or body.get("oid") != oid or body.get("size") != len(content):
            raise _Reply(422, f"verify of {oid} does not match an upload", violation=True)
        repo.lfs[oid] = content
        return 200, {"message": "Verified"}, {}

    def _commit(self, repo_id: str, rev: str, *, query: dict[str, str], body: list[dict[str, Any]], **_: Any) -> Answer:
        repo = self._repo(repo_id)
        head = self._resolve(repo, rev)
        if not body or body[0].get("key") != "header":
            raise _Reply(400, "the commit's first ndjson line must be its header", violation=True)
        header = body[0].get("value") or {}
        summary, parent = header.get("summary"), header.get("parentCommit")
        if not isinstance(summary, str) or not summary or not isinstance(header.get("description", ""), str):
            raise _Reply(400, "the commit header needs a summary", violation=True)
        if parent is not None and (not isinstance(parent, str) or not _COMMIT_OID.match(parent)):
            raise _Reply(400, f"bad parentCommit {parent!r}", violation=True)
        create_pr = query.get("create_pr") == "1"
        if parent is not None and not create_pr and not head.startswith(parent):
            raise _Reply(412, CONCURRENT_COMMIT)
        base = self._resolve(repo, parent) if parent is not None else head
        snapshot = dict(repo.commits[base].files)
        seen: set[str] = set()
        for line in body[1:]:
            key, value = line.get("key"), line.get("value") or {}
            path = value.get("path")
            if not isinstance(path, str) or not path or path in seen:
                raise _Reply(400, f"commit line without a path, or a path twice: {path!r}", violation=True)
            seen.add(path)
            if key == "file":
                snapshot[path] = self._regular(repo, path, value)
            elif key == "lfsFile":
                snapshot[path] = self._lfs_pointer(repo, path, value)
            elif key == "deletedFile":
                if path not in snapshot:
                    raise _Reply(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
                del snapshot[path]
            else:
                raise _Reply(400, f"unexpected commit line {key!r}", violation=True)
        if not seen:
            raise _Reply(400, "a commit without operations", violation=True)
        oid = self._add_commit(repo, (base,), summary, snapshot)
        pr_url = None
        if create_pr:
            num = len(repo.prs) + 1
            repo.prs.append(PullRequest(num, f"refs/pr/{num}", base, oid))
            repo.refs[f"refs/pr/{num}"] = oid
            pr_url = f"{self.endpoint}/datasets/{repo_id}/discussions/{num}"
        else:
            repo.refs[rev] = oid
        commit_url = f"{self.endpoint}/datasets/{repo_id}/commit/{oid}"
        answer = {"success": True, "commitOid": oid, "commitUrl": commit_url, "pullRequestUrl": pr_url}
        return 200, answer, {}

    # ---- the in-memory repository --------------------------------------------------------------

    def _repo(self, repo_id: str) -> Repo:
        if repo_id not in self._repos:
            raise _Reply(404, "Repository not found", code="RepoNotFound")
        return self._repos[repo_id]

    def _resolve(self, repo: Repo, rev: str) -> str:
        if rev in repo.refs:
            return repo.refs[rev]
        matches = [oid for oid in repo.commits if len(rev) >= 7 and oid.startswith(rev)]
        if len(matches) != 1:
            raise _Reply(404, f"Invalid rev id: {rev}", code="RevisionNotFound")
        return matches[0]

    def _new_repo(self, repo_id: str, visibility: str) -> None:
        repo = Repo(repo_id, visibility)
        content = DEFAULT_GITATTRIBUTES.encode()
        initial = {".gitattributes": Blob(len(content), content=content)}
        repo.refs["main"] = self._add_commit(repo, (), "initial commit", initial)
        self._repos[repo_id] = repo

    def _add_commit(self, repo: Repo, parents: tuple[str, ...], summary: str, files: dict[str, Blob]) -> str:
        self._counter += 1
        oid = hashlib.sha1(f"{self._counter}\0{parents}\0{summary}".encode()).hexdigest()
        repo.commits[oid] = Commit(oid, parents, summary, files)
        return oid

    @staticmethod
    def _lfs_tracked(snapshot: dict[str, Blob], path: str) -> bool:
        attributes = snapshot.get(".gitattributes")
        text = attributes.content.decode() if attributes and attributes.content else ""
        name = path.rsplit("/", 1)[-1]
        for line in text.splitlines():
            pattern, *attrs = line.split() or [""]
            if "filter=lfs" in attrs and fnmatch.fnmatchcase(path if "/" in pattern else name, pattern):
                return True
        return False

    @staticmethod
    def _regular(repo: Repo, path: str, value: dict[str, Any]) -> Blob:
        content = _b64(value.get("content")) if value.get("encoding") == "base64" else None
        if content is None:
            raise _Reply(400, f"{path}: a file line carries base64 content", violation=True)
        mode, size, sample = repo.announced.get(path, ("unannounced", -1, b""))
        if mode != "regular" or size != len(content) or not content.startswith(sample):
            raise _Reply(400, f"{path}: content does not match its preupload ({mode}, {size} bytes)", violation=True)
        return Blob(len(content), content=content)

    @staticmethod
    def _lfs_pointer(repo: Repo, path: str, value: dict[str, Any]) -> Blob:
        oid, size = value.get("oid"), value.get("size")
        mode, announced_size, _ = repo.announced.get(path, ("unannounced", -1, b""))
        if value.get("algo") != "sha256" or mode != "lfs" or size != announced_size:
            raise _Reply(
                400, f"{path}: lfsFile does not match its preupload ({mode}, {announced_size} bytes)", violation=True
            )
        if oid not in repo.lfs or len(repo.lfs[oid]) != size:
            raise _Reply(400, f"{path}: LFS object {oid} was not uploaded and verified", violation=True)
        return Blob(size, lfs_sha256=oid)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection frees its thread

    def do_GET(self) -> None:
        self.server.hub._handle(self, "GET")  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.hub._handle(self, "POST")  # type: ignore[attr-defined]

    def do_PUT(self) -> None:
        self.server.hub._handle(self, "PUT")  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests`, not stderr."""


def _route(method: str, parts: list[str]) -> tuple[str, tuple[str, ...]]:
    """The route name and its arguments (repo id, revision, ...), or "unknown"."""
    match method, parts:
        case "GET", ["api", "datasets", ns, name, "revision", rev]:
            return "repo_info", (f"{ns}/{name}", rev)
        case "GET", ["api", "datasets", ns, name, "tree", rev, *path]:
            return "tree", (f"{ns}/{name}", rev, "/".join(path))
        case "POST", ["api", "repos", "create"]:
            return "create_repo", ()
        case "POST", ["api", "validate-yaml"]:
            return "validate_yaml", ()
        case "POST", ["api", "datasets", ns, name, "preupload", rev]:
            return "preupload", (f"{ns}/{name}", rev)
        case "POST", ["datasets", ns, name, "info", "lfs", "objects", "batch"] if name.endswith(".git"):
            return "lfs_batch", (f"{ns}/{name[:-4]}",)
        case "PUT", ["_lfs", "upload", ns, name, oid]:
            return "lfs_upload", (f"{ns}/{name}", oid)
        case "POST", ["_lfs", "verify", ns, name, oid]:
            return "lfs_verify", (f"{ns}/{name}", oid)
        case "POST", ["api", "datasets", ns, name, "commit", rev]:
            return "commit", (f"{ns}/{name}", rev)
    return "unknown", ()


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body, by Content-Length or chunked, refusing more than MAX_BODY."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks, total = [], 0
        while (size := int(handler.rfile.readline().split(b";")[0], 16)) > 0:
            total += size
            if total > MAX_BODY:
                raise _Reply(413, "body too large", violation=True)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
        while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        return b"".join(chunks)
    length = int(handler.headers.get("Content-Length") or 0)
    if length > MAX_BODY:
        raise _Reply(413, "body too large", violation=True)
    return handler.rfile.read(length)


def _parse_body(route: str, raw: bytes, content_type: str) -> Any:
    """JSON for API routes, ndjson lines for a commit, nothing for uploads and reads."""
    if route in {"repo_info", "tree", "lfs_upload"}:
        return None
    try:
        if route == "commit":
            if not content_type.startswith("application/x-ndjson"):
                raise _Reply(400, f"commit sent as {content_type!r}, not application/x-ndjson", violation=True)
            return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        if route == "lfs_batch" and not content_type.startswith(LFS_MEDIA_TYPE):
            raise _Reply(400, f"LFS batch sent as {content_type!r}", violation=True)
        return json.loads(raw or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Reply(400, f"{route}: body is not valid JSON", violation=True) from None


def _b64(value: Any) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else None
    except ValueError:
        return None
