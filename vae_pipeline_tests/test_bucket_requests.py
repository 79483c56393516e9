"""What the pipeline asks of a bucket, counted by a proxy in front of moto's server: the runs
root listed in one LIST (not a HEAD per series.json), the dataset's files compared against one
listing, and the proxy's own counts."""

import json
import os
import re
import threading
import time

import pytest
import s3fs

from vae_pipeline.domain.objects import (
    Mirror,
    get_objects,
    heads_under,
    listings_held,
    location,
    place_file,
    put_bytes,
    write_if_changed,
)
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


def test_a_file_whose_etag_note_was_cut_short_is_fetched_again(runs, proxy, s3_client, tmp_path):
    """The note of the ETag a fetched file came with is written in place (a crash can leave it cut
    short): a cut or empty note never vouches for the file, a whole one does."""
    root = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "scratch"))
    folder = root.series_dir(SERIES[0])
    proxy.taken()
    notes = root.mirror.local.parent / f"{root.mirror.local.name}.etags" / SERIES[0]
    tag = s3_client.head_object(Bucket=runs, Key=f"runs/{SERIES[0]}/series.json")["ETag"]
    assert (notes / "series.json").read_text() == tag
    (notes / "series.json").write_text(tag[:-3])
    (notes / "ep-1/transcript.jsonl").write_text("")
    (folder / "series.json").write_bytes(b"half")
    (folder / "ep-1/transcript.jsonl").write_bytes(b"")
    assert root.series_dir(SERIES[0]) == folder
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "GET": 2}
    assert json.loads((folder / "series.json").read_bytes()) == {"id": SERIES[0]}
    assert (folder / "ep-1/transcript.jsonl").read_bytes() == b"{}\n"
    assert (notes / "series.json").read_text() == tag
    root.series_dir(SERIES[0])
    assert summary(proxy.taken())["kind"] == {"LIST": 1}


def test_files_compared_against_one_listing_make_no_head(make_bucket, proxy, tmp_path):
    folder = location(f"s3://{make_bucket()}/dataset")
    write_if_changed(folder / "README.md", b"card")  # a folder that exists (s3fs asks more of an empty one)
    source = tmp_path / "video.mp4"
    source.write_bytes(b"video bytes")
    proxy.taken()
    heads = heads_under(folder)
    assert sorted(heads) == [(folder / "README.md").path]
    assert place_file(source, folder / "videos/a.mp4", heads)
    assert write_if_changed(folder / "episodes/a.json", b"{}", heads)
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "PUT": 2}
    heads = heads_under(folder)
    # the same bytes again: nothing written, and no HEAD asked
    assert not place_file(source, folder / "videos/a.mp4", heads)
    assert not write_if_changed(folder / "episodes/a.json", b"{}", heads)
    source.write_bytes(b"other bytes")
    assert place_file(source, folder / "videos/a.mp4", heads)
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
    """Frames and their contact sheet, saved on a bucket: one PUT for the folder, not one per file; another machine gets it with one listing and one GET,
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
    assert made["kind"] == {"PUT": 1}, made
    s3 = s3fs.S3FileSystem(skip_instance_cache=True)
    assert sorted(s3.find(f"{bucket}/home")) == [f"{bucket}/home/frames/s1/ep-1@v1.tar"]
    proxy.taken()
    listed = writer.listed("frames/s1")
    assert writer.publish_folder(folder, listed) == "frames/s1/ep-1@v1"  # there already: no request
    assert summary(proxy.taken())["kind"] == {"LIST": 1}
    s3.pipe_file(f"{bucket}/home/frames/s1/ep-0.current", b"v0")  # a pointer an earlier build wrote
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


def test_a_fetch_cut_short_is_refused_and_fetched_again_next_time(make_bucket, s3_environ, s3_client, tmp_path,
                                                                   monkeypatch):
    """A file that comes shorter than the listing says (a connection dropped mid-body, a client that
    ends the stream early) fails the fetch, is not kept and is not noted with the object's ETag: a
    series.json cut in two would otherwise read as no series until the object changed. The next
    fetch gets the whole file."""
    import vae_pipeline.domain.objects as objects

    bucket = make_bucket()
    name = "2026-10-21-s1/series.json"
    whole = json.dumps({"series_id": "2026-10-21-s1", "status": "completed"}).encode()
    s3_client.put_object(Bucket=bucket, Key=f"runs/{name}", Body=whole)
    mirror = Mirror(location(f"s3://{bucket}/runs"), tmp_path / "scratch")

    def cut_short(fs, targets):
        get_objects(fs, targets)
        for path in targets.values():
            with open(path, "r+b") as handle:
                handle.truncate(len(whole) // 2)

    monkeypatch.setattr(objects, "get_objects", cut_short)
    with pytest.raises(OSError, match=r"^1 fetched file\(s\) came other than the size the bucket lists"):
        mirror.fetch_all([name])
    assert [p for p in (tmp_path / "scratch").rglob("*") if p.is_file()] == []
    monkeypatch.setattr(objects, "get_objects", get_objects)
    assert mirror.fetch_all([name])[name].read_bytes() == whole


def _site(folder, pages: dict[str, bytes]) -> None:
    for name, data in pages.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def test_the_review_site_goes_as_one_object_a_series_and_another_machine_unpacks_it(make_bucket, proxy, tmp_path):
    """The site's pages on a bucket: one PUT a series (its page, its episodes' pages, its search
    entries, its state), one for each file every page uses; the bytecode cache stays on its
    machine; `vae review` elsewhere (`sync`) gets the same files; a change to one series puts that
    series again and nothing else; a series gone is gone on both."""
    from vae_pipeline.domain.review.site import BYTECODE, series_of_file

    bucket = make_bucket()
    writer = Mirror(location(f"s3://{bucket}/home"), tmp_path / "writer")
    site = writer.local / "review"
    pages = {"index.html": b"index", "static/site.css": b"css"}
    for series in ("2026-01-01-a", "2026-01-02-b.v2"):
        pages |= {f"series/{series}.html": series.encode(), f"search/{series}.js": b"[]",
                  f".state/{series}.json": b"{}", **{f"episodes/{series}/ep-{i}.html": bytes([i]) * 50 for i in range(6)},
                  f"episodes/{series}/ep-0/messages-1.html": b"transcript"}
    _site(site, pages | {f"{BYTECODE}/index.cache": b"bytecode"})
    proxy.taken()
    writer.publish_tree(site, series_of_file, local_only=(f"{BYTECODE}/",))
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "PUT": 2 + 2}  # index, css, one pack a series
    s3 = s3fs.S3FileSystem(skip_instance_cache=True)
    assert sorted(name.split("/home/review/", 1)[1] for name in s3.find(f"{bucket}/home/review")) == [
        ".packs/2026-01-01-a.tar", ".packs/2026-01-02-b.v2.tar", "index.html", "static/site.css"]
    reader = Mirror(location(f"s3://{bucket}/home"), tmp_path / "reader")
    got = reader.sync("review")
    assert {p.relative_to(got).as_posix(): p.read_bytes() for p in got.rglob("*")
            if p.is_file() and not p.relative_to(got).as_posix().startswith(".packs/")} == pages
    (site / "episodes/2026-01-01-a/ep-3.html").write_bytes(b"relabelled")
    (site / "index.html").write_bytes(b"index 2")
    proxy.taken()
    writer.publish_tree(site, series_of_file, local_only=(f"{BYTECODE}/",))
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "PUT": 2}  # the index and that series' pack
    for name in [n for n in pages if "2026-01-02-b.v2" in n]:
        (site / name).unlink()
    writer.publish_tree(site, series_of_file, local_only=(f"{BYTECODE}/",))
    s3.invalidate_cache()
    assert not s3.exists(f"{bucket}/home/review/.packs/2026-01-02-b.v2.tar")
    reader.sync("review")
    assert (got / "episodes/2026-01-01-a/ep-3.html").read_bytes() == b"relabelled"
    assert (got / "index.html").read_bytes() == b"index 2"
    assert not (got / "series/2026-01-02-b.v2.html").exists()
    assert not [p for p in (got / "episodes").rglob("*") if p.is_file() and "2026-01-02-b.v2" in p.as_posix()]
    proxy.taken()
    reader.sync("review")  # unchanged: the listing alone
    assert summary(proxy.taken())["kind"] == {"LIST": 1}


def test_the_checks_read_a_stored_file_from_a_local_copy_that_the_listing_shows_it_holds(make_bucket, proxy,
                                                                                         tmp_path):
    """A dataset archive or video whose listed size and ETag are the MD5 of this machine's staged
    copy is read from that copy (no GET); one whose bytes on the bucket differ is read from the
    bucket, and the difference is found."""
    import hashlib

    from vae_pipeline.assets.dataset_episodes import video_in_place
    from vae_pipeline.domain.objects import listing

    bucket = make_bucket()
    root = location(f"s3://{bucket}/dataset")
    staged = tmp_path / "staged.mp4"
    staged.write_bytes(b"the delivered video" * 100)
    write_if_changed(root / "videos/ep-1.mp4", staged.read_bytes())
    row = {"video": "videos/ep-1.mp4", "video_size": staged.stat().st_size,
           "video_sha256": hashlib.sha256(staged.read_bytes()).hexdigest()}
    proxy.taken()
    found = listing(root / "videos")["ep-1.mp4"]
    assert video_in_place(root, row, found, staged)
    assert summary(proxy.taken())["kind"] == {"LIST": 1}
    write_if_changed(root / "videos/ep-1.mp4", b"THE DELIVERED VIDEO" * 100)  # same size, other bytes
    found = listing(root / "videos")["ep-1.mp4"]
    proxy.taken()
    assert not video_in_place(root, row, found, staged)
    read = summary(proxy.taken())["kind"]
    assert read["GET"] + read["ranged GET"] >= 1  # read from the bucket
    assert not video_in_place(root, row, None, staged)  # absent from the listing


def test_a_table_this_process_wrote_is_not_fetched_again_while_the_listing_shows_it_unchanged(make_bucket, proxy,
                                                                                              s3_client):
    """Several series' tables loaded from one listing: those this process wrote or read, whose
    listed ETag is still the MD5 of those bytes, come from memory; one another writer replaced
    since is fetched (its new bytes, not the remembered ones)."""
    import polars as pl

    from vae_pipeline.domain.objects import listing, put_bytes
    from vae_pipeline.storage.io_manager import parquet_bytes, read_table

    bucket = make_bucket()
    folder = location(f"s3://{bucket}/home/tables/episodes")
    frames = {s: pl.DataFrame({"id": [f"{s}-ep"]}) for s in SERIES}
    for s, frame in frames.items():
        put_bytes(folder / f"{s}.parquet", parquet_bytes(frame))
    replaced = pl.DataFrame({"id": ["another writer's"]})
    s3_client.put_object(Bucket=bucket, Key=f"home/tables/episodes/{SERIES[0]}.parquet", Body=parquet_bytes(replaced))
    proxy.taken()
    listed = listing(folder)
    got = {s: read_table(folder / f"{s}.parquet", listed[f"{s}.parquet"]) for s in SERIES}
    assert summary(proxy.taken())["kind"] == {"LIST": 1, "GET": 1}
    assert got[SERIES[0]].equals(replaced)
    assert all(got[s].equals(frames[s]) for s in SERIES[1:])
    read_table(folder / f"{SERIES[0]}.parquet", listing(folder)[f"{SERIES[0]}.parquet"])  # read once: held now
    assert summary(proxy.taken())["kind"] == {"LIST": 1}


def test_an_archive_is_checked_against_its_manifest_from_the_staged_copy_the_listing_vouches_for(make_bucket, proxy,
                                                                                                 tmp_path):
    """`files_match_manifests` on a bucket: an archive whose listed ETag is the MD5 of this
    machine's staged copy is hashed and unpacked from the copy (only the manifest is fetched);
    one whose bytes on the bucket differ from the copy is read from the bucket and refused."""
    import hashlib

    from vae_pipeline.assets.dataset_episodes import archive_problems
    from vae_pipeline.domain.episodes.episode_files import archive_digests
    from vae_pipeline.domain.objects import listing
    from vae_pipeline_tests.test_review_transcript import pack

    staged = pack({"messages.jsonl": b'{"type": "user"}\n', "brief.json": b"{}"}, tmp_path / "staged.tar.zst")
    other = pack({"messages.jsonl": b'{"type": "assistant"}\n', "brief.json": b"{}"}, tmp_path / "other.tar.zst")
    manifest = {"archive_sha256": hashlib.sha256(staged.read_bytes()).hexdigest(),
                "files": [{"path": path, "size": size, "sha256": sha} for path, (size, sha) in archive_digests(staged).items()]}
    root = location(f"s3://{make_bucket()}/dataset")
    row = {"id": "ep-1", "archive": "episodes/2026-01-01/ep-1.tar.zst"}
    write_if_changed(root / row["archive"], staged.read_bytes())
    write_if_changed(root / "episodes/2026-01-01/ep-1.json", json.dumps(manifest).encode())
    found = [listing(root / "episodes")[name] for name in ("2026-01-01/ep-1.tar.zst", "2026-01-01/ep-1.json")]
    proxy.taken()
    assert archive_problems(root, row, found, staged) == []
    assert summary(proxy.taken())["kind"] == {"GET": 1}  # the manifest; the archive read from the copy
    write_if_changed(root / row["archive"], other.read_bytes())  # the bucket's archive is no longer the copy
    found = [listing(root / "episodes")[name] for name in ("2026-01-01/ep-1.tar.zst", "2026-01-01/ep-1.json")]
    proxy.taken()
    assert archive_problems(root, row, found, staged) == [f"{row['archive']}: sha256 differs from its manifest"]
    read = summary(proxy.taken())["kind"]
    assert read["GET"] + read["ranged GET"] >= 2  # the manifest and the archive itself


def test_a_held_runs_root_is_read_from_its_first_listing_until_released(runs, proxy, s3_client, tmp_path):
    """While a build (or run) holds the runs root, each folder under it is listed once: the series
    found in the root's listing are synced and fingerprinted without another LIST, and a file the
    harness adds meanwhile waits for the next build; released, the root is listed afresh."""
    from vae_pipeline.domain.objects import listings_held

    root = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "scratch"))
    with listings_held(root.path):
        root.root  # noqa: B018 (the property lists and syncs)
        proxy.taken()
        versions = {series: root.fingerprint(series) for series in SERIES}
        folders = {series: root.series_dir(series) for series in SERIES}
        assert summary(proxy.taken())["kind"] == {"GET": len(SERIES)}  # each series' episode file, no LIST
        from vae_pipeline.domain.objects import listing

        assert sorted(listing(location(f"s3://{runs}/runs/{SERIES[1]}/ep-1"))) == ["transcript.jsonl"]
        assert listing(location(f"s3://{runs}/runs/absent-series")) == {}
        assert summary(proxy.taken())["kind"] == {}
        assert all((folders[s] / "ep-1" / "transcript.jsonl").read_bytes() == b"{}\n" for s in SERIES)
        s3_client.put_object(Bucket=runs, Key=f"runs/{SERIES[0]}/ep-2/transcript.jsonl", Body=b"{}\n")
        assert root.fingerprint(SERIES[0]) == versions[SERIES[0]]
        assert not (root.series_dir(SERIES[0]) / "ep-2").exists()
        assert summary(proxy.taken())["kind"] == {}
    assert root.fingerprint(SERIES[0]) != versions[SERIES[0]]
    assert (root.series_dir(SERIES[0]) / "ep-2" / "transcript.jsonl").is_file()
    assert summary(proxy.taken())["kind"] == {"LIST": 2, "GET": 1}


def test_a_listing_held_for_one_prefix_answers_nothing_outside_it(runs, proxy, tmp_path):
    """Only the held prefix is read from memory: the warehouse beside it is listed afresh."""
    from vae_pipeline.domain.objects import listing, listings_held, put_bytes

    home = location(f"s3://{runs}/home")
    with listings_held(f"s3://{runs}/runs"):
        assert listing(home) == {}
        put_bytes(home / "a.parquet", b"a")
        assert sorted(listing(home)) == ["a.parquet"]


def test_the_label_history_cache_fetches_each_generation_once(make_bucket, proxy, tmp_path):
    """On a bucket `label_history` is a table of the machine's DuckDB cache: each label generation
    is fetched once (one GET, none when this process wrote it), an unchanged folder costs its
    listing alone, and a generation replaced under its name rebuilds the table from the bucket."""
    import polars as pl

    from vae_pipeline.domain.objects import put_bytes
    from vae_pipeline.storage.io_manager import parquet_bytes
    from vae_pipeline.storage.resources import Warehouse

    def generation(rows: list[tuple[str, str | None, str, bool]]) -> bytes:
        return parquet_bytes(pl.DataFrame(
            {"series": [SERIES[0]] * len(rows), "id": [r[0] for r in rows], "old_label": [r[1] for r in rows],
             "label": [r[2] for r in rows], "host_rubric_version": ["1.1"] * len(rows),
             "changed_at": ["2026-12-01T00:00:00Z" if r[3] else None for r in rows], "changed": [r[3] for r in rows]},
            schema_overrides={"old_label": pl.String, "changed_at": pl.String}))

    bucket = make_bucket()
    warehouse = Warehouse(path=f"s3://{bucket}/home", scratch_path=str(tmp_path / "scratch"))
    state = location(f"s3://{bucket}/home/label_state/{SERIES[0]}")

    def history() -> list[tuple]:
        with warehouse.connect() as con:
            return con.execute("SELECT id, old_label, new_label FROM label_history "
                               "ORDER BY id, old_label NULLS FIRST").fetchall()

    put_bytes(state / "00000001.parquet", generation([("a", None, "PASS", True), ("b", None, "FAIL", True)]))
    from vae_pipeline.domain.objects import RECENT

    RECENT._drop((state / "00000001.parquet").path)  # as on another machine
    proxy.taken()
    assert history() == [("a", None, "PASS"), ("b", None, "FAIL")]
    first = summary(proxy.taken())["kind"]
    assert first["GET"] == 1 and first["LIST"] == 1  # the generation, and label_state's listing
    assert history() == [("a", None, "PASS"), ("b", None, "FAIL")]
    assert summary(proxy.taken())["kind"]["GET"] == 0
    put_bytes(state / "00000002.parquet", generation([("a", "PASS", "FAIL", True), ("b", None, "FAIL", False)]))
    proxy.taken()
    assert history() == [("a", None, "PASS"), ("a", "PASS", "FAIL"), ("b", None, "FAIL")]
    assert summary(proxy.taken())["kind"]["GET"] == 0  # written by this process: from memory
    put_bytes(state / "00000001.parquet", generation([("c", None, "PASS", True)]))
    RECENT._drop((state / "00000001.parquet").path)
    proxy.taken()
    assert history() == [("a", "PASS", "FAIL"), ("c", None, "PASS")]
    assert summary(proxy.taken())["kind"]["GET"] == 1


def test_an_unpartitioned_table_is_loaded_from_memory_when_its_materialization_recorded_those_bytes(
        make_bucket, proxy, s3_client, tmp_path):
    """A step loading a table (`episode_table`) that an earlier step of the same process stored
    makes no request: the materialization recorded the stored object's ETag and size. A table
    the process does not hold, or whose recorded ETag is not that of the bytes it holds, is fetched."""
    import dagster as dg
    import polars as pl

    from vae_pipeline.storage.io_manager import ParquetTableIOManager
    from vae_pipeline.storage.resources import Warehouse

    warehouse = Warehouse(path=f"s3://{make_bucket()}/home", scratch_path=str(tmp_path / "scratch"))
    table = pl.DataFrame({"id": ["a", "b"]})

    @dg.asset(io_manager_key="tables")
    def stored() -> pl.DataFrame:
        return table

    @dg.asset(io_manager_key="tables")
    def reader(stored: pl.DataFrame) -> pl.DataFrame:
        return stored.with_columns(seen=pl.lit(True))

    defs = dg.Definitions(assets=[stored, reader], resources={"tables": ParquetTableIOManager(warehouse=warehouse)})
    with dg.instance_for_test() as instance:
        proxy.taken()
        assert defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance).success
        kinds = summary(proxy.taken())["kind"]
        assert kinds["PUT"] == 2 and kinds["GET"] == 0 and kinds["HEAD"] == 0  # stored's table from memory
        recorded = instance.get_latest_materialization_event(dg.AssetKey("stored")).asset_materialization.metadata
        assert recorded["vae/bytes"].value == s3_client.head_object(Bucket=warehouse.home.path.split("/")[0],
                                                                    Key="home/tables/stored/table.parquet")["ContentLength"]
        from vae_pipeline.domain.objects import RECENT

        RECENT._drop((warehouse.home / "tables/stored/table.parquet").path)  # as in another process
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, asset_selection=[dg.AssetKey("reader")])
        assert result.success and summary(proxy.taken())["kind"]["GET"] == 1
        assert result.output_for_node("reader").equals(table.with_columns(seen=pl.lit(True)))


def test_machines_sharing_a_prefix_fetch_each_input_file_once_whichever_needs_it(runs, proxy, s3_client, tmp_path):
    """Two machines (each its scratch folder) reading the same series through a shared prefix:
    the first fetches its files and leaves them as one object, the second takes them from it in
    one GET; a file changed since is fetched from the runs root by whichever machine needs it
    first, and the other takes it from the object that machine left."""
    import hashlib

    shared = f"s3://{runs}/home/inputs"
    first, second = (RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / name), shared_path=shared)
                     for name in ("first", "second"))

    def runs_gets() -> list[str]:
        return sorted(r.path for r in proxy.taken() if r.kind == "GET" and f"/{runs}/runs/" in r.path)

    proxy.taken()
    first.series_dir(SERIES[0])
    assert runs_gets() == [f"/{runs}/runs/{SERIES[0]}/{name}" for name in ("ep-1/transcript.jsonl", "series.json")]
    folder = second.series_dir(SERIES[0])
    taken = proxy.taken()
    assert [r.path for r in taken if r.kind == "GET"] == [f"/{runs}/home/inputs/{SERIES[0]}.tar"]
    assert (folder / "ep-1" / "transcript.jsonl").read_bytes() == b"{}\n"
    assert second.series_dir(SERIES[0]) == folder and [r.kind for r in proxy.taken()] == ["LIST"]  # unchanged
    s3_client.put_object(Bucket=runs, Key=f"runs/{SERIES[0]}/ep-1/transcript.jsonl", Body=b"{}\n{}\n")
    second.series_dir(SERIES[0])
    assert runs_gets() == [f"/{runs}/runs/{SERIES[0]}/ep-1/transcript.jsonl"]
    first.series_dir(SERIES[0])
    assert runs_gets() == []
    assert (tmp_path / "first" / "runs" / SERIES[0] / "ep-1" / "transcript.jsonl").read_bytes() == b"{}\n{}\n"
    # a shared object whose bytes are not those its ETags name is not trusted: fetched from the runs root
    import io
    import tarfile

    name = f"runs/{SERIES[1]}/ep-1/transcript.jsonl"
    tag = s3_client.head_object(Bucket=runs, Key=name)["ETag"]
    assert tag.strip('"') == hashlib.md5(b"{}\n").hexdigest()
    forged = io.BytesIO()
    with tarfile.open(fileobj=forged, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(f"{SERIES[1]}/ep-1/transcript.jsonl")
        info.size, info.pax_headers = 7, {"VAE.etag": tag}
        tar.addfile(info, io.BytesIO(b"forged\n"))
    s3_client.put_object(Bucket=runs, Key=f"home/inputs/{SERIES[1]}.tar", Body=forged.getvalue())
    proxy.taken()
    assert (first.series_dir(SERIES[1]) / "ep-1" / "transcript.jsonl").read_bytes() == b"{}\n"
    assert runs_gets() == [f"/{runs}/runs/{name[len('runs/'):]}", f"/{runs}/runs/{SERIES[1]}/series.json"]


def test_vae_review_on_the_machine_that_rendered_keeps_its_compiled_templates(make_bucket, proxy, tmp_path):
    """Before: `vae review` on a bucket home made the local site equal to the bucket's and so
    deleted the templates' compiled cache, which is never uploaded (the next render compiled
    them all again)."""
    from vae_pipeline.cli.review import review_index
    from vae_pipeline.domain.review.site import BYTECODE, series_of_file
    from vae_pipeline.storage.resources import Warehouse

    env = {"VAE_HOME": f"s3://{make_bucket()}/home", "VAE_SCRATCH": str(tmp_path / "scratch")}
    mirror = Warehouse(path=env["VAE_HOME"], scratch_path=env["VAE_SCRATCH"]).mirror
    site = mirror.local / "review"
    _site(site, {"index.html": b"index", f"{BYTECODE}/index.cache": b"bytecode"})
    mirror.publish_tree(site, series_of_file, local_only=(f"{BYTECODE}/",))
    (site / "stray.html").write_bytes(b"never uploaded")
    assert review_index(env) == site / "index.html"
    assert (site / BYTECODE / "index.cache").read_bytes() == b"bytecode"
    assert not (site / "stray.html").exists()  # the rest is still the bucket's


def test_uploads_in_background_return_at_once_and_are_all_done_when_the_scope_ends(make_bucket, s3_environ,
                                                                                     tmp_path, monkeypatch):
    """A step's uploads overlap its work: `publish` returns before its upload is made, and the
    scope does not end until every upload has (so nothing the step records names a missing
    object); an upload that fails fails the scope."""
    import threading

    import vae_pipeline.domain.objects as objects
    from vae_pipeline.domain.objects import uploads_in_background

    bucket = make_bucket()
    mirror = Mirror(location(f"s3://{bucket}/home"), tmp_path / "local")
    files = []
    for number in range(3):
        path = mirror.local / "videos" / f"ep-{number}.mp4"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([number]) * 100)
        files.append(path)
    released = threading.Event()
    real_put = objects.put_file

    def held_put(target, source):
        assert released.wait(30)
        return real_put(target, source)

    monkeypatch.setattr(objects, "put_file", held_put)
    s3 = s3fs.S3FileSystem(skip_instance_cache=True)
    with uploads_in_background():
        names = [mirror.publish(path) for path in files]  # returns while every upload waits
        assert not s3.exists(f"{bucket}/home/videos/ep-0.mp4")
        released.set()
    s3.invalidate_cache()
    assert names == [f"videos/ep-{n}.mp4" for n in range(3)]
    assert [s3.cat_file(f"{bucket}/home/{name}") for name in names] == [bytes([n]) * 100 for n in range(3)]
    monkeypatch.setattr(objects, "put_file", real_put)
    nowhere = Mirror(location(f"s3://vae-absent-{bucket}/home"), tmp_path / "local")
    with pytest.raises(OSError), uploads_in_background():
        nowhere.publish(files[0])


def test_the_next_series_is_fetched_while_the_step_reads_this_one(runs, proxy, tmp_path, monkeypatch):
    """`series_dirs` hands each series' folder in order, the next one already fetching while the
    caller reads the current one: the store serves while the step parses. Each file is fetched
    once, and a series that cannot be fetched fails where it is reached, after those before it."""
    root = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "scratch"))
    local = root.mirror.local
    handed = root.series_dirs(SERIES)
    series, folder = next(handed)
    assert (series, folder) == (SERIES[0], local / SERIES[0])
    assert (folder / "ep-1/transcript.jsonl").read_bytes() == b"{}\n"
    deadline = time.monotonic() + 30  # the caller has not asked for the second series yet
    while not (local / SERIES[1] / "ep-1/transcript.jsonl").is_file():
        assert time.monotonic() < deadline, "the next series was not fetched ahead"
        time.sleep(0.05)
    assert [series for series, _ in handed] == SERIES[1:]
    assert summary(proxy.taken())["kind"] == {"LIST": len(SERIES), "GET": 2 * len(SERIES)}

    real_sync = Mirror.sync

    def sync(self, rel="", shared=None, local_only=()):
        if rel == SERIES[1]:
            raise OSError("the store refused")
        return real_sync(self, rel, shared, local_only)

    monkeypatch.setattr(Mirror, "sync", sync)
    handed = root.series_dirs(SERIES)
    assert next(handed)[0] == SERIES[0]
    with pytest.raises(OSError, match="refused"):
        next(handed)


def test_series_fetched_ahead_while_a_step_asks_for_them_are_fetched_once(runs, proxy, tmp_path, monkeypatch):
    """A build fetches a run's series ahead while the step reading them may already ask for the
    same ones: one fetch of a folder at a time, the second finding the files here. A fetch ahead
    that fails is left to the step, which fetches that series itself."""
    from vae_pipeline.domain import objects

    root = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "scratch"))
    real_get, fetching = objects.get_objects, threading.Event()

    def slow_get(fs, targets):  # the fetch ahead is inside its first series when the step asks
        fetching.set()
        time.sleep(0.3)
        real_get(fs, targets)

    monkeypatch.setattr(objects, "get_objects", slow_get)
    with listings_held(root.path), root.fetching_ahead(SERIES):
        assert fetching.wait(30)
        handed = dict(root.series_dirs(SERIES))
    # each series listed once (the listing held, as in a build) and each of its files fetched once
    assert summary(proxy.taken())["kind"] == {"LIST": len(SERIES), "GET": 2 * len(SERIES)}
    assert {s: (f / "ep-1/transcript.jsonl").read_bytes() for s, f in handed.items()} == dict.fromkeys(SERIES, b"{}\n")
    assert [p.name for p in root.mirror.local.rglob("*.fetching")] == []

    refused = threading.Event()

    def failing_get(fs, targets):
        refused.set()
        raise OSError("the store refused")

    fresh = RunsRoot(path=f"s3://{runs}/runs", scratch_path=str(tmp_path / "other"))
    monkeypatch.setattr(objects, "get_objects", failing_get)
    with fresh.fetching_ahead(SERIES):  # leaving waits for it; its failure is not raised here
        assert refused.wait(30)
    monkeypatch.setattr(objects, "get_objects", real_get)
    assert (fresh.series_dir(SERIES[0]) / "ep-1/transcript.jsonl").read_bytes() == b"{}\n"


def test_a_write_is_one_put_whose_etag_is_the_md5_and_a_refused_one_a_short_oserror(make_bucket, proxy, s3_client):
    """Writes go through obstore as s3fs made them: one PUT up to 100 MiB (so the ETag stays the
    MD5 the checks compare with, not a multipart one), the new ETag handed back; a write the
    store refuses is an OSError naming the object, not the server's whole answer."""
    import hashlib

    bucket = make_bucket()
    data = os.urandom(6 * 2**20)  # above obstore's own 5 MiB parts
    tag = put_bytes(location(f"s3://{bucket}/home/a.bin"), data)
    assert tag == f'"{hashlib.md5(data).hexdigest()}"' == s3_client.head_object(Bucket=bucket, Key="home/a.bin")["ETag"]
    assert summary(proxy.taken())["kind"] == {"PUT": 1}
    with pytest.raises(OSError) as refused:
        put_bytes(location(f"s3://{bucket}-gone/home/a.bin"), b"x")
    assert re.fullmatch(rf"could not write {bucket}-gone/home/a\.bin \(\w+Error\)", str(refused.value))


def test_many_files_are_fetched_where_botocore_goes_signed_with_its_credentials(runs, s3_endpoint, tmp_path,
                                                                                monkeypatch):
    """The client that fetches many files at once takes the endpoint, region and keys botocore
    resolved — here from a profile in the AWS files, no AWS variable set — and a missing object
    is a FileNotFoundError, as from s3fs, naming the bucket (a runs root's object names are input)."""
    config, credentials = tmp_path / "config", tmp_path / "credentials"
    with CountingProxy(s3_endpoint, lifetime_s=300) as proxy:
        config.write_text(f"[profile vae]\nregion = eu-west-3\nendpoint_url = {proxy.endpoint}\n")
        credentials.write_text("[vae]\naws_access_key_id = AKIAPROFILEKEY\naws_secret_access_key = profile-secret\n")
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
        monkeypatch.setenv("AWS_PROFILE", "vae")
        s3fs.S3FileSystem.clear_instance_cache()
        mirror = Mirror(location(f"s3://{runs}/runs"), tmp_path / "copy")
        wanted = [f"{series}/series.json" for series in SERIES]
        local = mirror.fetch_all(wanted)
        gets = [r for r in proxy.taken() if r.kind == "GET"]
        assert sorted(r.path for r in gets) == sorted(f"/{runs}/runs/{rel}" for rel in wanted)
        # signed with the profile's keys for its region (SigV4's scope: key id/date/region/service/...)
        assert {(r.credential.split("/")[0], r.credential.split("/")[2]) for r in gets} == {("AKIAPROFILEKEY", "eu-west-3")}
        assert {r.status for r in gets} == {200}
        assert [json.loads(local[rel].read_bytes()) for rel in wanted] == [{"id": s} for s in SERIES]
        with pytest.raises(FileNotFoundError) as gone:
            get_objects(mirror.remote.fs, {f"{runs}/runs/gone.json": tmp_path / "gone.json"})
        assert str(gone.value) == f"an object listed in bucket {runs} is not there any more"
    s3fs.S3FileSystem.clear_instance_cache()


def test_a_fetch_the_store_fails_is_an_oserror_naming_the_bucket_not_the_object_nor_the_answer(
        runs, s3_environ, tmp_path, monkeypatch):
    """A runs root's object names are input, and obstore's message holds the server's answer."""
    import obstore.exceptions

    from vae_pipeline.domain import objects

    async def failing_get(store, key):
        raise obstore.exceptions.GenericError("Error performing GET http://… <Error><HostId>the server's answer")

    monkeypatch.setattr(objects.obstore, "get_async", failing_get)
    mirror = Mirror(location(f"s3://{runs}/runs"), tmp_path / "copy")
    with pytest.raises(OSError) as failed:
        get_objects(mirror.remote.fs, {f"{runs}/runs/{SERIES[0]}/series.json": tmp_path / "series.json"})
    assert str(failed.value) == f"the store failed a fetch from bucket {runs} (GenericError)"
