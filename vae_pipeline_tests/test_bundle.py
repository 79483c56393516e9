"""The archive: planted values gone from every byte, images stored once, reproducible, exclusions."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import tarfile
import zlib

import pytest
import zstandard
from PIL import Image

from vae_pipeline.domain.bundles.bundle import Bundle, build_bundle, exclusion_reason
from vae_pipeline.domain.episodes.episode_files import SourceMember
from vae_pipeline.domain.files import write_atomic
from vae_pipeline.domain.scrub.texts import ScrubConfig, is_text_member
from vae_pipeline.domain.bundles.slim import ImageStore, slim_member
from vae_pipeline.sample.planted import PLANTED_KIND, planted_text, planted_values

TEXT_MEMBERS = [
    "transcript/notes.txt", "work/index.html", "work/main.js", "work/style.css", "work/app.ts",
    "work/tool.py", "work/run.sh", "work/config.yaml", "work/ci.yml", "work/README.md",
]
REDACTS = sum(action == "redact" for _, action in PLANTED_KIND.values())


def _png(rng: random.Random, size: int = 96) -> bytes:
    """A noisy PNG: WebP at quality 70 is much smaller, so it gets converted."""
    image = Image.frombytes("RGB", (size, size), rng.randbytes(size * size * 3))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _image_block(png: bytes) -> dict:
    data = base64.b64encode(png).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def _episode(seed: int = 0) -> tuple[dict[str, bytes], dict[str, str], bytes]:
    rng = random.Random(seed)
    values = planted_values(rng)
    text = planted_text(values)
    png = _png(rng)
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": text}}
    messages = [
        {"type": "system", "subtype": "init", "cwd": values["home"] + "/work"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}, tool_use]}},
        {"type": "stream_event", "event": {"delta": {"type": "text_delta", "text": text}}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [_image_block(png)]}]}},
        {"type": "stream_event", "event": {"delta": {"type": "text_delta", "text": "x"}}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "done, no secrets"}]}},
        {"type": "result", "subtype": "success", "result": text},
    ]
    blob = {"model": "m", "messages": [
        {"role": "user", "content": [_image_block(png), {"type": "text", "text": text}]},
        {"role": "user", "content": [{"type": "tool_result", "content": [_image_block(png)]}]},
    ]}
    members = {
        "brief.json": json.dumps({"brief_id": "ui-product-014", "prompt": text}).encode(),
        "result.json": json.dumps({"status": "completed", "error": text}).encode(),
        "messages.jsonl": b"".join(json.dumps(m).encode() + b"\n" for m in messages),
        "transcript/session.jsonl": json.dumps({"type": "user", "text": text}).encode() + b"\n",
        "transcript/api-request-blob/1.json": json.dumps(blob, indent=2).encode(),
        "work/assets/vendor/gsap.min.js": b"/* gsap */ var gsap = {};",
        "work/assets/vendor/three/three.module.js": b"export const THREE = {};",
        "work/node_modules/left-pad/index.js": text.encode(),
        "work/.env": f"ANTHROPIC_API_KEY={values['anthropic']}\n".encode(),
        "work/prod.env": f"HF_TOKEN={values['huggingface']}\n".encode(),
        "out.mp4": rng.randbytes(4096),
        "frames/f00.jpg": rng.randbytes(512),
        **{path: text.encode() for path in TEXT_MEMBERS},
    }
    return members, values, png


def as_members(files: dict[str, bytes]) -> list[SourceMember]:
    """Files in memory as an archive's members would come: each readable once, as a stream."""
    return [SourceMember(path, len(data), lambda data=data: io.BytesIO(data), reopenable=False)
            for path, data in files.items()]


def pack(files: dict[str, bytes], target, **options) -> Bundle:
    options.setdefault("config", ScrubConfig())
    return build_bundle(as_members(files), target, **options)


def _unpack(archive: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    raw = zstandard.ZstdDecompressor().decompress(archive)
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {info.name: (info, tar.extractfile(info).read()) for info in tar.getmembers()}


def _forms(value: str) -> list[bytes]:
    """Every way a value can sit in a member: raw, JSON-escaped, and each line of a PEM body."""
    forms = {value.encode(), json.dumps(value)[1:-1].encode()}
    if "PRIVATE KEY" in value:
        forms.update(line.encode() for line in value.splitlines()[1:-1])
    return sorted(forms)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    members, values, png = _episode()
    return members, values, png, pack(members, tmp_path_factory.mktemp("bundle") / "a.tar.zst")


def test_no_planted_secret_survives_anywhere_in_the_archive(built) -> None:
    members, values, _, bundle = built
    unpacked = _unpack(bundle.archive.read_bytes())
    everything = zstandard.ZstdDecompressor().decompress(bundle.archive.read_bytes())
    for key, value in values.items():
        if PLANTED_KIND[key][1] == "finding":
            continue
        for form in _forms(value):
            assert form not in everything, key
            assert form not in bundle.archive.read_bytes()
    text_members = {path: data for path, (_, data) in unpacked.items() if is_text_member(path)}
    assert text_members and not [path for path, data in text_members.items() if b"PRIVATE KEY" in data]


def test_redactions_and_findings_match_what_was_planted(built) -> None:
    members, values, _, bundle = built
    kept_text = [p for p in members if is_text_member(p) and exclusion_reason(p) is None]
    # copies of the planted text per archived text member: messages.jsonl holds it in a text
    # block, a tool input and the result (its dropped stream_event holds a fourth, not counted)
    copies = {"brief.json": 1, "result.json": 1, "messages.jsonl": 3, "transcript/session.jsonl": 1,
              "transcript/api-request-blob/1.json": 1, **{p: 1 for p in TEXT_MEMBERS}}
    assert set(copies) == set(kept_text)
    expected_copies = sum(copies.values())
    assert bundle.redacted_keys == REDACTS * expected_copies
    assert bundle.scrub["redacted"]["github"] == 6 * expected_copies
    assert bundle.scrub["placeholders"]["home"] == expected_copies + 1  # + the init cwd
    kinds_by_file: dict[str, set[str]] = {}
    for finding in bundle.scrub["findings"]:
        kinds_by_file.setdefault(finding["file"], set()).add(finding["kind"])
        assert set(finding) == {"file", "line", "kind", "sha256s", "allowed"}
    assert all(kinds == {"email", "ip_address"} for kinds in kinds_by_file.values())
    assert set(kinds_by_file) == set(kept_text)
    serialized = json.dumps(bundle.scrub)
    assert values["email"] not in serialized and values["public_ip"] not in serialized


def test_findings_name_lines_of_the_input_files(built) -> None:
    members, values, _, bundle = built
    mail = values["email"].encode()
    for path in ("messages.jsonl", "transcript/api-request-blob/1.json", "work/README.md"):
        lines = members[path].split(b"\n")
        expected = sorted({i for i, line in enumerate(lines, 1) if mail in line
                           and b'"stream_event"' not in line})  # dropped lines are not archived
        got = sorted(f["line"] for f in bundle.scrub["findings"] if f["file"] == path and f["kind"] == "email")
        assert got == expected, path
    # the result line of messages.jsonl is line 7 of the input, after two dropped stream events
    assert 7 in [f["line"] for f in bundle.scrub["findings"] if f["file"] == "messages.jsonl"]


def test_repeated_image_is_stored_once_and_blocks_point_to_it(built) -> None:
    _, _, png, bundle = built
    unpacked = _unpack(bundle.archive.read_bytes())
    images = [p for p in unpacked if p.startswith("images/")]
    digest = hashlib.sha256(png).hexdigest()
    assert images == [f"images/{digest}.webp"]
    stored = unpacked[images[0]][1]
    assert stored[:4] == b"RIFF" and stored[8:12] == b"WEBP" and len(stored) < len(png)
    block = json.dumps({"type": "image", "mimeType": "image/webp", "path": images[0]}).encode()
    assert unpacked["messages.jsonl"][1].count(block) == 1
    assert unpacked["transcript/api-request-blob/1.json"][1].count(block) == 2
    assert base64.b64encode(png)[:200] not in zstandard.ZstdDecompressor().decompress(bundle.archive.read_bytes())
    assert bundle.slimmed["images"] == 3
    assert bundle.slimmed["stream_events_dropped"] == 2
    assert bundle.slimmed["bytes_after"] < bundle.slimmed["bytes_before"]


def test_two_builds_are_byte_identical_and_headers_are_normalised(built, tmp_path) -> None:
    members, _, _, bundle = built
    again = pack(dict(reversed(list(members.items()))), tmp_path / "again.tar.zst")
    assert again.archive.read_bytes() == bundle.archive.read_bytes()
    assert again.archive_sha256 == hashlib.sha256(bundle.archive.read_bytes()).hexdigest() == bundle.archive_sha256
    unpacked = _unpack(bundle.archive.read_bytes())
    assert list(unpacked) == sorted(unpacked)
    for info, _ in unpacked.values():
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode) == (0, 0, 0, "", "", 0o644)
        assert info.isfile() and not info.pax_headers


def test_files_list_every_member_with_size_and_sha256(built) -> None:
    _, _, _, bundle = built
    unpacked = _unpack(bundle.archive.read_bytes())
    assert [f["path"] for f in bundle.files] == sorted(unpacked)
    for entry in bundle.files:
        data = unpacked[entry["path"]][1]
        assert entry == {"path": entry["path"], "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_exclusions_are_listed_and_left_out(built) -> None:
    members, _, _, bundle = built
    unpacked = _unpack(bundle.archive.read_bytes())
    assert bundle.excluded == [
        {"path": "work/.env", "reason": "env file"},
        {"path": "work/assets/vendor/gsap.min.js", "reason": "vendored runtime"},
        {"path": "work/assets/vendor/three/three.module.js", "reason": "vendored runtime"},
        {"path": "work/node_modules/left-pad/index.js", "reason": "node_modules"},
        {"path": "work/prod.env", "reason": "env file"},
    ]
    assert bundle.vendor_files == [
        {"name": "gsap.min.js", "sha256": hashlib.sha256(members["work/assets/vendor/gsap.min.js"]).hexdigest()},
        {"name": "three/three.module.js",
         "sha256": hashlib.sha256(members["work/assets/vendor/three/three.module.js"]).hexdigest()},
    ]
    assert not any(p.startswith(("work/assets/vendor/", "work/node_modules/")) or p.endswith(".env")
                   for p in unpacked)
    assert unpacked["out.mp4"][1] == members["out.mp4"]  # binary members pass through as they are
    assert unpacked["frames/f00.jpg"][1] == members["frames/f00.jpg"]


def test_untouched_lines_are_copied_byte_for_byte(built) -> None:
    members, _, _, bundle = built
    unpacked = _unpack(bundle.archive.read_bytes())
    before = members["messages.jsonl"].split(b"\n")
    after = unpacked["messages.jsonl"][1].split(b"\n")
    kept = [line for line in before if b'"stream_event"' not in line]
    assert len(after) == len(kept)
    assert after[3] == before[5]  # no secret, no image: the same bytes
    assert after[5] == before[7] == b""
    assert after[0] != before[0] and after[2] != before[3]  # home path, image block
    assert unpacked["brief.json"][1] != members["brief.json"]  # scrubbed ...
    assert json.loads(unpacked["brief.json"][1])["brief_id"] == "ui-product-014"  # ... still JSON


def test_slim_keeps_other_bytes_and_collapsed_json_maps_lines() -> None:
    rng = random.Random(5)
    png = _png(rng, 64)
    doc = json.dumps({"a": [_image_block(png)], "b": "after"}, indent=2).encode()
    result = slim_member("transcript/api-request/3.json", doc, ImageStore())
    assert result.data.startswith(b'{\n  "a": [\n    {"type": "image"')
    assert result.data.endswith(b'],\n  "b": "after"\n}')
    lines_out = result.data.split(b"\n")
    b_line = next(i for i, line in enumerate(lines_out) if b'"b"' in line)
    b_input = next(i for i, line in enumerate(doc.split(b"\n")) if b'"b"' in line)
    assert result.line_map[b_line] == b_input + 1
    untouched = b'{"type": "assistant", "data": "not an image"}\n'
    assert slim_member("m.jsonl", untouched, ImageStore()).data == untouched


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")


def test_image_blocks_alike_where_the_memo_samples_them_are_still_told_apart() -> None:
    """The parse memo keys a block by its length and a few samples; two blocks that agree there
    but differ elsewhere are two images, each block pointing to its own file."""
    png = _png(random.Random(6), 64)
    size = len(png)
    # a private chunk over the first fifth of the file: a byte changed in it (CRC fixed) is
    # another valid PNG, differing only between the memo's head and quarter samples
    pictures = [png[:33] + _png_chunk(b"prVt", bytes([n]) * (size // 5)) + png[33:] for n in (0, 1)]
    first, second = (json.dumps(_image_block(p)) for p in pictures)
    assert len(second) == len(first) and second != first
    n = len(first)
    assert [first[i : i + 64] for i in (n // 4, n // 2, 3 * n // 4, n - 64)] == \
        [second[i : i + 64] for i in (n // 4, n // 2, 3 * n // 4, n - 64)]
    store = ImageStore()
    result = slim_member("messages.jsonl", f"{first}\n{second}\n{first}\n".encode(), store)
    paths = [json.loads(line)["path"] for line in result.data.decode().splitlines()]
    assert [p.split("/")[1].split(".")[0] for p in paths] == [
        hashlib.sha256(d).hexdigest() for d in (pictures[0], pictures[1], pictures[0])]
    assert len(store.files) == 2


def test_write_atomic_replaces_whole_file(tmp_path) -> None:
    target = tmp_path / "episodes" / "2026-10-21" / "a.tar.zst"
    write_atomic(target, b"first")
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["a.tar.zst"]


def test_text_members_outside_the_contracts_list_are_scrubbed_too(tmp_path) -> None:
    values = planted_values(random.Random(5))
    members = {"brief.json": b"{}\n", "work/server.log": f"token {values['huggingface']}\n".encode(),
               "work/app.mjs": f"const k = '{values['github_ghp']}';\n".encode(),
               "work/logo.png": b"\x89PNG\r\n\x1a\n\x00" + values["huggingface"].encode()}
    bundle = pack(members, tmp_path / "a.tar.zst")
    archived = {path: data for path, (_, data) in _unpack(bundle.archive.read_bytes()).items()}
    assert values["huggingface"].encode() not in archived["work/server.log"]
    assert values["github_ghp"].encode() not in archived["work/app.mjs"]
    assert archived["work/logo.png"] == members["work/logo.png"]  # media is never touched
