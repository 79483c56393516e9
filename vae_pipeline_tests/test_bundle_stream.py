"""The streaming packer: the same archive bytes as an in-memory reference packing, members read
once and in chunks, zstd threads that do not change the bytes, the image cache."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import tarfile

import pytest
import zstandard
from PIL import Image

from vae_pipeline.domain.bundles import slim
from vae_pipeline.domain.bundles.bundle import ZSTD_LEVEL, ZSTD_WINDOW_LOG, build_bundle, exclusion_reason
from vae_pipeline.domain.episodes.episode_files import SourceMember, archive_digests, episode_members, read_episode_files
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import CHUNK
from vae_pipeline.domain.bundles.image_bytes import image_format, strip_metadata
from vae_pipeline.domain.scrub.texts import ScrubConfig, is_text_member, scrub_text
from vae_pipeline.domain.episodes.series import EpisodeEntry
from vae_pipeline.domain.bundles.slim import ImageStore, slim_member
from vae_pipeline.sample.generator import HARNESS_HOST, HARNESS_USER
from vae_pipeline_tests.test_bundle import pack


def pinned_episode() -> dict[str, bytes]:
    """A hand-built episode: an image repeated in two files, a stream event, a key, a home path,
    a path longer than a ustar name, left-out files, binary members."""
    image = Image.frombytes("RGB", (64, 48), bytes((i * 37 + (i // 192) * 11) % 256 for i in range(64 * 48 * 3)))
    out = io.BytesIO()
    image.save(out, "PNG")
    png = base64.b64encode(out.getvalue()).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    secret = "sk-ant-api03-" + "Q" * 40
    home = "/home/alex/runs/ep-1/work"
    lines = [
        {"type": "system", "subtype": "init", "cwd": home},
        {"type": "stream_event", "event": {"delta": {"type": "text_delta", "text": "Let"}}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": f"export ANTHROPIC_API_KEY={secret}"}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": [block]}]}},
        {"type": "result", "subtype": "success", "result": "mail ops@acme-corp.io from 8.8.4.4"},
    ]
    messages = "".join(json.dumps(line) + "\n" for line in lines).encode()
    long_dir = "work/a-very-long-folder-name-that-goes-past-the-hundred-characters-of-a-ustar-name-field/and-more"
    return {
        "brief.json": json.dumps({"brief_id": "ui-product-014", "prompt": f"see {home}"}, indent=2).encode(),
        "messages.jsonl": messages,
        "transcript/session.jsonl": messages,
        "transcript/api-request-blob/0.json": json.dumps({"messages": [{"content": [block, block]}]}).encode(),
        "work/index.html": b"<!doctype html><div id='stage'>x</div>\n",
        f"{long_dir}/notes.md": f"deploy {secret}\n".encode(),
        "work/assets/vendor/gsap.min.js": b"/* gsap */ var gsap={};\n",
        "work/node_modules/x/index.js": b"module.exports = {};\n",
        "work/.env": f"ANTHROPIC_API_KEY={secret}\n".encode(),
        "out.mp4": bytes(range(256)) * 64,
        "frames/f00.jpg": bytes(range(255, -1, -1)) * 8,
    }


# Recorded from the in-memory packer before archives were streamed (commit e5bb4e9, where
# build_bundle took {path: bytes} and returned the archive's bytes): the streamed archive of the
# same episode must be these very bytes.
PINNED_SHA256 = "4b166ba29ffbbb61c4a19d639511e1d4be8882c3e7e850726add988f8f6c7a6f"
PINNED_SIZE = 1758


def test_streamed_archive_is_byte_identical_to_the_one_recorded_before_streaming(tmp_path) -> None:
    bundle = pack(pinned_episode(), tmp_path / "a.tar.zst")
    assert bundle.archive_sha256 == PINNED_SHA256
    assert hashlib.sha256(bundle.archive.read_bytes()).hexdigest() == PINNED_SHA256
    assert bundle.archive_size == PINNED_SIZE == bundle.archive.stat().st_size


def reference_archive(files: dict[str, bytes], config: ScrubConfig) -> bytes:
    """The archive packed the straightforward way, all in memory: the scrubbed, slimmed member
    bytes (images without their metadata) in a `tarfile` GNU tar, compressed in one call."""
    store, archived = ImageStore(), {}
    for path in sorted(files):
        if exclusion_reason(path) is not None:
            continue
        data = slim_member(path, files[path], store)
        archived[path] = strip_metadata(data.data) if image_format(data.data) else data.data
        if is_text_member(path, files[path]):
            archived[path] = scrub_text(data.data, path, config, line_map=data.line_map).data
    archived.update(store.files)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(archived):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
                len(archived[path]), 0, 0o644, 0, 0, "", "")
            tar.addfile(info, io.BytesIO(archived[path]))
    raw = buffer.getvalue()
    params = zstandard.ZstdCompressionParameters.from_level(
        ZSTD_LEVEL, source_size=len(raw), window_log=ZSTD_WINDOW_LOG, enable_ldm=True, write_checksum=True,
        write_content_size=True, threads=1)
    return zstandard.ZstdCompressor(compression_params=params).compress(raw)


def test_sample_runs_pack_to_the_reference_bytes_from_folders_and_archives(sample_runs, tmp_path) -> None:
    config = ScrubConfig(hostname=HARNESS_HOST, usernames=(HARNESS_USER,))
    good = [plan for plan in sample_runs.episodes if plan.bad is None]
    assert any(plan.archive for plan in good) and any(not plan.archive for plan in good)
    for plan in good:
        name = f"{plan.episode_id}.tar.zst" if plan.archive else plan.episode_id
        entry = EpisodeEntry(name, plan.episode_id, sample_runs.root / plan.series / name, plan.archive)
        bundle = build_bundle(episode_members(entry), tmp_path / f"{plan.episode_id}.tar.zst", config=config)
        expected = reference_archive(read_episode_files(entry, lambda _: True).data, config)
        assert bundle.archive.read_bytes() == expected, plan.episode_id
        assert bundle.archive_sha256 == hashlib.sha256(expected).hexdigest()


class _ChunkOnly(io.BytesIO):
    """A stream that refuses to be read whole or in pieces larger than the packer's chunk."""

    def read(self, size: int | None = -1) -> bytes:
        assert size is not None and 0 < size <= CHUNK, f"read({size})"
        return super().read(size)


def test_left_out_files_are_never_read_and_large_members_are_read_in_chunks(tmp_path) -> None:
    video = bytes(range(256)) * (5 * 4096)  # 5 MiB
    vendor = b"var gsap = {};\n" * 300_000  # 4.5 MB
    opened: list[str] = []

    def refuse(path):
        def open_():
            opened.append(path)
            raise AssertionError(f"{path} was read")
        return open_

    def chunk_only(data, path):
        def open_():
            opened.append(path)
            return _ChunkOnly(data)
        return open_

    members = [
        SourceMember("brief.json", 2, lambda: io.BytesIO(b"{}"), reopenable=False),
        SourceMember("out.mp4", len(video), chunk_only(video, "out.mp4"), reopenable=True),
        SourceMember("work/assets/vendor/gsap.min.js", len(vendor), chunk_only(vendor, "vendor"), reopenable=False),
        SourceMember("work/node_modules/big/index.js", 10**9, refuse("node_modules"), reopenable=True),
        SourceMember("work/.env", 10, refuse(".env"), reopenable=True),
    ]
    bundle = build_bundle(members, tmp_path / "a.tar.zst", config=ScrubConfig())
    assert opened == ["out.mp4", "vendor", "out.mp4"]  # sniffed, hashed; copied into the tar
    assert bundle.vendor_files == [{"name": "gsap.min.js", "sha256": hashlib.sha256(vendor).hexdigest()}]
    assert {f["path"]: f["sha256"] for f in bundle.files} == {
        "brief.json": hashlib.sha256(b"{}").hexdigest(), "out.mp4": hashlib.sha256(video).hexdigest()}
    with tarfile.open(fileobj=io.BytesIO(zstandard.ZstdDecompressor().decompress(bundle.archive.read_bytes()))) as tar:
        assert tar.extractfile("out.mp4").read() == video


def test_a_member_that_changes_while_packed_fails_and_leaves_no_archive(tmp_path) -> None:
    source = tmp_path / "out.mp4"
    source.write_bytes(b"\1" * 1000)
    members = [SourceMember("out.mp4", 2000, lambda: source.open("rb"), reopenable=True)]
    with pytest.raises(BadInput, match="out.mp4: changed while the archive was written"):
        build_bundle(members, tmp_path / "out" / "a.tar.zst", config=ScrubConfig())
    assert list((tmp_path / "out").iterdir()) == []  # no archive, no temp file, no spool


def test_zstd_thread_count_does_not_change_the_bytes(tmp_path) -> None:
    files = pinned_episode()
    # 40 MiB: more than two of zstd's 16 MiB jobs at this level and window, so workers share it
    files["out.mp4"] = random.Random(1).randbytes(1 << 20) * 40
    one = pack(files, tmp_path / "1.tar.zst", threads=1)
    four = pack(files, tmp_path / "4.tar.zst", threads=4)
    assert one.archive.read_bytes() == four.archive.read_bytes()


def test_archive_digests_read_back_the_manifest_files(tmp_path) -> None:
    bundle = pack(pinned_episode(), tmp_path / "a.tar.zst")
    assert archive_digests(bundle.archive) == {f["path"]: (f["size"], f["sha256"]) for f in bundle.files}


def test_image_cache_encodes_an_image_once_across_episodes_and_builds(tmp_path, monkeypatch) -> None:
    encoded = []
    real = slim._smallest
    monkeypatch.setattr(slim, "_smallest", lambda raw: encoded.append(raw) or real(raw))
    cache = tmp_path / "cache"
    first = pack(pinned_episode(), tmp_path / "1.tar.zst", image_cache=cache)
    assert len(encoded) == 1
    other = pinned_episode()
    other["messages.jsonl"] = other["messages.jsonl"].replace(b"Let", b"Now")  # another episode, same image
    pack(other, tmp_path / "2.tar.zst", image_cache=cache)
    again = pack(pinned_episode(), tmp_path / "3.tar.zst", image_cache=cache)
    assert len(encoded) == 1
    assert again.archive.read_bytes() == first.archive.read_bytes()
    assert first.archive_sha256 == PINNED_SHA256  # the cache changes nothing in the archive
    [entry] = [p for p in cache.rglob("*") if p.is_file()]
    entry.write_bytes(entry.read_bytes()[:-10])  # a torn write
    assert pack(pinned_episode(), tmp_path / "4.tar.zst", image_cache=cache).archive_sha256 == PINNED_SHA256
    assert len(encoded) == 2


def _bundled(sample_runs, home, workers: int) -> list[dict]:
    from vae_pipeline.assets.bundles import bundle_rows
    from vae_pipeline.storage.resources import RunsRoot, Warehouse

    rows = [{"id": p.episode_id, "series": p.series, "date": "2026-10-21", "is_archive": p.archive,
             "source": f"{p.episode_id}.tar.zst" if p.archive else p.episode_id}
            for p in sample_runs.episodes if p.bad is None]
    config = ScrubConfig(hostname=HARNESS_HOST, usernames=(HARNESS_USER,))
    return list(bundle_rows(RunsRoot(path=str(sample_runs.root)), Warehouse(path=str(home)), rows, config, workers))


def test_a_series_packed_by_one_or_two_workers_gives_the_same_archives(sample_runs, tmp_path) -> None:
    one = _bundled(sample_runs, tmp_path / "one", workers=1)
    two = _bundled(sample_runs, tmp_path / "two", workers=2)
    assert [row["id"] for row in one] == [p.episode_id for p in sample_runs.episodes if p.bad is None]
    assert one == two  # ids, archive sha256s, findings, manifest parts: all in the same order
    for row in one:
        staged = [(tmp_path / home / row["staged_archive"]).read_bytes() for home in ("one", "two")]
        assert staged[0] == staged[1]
        assert hashlib.sha256(staged[0]).hexdigest() == row["archive_sha256"]
    cached = sorted(p.name for p in (tmp_path / "two" / "image-cache").rglob("*") if p.is_file())
    assert cached == sorted(p.name for p in (tmp_path / "one" / "image-cache").rglob("*") if p.is_file())
    assert cached  # the sample's screenshots went through the cache


def test_files_match_manifests_reads_archives_as_streams_and_reports_unreadable_ones(tmp_path) -> None:
    from vae_pipeline.assets.dataset_episodes import archive_problems

    folder = tmp_path / "episodes" / "2026-10-21"
    bundle = pack(pinned_episode(), folder / "ep-1.tar.zst")
    row = {"id": "ep-1", "archive": "episodes/2026-10-21/ep-1.tar.zst"}
    manifest = {"archive_sha256": bundle.archive_sha256, "files": bundle.files}
    (folder / "ep-1.json").write_text(json.dumps(manifest))
    assert archive_problems(tmp_path, row) == []
    manifest["files"][0]["sha256"] = "0" * 64
    (folder / "ep-1.json").write_text(json.dumps(manifest))
    assert archive_problems(tmp_path, row) == [f"{row['archive']}: {bundle.files[0]['path']} differs from its manifest"]
    garbage = b"not an archive at all"
    bundle.archive.write_bytes(garbage)
    (folder / "ep-1.json").write_text(json.dumps({**manifest, "archive_sha256": hashlib.sha256(garbage).hexdigest()}))
    assert archive_problems(tmp_path, row) == [
        f"{row['archive']}: ep-1.tar.zst: is not a zstd archive (wrong magic bytes)"]


def test_delivery_size_request_logs_repeat_a_few_screenshots_stored_once(tmp_path) -> None:
    from vae_pipeline.sample.request_logs import SCREENSHOTS, TARGET_BYTES, request_logs

    secrets = {"bearer": "b" * 40, "anthropic": "sk-ant-api03-" + "R" * 40}
    logs = request_logs("ui-product-014-s1", secrets)
    blobs = {path: data for path, data in logs.items() if "/api-request-blob/" in path}
    assert sum(map(len, blobs.values())) >= TARGET_BYTES
    shown = [block["source"]["data"] for data in blobs.values() for turn in json.loads(data)["messages"]
             for block in turn["content"] if block["type"] == "image"]
    assert len(set(shown)) == SCREENSHOTS and len(shown) > 10 * SCREENSHOTS
    bundle = pack(logs, tmp_path / "a.tar.zst")
    assert [f["path"].startswith("images/") for f in bundle.files].count(True) == SCREENSHOTS
    assert bundle.slimmed["images"] == len(shown)
    assert bundle.redacted_keys == 2 * len(blobs)  # the bearer token and the API key of every request
