"""What the pipeline asks of a bucket, counted by a proxy in front of moto's server: the runs
root listed in one LIST (not a HEAD per series.json), the dataset's files compared against one
listing, and the proxy's own counts."""

import json

import pytest
import s3fs

from vae_pipeline.assets.dataset_episodes import place
from vae_pipeline.domain.objects import Mirror, heads_under, location, write_if_changed
from vae_pipeline.storage.resources import RunsRoot
from vae_pipeline_tests.request_counter import CountingProxy, summary

SERIES = ["2026-01-01-a", "2026-01-02-b", "2026-01-03-c"]


@pytest.fixture
def proxy(s3_environ, s3_endpoint, monkeypatch):
    """Every client made from here on reaches the server through a counting proxy."""
    with CountingProxy(s3_endpoint, lifetime_s=300) as counting:
        s3fs.S3FileSystem.clear_instance_cache()
        monkeypatch.setenv("AWS_ENDPOINT_URL", counting.endpoint)
        yield counting
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def runs(make_bucket, s3_client):
    """A runs root of three series (each a series.json and an episode file) and comparisons/."""
    bucket = make_bucket()
    for series in SERIES:
        s3_client.put_object(Bucket=bucket, Key=f"runs/{series}/series.json", Body=json.dumps({"id": series}).encode())
        s3_client.put_object(Bucket=bucket, Key=f"runs/{series}/ep-1/transcript.jsonl", Body=b"{}\n")
    s3_client.put_object(Bucket=bucket, Key="runs/comparisons/human/votes.jsonl", Body=b"{}\n")
    s3_client.put_object(Bucket=bucket, Key="runs/no-series-file/notes.txt", Body=b"x")
    return bucket


def test_the_runs_root_is_listed_once_and_each_file_fetched_once(runs, proxy, s3_client, tmp_path):
    root = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "scratch"))
    local = root.root
    first = proxy.taken()
    # one LIST of the whole root, one GET per series.json and comparisons file, nothing else
    assert summary(first)["kind"] == {"LIST": 1, "GET": len(SERIES) + 1}
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == sorted(
        [f"{s}/series.json" for s in SERIES] + ["comparisons/human/votes.jsonl"])
    assert (local / "no-series-file").is_dir() and not (local / "no-series-file" / "series.json").exists()
    # unchanged: the listing alone; a series.json gone from the bucket is gone here too
    assert root.root == local
    assert summary(proxy.taken())["kind"] == {"LIST": 1}
    s3_client.delete_object(Bucket=runs, Key=f"runs/{SERIES[0]}/series.json")
    s3_client.put_object(Bucket=runs, Key="runs/comparisons/human/votes.jsonl", Body=b"{}\n{}\n")
    root.root  # noqa: B018 (the property syncs)
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "GET": 1}
    assert not (local / SERIES[0] / "series.json").exists()
    assert (local / "comparisons/human/votes.jsonl").read_bytes() == b"{}\n{}\n"


def test_files_compared_against_one_listing_make_no_head(make_bucket, proxy, tmp_path):
    folder = location(f"s3://{make_bucket()}/dataset")
    write_if_changed(folder / "README.md", b"card")  # a folder that exists (s3fs asks more of an empty one)
    source = tmp_path / "video.mp4"
    source.write_bytes(b"video bytes")
    proxy.taken()
    heads = heads_under(folder)
    assert sorted(heads) == [(folder / "README.md").path]
    assert place(source, folder / "videos/a.mp4", heads)
    assert write_if_changed(folder / "episodes/a.json", b"{}", heads)
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "PUT": 2}
    heads = heads_under(folder)
    # the same bytes again: nothing written, and no HEAD asked
    assert not place(source, folder / "videos/a.mp4", heads)
    assert not write_if_changed(folder / "episodes/a.json", b"{}", heads)
    source.write_bytes(b"other bytes")
    assert place(source, folder / "videos/a.mp4", heads)
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "PUT": 1}
    assert (folder / "videos/a.mp4").read_bytes() == b"other bytes"


def test_the_proxy_counts_kinds_and_statuses(make_bucket, proxy):
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    bucket = make_bucket()
    proxy.taken()
    fs.pipe_file(f"{bucket}/a", b"0123456789")
    fs.pipe_file(f"{bucket}/b", b"x", mode="create")
    fs.cat_file(f"{bucket}/a", start=2, end=4)
    fs.ls(bucket, refresh=True)
    with pytest.raises(FileNotFoundError):
        fs.call_s3("head_object", Bucket=bucket, Key="missing")
    counts = summary(proxy.taken())
    assert counts["kind"] == {"PUT": 1, "conditional PUT": 1, "ranged GET": 1, "LIST": 1, "HEAD": 1}
    assert counts["HEAD 404"]["HEAD 404"] == 1


def test_a_frames_folder_is_one_object_and_another_machine_fetches_it_in_one_get(make_bucket, proxy, tmp_path):
    """Frames and their contact sheet, saved on a bucket: one PUT for the folder (and the pointer
    naming its version), not one per file; another machine gets it with one listing and one GET,
    the same files; a folder saved file by file before folders were packed is still fetched."""
    bucket = make_bucket()
    writer = Mirror(location(f"s3://{bucket}/home"), tmp_path / "writer")
    folder = writer.local / writer.versioned("frames/s1/ep-1", "v1")
    frames = {f"f{i:02d}.jpg": bytes([i]) * (100 + i) for i in range(14)} | {"contact.jpg": b"sheet", "labels.json": b"{}"}
    for name, data in frames.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    proxy.taken()
    assert writer.publish_folder(folder) == "frames/s1/ep-1@v1"
    made = summary(proxy.taken())
    assert made["method"]["PUT"] == 2 and made["method"]["GET"] + made["method"]["HEAD"] <= 1, made  # folder, pointer
    s3 = s3fs.S3FileSystem(skip_instance_cache=True)
    assert sorted(s3.find(f"{bucket}/home")) == [f"{bucket}/home/frames/s1/ep-1.current",
                                                  f"{bucket}/home/frames/s1/ep-1@v1.tar"]
    for name, data in {"f00.jpg": b"old", "contact.jpg": b"old sheet"}.items():  # saved file by file
        s3.pipe_file(f"{bucket}/home/frames/s0/ep-0@v0/{name}", data)
    reader = Mirror(location(f"s3://{bucket}/home"), tmp_path / "reader")
    proxy.taken()
    reader.fetch_folders(["frames/s1/ep-1@v1", "frames/s0/ep-0@v0"], "frames")
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "GET": 3}
    got = reader.local / "frames/s1/ep-1@v1"
    assert {p.relative_to(got).as_posix(): p.read_bytes() for p in got.rglob("*") if p.is_file()} == frames
    assert (reader.local / "frames/s0/ep-0@v0/contact.jpg").read_bytes() == b"old sheet"
    reader.fetch_folders(["frames/s1/ep-1@v1"], "frames")  # unchanged: the listing alone
    assert summary(proxy.taken())["kind"] == {"LIST": 1}
    other = Mirror(location(f"s3://{bucket}/home"), tmp_path / "other")
    other.sync_folders("frames")  # `vae review` on a bucket home: every folder
    assert (other.local / "frames/s1/ep-1@v1/f13.jpg").read_bytes() == frames["f13.jpg"]
    assert (other.local / "frames/s0/ep-0@v0/f00.jpg").read_bytes() == b"old"


def test_staged_files_are_fetched_from_one_listing_a_folder_not_a_head_each(make_bucket, proxy, s3_client, tmp_path):
    """What `dataset_episodes` and the review step read of the home's staged videos and archives."""
    bucket = make_bucket()
    names = [f"videos/s1/ep-{i}.mp4" for i in range(5)] + [f"bundles/s1/ep-{i}.tar.zst" for i in range(5)]
    for name in names:
        s3_client.put_object(Bucket=bucket, Key=f"home/{name}", Body=name.encode())
    mirror = Mirror(location(f"s3://{bucket}/home"), tmp_path / "scratch")
    proxy.taken()
    local = mirror.fetch_all(names)
    assert summary(proxy.taken())["kind"] == {"LIST": 2, "GET": len(names)}
    assert {name: path.read_bytes() for name, path in local.items()} == {name: name.encode() for name in names}
    mirror.fetch_all(names)  # held here already: the listings alone
    assert summary(proxy.taken())["kind"] == {"LIST": 2}
    with pytest.raises(FileNotFoundError, match="videos/s1/gone.mp4 is not in the bucket"):
        mirror.fetch_all(["videos/s1/gone.mp4"])
