"""Slimming (contract 3, "Slimming"): base64 images out of JSON/JSONL logs, stream events dropped.

An image is recognised by what it decodes to, never by the key that holds it: base64 whose
bytes are a PNG, JPEG, GIF or WebP that decodes (libspng or Pillow). An image block is replaced
where it stands, in the text, by `{"type": "image", "mimeType": …, "path": "images/…"}`; any
other string of 512+ base64 characters that is an image (the CLI's `tool_use_result.file.base64`
copy, a `data:image/…;base64,` URL) is replaced by the path. Nothing else in the file is
re-serialised, so every other byte (and every line with no image) is copied as it was. Base64
that is not an image (thinking signatures, an "image" block holding text) stays where it is,
for the scrub to read as text.
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

import imagecodecs
import numpy as np
import PIL
from PIL import Image, UnidentifiedImageError

from vae_pipeline.domain.files import write_atomic
from vae_pipeline.domain.bundles.image_bytes import EXTENSIONS, MIME_TYPES, image_format, strip_metadata

WEBP_QUALITY = 70
# libwebp's effort (0 fastest .. 6 smallest), chosen by `benchmarks/bench_bundles.py --methods`:
# on the delivery-size screenshots, 0 encodes in ~80% of method 2's CPU time and ~45% of method
# 4's (Pillow's default), for ~20% more image bytes; a first build is mostly this encoding
WEBP_METHOD = 0
IMAGE_DIR = "images"
# bumped whenever what is stored for an image changes (the cache must not hand back older bytes)
_STORED_FORM = "stripped-1"
_B64_MIN_RUN = 512  # contract 3: strings of 512+ base64 characters
_B64_STANDARD = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_B64_RUN = re.compile(rb"(?:[A-Za-z0-9+=]|\\?/)+")
# how the base64 of each format's magic bytes begins (`\/` where a JSON writer escapes "/")
_IMAGE_B64_HEADS = (b"iVBORw0KGg", b"/9j/", b"\\/9j\\/", b"R0lGOD", b"UklGR")
_DATA_URL_HEAD = re.compile(rb"data:image/[A-Za-z0-9.+-]{1,32};base64,\Z")

# Braces, "data" keys, and runs of anything else (strings whole, so a brace inside one is not
# taken for structure): enough to find every object's span without parsing the whole text.
_TOKEN = re.compile(rb'\{|\}|"data"\s*:|(?:[^"{}]+|"(?!data"\s*:)[^"\\]*(?:\\.[^"\\]*)*")+')
_MEMO_MAX_SPAN = 8 << 20  # larger objects are parsed each time rather than kept
_STREAM_EVENT_PREFIXES = (b'{"type": "stream_event"', b'{"type":"stream_event"')


@dataclass(frozen=True)
class SlimStats:
    """What slimming did to one member (or, summed, to an episode)."""

    images: int = 0  # images moved out of the text: blocks, and other values that are images
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
    kept under the sha256 of the decoded bytes and the encoder's settings.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    cache: Path | None = None
    _by_sha: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    _parsed: dict[tuple[int, bytes, bytes, bytes, bytes], list[tuple[bytes, object]]] = field(default_factory=dict)
    _by_text: dict[tuple[int, bytes, bytes, bytes, bytes], list[tuple[bytes, tuple[str, str] | None]]] = field(
        default_factory=dict)

    def parse_block(self, span: bytes) -> object:
        """json.loads of an object's text, once per distinct text: request logs repeat the same
        image blocks request after request, and parsing their base64 is most of the work."""
        return _memo(self._parsed, span, _loads_or_none, keep=len(span) <= _MEMO_MAX_SPAN)

    def put_base64(self, data: bytes) -> tuple[str, str] | None:
        """Like `put` for base64 text (None if it is not the base64 of an image); repeats skip
        the decoding. Texts are told apart by a key read off a few hundred bytes of them
        (`_sample_key`), then compared whole: a comparison runs at memory speed, a checksum of
        every byte several times slower."""
        return _memo(self._by_text, data, self._put_base64, keep=True)

    def _put_base64(self, data: bytes) -> tuple[str, str] | None:
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
        return self.put(raw)

    def put(self, raw: bytes) -> tuple[str, str] | None:
        """Store decoded image bytes once; (path, mimeType) of the stored file, or None when
        the bytes are not an image (they are then not stored)."""
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in self._by_sha:
            stored = self._smallest(raw, digest) if image_format(raw) else None
            if stored is not None:
                data, mime, ext = stored
                path = f"{IMAGE_DIR}/{digest}.{ext}"
                self.files[path] = data
                self._by_sha[digest] = (path, mime)
            else:
                self._by_sha[digest] = None
        return self._by_sha[digest]

    def _smallest(self, raw: bytes, digest: str) -> tuple[bytes, str, str] | None:
        """`_smallest`, through the cache: an entry is `mime ext sha256-of-data` on one line,
        then the data (`- -` for bytes that are no image); one that does not check out (a torn
        write) is encoded again."""
        if self.cache is None:
            return _smallest(raw)
        settings = (f"webp-q{WEBP_QUALITY}-m{WEBP_METHOD}\0{_STORED_FORM}\0pillow-{PIL.__version__}"
                    f"\0imagecodecs-{imagecodecs.__version__}\0{digest}")
        key = hashlib.sha256(settings.encode()).hexdigest()
        entry = self.cache / key[:2] / key
        cached = _cache_entry(entry)
        if cached is not None:
            return None if cached[1] == "-" else cached
        stored = _smallest(raw)
        data, mime, ext = stored if stored is not None else (b"", "-", "-")
        write_atomic(entry, f"{mime} {ext} {hashlib.sha256(data).hexdigest()}\n".encode() + data, durable=False)
        return stored


def _memo(memo: dict, text: bytes, compute: Callable[[bytes], object], *, keep: bool):
    """compute(text), once per distinct text seen by this memo (see `ImageStore.put_base64`)."""
    key = _sample_key(text)
    for seen, value in memo.get(key, ()):
        if seen == text:
            return value
    value = compute(text)
    if keep:
        memo.setdefault(key, []).append((text, value))
    return value


def _loads_or_none(span: bytes) -> object:
    try:
        return json.loads(span)
    except ValueError:
        return None


def _sample_key(span: bytes) -> tuple[int, bytes, bytes, bytes, bytes]:
    """Length and four 64-byte samples: the head and tail of image blocks of one media type
    are alike, base64 from the middle of two different images is not. Equal keys are only
    candidates; the memo compares the texts."""
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


def _smallest(raw: bytes) -> tuple[bytes, str, str] | None:
    """WebP at quality 70, or the original bytes (their metadata stripped, with their own
    extension) when smaller; None when the bytes do not decode as their format."""
    kind = image_format(raw)
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if {"MPO": "JPEG"}.get(image.format, image.format) != kind:  # MPO: a camera JPEG with a preview
                return None
            pixels = _png_pixels(raw, image)
            if pixels is None:
                image.load()
                if getattr(image, "n_frames", 1) > 1:
                    return strip_metadata(raw), MIME_TYPES[kind], EXTENSIONS[kind]  # animation: kept as it is
                has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
                pixels = np.asarray(image if image.mode in ("RGB", "RGBA") else image.convert("RGBA" if has_alpha else "RGB"))
            webp = imagecodecs.webp_encode(pixels, WEBP_QUALITY, lossless=False, method=WEBP_METHOD)
            original = strip_metadata(raw)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError,
            imagecodecs.WebpError):  # libwebp refusing a picture (out of memory, a partition too big)
        return None
    if len(webp) < len(original):
        return webp, "image/webp", "webp"
    return original, MIME_TYPES[kind], EXTENSIONS[kind]


def _png_pixels(raw: bytes, image: Image.Image) -> np.ndarray | None:
    """The pixels of a still 8-bit RGB or RGBA PNG, decoded by libspng (a first build spends
    a quarter less CPU on an image than through Pillow, and the WebP made of them is the same
    bytes); None for any other image, or when libspng refuses it: Pillow then decides."""
    if image.format != "PNG" or image.mode not in ("RGB", "RGBA") or "transparency" in image.info \
            or getattr(image, "n_frames", 1) > 1:
        return None
    try:
        pixels = imagecodecs.spng_decode(raw)
    except imagecodecs.SpngError:
        return None
    return pixels if pixels.dtype == np.uint8 and pixels.shape[2:] == (len(image.mode),) else None


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
    """The text with its image blocks moved to the store; the replaced spans; how many. A block
    whose data is the base64 of UTF-8 text, not of an image, becomes a text block of that text,
    so the scrub reads what a reader decoding it would (a key hidden in a fake image is redacted);
    other data that is no image stays as it is."""
    pieces, spans, last, images = [], [], 0, 0
    for start, end, data, _ in sorted(_image_blocks(text, store.parse_block)):
        if start < last:
            continue
        try:
            stored = store.put_base64(data.encode("ascii"))
        except UnicodeEncodeError:
            continue
        if stored is not None:
            path, stored_mime = stored
            block = json.dumps({"type": "image", "mimeType": stored_mime, "path": path}).encode()
            images += 1
        elif (decoded := _base64_text(data)) is not None:
            block = json.dumps({"type": "text", "text": decoded}, ensure_ascii=False).encode()
        else:
            continue
        pieces += (text[last:start], block)
        spans.append((start, end))
        last = end
    if not spans:
        return text, [], 0
    pieces.append(text[last:])
    return b"".join(pieces), spans, images


def _base64_text(data: str) -> str | None:
    """The UTF-8 text `data` is the base64 of, or None."""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _may_hold_image(text: bytes) -> bool:
    return b'"data"' in text and (b'"base64"' in text or b'"mimeType"' in text)


def _image_runs(text: bytes) -> list[int]:
    """Where a run of base64 may begin that decodes to an image: the base64 of a format's magic
    bytes, not inside a longer run (found at memory-search speed, one scan per format)."""
    starts = set()
    for head in _IMAGE_B64_HEADS:
        at = text.find(head)
        while at >= 0:
            if at == 0 or text[at - 1] not in _B64_STANDARD:
                starts.add(at)
            at = text.find(head, at + len(head))
    return sorted(starts)


def _run_end(text: bytes, start: int) -> int:
    """End of the base64 run at `start`: mostly the closing quote of its JSON string, checked
    at memory speed; otherwise where the base64 characters stop."""
    quote = text.find(b'"', start)
    if quote > start and not text[start:quote].replace(b"\\/", b"/").translate(None, _B64_STANDARD):
        return quote
    return _B64_RUN.match(text, start).end()


def _replace_image_values(text: bytes, store: ImageStore) -> tuple[bytes, int]:
    """Every other base64 image in the text replaced by its path: a string value that is one
    (`tool_use_result.file.base64`), or a `data:image/…;base64,` URL. Runs shorter than 512
    characters, or that are no image, stay."""
    pieces, last, moved = [], 0, 0
    for start in _image_runs(text):
        if start < last:
            continue
        end = _run_end(text, start)
        run = text[start:end]
        if b"\\" in run:
            run = run.replace(b"\\/", b"/")
        if len(run) < _B64_MIN_RUN:
            continue
        stored = store.put_base64(run)
        if stored is None:
            continue
        url = _DATA_URL_HEAD.search(text, max(last, start - 64), start)
        pieces += (text[last : url.start() if url else start], stored[0].encode())
        last = end
        moved += 1
    if not moved:
        return text, 0
    pieces.append(text[last:])
    return b"".join(pieces), moved


def _slim_text(text: bytes, store: ImageStore) -> tuple[bytes, list[tuple[int, int]], int]:
    """Image blocks, then every other image value, moved out of one JSON text (a line of a
    JSONL file, or a whole JSON file); the replaced block spans; how many images were moved."""
    spans, blocks = [], 0
    if _may_hold_image(text):
        text, spans, blocks = _replace_images(text, store)
    text, values = _replace_image_values(text, store)
    return text, spans, blocks + values


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
    changed = False
    for number, line in enumerate(lines, start=1):
        if _is_stream_event(line):
            dropped += 1
            continue
        slimmed_line, _, moved = _slim_text(line, store)
        images += moved
        changed = changed or slimmed_line is not line
        out.append(slimmed_line)
        kept.append(number)
    slimmed = b"\n".join(out) if (changed or dropped) else data
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
    slimmed, spans, moved = _slim_text(data, store)
    collapsed = any(data.find(b"\n", s, e) >= 0 for s, e in spans)  # find: memchr, far faster than count
    line_map = _collapsed_line_map(data, spans) if collapsed else None
    return SlimResult(slimmed, SlimStats(moved, len(data), len(slimmed), 0), line_map)
