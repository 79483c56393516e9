"""Slimming (contract 3, "Slimming"): base64 images out of JSON/JSONL logs, stream events dropped.

An image block is replaced where it stands, in the text, by
`{"type": "image", "mimeType": …, "path": "images/…"}`: nothing else in the file is
re-serialised, so every other byte (and every line with no image) is copied as it was.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import PIL
from PIL import Image, UnidentifiedImageError

from vae_pipeline.domain.files import write_atomic

WEBP_QUALITY = 70
IMAGE_DIR = "images"

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/jpg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_MIME_OF_FORMAT = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}

# Braces, "data" keys, and runs of anything else (strings whole, so a brace inside one is not
# taken for structure): enough to find every object's span without parsing the whole text.
_TOKEN = re.compile(rb'\{|\}|"data"\s*:|(?:[^"{}]+|"(?!data"\s*:)[^"\\]*(?:\\.[^"\\]*)*")+')
_MEMO_MAX_SPAN = 8 << 20  # larger objects are parsed each time rather than kept
_STREAM_EVENT_PREFIXES = (b'{"type": "stream_event"', b'{"type":"stream_event"')


@dataclass(frozen=True)
class SlimStats:
    """What slimming did to one member (or, summed, to an episode)."""

    images: int = 0  # image blocks moved out of the text
    bytes_before: int = 0
    bytes_after: int = 0
    stream_events_dropped: int = 0

    def __add__(self, other: SlimStats) -> SlimStats:
        return SlimStats(
            self.images + other.images,
            self.bytes_before + other.bytes_before,
            self.bytes_after + other.bytes_after,
            self.stream_events_dropped + other.stream_events_dropped,
        )


@dataclass(frozen=True)
class SlimResult:
    """The slimmed text; `line_map[i]` is the input line of output line i+1 (None: unchanged)."""

    data: bytes
    stats: SlimStats
    line_map: Sequence[int] | None


@dataclass
class ImageStore:
    """The episode's images by path; one file per distinct decoded image, however often seen.

    With a `cache` folder (shared by every build), an image is encoded once ever: the result is
    kept under the sha256 of the decoded bytes, the media type and the encoder's settings.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    cache: Path | None = None
    _by_sha: dict[str, tuple[str, str]] = field(default_factory=dict)
    _parsed: dict[tuple[int, bytes, bytes, bytes, bytes], list[tuple[bytes, object]]] = field(default_factory=dict)
    _by_text: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def parse_block(self, span: bytes) -> object:
        """json.loads of an object's text, once per distinct text: request logs repeat the same
        image blocks request after request, and parsing their base64 is most of the work.
        Texts are told apart by a key read off a few hundred bytes of them (`_sample_key`),
        then compared whole: a comparison runs at memory speed, a checksum of every byte
        several times slower."""
        key = _sample_key(span)
        for seen, obj in self._parsed.get(key, ()):
            if seen == span:
                return obj
        try:
            obj = json.loads(span)
        except ValueError:
            obj = None
        if len(span) <= _MEMO_MAX_SPAN:
            self._parsed.setdefault(key, []).append((span, obj))
        return obj

    def put_base64(self, data: str, media_type: str) -> tuple[str, str] | None:
        """Like `put` for base64 text (None if it does not decode); repeats skip the decoding."""
        key = (data, media_type)
        if key not in self._by_text:
            try:
                raw = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                return None
            self._by_text[key] = self.put(raw, media_type)
        return self._by_text[key]

    def put(self, raw: bytes, media_type: str) -> tuple[str, str]:
        """Store decoded image bytes once; return (path, mimeType) of the stored file."""
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in self._by_sha:
            data, mime, ext = self._smallest(raw, digest, media_type)
            path = f"{IMAGE_DIR}/{digest}.{ext}"
            self.files[path] = data
            self._by_sha[digest] = (path, mime)
        return self._by_sha[digest]

    def _smallest(self, raw: bytes, digest: str, media_type: str) -> tuple[bytes, str, str]:
        """`_smallest`, through the cache: an entry is `mime ext sha256-of-data` on one line,
        then the data; one that does not check out (a torn write) is encoded again."""
        if self.cache is None:
            return _smallest(raw, media_type)
        settings = f"{media_type.lower()}\0webp-q{WEBP_QUALITY}\0pillow-{PIL.__version__}\0{digest}"
        key = hashlib.sha256(settings.encode()).hexdigest()
        entry = self.cache / key[:2] / key
        cached = _cache_entry(entry)
        if cached is not None:
            return cached
        data, mime, ext = _smallest(raw, media_type)
        write_atomic(entry, f"{mime} {ext} {hashlib.sha256(data).hexdigest()}\n".encode() + data, durable=False)
        return data, mime, ext


def _sample_key(span: bytes) -> tuple[int, bytes, bytes, bytes, bytes]:
    """Length and four 64-byte samples: the head and tail of image blocks of one media type
    are alike, base64 from the middle of two different images is not. Equal keys are only
    candidates; `parse_block` compares the texts."""
    n = len(span)
    return n, span[n // 4 : n // 4 + 64], span[n // 2 : n // 2 + 64], span[3 * n // 4 : 3 * n // 4 + 64], span[-64:]


def _cache_entry(entry: Path) -> tuple[bytes, str, str] | None:
    if not entry.is_file():
        return None
    head, _, data = entry.read_bytes().partition(b"\n")
    try:
        mime, ext, data_sha = head.decode().split(" ")
    except ValueError:
        return None
    return (data, mime, ext) if hashlib.sha256(data).hexdigest() == data_sha else None


def _smallest(raw: bytes, media_type: str) -> tuple[bytes, str, str]:
    """WebP at quality 70, or the original bytes (with their own extension) when smaller."""
    original_mime = media_type.lower()
    original_ext = _EXTENSIONS.get(original_mime)
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if original_ext is None:
                original_mime = _MIME_OF_FORMAT.get(image.format or "", original_mime)
                original_ext = _EXTENSIONS.get(original_mime, "bin")
            if getattr(image, "n_frames", 1) > 1:
                return raw, original_mime, original_ext  # animation: kept as it is
            image.load()
            has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            picture = image if image.mode in ("RGB", "RGBA") else image.convert("RGBA" if has_alpha else "RGB")
            out = io.BytesIO()
            picture.save(out, "WEBP", quality=WEBP_QUALITY)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return raw, original_mime, original_ext or "bin"
    webp = out.getvalue()
    if len(webp) < len(raw):
        return webp, "image/webp", "webp"
    return raw, original_mime, original_ext


def is_slimmable(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in (".json", ".jsonl")


def _image_payload(obj: object) -> tuple[str, str] | None:
    """(base64 data, media type) of an image block: Anthropic `source` or MCP `data`/`mimeType`."""
    if not isinstance(obj, dict) or obj.get("type") != "image":
        return None
    source = obj.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        data, mime = source.get("data"), source.get("media_type")
    else:
        data, mime = obj.get("data"), obj.get("mimeType")
    if isinstance(data, str) and isinstance(mime, str) and data:
        return data, mime
    return None


def _image_blocks(text: bytes, parse: Callable[[bytes], object]) -> list[tuple[int, int, str, str]]:
    """Spans of the image blocks in one JSON text, with their base64 data and media type."""
    stack: list[list] = []  # per open object: [start, has a "data" key, holds a base64 source]
    blocks = []
    pos = 0
    while (m := _TOKEN.search(text, pos)) is not None:
        token, pos = m.group(), m.end()
        if token == b"{":
            stack.append([m.start(), False, False])
        elif token == b"}":
            if not stack:
                continue
            start, has_data, holds_source = stack.pop()
            if not (has_data or holds_source):
                continue
            obj = parse(text[start : m.end()])
            if obj is None:
                continue
            if has_data and stack and isinstance(obj, dict) and obj.get("type") == "base64":
                stack[-1][2] = True
            payload = _image_payload(obj)
            if payload is not None:
                blocks.append((start, m.end(), *payload))
        elif token.startswith(b'"data"') and stack:  # a "data" key (or, harmlessly, value)
            stack[-1][1] = True
            pos = _after_string(text, pos)
    return blocks


def _after_string(text: bytes, pos: int) -> int:
    """Past the JSON string value starting at pos (after blanks), found at memory-search speed.

    A base64 image is most of a log's bytes; scanning it with a regex would dominate the run.
    """
    while pos < len(text) and text[pos] in b" \t\r\n:":
        pos += 1
    if pos >= len(text) or text[pos] != 0x22:
        return pos
    end = text.find(b'"', pos + 1)
    while end > 0:
        backslashes = len(text[pos:end]) - len(text[pos:end].rstrip(b"\\"))
        if backslashes % 2 == 0:
            return end + 1
        end = text.find(b'"', end + 1)
    return len(text)


def _replace_images(text: bytes, store: ImageStore) -> tuple[bytes, list[tuple[int, int]], int]:
    """The text with its image blocks moved to the store; the replaced spans; how many."""
    pieces, spans, last = [], [], 0
    for start, end, data, mime in sorted(_image_blocks(text, store.parse_block)):
        if start < last:
            continue
        stored = store.put_base64(data, mime)
        if stored is None:
            continue
        path, stored_mime = stored
        block = json.dumps({"type": "image", "mimeType": stored_mime, "path": path}).encode()
        pieces += (text[last:start], block)
        spans.append((start, end))
        last = end
    if not spans:
        return text, [], 0
    pieces.append(text[last:])
    return b"".join(pieces), spans, len(spans)


def _may_hold_image(text: bytes) -> bool:
    return b'"data"' in text and (b'"base64"' in text or b'"mimeType"' in text)


def _is_stream_event(line: bytes) -> bool:
    if line.startswith(_STREAM_EVENT_PREFIXES):
        return True
    if b'"stream_event"' not in line:
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "stream_event"


def _slim_jsonl(data: bytes, store: ImageStore) -> SlimResult:
    lines = data.split(b"\n")
    out: list[bytes] = []
    kept: list[int] = []
    images = dropped = 0
    for number, line in enumerate(lines, start=1):
        if _is_stream_event(line):
            dropped += 1
            continue
        if _may_hold_image(line):
            line, _, moved = _replace_images(line, store)
            images += moved
        out.append(line)
        kept.append(number)
    slimmed = b"\n".join(out) if (images or dropped) else data
    stats = SlimStats(images, len(data), len(slimmed), dropped)
    return SlimResult(slimmed, stats, kept if dropped else None)


def _collapsed_line_map(text: bytes, spans: list[tuple[int, int]]) -> list[int]:
    """Input line of each output line when each span became one line of text."""
    mapping: list[int] = []
    line_start = in_line = 1
    pos = 0
    for start, end in [*spans, (len(text), len(text))]:
        n = text.count(b"\n", pos, start)
        if n:
            mapping.append(line_start)
            mapping.extend(range(in_line + 1, in_line + n))
            in_line += n
            line_start = in_line
        in_line += text.count(b"\n", start, end)
        pos = end
    mapping.append(line_start)
    return mapping


def slim_member(path: str, data: bytes, store: ImageStore) -> SlimResult:
    """Slim one JSON or JSONL member; any other member comes back unchanged."""
    if not is_slimmable(path):
        return SlimResult(data, SlimStats(), None)
    if path.lower().endswith(".jsonl"):
        return _slim_jsonl(data, store)
    if not _may_hold_image(data):
        return SlimResult(data, SlimStats(0, len(data), len(data), 0), None)
    slimmed, spans, moved = _replace_images(data, store)
    collapsed = any(data.find(b"\n", s, e) >= 0 for s, e in spans)  # find: memchr, far faster than count
    line_map = _collapsed_line_map(data, spans) if collapsed else None
    return SlimResult(slimmed, SlimStats(moved, len(data), len(slimmed), 0), line_map)
