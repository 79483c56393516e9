"""Publishing through the real `HfApi` client against the Hub stand-in: plan, dry run, one commit."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import urllib.error
import urllib.request
from pathlib import Path

import huggingface_hub
import pytest

from vae_pipeline.domain.dataset.publish import (
    PlanEntry,
    PublishError,
    execute_plan,
    format_plan,
    hub_api,
    plan_publish,
)
from vae_pipeline_tests.hub_standin import CONCURRENT_COMMIT, HubStandin, PullRequest

TOKEN = "hf_standinTestToken0123456789abcdefXYZ"  # not a real token
REPO = "vae-lab/agent-runs"
TAR = "episodes/2025-01-02/ep-1.tar.zst"
LFS_PATHS = {"data/episodes.parquet", "videos/ep-1.mp4", TAR}


@pytest.fixture(autouse=True)
def _client_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The stand-in speaks LFS, not Xet's CAS protocol (hf_xet is installed, so say so); and no
    HF_TOKEN or stored login of the machine running the tests may leak into a test."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)


@pytest.fixture
def hub():
    # A small page size makes every tree listing follow the Link pagination.
    with HubStandin(TOKEN, page_size=3) as standin:
        yield standin
        assert standin.violations == []


@pytest.fixture
def api(hub: HubStandin) -> huggingface_hub.HfApi:
    return hub_api(hub.endpoint, TOKEN)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A small dataset folder: text files, and binaries the Hub routes to LFS (by extension and content)."""
    rng = random.Random(7)
    root = tmp_path / "dataset"
    files = {
        "README.md": b"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
        b"    path: data/episodes.parquet\n---\n# runs\n",
        "episodes.jsonl": b'{"id": "ep-1", "label": "PASS"}\n',
        "data/episodes.parquet": b"PAR1" + rng.randbytes(40_000) + b"PAR1",
        "meta/rubric.json": b'{"version": 3}\n',
        "videos/ep-1.mp4": b"\x00\x00\x00\x18ftypmp42" + rng.randbytes(256 * 1024),
        TAR: b"\x28\xb5\x2f\xfd" + rng.randbytes(512 * 1024),
        "episodes/2025-01-02/ep-1.json": b'{"id": "ep-1", "archive_sha256": "..."}\n',
    }
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return root


def local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def every_file(root: Path) -> set[str]:
    """For the tests of the Hub mechanics: every file of the folder counts as produced."""
    return set(local_files(root))


def commit_lines(hub: HubStandin, since: int = 0) -> list[list[dict]]:
    return [r.body for r in hub.recorded("commit", since) if r.status == 200]


def publish(dataset: Path, api: huggingface_hub.HfApi, message: str = "publish") -> str:
    return execute_plan(plan_publish(dataset, api, REPO, every_file(dataset)), api, REPO, dataset_dir=dataset, message=message)


def paths(entries: tuple[PlanEntry, ...]) -> list[str]:
    return [e.path for e in entries]


def test_dry_run_of_a_new_repository_lists_everything_and_sends_nothing(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))

    files = local_files(dataset)
    assert plan.creates_repo and plan.parent_commit is None
    assert paths(plan.added) == sorted(files)
    assert {e.path: e.bytes for e in plan.added} == {p: len(c) for p, c in files.items()}
    assert plan.changed == plan.deleted == plan.unchanged == ()
    text = format_plan(plan)
    assert "new repository" in text
    assert all(path in text for path in files)
    assert f"added: {len(files)} files, {sum(map(len, files.values())):,} bytes" in text
    assert hub.routes() == ["repo_info"] and {r.method for r in hub.requests} == {"GET"}
    assert not hub.exists(REPO)


def test_first_publish_creates_the_public_repo_in_one_commit(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    url = execute_plan(plan, api, REPO, dataset_dir=dataset, message="Publish 1 episode")

    files = local_files(dataset)
    assert url == f"{hub.endpoint}/datasets/{REPO}/commit/{hub.head(REPO)}"
    [create] = hub.recorded("create_repo")
    assert create.body == {"name": "agent-runs", "organization": "vae-lab", "visibility": "public", "type": "dataset"}
    assert hub.visibility(REPO) == "public"
    [lines] = commit_lines(hub)
    assert lines[0] == {"key": "header", "value": {"summary": "Publish 1 episode", "description": ""}}
    kinds = {line["value"]["path"]: line["key"] for line in lines[1:]}
    assert kinds == {p: "lfsFile" if p in LFS_PATHS else "file" for p in files}
    sha = {p: hashlib.sha256(c).hexdigest() for p, c in files.items()}
    assert {line["value"]["oid"] for line in lines[1:] if line["key"] == "lfsFile"} == {sha[p] for p in LFS_PATHS}
    uploads = hub.recorded("lfs_upload")
    assert sorted(r.path.rsplit("/", 1)[1] for r in uploads) == sorted(sha[p] for p in LFS_PATHS)
    assert len(hub.recorded("lfs_verify")) == len(LFS_PATHS)
    assert hub.files(REPO) == files | {".gitattributes": hub.files(REPO)[".gitattributes"]}
    initial = hub.commit(REPO, hub.head(REPO)).parents
    assert len(initial) == 1 and hub.commit(REPO, initial[0]).summary == "initial commit"
    assert all(r.authorized for r in hub.requests if r.route != "lfs_upload")


def test_republish_sends_only_the_difference_in_one_commit_on_the_planned_parent(hub, api, dataset):
    publish(dataset, api)
    (dataset / "episodes.jsonl").write_bytes(b'{"id": "ep-1", "label": "FAIL"}\n')
    (dataset / TAR).write_bytes(b"\x28\xb5\x2f\xfd" + random.Random(8).randbytes(300_000))
    (dataset / "videos/ep-2.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + random.Random(9).randbytes(100_000))
    rubric_size = (dataset / "meta/rubric.json").stat().st_size
    (dataset / "meta/rubric.json").unlink()
    before = len(hub.requests)

    plan = plan_publish(dataset, api, REPO, every_file(dataset))

    assert {r.method for r in hub.requests[before:]} == {"GET"}
    assert hub.routes(before).count("tree") > 1  # the listing was paginated and followed
    assert plan.parent_commit == hub.head(REPO)
    assert paths(plan.added) == ["videos/ep-2.mp4"]
    assert paths(plan.changed) == ["episodes.jsonl", TAR]
    assert plan.deleted == (PlanEntry("meta/rubric.json", rubric_size),)
    assert paths(plan.unchanged) == [
        "README.md",
        "data/episodes.parquet",
        "episodes/2025-01-02/ep-1.json",
        "videos/ep-1.mp4",
    ]
    assert [e.bytes for e in plan.changed] == [(dataset / p).stat().st_size for p in paths(plan.changed)]
    text = format_plan(plan)
    assert "  - meta/rubric.json" in text and "  ~ episodes.jsonl" in text and "  + videos/ep-2.mp4" in text

    before = len(hub.requests)
    url = execute_plan(plan, api, REPO, dataset_dir=dataset, message="Republish")

    [lines] = commit_lines(hub, before)
    assert lines[0]["value"] == {"summary": "Republish", "description": "", "parentCommit": plan.parent_commit}
    assert sorted((line["key"], line["value"]["path"]) for line in lines[1:]) == [
        ("deletedFile", "meta/rubric.json"),
        ("file", "episodes.jsonl"),
        ("lfsFile", TAR),
        ("lfsFile", "videos/ep-2.mp4"),
    ]
    [preupload] = hub.recorded("preupload", before)
    assert sorted(f["path"] for f in preupload.body["files"]) == ["episodes.jsonl", TAR, "videos/ep-2.mp4"]
    uploaded = {r.path.rsplit("/", 1)[1] for r in hub.recorded("lfs_upload", before)}
    assert uploaded == {hashlib.sha256((dataset / p).read_bytes()).hexdigest() for p in (TAR, "videos/ep-2.mp4")}
    assert "create_repo" not in hub.routes(before)
    assert url == f"{hub.endpoint}/datasets/{REPO}/commit/{hub.head(REPO)}"
    assert hub.commit(REPO, hub.head(REPO)).parents == (plan.parent_commit,)
    assert hub.files(REPO) == local_files(dataset) | {".gitattributes": hub.files(REPO)[".gitattributes"]}

    again = plan_publish(dataset, api, REPO, every_file(dataset))
    assert again.is_empty and len(again.unchanged) == len(local_files(dataset))
    assert "nothing to send" in format_plan(again)
    before = len(hub.requests)
    assert execute_plan(again, api, REPO, dataset_dir=dataset, message="noop") == url
    assert hub.routes(before) == []


def test_create_pr_opens_a_pull_request_and_leaves_main_alone(hub, api, dataset):
    publish(dataset, api)
    (dataset / "episodes.jsonl").write_bytes(b'{"id": "ep-1", "label": "PASS_WITH_NITS"}\n')
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    before = len(hub.requests)

    url = execute_plan(plan, api, REPO, dataset_dir=dataset, create_pr=True, message="Relabel")

    assert url == f"{hub.endpoint}/datasets/{REPO}/discussions/1"
    [pr] = hub.pull_requests(REPO)
    assert pr == PullRequest(1, "refs/pr/1", plan.parent_commit, hub.head(REPO, "refs/pr/1"))
    assert hub.head(REPO) == plan.parent_commit
    assert hub.files(REPO, "refs/pr/1")["episodes.jsonl"] == (dataset / "episodes.jsonl").read_bytes()
    [commit] = hub.recorded("commit", before)
    assert commit.query == {"create_pr": "1"}
    assert [line["value"]["path"] for line in commit.body[1:]] == ["episodes.jsonl"]


def test_a_commit_made_after_the_plan_makes_publishing_fail_cleanly(hub, api, dataset):
    publish(dataset, api)
    (dataset / "episodes.jsonl").write_bytes(b"{}\n")
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    theirs = hub.push(REPO, {"NOTES.md": b"someone else\n"})

    with pytest.raises(PublishError) as caught:
        execute_plan(plan, api, REPO, dataset_dir=dataset, message="mine")

    message = str(caught.value)
    assert "\n" not in message and "moved since the plan" in message and "re-run the plan" in message
    assert caught.value.__cause__ is None
    assert hub.recorded("commit")[-1].status == 412
    assert hub.head(REPO) == theirs
    assert hub.files(REPO)["episodes.jsonl"] != b"{}\n"


def test_a_repository_created_after_the_plan_is_not_overwritten(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    hub.create(REPO)

    with pytest.raises(PublishError, match="already exists"):
        execute_plan(plan, api, REPO, dataset_dir=dataset, message="first")

    assert "commit" not in hub.routes()


def test_a_file_edited_after_the_plan_is_not_sent(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    (dataset / "episodes.jsonl").write_bytes(b"edited after review\n")
    before = len(hub.requests)

    with pytest.raises(PublishError, match="episodes.jsonl changed since the plan"):
        execute_plan(plan, api, REPO, dataset_dir=dataset, message="first")

    assert hub.routes(before) == [] and not hub.exists(REPO)


def test_a_plan_is_only_executed_against_its_repository(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))

    with pytest.raises(PublishError, match="the plan is for"):
        execute_plan(plan, api, "vae-lab/other", dataset_dir=dataset, message="first")


def test_nothing_is_planned_from_an_empty_or_unpublishable_folder(hub, api, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PublishError, match="holds no files"):
        plan_publish(tmp_path / "empty", api, REPO, {"README.md"})
    (tmp_path / "bad/.git").mkdir(parents=True)
    (tmp_path / "bad/.git/config").write_text("[core]\n")
    with pytest.raises(PublishError, match=r"\.git/config"):
        plan_publish(tmp_path / "bad", api, REPO, every_file(tmp_path / "bad"))
    assert hub.requests == []


def test_a_missing_revision_is_a_publish_error(hub, api, dataset):
    publish(dataset, api)
    with pytest.raises(PublishError, match="has no revision 'release'"):
        plan_publish(dataset, api, REPO, every_file(dataset), revision="release")


def test_the_token_comes_from_hf_token_and_is_never_shown(hub, dataset, monkeypatch, caplog, capsys):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    api = hub_api(hub.endpoint)
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    shown = [format_plan(plan), execute_plan(plan, api, REPO, dataset_dir=dataset, message="first")]
    assert all(r.authorized for r in hub.requests if r.route != "lfs_upload")

    (dataset / "episodes.jsonl").write_bytes(b"{}\n")
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    hub.push(REPO, {"NOTES.md": b"x\n"})
    with pytest.raises(PublishError) as concurrent:
        execute_plan(plan, api, REPO, dataset_dir=dataset, message="second")
    wrong = "hf_wrongTokenForTheStandin0000000000"
    with pytest.raises(PublishError) as rejected:
        plan_publish(dataset, hub_api(hub.endpoint, wrong), REPO, every_file(dataset))
    assert "HTTP 401" in str(rejected.value) and wrong not in str(rejected.value)
    assert hub.violations == [f"GET /api/datasets/{REPO}/revision/main: Invalid credentials in Authorization header"]
    hub.violations.clear()

    captured = capsys.readouterr()
    shown += [str(concurrent.value), str(rejected.value), caplog.text, captured.out, captured.err]
    assert all(TOKEN not in text for text in shown)
    assert all(wrong not in text for text in shown)


def test_a_token_echoed_back_by_a_server_is_masked_in_the_error(hub, api, dataset):
    plan = plan_publish(dataset, api, REPO, every_file(dataset))
    hub.fail_next("commit", 403, f"proxy refused Authorization: Bearer {TOKEN}")

    with pytest.raises(PublishError) as echoed:
        execute_plan(plan, api, REPO, dataset_dir=dataset, message="first")

    message = str(echoed.value)
    assert TOKEN not in message and "\n" not in message
    assert "publishing to vae-lab/agent-runs failed: HTTP 403" in message and "Bearer <token>" in message


def _raw(hub: HubStandin, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(f"{hub.endpoint}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_standin_rejects_what_the_hub_would(hub):
    """The stand-in's checks are what make the publish tests meaningful: prove they bite."""
    hub.create(REPO)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    ndjson = {**auth, "Content-Type": "application/x-ndjson"}
    commit = f"/api/datasets/{REPO}/commit/main"
    header = json.dumps({"key": "header", "value": {"summary": "s", "description": ""}}).encode() + b"\n"
    unannounced = json.dumps(
        {"key": "file", "value": {"path": "a.txt", "content": "eA==", "encoding": "base64"}}
    ).encode()
    content = b"the real bytes"
    oid = hashlib.sha256(content).hexdigest()
    lfs = {**auth, "Content-Type": "application/vnd.git-lfs+json", "Accept": "application/vnd.git-lfs+json"}
    objects = [{"oid": oid, "size": len(content)}]
    batch = json.dumps({"operation": "upload", "transfers": ["basic"], "objects": objects, "hash_algo": "sha256"})

    assert _raw(hub, "POST", commit, header, {"Content-Type": "application/x-ndjson"})[0] == 401
    assert _raw(hub, "POST", commit, header, auth)[0] == 400  # not ndjson
    assert _raw(hub, "POST", commit, unannounced, ndjson)[0] == 400  # no header line
    assert _raw(hub, "POST", commit, header + unannounced, ndjson)[0] == 400  # never preuploaded
    status, answer = _raw(hub, "POST", f"/datasets/{REPO}.git/info/lfs/objects/batch", batch.encode(), lfs)
    assert status == 200
    upload = answer["objects"][0]["actions"]["upload"]["href"].removeprefix(hub.endpoint)
    assert _raw(hub, "PUT", upload, b"other bytes, same size!", {})[0] == 400
    assert _raw(hub, "PUT", upload.split("?")[0] + "?sig=forged", content, {})[0] == 403
    stale = json.dumps({"key": "header", "value": {"summary": "s", "parentCommit": "0" * 40}}).encode() + b"\n"
    assert _raw(hub, "POST", commit, stale + unannounced, ndjson) == (412, {"error": CONCURRENT_COMMIT})
    assert _raw(hub, "GET", f"/api/models/{REPO}/revision/main", b"", auth)[0] == 501

    assert len(hub.violations) == 7  # every rejection above but the 412, which is the Hub's normal answer
    hub.violations.clear()


# ---------------------------------------------------------------- only what the pipeline produced


def pipeline_folder(root: Path, ids: list[str]) -> dict[str, bytes]:
    """A dataset folder laid out as the pipeline writes it: rows (JSON lines and Parquet from one
    frame), card, leaderboard files, a meta file, and each row's video, archive and manifest.
    Returns its files."""
    import polars as pl

    rng = random.Random(3)
    rows = pl.DataFrame([{"id": i, "video": f"videos/{i}.mp4", "archive": f"episodes/2025-01-02/{i}.tar.zst"}
                         for i in ids])
    files = {"README.md": b"# card\n", "episodes.jsonl": rows.write_ndjson().encode(),
             "meta/brief.schema.json": b"{}\n", "leaderboard.png": b"\x89PNG\r\n\x1a\n" + rng.randbytes(64),
             "data/leaderboard.parquet": b"PAR1" + rng.randbytes(64) + b"PAR1",
             "data/judge_agreement.parquet": b"PAR1" + rng.randbytes(64) + b"PAR1"}
    parquet = root / "data" / "episodes.parquet"
    parquet.parent.mkdir(parents=True, exist_ok=True)
    rows.write_parquet(parquet)
    files["data/episodes.parquet"] = parquet.read_bytes()
    for i in ids:
        files |= {f"videos/{i}.mp4": b"\x00\x00\x00\x18ftypmp42" + rng.randbytes(2048),
                  f"episodes/2025-01-02/{i}.tar.zst": b"\x28\xb5\x2f\xfd" + rng.randbytes(2048),
                  f"episodes/2025-01-02/{i}.json": json.dumps({"id": i}).encode()}
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content)
    return files


STRAYS = {
    ".episodes.jsonl.k2j4.part": b'{"id": "half a wri',  # a write killed before its rename
    "README.md~": b"# an editor's backup\n",
    "videos/notes.txt": b"dropped here by a person\n",
    "episodes/2025-01-02/.ep-1.tar.zst.123.part": b"\x28\xb5\x2f\xfd",
}


def test_the_plan_sends_only_what_the_pipeline_produced(hub, api, tmp_path):
    from vae_pipeline.domain.dataset.dataset_files import produced_files

    root = tmp_path / "dataset"
    ours = pipeline_folder(root, ["ep-1", "ep-2"])
    for rel, content in STRAYS.items():
        (root / rel).write_bytes(content)

    produced = produced_files(root, ["meta/brief.schema.json"])
    assert produced == set(ours)
    plan = plan_publish(root, api, REPO, produced)
    assert paths(plan.added) == sorted(ours)
    assert {e.path: e.bytes for e in plan.not_ours} == {p: len(c) for p, c in STRAYS.items()}
    text = format_plan(plan)
    assert f"not ours, not sent: {len(STRAYS)} files" in text
    assert all(f"  ! {p} (" in text for p in STRAYS) and not any(f"  + {p} " in text for p in STRAYS)
    execute_plan(plan, api, REPO, dataset_dir=root, message="first")
    sent = {k: v for k, v in hub.files(REPO).items() if k != ".gitattributes"}
    assert sent == ours

    # ep-2 is no longer published but its video is still in the folder: it is deleted from the
    # Hub, and locally listed as not ours
    (root / "episodes.jsonl").write_text(json.dumps({"id": "ep-1", "video": "videos/ep-1.mp4",
                                                     "archive": "episodes/2025-01-02/ep-1.tar.zst"}) + "\n")
    plan = plan_publish(root, api, REPO, produced_files(root, ["meta/brief.schema.json"]))
    gone = ["episodes/2025-01-02/ep-2.json", "episodes/2025-01-02/ep-2.tar.zst", "videos/ep-2.mp4"]
    assert paths(plan.deleted) == gone
    assert set(gone) <= set(paths(plan.not_ours))
    execute_plan(plan, api, REPO, dataset_dir=root, message="second")
    assert not set(gone) & set(hub.files(REPO)) and not set(STRAYS) & set(hub.files(REPO))


def test_a_produced_file_missing_from_the_folder_stops_the_plan(tmp_path):
    from vae_pipeline.domain.dataset.dataset_files import DatasetFolderError, produced_files

    root = tmp_path / "dataset"
    pipeline_folder(root, ["ep-1"])
    (root / "videos" / "ep-1.mp4").unlink()
    (root / "README.md").unlink()
    with pytest.raises(DatasetFolderError, match=r"missing from the dataset folder: README\.md \(from dataset_card\), videos/ep-1\.mp4;"):
        produced_files(root, ["meta/brief.schema.json"])


def test_rows_in_jsonl_and_parquet_must_agree(tmp_path):
    import polars as pl

    from vae_pipeline.domain.dataset.dataset_files import rows_files_disagree

    root = tmp_path / "dataset"
    pipeline_folder(root, ["ep-1", "ep-2", "ep-3"])
    assert rows_files_disagree(root) == []
    frame = pl.read_parquet(root / "data" / "episodes.parquet")
    frame.filter(pl.col("id") != "ep-2").with_columns(
        video=pl.when(pl.col("id") == "ep-3").then(pl.lit("videos/other.mp4")).otherwise(pl.col("video")),
    ).vstack(pl.DataFrame([{"id": "ep-9", "video": None, "archive": None}], schema=frame.schema)) \
        .write_parquet(root / "data" / "episodes.parquet")
    assert [(i["id"], i["text"]) for i in rows_files_disagree(root)] == [
        ("ep-2", "only in episodes.jsonl"),
        ("ep-9", "only in data/episodes.parquet"),
        ("ep-3", "the row differs between episodes.jsonl and data/episodes.parquet"),
    ]
    twice = frame.vstack(frame.filter(pl.col("id") == "ep-1"))  # both files the same bytes, one id twice
    twice.write_parquet(root / "data" / "episodes.parquet")
    (root / "episodes.jsonl").write_bytes(twice.write_ndjson().encode())
    assert [(i["id"], i["text"]) for i in rows_files_disagree(root)] == [(None, "an episode id appears twice")]
