"""The pipeline's state on object storage: VAE_HOME, the runs root and the dataset folder as
`s3://bucket/prefix` on moto's S3 server (127.0.0.1), against the same build on disk."""

import contextlib
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import s3fs

from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.cli.review import review_index
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META, isolate
from vae_pipeline_tests.object_store import OVERRIDING, aws_environ, fresh_bucket
from vae_pipeline_tests.request_counter import CountingProxy, step_windows
from vae_pipeline_tests.services import postgres_database, process, redis_prefix, wait_for
from vae_pipeline_tests.test_publish_flow import REPO, TOKEN, hub  # noqa: F401 (a fixture)

BIN = Path(sys.executable).parent
REFRESHED = re.compile(rb"Last refreshed: [^(]*\(UTC\)")


def normalised(files: dict[str, bytes]) -> dict[str, bytes]:
    """The card's refresh time is the one line two builds of the same runs may differ in."""
    return {**files, "README.md": REFRESHED.sub(b"Last refreshed: - (UTC)", files["README.md"])}


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return normalised({p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
                       if p.is_file()})


def bucket_bytes(prefix: str) -> dict[str, bytes]:
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    names = sorted(fs.find(prefix))
    return normalised({name[len(prefix):].lstrip("/"): fs.cat_file(name) for name in names})


def bucket_etags(prefix: str) -> dict[str, str]:
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    return {name: info["ETag"] for name, info in fs.find(prefix, detail=True).items()}


@pytest.fixture(scope="module")
def s3(s3_endpoint):
    """The AWS variables pointing every client at the test server, and a bucket, for the module."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's server logs every request
    with pytest.MonkeyPatch.context() as monkeypatch, fresh_bucket(s3_endpoint) as bucket:
        for name in OVERRIDING:
            monkeypatch.delenv(name, raising=False)
        for name, value in aws_environ(s3_endpoint).items():
            monkeypatch.setenv(name, value)
        yield {"bucket": bucket, "endpoint": s3_endpoint}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, s3):
    """Two series of two good episodes, on disk and uploaded to the bucket as they are."""
    sample = generate(tmp_path_factory.mktemp("runs"), META, series=2, episodes=2, seed=31, bad=False, drifted=0)
    url = f"s3://{s3['bucket']}/runs"
    s3fs.S3FileSystem(skip_instance_cache=True).put(f"{sample.root}/", url, recursive=True)
    return {"sample": sample, "local": sample.root, "url": url}


@pytest.fixture(scope="module")
def local_build(runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        summary = build(runs["local"], paths["dataset"])
    assert summary["failed_runs"] == []
    return {**paths, "files": folder_bytes(paths["dataset"])}


def on_bucket(monkeypatch, root: Path, bucket: str, name: str) -> dict[str, str]:
    """Settings for a build whose home and dataset are on the bucket; only this machine's scratch
    folder (and its embedded instance) is on disk."""
    isolate(root, monkeypatch)
    paths = {"home": f"s3://{bucket}/{name}/home", "dataset": f"s3://{bucket}/{name}/dataset",
             "scratch": str(root / "scratch")}
    monkeypatch.setenv("VAE_HOME", paths["home"])
    monkeypatch.setenv("VAE_SCRATCH", paths["scratch"])
    monkeypatch.setenv("VAE_DATASET_DIR", paths["dataset"])
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster"))
    return paths


@pytest.fixture(scope="module")
def bucket_build(runs, s3, tmp_path_factory):
    root = tmp_path_factory.mktemp("bucket")
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = on_bucket(monkeypatch, root, s3["bucket"], "one")
        summary = build(runs["url"], paths["dataset"])
        yield {**paths, "root": root, "summary": summary, "monkeypatch": monkeypatch}


def test_a_build_on_a_bucket_writes_the_bytes_of_the_build_on_disk(bucket_build, local_build, runs):
    assert bucket_build["summary"]["failed_runs"] == []
    published = bucket_bytes(bucket_build["dataset"].removeprefix("s3://"))
    assert published == local_build["files"]
    # a row for every episode of the plan's completed series (from the generator, not the build)
    rows = [json.loads(line) for line in published["episodes.jsonl"].decode().splitlines() if line.strip()]
    sample = runs["sample"]
    assert sorted(row["id"] for row in rows) == sorted(
        e.episode_id for e in sample.episodes if sample.series[e.series] == "completed")


def test_compare_tells_the_bucket_build_is_the_disk_build_clock_readings_masked(bucket_build, local_build, tmp_path,
                                                                              capsys):
    """Before: no way to compare a dataset on disk with one on a bucket but the tests' own helper.
    (Before the publish test below allows findings on the bucket's build.)"""
    assert main(["compare", str(local_build["dataset"]), bucket_build["dataset"]]) == 0
    assert capsys.readouterr().out.startswith(f"same dataset: {len(local_build['files'])} files")
    copy = tmp_path / "copy"
    shutil.copytree(local_build["dataset"], copy)
    card = (copy / "README.md").read_text()
    later = REFRESHED.sub(b"Last refreshed: 2031-01-01 00:00 (UTC)", card.encode()).decode()
    assert later != card
    (copy / "README.md").write_text(later)
    rows = (copy / "episodes.jsonl").read_text()
    (copy / "episodes.jsonl").write_text(re.sub(r'("rehosted_at":)"[^"]*"', r'\1"2031-01-01T00:00:00Z"', rows))
    assert main(["compare", str(copy), bucket_build["dataset"]]) == 0, capsys.readouterr().out
    capsys.readouterr()
    video = sorted((copy / "videos").rglob("*.mp4"))[0]
    video.write_bytes(video.read_bytes() + b"\0")
    (copy / "stray.txt").write_text("dropped here")
    assert main(["compare", str(copy), bucket_build["dataset"]]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"only in {copy}: stray.txt", f"differs: {video.relative_to(copy).as_posix()}", "2 difference(s)"]


def test_the_state_lives_on_the_bucket_and_only_the_scratch_folder_on_disk(bucket_build, runs):
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    home = bucket_build["home"].removeprefix("s3://")
    names = {name[len(home) + 1:] for name in fs.find(home)}
    series = sorted(runs["sample"].series)
    # one Parquet object per asset and series, a label generation per series, staged files
    assert {f"tables/{stage}/{s}.parquet" for stage in ("episodes", "renders", "verdicts", "labels", "bundles")
            for s in series} <= names
    assert {f"label_state/{s}/00000001.parquet" for s in series} <= names
    assert len([n for n in names if n.startswith("bundles/") and n.endswith(".tar.zst")]) == len(runs["sample"].episodes)
    # each video's frames are one object under a versioned key, which the renders table names
    frames = sorted(n for n in names if n.startswith("frames/"))
    named = sorted(f"{sheet.rsplit('/', 1)[0]}.tar" for s in series
                   for sheet in pl.read_parquet(io.BytesIO(fs.cat_file(f"{home}/tables/renders/{s}.parquet")))
                   ["contact_sheet"].drop_nulls().to_list())
    assert frames == named and len(frames) == len(runs["sample"].episodes)
    # nothing named after the bucket was made on disk (a URL taken for a folder)
    assert not list(Path.cwd().glob("s3*")) and not list(bucket_build["root"].rglob("s3:*"))


def test_vae_review_on_another_machine_shows_every_frame_from_the_bucket(bucket_build, tmp_path):
    """The review site, videos and frames of a bucket home fetched into a fresh scratch folder:
    every frame and contact sheet the pages link is there (the frames came as one object each)."""
    index = review_index({"VAE_HOME": bucket_build["home"], "VAE_SCRATCH": str(tmp_path / "elsewhere")})
    site = index.parent
    linked = set()
    for page in site.rglob("*.html"):
        for target in re.findall(r'(?:src|href)="([^"#?]+\.jpg)"', page.read_text()):
            linked.add((page.parent / target).resolve())
    assert len([p for p in linked if "/frames/" in p.as_posix()]) >= 14
    assert [p for p in linked if not p.is_file()] == []


def test_a_second_build_on_the_bucket_changes_nothing(bucket_build, runs):
    dataset = bucket_build["dataset"].removeprefix("s3://")
    before = bucket_etags(dataset)
    with contextlib.redirect_stdout(io.StringIO()):
        summary = build(runs["url"], bucket_build["dataset"])
    assert summary["materialized"] == {}
    assert bucket_etags(dataset) == before


def test_duckdb_is_a_local_cache_rebuilt_from_the_objects(bucket_build, runs):
    from vae_pipeline.storage.resources import Warehouse

    other_machine = bucket_build["root"] / "another-scratch"
    warehouse = Warehouse(path=bucket_build["home"], scratch_path=str(other_machine))
    assert not warehouse.database.exists()
    with warehouse.connect() as con:
        ids = {row[0] for row in con.execute("SELECT id FROM episode_table").fetchall()}
    assert ids == {episode.episode_id for episode in runs["sample"].episodes}
    assert warehouse.database.is_relative_to(other_machine)


def test_a_build_killed_mid_step_on_the_bucket_leaves_nothing_a_later_build_trusts(runs, s3, local_build,
                                                                                    tmp_path, monkeypatch):
    paths = on_bucket(monkeypatch, tmp_path, s3["bucket"], "killed")
    home = paths["home"].removeprefix("s3://")
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    log = tmp_path / "build.log"
    command = [str(BIN / "vae"), "build", "--runs", runs["url"], "--out", paths["dataset"]]
    with log.open("wb") as out:
        build_process = subprocess.Popen(command, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
    deadline = time.monotonic() + 300
    # killed once the first staged archive is on the bucket: bundles is writing, the rest is not done
    while not fs.glob(f"{home}/bundles/**/*.tar.zst") and build_process.poll() is None:
        assert time.monotonic() < deadline, log.read_text()
        fs.invalidate_cache()
        time.sleep(0.05)
    assert build_process.poll() is None, log.read_text()
    os.killpg(build_process.pid, signal.SIGKILL)
    build_process.wait(30)
    assert not fs.exists(f"{paths['dataset'].removeprefix('s3://')}/episodes.jsonl")
    with contextlib.redirect_stdout(io.StringIO()):
        summary = build(runs["url"], paths["dataset"])
    assert summary["failed_runs"] == []
    assert bucket_bytes(paths["dataset"].removeprefix("s3://")) == local_build["files"]


def test_two_celery_workers_sharing_only_the_bucket_build_the_same_bytes(runs, s3, local_build, tmp_path,
                                                                         monkeypatch):
    """Both workers run steps, the dataset is the disk build's, and each of the runs root's files
    is fetched from it once in all (counted by a proxy in front of the server): a worker lacking
    a series takes it from the object the worker that fetched it first left in the home."""
    paths = on_bucket(monkeypatch, tmp_path / "build", s3["bucket"], "celery")
    counting = CountingProxy(s3["endpoint"], lifetime_s=1200)
    with postgres_database() as url, redis_prefix() as prefix, counting:
        monkeypatch.setenv("AWS_ENDPOINT_URL", counting.endpoint)  # the workers' and the build's requests
        s3fs.S3FileSystem.clear_instance_cache()
        monkeypatch.setenv("VAE_INSTANCE", "postgres")
        monkeypatch.setenv("DAGSTER_PG_URL", url)
        monkeypatch.setenv("VAE_CELERY_PREFIX", prefix)
        monkeypatch.setenv("VAE_EXECUTOR", "celery")
        names = [f"vae-s3-{n}-{os.getpid()}" for n in (1, 2)]
        with contextlib.ExitStack() as stack:
            workers = []
            for name in names:
                # each worker its own empty folders: scratch and instance folder, nothing shared
                machine = tmp_path / name
                env = {**os.environ, "VAE_SCRATCH": str(machine / "scratch"), "DAGSTER_HOME": str(machine / "dagster")}
                log = tmp_path / f"{name}.log"
                command = [str(BIN / "vae"), "worker", "--runs", runs["url"], "--out", paths["dataset"],
                           "--name", name, "--concurrency", "1"]
                worker = stack.enter_context(process(command, env, log))
                workers.append((worker, log))
            for worker, log in workers:
                wait_for(lambda log=log: b" ready." in log.read_bytes(), "vae worker", worker, log)
            with contextlib.redirect_stdout(io.StringIO()):
                summary = build(runs["url"], paths["dataset"])
            assert all(worker.poll() is None for worker, _ in workers)
        assert summary["failed_runs"] == []
        with dg.DagsterInstance.get() as instance:
            hosts = set()
            for record in instance.get_run_records():
                for event in instance.all_logs(record.dagster_run.run_id):
                    if event.is_dagster_event and event.dagster_event.event_type_value == "ENGINE_EVENT" \
                            and "Celery worker" in (event.dagster_event.engine_event_data.metadata or {}):
                        hosts.add(event.dagster_event.engine_event_data.metadata["Celery worker"].text.split("@")[0])
        assert hosts == set(names)  # both workers ran steps
        fetched = Counter(r.path for r in counting.taken() if r.method == "GET" and not r.kind.startswith("LIST")
                          and r.path.startswith(f"/{s3['bucket']}/runs/"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])  # the proxy is gone
    s3fs.S3FileSystem.clear_instance_cache()
    inputs = {f"/{s3['bucket']}/runs/{p.relative_to(runs['local']).as_posix()}" for p in runs["local"].rglob("*")
              if p.is_file()}
    assert set(fetched) == inputs and {p: n for p, n in fetched.items() if n > 1} == {}
    assert bucket_bytes(paths["dataset"].removeprefix("s3://")) == local_build["files"]


def test_a_build_fetches_the_series_its_run_reads_before_the_run_reads_them_and_each_file_once(
        runs, s3, local_build, tmp_path, monkeypatch):
    """In-process, the build starts fetching the series a run reads while Dagster makes and starts
    the run (the store would sit idle), and the steps then find them here: the first of their
    files arrives before `episodes` starts, and each input file is fetched once."""
    paths = on_bucket(monkeypatch, tmp_path / "build", s3["bucket"], "ahead")
    with CountingProxy(s3["endpoint"], lifetime_s=600) as counting:
        monkeypatch.setenv("AWS_ENDPOINT_URL", counting.endpoint)
        s3fs.S3FileSystem.clear_instance_cache()
        with contextlib.redirect_stdout(io.StringIO()):
            summary = build(runs["url"], paths["dataset"])
        with dg.DagsterInstance.get() as instance:
            windows = step_windows(instance)
        taken = counting.taken()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3["endpoint"])  # the proxy is gone
    s3fs.S3FileSystem.clear_instance_cache()
    assert summary["failed_runs"] == []
    prefix = f"/{s3['bucket']}/runs/"
    fetched = [r for r in taken if r.method == "GET" and r.kind == "GET" and r.path.startswith(prefix)]
    inputs = {prefix + p.relative_to(runs["local"]).as_posix() for p in runs["local"].rglob("*") if p.is_file()}
    counts = Counter(r.path for r in fetched)
    assert set(counts) == inputs and {p: n for p, n in counts.items() if n > 1} == {}
    episodes_started = min(start for start, _, step in windows if step == "episodes")
    episode_files = [r.at for r in fetched if r.path.count("/") >= 5]  # /bucket/runs/series/episode/…
    assert episode_files and min(episode_files) < episodes_started
    assert bucket_bytes(paths["dataset"].removeprefix("s3://")) == local_build["files"]


def test_judge_answers_are_read_on_a_machine_that_has_not_fetched_the_series(bucket_build, runs):
    """With Celery, `verdicts` may run on a worker that ran no other step of its series: it fetches
    the series' files first, as `renders` and `bundles` do. Reading from an empty local copy
    instead made every judged episode invalid and the release publish none of them."""
    from vae_pipeline.cli.common import paths_of, settings
    from vae_pipeline.cli.launch import run_job
    from vae_pipeline.storage.resources import RunsRoot

    mirror = RunsRoot(path=runs["url"], scratch_path=bucket_build["scratch"]).mirror
    shutil.rmtree(mirror.local)  # what this machine fetched of the runs root: as on another worker
    shutil.rmtree(mirror.local.parent / f"{mirror.local.name}.etags")
    series = sorted(s for s, status in runs["sample"].series.items() if status == "completed")[0]
    judged = sorted(p.episode_id for p in runs["sample"].episodes if p.series == series and p.bad is None)
    assert judged
    with settings(**paths_of(runs["url"], bucket_build["dataset"])), dg.DagsterInstance.get() as instance:
        result = run_job("refresh", instance, partition_key=series, asset_selection=[dg.AssetKey("verdicts")])
        assert result.success
        (frame,) = result.output_for_node("verdicts").values()
    assert sorted(frame.filter(pl.col("judge_valid"))["id"].to_list()) == judged


def test_publish_streams_the_dataset_on_the_bucket_to_the_hub(bucket_build, runs, hub, capsys):
    dataset = bucket_build["dataset"]
    code = main(["publish", "--dataset", dataset, "--repo", REPO])
    refused = capsys.readouterr().out
    assert code == 1 and "dataset_episodes.no_scrub_findings" in refused  # the generator plants findings
    # reviewed and accepted with `vae allow`, which reads this machine's DuckDB cache of the bucket
    section = refused.split("dataset_episodes.no_scrub_findings", 1)[1].split("\n- ", 1)[0]  # one finding a line
    findings = set(re.findall(r"[\w.-]+/([\w.-]+): ([\w./-]+:\d+) (\w+)", section))
    assert findings
    for episode, where, kind in sorted(findings):
        assert main(["allow", episode, where, kind, "--reason", "planted by the test's generator"]) == 0
    capsys.readouterr()
    with contextlib.redirect_stdout(io.StringIO()):
        assert build(runs["url"], dataset)["failed_runs"] == []
    code = main(["publish", "--dataset", dataset, "--repo", REPO])
    planned = capsys.readouterr().out
    assert code == 0 and "new repository" in planned, planned
    assert not hub.exists(REPO)  # a dry run sends nothing
    code = main(["publish", "--dataset", dataset, "--repo", REPO, "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert TOKEN not in out
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    prefix = dataset.removeprefix("s3://")
    sent = {name: body for name, body in hub.files(REPO).items() if name != ".gitattributes"}
    assert sent == {name[len(prefix) + 1:]: fs.cat_file(name) for name in fs.find(prefix)}


def test_a_bucket_that_does_not_exist_is_refused_in_one_line_naming_its_setting(s3, tmp_path, monkeypatch, capsys):
    """Before: "The specified bucket does not exist" (home), "runs root … is not a folder" (runs
    root), a build whose every roll-up failed (dataset folder), a local folder `s3:` (sample)."""
    isolate(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    absent = f"vae-absent-{uuid.uuid4().hex[:12]}"
    runs = tmp_path / "runs"
    runs.mkdir()

    def refused(argv: list[str], setting: str) -> None:
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"vae: error: {setting}"), lines
        assert f"the bucket {absent} does not exist: create it first" in lines[0]

    refused(["build", "--runs", f"s3://{absent}/runs", "--out", "dataset"], "VAE_RUNS_ROOT (--runs)")
    refused(["build", "--runs", str(runs), "--out", f"s3://{absent}/dataset"], "VAE_DATASET_DIR")
    refused(["publish", "--dataset", f"s3://{absent}/dataset", "--repo", "org/name"], "VAE_DATASET_DIR")
    refused(["sample", "--out", f"s3://{absent}/runs"], "--out")
    monkeypatch.setenv("VAE_HOME", f"s3://{absent}/home")
    refused(["build", "--runs", str(runs), "--out", "dataset"], "VAE_HOME")
    refused(["leaderboard"], "VAE_HOME")
    assert not (tmp_path / "s3:").exists()
    assert absent not in s3fs.S3FileSystem(skip_instance_cache=True).ls("", refresh=True)  # never created


@pytest.mark.parametrize(("store", "said"), [
    pytest.param({}, "Unable to locate credentials", id="no-credentials"),
    pytest.param({"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example",
                  "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "Could not connect to the endpoint URL",
                 id="no-answer"),
])
def test_a_store_that_cannot_be_reached_is_refused_in_one_line_naming_the_setting(store, said, tmp_path,
                                                                                  monkeypatch, capsys, request):
    """Before: a botocore traceback (NoCredentialsError, EndpointConnectionError) of every command."""
    isolate(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    for name, value in store.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()  # a command is a new process: no client from another test
    request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)  # nor from this one in the next
    for argv, setting in [(["sample", "--out", "s3://harness/runs"], "--out"),
                          (["build", "--runs", "s3://harness/runs", "--out", "dataset"], "VAE_RUNS_ROOT (--runs)")]:
        assert main(argv) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"vae: error: {setting} is s3://harness/runs, but the object "
                                                       "store cannot be reached ("), lines
        assert said in lines[0] and "AWS_ENDPOINT_URL" in lines[0]
    assert not (tmp_path / "s3:").exists()


def test_sample_writes_its_runs_root_onto_a_bucket(s3, tmp_path, monkeypatch, capsys):
    """Before: `vae sample --out s3://…` exited 0 and wrote a local folder named `s3:`."""
    isolate(tmp_path / "env", monkeypatch)
    monkeypatch.chdir(tmp_path)
    url = f"s3://{s3['bucket']}/sampled/runs"
    plan = ["--series", "2", "--episodes", "1", "--no-bad", "--seed", "3"]
    assert main(["sample", "--out", url, *plan]) == 0
    assert main(["sample", "--out", "local", *plan]) == 0
    assert f"to {url} (" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env", "local"]  # no folder `s3:`
    local = tmp_path / "local"
    expected = {p.relative_to(local).as_posix(): p.read_bytes() for p in sorted(local.rglob("*")) if p.is_file()}
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    prefix = url.removeprefix("s3://")
    assert {name[len(prefix) + 1:]: fs.cat_file(name) for name in fs.find(prefix)} == expected
    # sampled again onto the same prefix, a series is written anew: nothing of the first stays
    stale = f"{prefix}/{sorted(expected)[0].split('/')[0]}/stale.txt"
    fs.pipe_file(stale, b"left over")
    assert main(["sample", "--out", url, *plan]) == 0
    fs.invalidate_cache()
    assert not fs.exists(stale)

