"""What a reader of a text member sees, for the scrub (contract 3, "The scrub").

A credential hides from a byte-level scan when the file spells it another way than a reader
reads it: in UTF-16 or UTF-32, or with JSON string escapes (`\\u0073k-ant-…`, `\\/`), also
escaped once more where a JSON string holds JSON text (a Read of a `.jsonl` file: `\\\\/`). This
module gives the scrub those readings — wide text as UTF-8 and back, stretches of escaped text
decoded, as many times as they nest, with the way back to the escaped bytes — and tells base64
images from other base64.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

# ---- UTF-16 and UTF-32 text -------------------------------------------------------------

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16's: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class WideText:
    """How a UTF-16 or UTF-32 member was written, to write its scrubbed text back the same way."""

    codec: str
    bom: bytes
    tail: bytes  # bytes after the last whole code unit, kept as they were

    def encode(self, utf8: bytes) -> bytes:
        text = utf8.decode("utf-8", "surrogatepass")
        return self.bom + text.encode(self.codec, "surrogatepass") + self.tail


def _wide_codec(data: bytes) -> tuple[bytes, str] | None:
    """(BOM, codec) of UTF-16/32 text: by its BOM, or by where its NUL bytes fall (the high bytes
    of ASCII characters): every other byte for UTF-16, three bytes in four for UTF-32."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return bom, codec
    if b"\0" not in data:
        return None
    quarter = max(len(data) // 4, 1)
    zeros = [data[r::4].count(0) / quarter for r in range(4)]
    if zeros[3] > 0.99 and zeros[2] > 0.9 and zeros[0] < 0.5:
        return b"", "utf-32-le"
    if zeros[0] > 0.99 and zeros[1] > 0.9 and zeros[3] < 0.5:
        return b"", "utf-32-be"
    odd, even = (zeros[1] + zeros[3]) / 2, (zeros[0] + zeros[2]) / 2
    if odd > 0.3 and even < 0.05:
        return b"", "utf-16-le"
    if even > 0.3 and odd < 0.05:
        return b"", "utf-16-be"
    return None


def wide_text(data: bytes) -> tuple[WideText, bytes] | None:
    """The member's text as UTF-8 and how to write it back, when it is UTF-16 or UTF-32 text."""
    found = _wide_codec(data)
    if found is None:
        return None
    bom, codec = found
    unit = 4 if "32" in codec else 2
    body = data[len(bom) :]
    whole = len(body) - len(body) % unit
    try:
        text = body[:whole].decode(codec, "surrogatepass")
    except UnicodeDecodeError:
        return None
    return WideText(codec, bom, body[whole:]), text.encode("utf-8", "surrogatepass")


# ---- JSON string escapes ------------------------------------------------------------------

# Escapes that can spell part of a credential, a path or a name: ASCII printable characters
# as \u00XX, and \/. (\n, \t, \" are read around by the kinds' own patterns; \u00e9 and other
# non-ASCII escapes are no part of what the scrub looks for.)
_SPELLING_ESCAPE = re.compile(rb"\\(?:u00[2-7][0-9A-Fa-f]|/)")
_JSON_ESCAPE = re.compile(rb'\\(?:u([0-9A-Fa-f]{4})|(["\\/bfnrt]))')
_SIMPLE = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t"}
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class Window:
    """A stretch of one line around escapes; `at_line_start`/`at_line_end`: it is not cut there."""

    start: int
    end: int
    at_line_start: bool
    at_line_end: bool


def escape_windows(buf: bytes, reach: int) -> Iterator[Window]:
    """The stretches of `buf` within `reach` bytes of an escape that can hide what the scrub
    looks for, merged, each inside one line: every match holding such an escape lies in one.
    Yielded as found; a window grows by twice `reach` at a time, and the scan skips the escapes
    that lie too deep inside it to make it grow, so dense escapes cost a scan, not a step each."""
    if b"\\" not in buf:  # memchr: most project sources hold no backslash at all
        return
    pos = 0
    window: Window | None = None
    while (m := _SPELLING_ESCAPE.search(buf, pos)) is not None:
        hit = m.start()
        if window is not None and (hit < window.end or (not window.at_line_end and hit - reach <= window.end)):
            if not window.at_line_end and hit + reach > window.end:
                end, at_end = _window_end(buf, window.end, hit + 2 * reach)
                window = Window(window.start, end, window.at_line_start, at_end)
            pos = window.end if window.at_line_end else max(hit + 1, window.end - reach)
            continue
        if window is not None:
            yield window
        newline = buf.rfind(b"\n", max(0, hit - reach), hit)
        start, at_start = (newline + 1, True) if newline >= 0 else (max(0, hit - reach), hit - reach <= 0)
        start, at_start = escape_start(buf, start, at_start)
        end, at_end = _window_end(buf, hit, hit + 2 * reach)
        window = Window(start, end, at_start, at_end)
        pos = window.end if window.at_line_end else max(hit + 1, window.end - reach)
    if window is not None:
        yield window


def _window_end(buf: bytes, start: int, end: int) -> tuple[int, bool]:
    """Where a window reaching from `start` to `end` ends: the end of its line, if nearer."""
    newline = buf.find(b"\n", start, end)
    return (newline, True) if newline >= 0 else (min(len(buf), end), end >= len(buf))


def escape_start(buf: bytes, start: int, at_start: bool) -> tuple[int, bool]:
    """A cut at `start` moved back over backslashes, so that it never falls inside an escape."""
    while not at_start and buf[start - 1] == _BACKSLASH:
        start -= 1
        at_start = start == 0
    return start, at_start


def window_pieces(raw: bytes, overlap: int) -> Iterator[tuple[int, int]]:
    """A long window as pieces of at most `VIEW_BYTES` (so a view of it stays small), each
    starting `overlap` bytes (or a few more: never inside an escape) before the last one ended:
    a match cut at one piece's end lies whole in the next."""
    if len(raw) <= VIEW_BYTES:
        yield 0, len(raw)
        return
    start = 0
    while True:
        end = min(len(raw), start + VIEW_BYTES)
        yield start, end
        if end == len(raw):
            return
        start, _ = escape_start(raw, end - overlap, False)


# The most bytes decoded at once: a view keeps four integers per escape.
VIEW_BYTES = 1 << 20
_UNICODE_ESCAPE = re.compile(rb"\\u([0-9A-Fa-f]{4})")
_SIMPLE_ESCAPES = tuple((b"\\" + k, v) for k, v in _SIMPLE.items() if k != b"\\")


def _unicode_char(m: re.Match[bytes]) -> bytes:
    return chr(int(m.group(1), 16)).encode("utf-8", "surrogatepass")


def decoded(raw: bytes) -> bytes:
    """`raw` with its JSON escapes decoded, at C speed: split at escaped backslashes, the other
    escapes replaced in each part (none of \\" \\/ \\n … decodes to a backslash, so none makes a
    new escape)."""
    parts = raw.split(b"\\\\")
    for i, part in enumerate(parts):
        if b"\\" in part:
            for escape, char in _SIMPLE_ESCAPES:
                part = part.replace(escape, char)
            if b"\\u" in part:  # last: a \u005c it decodes is a backslash, not an escape
                part = _UNICODE_ESCAPE.sub(_unicode_char, part)
            parts[i] = part
    return b"\\".join(parts)


class DecodedView:
    """JSON-escaped bytes as a reader reads them (every JSON escape decoded, other bytes as they
    are), and for any stretch of that reading the escaped bytes that spell it.

    The escapes' positions are only listed when a stretch is first asked for (four integers
    each, in arrays: the text between them is the same in both).
    """

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.data = decoded(raw)
        self._table: tuple[array, array, array, array] | None = None

    def _escapes(self) -> tuple[array, array, array, array]:
        """Per escape: where its reading starts and ends, and where it starts and ends in `raw`."""
        if self._table is None:
            read_start, read_end, raw_start, raw_end = array("q"), array("q"), array("q"), array("q")
            shift = 0  # bytes the escapes so far take in `raw` beyond their reading
            for m in _JSON_ESCAPE.finditer(self.raw):
                code = m.group(1)
                width = (1 if int(code, 16) < 0x80 else 2 if int(code, 16) < 0x800 else 3) if code else 1
                read_start.append(m.start() - shift)
                read_end.append(m.start() - shift + width)
                raw_start.append(m.start())
                raw_end.append(m.end())
                shift += m.end() - m.start() - width
            self._table = (read_start, read_end, raw_start, raw_end)
        return self._table

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The bytes of `raw` that spell data[start:end] (start < end), whole escapes included."""
        read_start, read_end, raw_start, raw_end = self._escapes()
        i = bisect_right(read_start, start) - 1
        if i < 0:
            source_start = start
        elif start < read_end[i]:
            source_start = raw_start[i]
        else:
            source_start = raw_end[i] + start - read_end[i]
        j = bisect_right(read_start, end - 1) - 1
        if j < 0:
            source_end = end
        elif end - 1 < read_end[j]:
            source_end = raw_end[j]
        else:
            source_end = raw_end[j] + end - read_end[j]
        return source_start, source_end


# A JSON string that holds JSON text (the agent Read or `cat` a `.jsonl` file) escapes that
# text's escapes once more: `\\\\/`, `\\\\u0073`, `\\\\n`; a log of such a log, once more again.
# How many times a stretch is decoded, at most.
NESTING = 4


def readings(raw: bytes, deepest: int = NESTING) -> list[DecodedView]:
    """`raw` decoded once, then its reading decoded again while that still holds an escape that
    can spell part of a value (up to `deepest` times): a reader's view at each depth of nesting."""
    levels = [DecodedView(raw)]
    while len(levels) < deepest and b"\\" in levels[-1].data and _SPELLING_ESCAPE.search(levels[-1].data):
        levels.append(DecodedView(levels[-1].data))
    return levels


class NestedView:
    """The reading of the deepest of `levels` (each the decoding of the one before), and for any
    stretch of it the bytes of the first level's `raw` that spell it, whole escapes included."""

    def __init__(self, levels: list[DecodedView]) -> None:
        self.levels = levels
        self.data = levels[-1].data

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        for level in reversed(self.levels):
            start, end = level.source_span(start, end)
        return start, end


# ---- base64 images ----------------------------------------------------------------------

_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def is_image(head: bytes) -> bool:
    """Whether bytes start as a PNG, JPEG, GIF or WebP file does."""
    return (
        head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a"))
        or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")
    )


def base64_is_image(text: bytes) -> bool:
    """Whether base64 text (standard or url-safe) decodes to the start of an image."""
    head = text[:24].translate(_TO_STANDARD)
    try:
        return is_image(base64.b64decode(head[: len(head) // 4 * 4], validate=True))
    except (binascii.Error, ValueError):
        return False
