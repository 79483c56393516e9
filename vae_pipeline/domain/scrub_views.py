"""What a reader of a text member sees, for the scrub (contract 3, "The scrub").

A credential hides from a byte-level scan when the file spells it another way than a reader
reads it: in UTF-16 or UTF-32, or with JSON string escapes (`\\u0073k-ant-…`, `\\/`). This
module gives the scrub those readings — wide text as UTF-8 and back, stretches of escaped text
decoded with the way back to the escaped bytes — and tells base64 images from other base64.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from bisect import bisect_right
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


def escape_windows(buf: bytes, reach: int) -> list[Window]:
    """The stretches of `buf` within `reach` bytes of an escape that can hide what the scrub
    looks for, merged, each inside one line: every match holding such an escape lies in one."""
    if b"\\" not in buf:  # memchr: most project sources hold no backslash at all
        return []
    hits = [m.start() for m in _SPELLING_ESCAPE.finditer(buf)]  # one scan: as fast as a test for either
    n = len(buf)
    windows: list[Window] = []
    start = end = -1
    at_start = at_end = False
    for hit in hits:
        if start >= 0 and (hit < end or (not at_end and hit - reach <= end)):
            if not at_end and hit + reach > end:
                newline = buf.find(b"\n", end, hit + reach)
                end, at_end = (newline, True) if newline >= 0 else (min(n, hit + reach), hit + reach >= n)
            continue
        if start >= 0:
            windows.append(Window(start, end, at_start, at_end))
        newline = buf.rfind(b"\n", max(0, hit - reach), hit)
        start, at_start = (newline + 1, True) if newline >= 0 else (max(0, hit - reach), hit - reach <= 0)
        while not at_start and buf[start - 1] == _BACKSLASH:  # never start inside an escape
            start -= 1
            at_start = start == 0
        newline = buf.find(b"\n", hit, hit + reach)
        end, at_end = (newline, True) if newline >= 0 else (min(n, hit + reach), hit + reach >= n)
    if start >= 0:
        windows.append(Window(start, end, at_start, at_end))
    return windows


class DecodedView:
    """JSON-escaped bytes as a reader reads them (every JSON escape decoded, other bytes as they
    are), and for any stretch of that reading the escaped bytes that spell it."""

    def __init__(self, raw: bytes) -> None:
        pieces: list[bytes] = []
        # per segment: where it starts in the reading, where it starts and ends in `raw`, escape?
        self._starts: list[int] = []
        self._raw: list[tuple[int, int, bool]] = []
        pos = out = 0
        for m in _JSON_ESCAPE.finditer(raw):
            if m.start() > pos:
                self._starts.append(out)
                self._raw.append((pos, m.start(), False))
                pieces.append(raw[pos : m.start()])
                out += m.start() - pos
            code = m.group(1)
            char = chr(int(code, 16)).encode("utf-8", "surrogatepass") if code else _SIMPLE[m.group(2)]
            self._starts.append(out)
            self._raw.append((m.start(), m.end(), True))
            pieces.append(char)
            out += len(char)
            pos = m.end()
        if pos < len(raw) or not self._starts:
            self._starts.append(out)
            self._raw.append((pos, len(raw), False))
            pieces.append(raw[pos:])
        self.data = b"".join(pieces)

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The bytes of `raw` that spell data[start:end], whole escapes included."""
        i = bisect_right(self._starts, start) - 1
        raw_start, _, escape = self._raw[i]
        source_start = raw_start if escape else raw_start + start - self._starts[i]
        j = bisect_right(self._starts, max(end - 1, start)) - 1
        raw_start, raw_end, escape = self._raw[j]
        source_end = raw_end if escape else raw_start + end - self._starts[j]
        return source_start, source_end


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
