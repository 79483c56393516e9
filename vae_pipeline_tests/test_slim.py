"""Slimming and names (contract 3, "Slimming", "The archive", "Manifest"), on bytes built here in
the shapes the Claude Code CLI writes: every base64 image moved out once whatever key holds it,
other base64 left byte for byte, image metadata stripped, an "image" that is no image kept as
text, and a credential in a file, episode or series name refusing that episode or series only."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import re
import shutil

import pytest
from PIL import Image, PngImagePlugin

from vae_pipeline.domain.bundles import slim
from vae_pipeline.domain.episodes.episode_files import read_episode_files
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.series import EpisodeEntry, discover_series, read_series_json
from vae_pipeline_tests.test_bundle import _unpack, pack

KEY = "sk-ant-api03-" + "Zq7" * 14  # an Anthropic key's shape
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
HF = "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"
_B64_RUN = re.compile(rb"(?:[A-Za-z0-9+/]|\\/){512,}={0,2}")


def noisy_png(seed: int, size: int = 96) -> bytes:
    """Noise: WebP at quality 70 is smaller, so it is what gets stored."""
    image = Image.frombytes("RGB", (size, size), random.Random(seed).randbytes(size * size * 3))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def checkerboard_png_with_text() -> bytes:
    """A 1-bit checkerboard (its PNG is far smaller than any WebP, so the original is kept)
    carrying a key in a tEXt chunk and another in an iTXt chunk."""
    image = Image.new("P", (64, 64))
    image.putpalette([0, 0, 0, 255, 255, 255])
    image.putdata([(x + y) % 2 for y in range(64) for x in range(64)])
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", KEY)
    info.add_itxt("Source", AWS_ID)
    out = io.BytesIO()
    image.save(out, "PNG", pnginfo=info)
    return out.getvalue()


def decoded_images_left(data: bytes) -> list[int]:
    """Offsets of every run of 512+ base64 characters that decodes to an image Pillow opens."""
    found = []
    for m in _B64_RUN.finditer(data):
        run = m.group().replace(b"\\/", b"/")
        try:
            raw = base64.b64decode(run + b"=" * (-len(run) % 4))
            with Image.open(io.BytesIO(raw)) as image:
                image.load()
        except Exception:  # noqa: BLE001 - anything Pillow refuses is not an image
            continue
        found.append(m.start())
    return found


def image_block(raw: bytes, media_type: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                        "data": base64.b64encode(raw).decode()}}


def read_result(raw: bytes, key: str = "tool_use_result") -> dict:
    """The user line the CLI writes for a Read of an image: the block, and the file's copy."""
    return {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_01", "type": "tool_result", "content": [image_block(raw)]}]},
        "parent_tool_use_id": None, "session_id": "3f0c", "uuid": "a1b2",
        key: {"type": "image", "file": {"base64": base64.b64encode(raw).decode(), "type": "image/png",
                                        "originalSize": len(raw)}}}


def jsonl(*lines: dict) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def members_of(bundle) -> dict[str, bytes]:
    return {path: data for path, (_, data) in _unpack(bundle.archive.read_bytes()).items()}


def test_a_read_image_and_its_tool_use_result_copy_are_one_file_and_no_base64_image_is_left(tmp_path) -> None:
    png, other = noisy_png(1), noisy_png(2)
    session_line = {**read_result(png, "toolUseResult"), "cwd": "/tmp/w", "isSidechain": False}
    files = {
        "messages.jsonl": jsonl({"type": "assistant", "message": {"id": "msg_1", "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "/tmp/w/shot.png"}}]}},
            read_result(png)),
        "transcript/session.jsonl": jsonl(session_line),
        "transcript/subagents/agent-a1.jsonl": jsonl(read_result(other, "toolUseResult")),
        # a request blob: pretty-printed, the image in a tool result and as a data: URL
        "transcript/api-request-blob/0.json": json.dumps({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "content": [image_block(png)]}]},
            {"role": "user", "content": [{"type": "text", "text": "see"}],
             "url": "data:image/png;base64," + base64.b64encode(other).decode()}]}, indent=2).encode(),
    }
    bundle = pack(files, tmp_path / "a.tar.zst")
    archived = members_of(bundle)
    images = sorted(p for p in archived if p.startswith("images/"))
    expected = sorted(f"images/{hashlib.sha256(raw).hexdigest()}.webp" for raw in (png, other))
    assert images == expected
    for path, data in archived.items():
        assert decoded_images_left(data) == [], path
    first = f"images/{hashlib.sha256(png).hexdigest()}.webp"
    line = json.loads(archived["messages.jsonl"].splitlines()[1])
    assert line["message"]["content"][0]["content"] == [{"type": "image", "mimeType": "image/webp", "path": first}]
    assert line["tool_use_result"]["file"] == {"base64": first, "type": "image/png", "originalSize": len(png)}
    assert json.loads(archived["transcript/session.jsonl"])["toolUseResult"]["file"]["base64"] == first
    assert json.loads(archived["transcript/api-request-blob/0.json"])["messages"][1]["url"] == images[
        images.index(f"images/{hashlib.sha256(other).hexdigest()}.webp")]
    # a block and a file copy in each of the three logs, a block and a data: URL in the blob
    assert bundle.slimmed["images"] == 8


def test_a_thinking_signature_and_other_base64_that_is_no_image_stay_byte_for_byte(tmp_path) -> None:
    rng = random.Random(3)
    signature = base64.b64encode(rng.randbytes(900)).decode()
    # starts like the base64 of a PNG, but the bytes after the magic are not one
    fake_png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(700)).decode()
    thinking = {"type": "assistant", "message": {"id": "msg_1", "content": [
        {"type": "thinking", "thinking": "", "signature": signature}]}}
    other = {"type": "user", "tool_use_result": {"stdout": fake_png}}
    messages = jsonl(thinking, other)
    archived = members_of(pack({"messages.jsonl": messages}, tmp_path / "a.tar.zst"))
    assert archived["messages.jsonl"] == messages
    assert not [p for p in archived if p.startswith("images/")]


def test_images_kept_as_original_bytes_lose_their_text_chunks_and_exif(tmp_path) -> None:
    png = checkerboard_png_with_text()
    exif = Image.Exif()
    exif[0x010E] = f"key {AWS_ID}"  # ImageDescription
    jpeg = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(jpeg, "JPEG", exif=exif, comment=HF.encode())
    gif = io.BytesIO()
    Image.new("P", (8, 8), 3).save(gif, "GIF", comment=HF.encode())
    files = {
        "messages.jsonl": jsonl(read_result(png)),
        "observations/shot.png": png,
        "frames/f00.jpg": jpeg.getvalue(),
        "work/assets/logo.gif": gif.getvalue(),
    }
    for raw, secret in ((png, KEY), (png, AWS_ID), (jpeg.getvalue(), AWS_ID), (jpeg.getvalue(), HF),
                        (gif.getvalue(), HF)):
        assert secret.encode() in raw  # planted where the format keeps text
    first = pack(files, tmp_path / "a.tar.zst")
    archived = members_of(first)
    stored = f"images/{hashlib.sha256(png).hexdigest()}.png"
    assert sorted(p for p in archived if p.startswith("images/")) == [stored]  # smaller than its WebP
    everything = b"".join(archived.values())
    for secret in (KEY, AWS_ID, HF):
        assert secret.encode() not in everything
    for path, original in ((stored, png), ("observations/shot.png", png), ("frames/f00.jpg", jpeg.getvalue()),
                           ("work/assets/logo.gif", gif.getvalue())):
        with Image.open(io.BytesIO(archived[path])) as kept, Image.open(io.BytesIO(original)) as before:
            assert (kept.format, kept.size, kept.tobytes()) == (before.format, before.size, before.tobytes()), path
    assert archived[stored] == archived["observations/shot.png"] and len(archived[stored]) < len(png)
    assert pack(dict(reversed(list(files.items()))), tmp_path / "b.tar.zst").archive_sha256 == first.archive_sha256


def test_an_image_block_whose_bytes_are_not_an_image_is_text_and_is_scrubbed(tmp_path) -> None:
    text_as_base64 = image_block(f"export ANTHROPIC_API_KEY={KEY}\n".encode() * 20)  # decodes, to text
    key_as_data = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                               "data": f"not an image: {KEY}"}}
    messages = jsonl({"type": "user", "message": {"content": [
        {"type": "tool_result", "content": [text_as_base64, key_as_data]}]}})
    bundle = pack({"messages.jsonl": messages}, tmp_path / "a.tar.zst")
    archived = members_of(bundle)
    assert list(archived) == ["messages.jsonl"]  # nothing under images/
    content = json.loads(archived["messages.jsonl"])["message"]["content"][0]["content"]
    # base64 of text: the text it decodes to, as a text block the scrub has read
    assert content[0] == {"type": "text", "text": "export ANTHROPIC_API_KEY=<redacted:anthropic>\n" * 20}
    assert content[1]["source"]["data"] == "not an image: <redacted:anthropic>"
    everything = b"".join(archived.values())
    assert KEY.encode() not in everything
    assert text_as_base64["source"]["data"].encode() not in everything
    assert bundle.slimmed["images"] == 0 and bundle.redacted_keys == 21


def _episode_folder(sample_runs) -> tuple:
    plan = next(p for p in sample_runs.episodes if p.bad is None and not p.archive)
    return plan, sample_runs.root / plan.series / plan.episode_id


def test_a_credential_in_a_file_name_makes_the_episode_invalid_and_names_the_file_not_the_value(
        sample_runs, tmp_path) -> None:
    plan, source = _episode_folder(sample_runs)
    folder = tmp_path / plan.episode_id
    shutil.copytree(source, folder)
    (folder / "work" / f"{KEY}.txt").write_text("notes\n")
    entry = EpisodeEntry(plan.episode_id, plan.episode_id, folder, False)
    with pytest.raises(BadInput) as caught:
        read_episode_files(entry, lambda _: False)
    error = caught.value
    assert (error.file, error.line) == ("work/<redacted:anthropic>.txt", None)
    assert "credential" in error.reason and "anthropic" in error.reason
    assert KEY not in str(error) and KEY[:20] not in str(error)


def test_a_credential_in_series_json_is_scrubbed_and_a_key_named_series_is_skipped(sample_runs, tmp_path) -> None:
    series = next(p.series for p in sample_runs.episodes)
    good = tmp_path / series
    good.mkdir()
    info = json.loads((sample_runs.root / series / "series.json").read_text())
    info["actor"]["model"] = KEY
    info["harness"] = {**info.get("harness", {}), "notes": f"ran from /home/ana/h with {HF}"}
    (good / "series.json").write_text(json.dumps(info))
    named = tmp_path / KEY
    named.mkdir()
    shutil.copy(good / "series.json", named / "series.json")
    found, skipped = discover_series(tmp_path)
    assert [s.series_id for s in found] == [series]
    assert found[0].info["actor"]["model"] == "<redacted:anthropic>"
    assert found[0].info["harness"]["notes"] == "ran from <home>/h with <redacted:huggingface>"
    assert read_series_json(good / "series.json") == found[0].info
    assert [(s.name, s.reason) for s in skipped] == [
        ("<redacted:anthropic>", "the folder name holds a credential-shaped string (anthropic); rename it")]


def _bytes_kept(*roots) -> dict[str, bytes]:
    """Every file under the roots, as a reader would see it: archives decompressed, Parquet
    tables decoded, everything else raw."""
    import polars as pl
    import zstandard

    kept = {}
    for root in roots:
        for path in (p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            if data[:4] == b"\x28\xb5\x2f\xfd":
                data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()
            elif path.suffix == ".parquet":
                data = json.dumps(pl.read_parquet(path).to_dicts(), default=str, ensure_ascii=False).encode()
            kept[str(path)] = data
    return kept


def test_key_named_files_episodes_and_series_fields_never_reach_a_kept_byte_and_the_rest_is_built(
        pipeline_env, tmp_path) -> None:
    """One series: an episode with a key in a work/ file name, one whose folder is named like a
    key (a valid id otherwise), a key as series.json's actor.model; the other episodes publish."""
    from vae_pipeline.cli.build import build
    from vae_pipeline.sample.generator import generate
    from vae_pipeline_tests.conftest import META

    runs = tmp_path / "runs"
    plan = generate(runs, META, series=2, episodes=3, seed=5, bad=False)
    series = plan.episodes[0].series
    episodes = [p for p in plan.episodes if p.series == series and not p.archive]
    assert len(episodes) >= 2
    with_file, renamed = episodes[0], episodes[1]
    (runs / series / with_file.episode_id / "work" / f"{KEY}.txt").write_text("notes\n")
    key_id = KEY.lower()
    (runs / series / renamed.episode_id).rename(runs / series / key_id)
    info = json.loads((runs / series / "series.json").read_text())
    info["actor"]["model"] = KEY
    (runs / series / "series.json").write_text(json.dumps(info))

    summary = build(runs, pipeline_env["dataset"])

    published = [json.loads(line)["id"] for line in (pipeline_env["dataset"] / "episodes.jsonl").read_text().splitlines()]
    kept_ids = sorted(p.episode_id for p in plan.episodes if p.series == series and p not in (with_file, renamed))
    assert sorted(i for i in published if i in {p.episode_id for p in plan.episodes if p.series == series}) == kept_ids
    invalid = {row["episode"]: row for row in summary["invalid_episodes"] if row["series"] == series}
    assert invalid[with_file.episode_id]["file"] == "work/<redacted:anthropic>.txt"
    placeholder = "redacted-" + hashlib.sha256(key_id.encode()).hexdigest()[:12]
    assert invalid[placeholder]["file"] == "<redacted:anthropic>"
    assert "credential-shaped" in invalid[placeholder]["reason"]
    kept = _bytes_kept(pipeline_env["dataset"], pipeline_env["home"])
    assert any(path.endswith(".tar.zst") for path in kept)
    for secret in (KEY, key_id, KEY[13:33], key_id[13:33]):
        assert [path for path, data in kept.items() if secret.encode() in data] == [], secret
        assert secret not in json.dumps(summary)


def test_an_image_member_too_large_to_strip_in_memory_is_refused_unread(tmp_path) -> None:
    from vae_pipeline.domain.bundles.bundle import IMAGE_MEMBER_LIMIT, build_bundle
    from vae_pipeline.domain.episodes.episode_files import SourceMember
    from vae_pipeline.domain.scrub.texts import ScrubConfig

    reads = []

    class Huge(io.BytesIO):
        def read(self, size=-1):
            reads.append(size)
            return super().read(size)

    head = checkerboard_png_with_text()
    member = SourceMember("observations/huge.png", IMAGE_MEMBER_LIMIT + 1, lambda: Huge(head), reopenable=False)
    with pytest.raises(BadInput, match="observations/huge.png: image larger than 64 MiB"):
        build_bundle([member], tmp_path / "a.tar.zst", config=ScrubConfig())
    assert all(size is not None and 0 < size <= 65536 for size in reads)  # only the head was read
    assert not (tmp_path / "a.tar.zst").exists()


def _pillow_webp(raw: bytes) -> bytes:
    """What Pillow's own WebP writer makes of an image at the contract's quality 70."""
    out = io.BytesIO()
    with Image.open(io.BytesIO(raw)) as image:
        image.save(out, "WEBP", quality=70, method=slim.WEBP_METHOD)
    return out.getvalue()


@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_a_png_screenshot_becomes_the_webp_pillow_writes_for_it_and_a_truncated_one_no_image(mode) -> None:
    image = Image.frombytes(mode, (320, 180), random.Random(7).randbytes(320 * 180 * len(mode)))
    out = io.BytesIO()
    image.save(out, "PNG")
    png = out.getvalue()
    store = slim.ImageStore()
    path, mime = store.put(png)
    assert (mime, store.files[path]) == ("image/webp", _pillow_webp(png))
    assert store.put(png[: len(png) // 2]) is None  # neither decoder reads it: it is text, for the scrub


def test_a_picture_libwebp_refuses_stays_text_and_the_episode_goes_on(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise slim.imagecodecs.WebpError("WebPEncode", 6)  # VP8_ENC_ERROR_PARTITION0_OVERFLOW

    monkeypatch.setattr(slim.imagecodecs, "webp_encode", refuse)
    assert slim.ImageStore().put(noisy_png(3)) is None
