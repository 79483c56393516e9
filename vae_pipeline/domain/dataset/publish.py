"""Publishing the dataset folder to a Hugging Face dataset repository: plan, dry-run listing, one commit.

The plan compares the files the pipeline produced (`dataset_files`) with the repository at one
pinned commit — anything else in the folder is listed as not ours and never sent — so a dry run shows
exactly what the commit will carry, and the commit names that pinned commit as its parent: if
anyone pushed in between, the Hub refuses the commit instead of silently overwriting their work.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Collection
from dataclasses import dataclass

from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    RepoFile,
    get_token,
)
from huggingface_hub.errors import (
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from upath import UPath

from vae_pipeline.domain.objects import exists, files_under, is_local, local_path, size_of

REPO_TYPE = "dataset"
# The Hub keeps this file in every repository (it routes big files to LFS); a dataset folder
# without one must not delete it.
GITATTRIBUTES = ".gitattributes"
# The Hub client refuses any path with one of these as a component.
_FORBIDDEN_PARTS = frozenset({".git", ".cache"})
_CHUNK = 1 << 20


class PublishError(Exception):
    """Publishing cannot go ahead. The message is one line and never carries the token."""


@dataclass(frozen=True)
class PlanEntry:
    """One file of the plan. `sha256` is the local content's; None for a deletion (the Hub only
    exposes sha256 for LFS files, and a deleted file has no local content)."""

    path: str
    bytes: int
    sha256: str | None = None


@dataclass(frozen=True)
class PublishPlan:
    """What one commit would change in `repo_id` at `revision`, relative to `parent_commit`.

    `parent_commit` is None when the repository does not exist yet: executing creates it.
    """

    repo_id: str
    revision: str
    parent_commit: str | None
    added: tuple[PlanEntry, ...]
    changed: tuple[PlanEntry, ...]
    deleted: tuple[PlanEntry, ...]
    unchanged: tuple[PlanEntry, ...]
    not_ours: tuple[PlanEntry, ...] = ()  # files in the folder the pipeline did not produce: never sent

    @property
    def creates_repo(self) -> bool:
        """Every Hub repository has at least one commit, so no parent means no repository."""
        return self.parent_commit is None

    @property
    def to_send(self) -> tuple[PlanEntry, ...]:
        """The files whose content goes into the commit."""
        return self.added + self.changed

    @property
    def is_empty(self) -> bool:
        """Nothing to add, change or delete."""
        return not (self.added or self.changed or self.deleted)


@dataclass(frozen=True)
class _Remote:
    size: int
    blob_id: str
    lfs_sha256: str | None


def hub_api(endpoint: str | None = None, token: str | None = None) -> HfApi:
    """The real Hub client. With no token it uses HF_TOKEN or the stored login, as the Hub CLI does;
    the token is only ever put in request headers by the client."""
    return HfApi(endpoint=endpoint, token=token, library_name="vae-pipeline")


def plan_publish(dataset_dir: UPath, api: HfApi, repo_id: str, produced: Collection[str], *,
                 revision: str = "main") -> PublishPlan:
    """Classify the `produced` files of `dataset_dir` (relative posix paths) against the repository
    at `revision` (read-only requests); every other file of the folder is listed as not ours."""
    local, strays = _local_files(dataset_dir, produced)
    try:
        parent = api.repo_info(repo_id, repo_type=REPO_TYPE, revision=revision).sha
    except RevisionNotFoundError:
        raise PublishError(f"{repo_id} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        parent = None
    except HfHubHTTPError as err:
        raise _http_error(err, f"cannot read {repo_id}", api) from None
    remote = _remote_files(api, repo_id, parent) if parent is not None else {}

    added: list[PlanEntry] = []
    changed: list[PlanEntry] = []
    unchanged: list[PlanEntry] = []
    for rel, path in local.items():
        size, sha256, git_sha1 = _digest(path)
        entry = PlanEntry(rel, size, sha256)
        theirs = remote.get(rel)
        if theirs is None:
            added.append(entry)
        elif (theirs.lfs_sha256 == sha256) if theirs.lfs_sha256 else (theirs.blob_id == git_sha1):
            unchanged.append(entry)
        else:
            changed.append(entry)
    deleted = [PlanEntry(p, r.size) for p, r in sorted(remote.items()) if p not in local and p != GITATTRIBUTES]
    not_ours = [PlanEntry(rel, size_of(path)) for rel, path in strays.items()]
    return PublishPlan(repo_id, revision, parent, tuple(added), tuple(changed), tuple(deleted), tuple(unchanged),
                       tuple(not_ours))


def format_plan(plan: PublishPlan) -> str:
    """The dry-run listing an operator reviews before publishing."""
    where = f"datasets/{plan.repo_id} @ {plan.revision}"
    head = "new repository, created public on publish" if plan.creates_repo else f"parent {plan.parent_commit}"
    lines = [f"Publish plan for {where} ({head})"]
    for title, mark, entries in (
        ("added", "+", plan.added),
        ("changed", "~", plan.changed),
        ("deleted", "-", plan.deleted),
        ("unchanged", "=", plan.unchanged),
    ):
        lines.append(f"{title}: {_count(entries)}, {_total(entries):,} bytes")
        lines.extend(f"  {mark} {e.path} ({e.bytes:,} bytes)" for e in entries)
    if plan.not_ours:
        lines.append(f"not ours, not sent: {_count(plan.not_ours)}, {_total(plan.not_ours):,} bytes")
        lines.extend(f"  ! {e.path} ({e.bytes:,} bytes)" for e in plan.not_ours)
    if plan.is_empty:
        lines.append("nothing to send: the repository already matches the dataset folder")
    else:
        lines.append(
            f"to send: {_count(plan.to_send)}, {_total(plan.to_send):,} bytes; to delete: {_count(plan.deleted)}"
        )
    return "\n".join(lines)


def execute_plan(
    plan: PublishPlan,
    api: HfApi,
    repo_id: str,
    *,
    dataset_dir: UPath,
    create_pr: bool = False,
    message: str,
) -> str:
    """Send the plan as one commit on top of `plan.parent_commit`; return the commit URL (or PR URL).

    Unchanged files are not sent. A file to send whose content differs from the plan, or a
    repository that moved since the plan, stops the publish: the operator re-plans and re-reviews.
    """
    if repo_id != plan.repo_id:
        raise PublishError(f"the plan is for {plan.repo_id}, not {repo_id}")
    if plan.is_empty and not plan.creates_repo:
        return f"{api.endpoint}/datasets/{repo_id}/commit/{plan.parent_commit}"
    operations: list[CommitOperationAdd | CommitOperationDelete] = [
        _verified_add(dataset_dir, entry) for entry in plan.to_send
    ]
    operations += [CommitOperationDelete(path_in_repo=e.path, is_folder=False) for e in plan.deleted]

    if plan.creates_repo:
        try:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=False, exist_ok=False)
        except HfHubHTTPError as err:
            if err.response is not None and err.response.status_code == 409:
                raise PublishError(
                    f"{repo_id} already exists (created since the plan, or not visible with this token): "
                    "re-run the plan"
                ) from None
            raise _http_error(err, f"cannot create {repo_id}", api) from None
    try:
        info = api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            repo_type=REPO_TYPE,
            revision=plan.revision,
            parent_commit=plan.parent_commit,
            create_pr=create_pr,
        )
    except HfHubHTTPError as err:
        if err.response is not None and err.response.status_code == 412:
            raise PublishError(
                f"{repo_id}@{plan.revision} moved since the plan (parent {plan.parent_commit}): "
                "nothing was committed; re-run the plan and review it"
            ) from None
        raise _http_error(err, f"publishing to {repo_id} failed", api) from None
    return info.pr_url if create_pr else info.commit_url


def _local_files(dataset_dir: UPath, produced: Collection[str]) -> tuple[dict[str, UPath], dict[str, UPath]]:
    """The produced files under `dataset_dir` (a folder or a bucket prefix) and every other file,
    by relative posix path, sorted; refuses what the Hub cannot hold."""
    if is_local(dataset_dir) and not dataset_dir.is_dir():
        raise PublishError(f"{dataset_dir} is not a directory")
    found = list(files_under(dataset_dir))
    files = {rel: path for rel, path in found if rel in produced}
    strays = {rel: path for rel, path in found if rel not in produced}
    if not files:
        # An empty folder would plan the deletion of the whole published dataset.
        raise PublishError(f"{dataset_dir} holds no files: nothing to publish")
    forbidden = [rel for rel in files if _FORBIDDEN_PARTS.intersection(rel.split("/"))]
    if forbidden:
        raise PublishError(f"{forbidden[0]}: files under .git/ or .cache/ cannot be published")
    return files, strays


def _remote_files(api: HfApi, repo_id: str, commit: str) -> dict[str, _Remote]:
    """The files of the repository at `commit` (a sha, so the listing and the parent agree)."""
    try:
        return {
            item.path: _Remote(item.size, item.blob_id, item.lfs.sha256 if item.lfs else None)
            for item in api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=commit, recursive=True)
            if isinstance(item, RepoFile)
        }
    except HfHubHTTPError as err:
        raise _http_error(err, f"cannot list {repo_id}", api) from None


def _digest(path: UPath) -> tuple[int, str, str]:
    """Size, sha256 (what the Hub records for an LFS file) and git blob sha1 (a regular file's oid),
    in one read."""
    size = size_of(path)
    with path.open("rb") as f:
        sha256 = hashlib.sha256()
        sha1 = hashlib.sha1(f"blob {size}\0".encode())
        while chunk := f.read(_CHUNK):
            sha256.update(chunk)
            sha1.update(chunk)
    return size, sha256.hexdigest(), sha1.hexdigest()


def _verified_add(dataset_dir: UPath, entry: PlanEntry) -> CommitOperationAdd:
    """An upload of `entry`, refused if the file is no longer what the operator reviewed; a file
    on a bucket is streamed to the Hub from an open object (the client reads file objects)."""
    path = dataset_dir / entry.path
    sha256 = _digest(path)[1] if exists(path) else None
    if sha256 is None or sha256 != entry.sha256:
        raise PublishError(f"{entry.path} changed since the plan: re-run the plan")
    source = local_path(path) if is_local(path) else _ObjectReader(path.open("rb"))
    op = CommitOperationAdd(path_in_repo=entry.path, path_or_fileobj=source)
    op.upload_info.sha256 = bytes.fromhex(sha256)  # just verified: spares the client another read
    return op


class _ObjectReader(io.BufferedIOBase):
    """An object on a bucket as the binary file the Hub client takes (it reads, seeks and tells;
    s3fs's file is not an `io.BufferedIOBase`)."""

    def __init__(self, handle):
        super().__init__()
        self._handle = handle

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._handle.read(-1 if size is None or size < 0 else size)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def close(self) -> None:
        self._handle.close()
        super().close()


def _http_error(err: HfHubHTTPError, what: str, api: HfApi) -> PublishError:
    """One line from a Hub error: status and the server's message, with the token masked in case
    a server or proxy echoed it back."""
    status = err.response.status_code if err.response is not None else "no response"
    detail = " ".join((err.server_message or str(err)).split())
    text = f"{what}: HTTP {status}: {detail}"
    token = api.token if isinstance(api.token, str) else get_token()
    return PublishError(text.replace(token, "<token>") if token else text)


def _count(entries: tuple[PlanEntry, ...]) -> str:
    return f"{len(entries)} file" + ("" if len(entries) == 1 else "s")


def _total(entries: tuple[PlanEntry, ...]) -> int:
    return sum(e.bytes for e in entries)
