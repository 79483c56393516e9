"""What an image file's bytes are, and the same picture without the text it may carry.

An image kept as its original bytes (a slimmed image the WebP would not shrink, an `observations/`
screenshot, any image member of an archive) can hold text the scrub never reads: PNG `tEXt`,
`iTXt` and `zTXt` chunks, EXIF, XMP, comments, bytes after the image's end. `strip_metadata`
keeps only what draws the picture, chunk by chunk, so the result is the same for the same input
(reproducible) and the pixels are untouched. Bytes that do not parse as their format are returned
as they are: there is no structure to strip, and nothing is guessed.
"""

from __future__ import annotations

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXTENSIONS = {"PNG": "png", "JPEG": "jpg", "GIF": "gif", "WEBP": "webp"}
MIME_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}

# ancillary PNG chunks that change how the picture is drawn (APNG frames included); every other
# ancillary chunk (tEXt, iTXt, zTXt, eXIf, tIME, private ones) is dropped
_PNG_DRAWING_CHUNKS = frozenset({b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"bKGD", b"pHYs",
                                 b"cICP", b"mDCV", b"cLLI", b"acTL", b"fcTL", b"fdAT"})
_WEBP_DRAWING_CHUNKS = frozenset({b"VP8 ", b"VP8L", b"VP8X", b"ALPH", b"ANIM", b"ANMF", b"ICCP"})
_WEBP_EXIF_XMP_FLAGS = 0x08 | 0x04  # VP8X flags announcing the EXIF and XMP chunks
_GIF_LOOP_APPS = (b"NETSCAPE2.0", b"ANIMEXTS1.0")  # application extensions that only set looping


def image_format(raw: bytes) -> str | None:
    """"PNG", "JPEG", "GIF" or "WEBP" by the file's magic bytes, else None."""
    if raw.startswith(PNG_MAGIC):
        return "PNG"
    if raw.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "GIF"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "WEBP"
    return None


def strip_metadata(raw: bytes) -> bytes:
    """The image without its text chunks, EXIF, XMP, comments and trailing bytes."""
    stripper = {"PNG": _strip_png, "JPEG": _strip_jpeg, "GIF": _strip_gif, "WEBP": _strip_webp}.get(
        image_format(raw) or "")
    if stripper is None:
        return raw
    try:
        return stripper(raw)
    except _Malformed:
        return raw


class _Malformed(Exception):
    pass


def _need(raw: bytes, end: int) -> None:
    if end > len(raw):
        raise _Malformed


def _strip_png(raw: bytes) -> bytes:
    out, pos = [PNG_MAGIC], len(PNG_MAGIC)
    while True:
        _need(raw, pos + 12)
        length, kind = int.from_bytes(raw[pos : pos + 4], "big"), raw[pos + 4 : pos + 8]
        end = pos + 12 + length
        _need(raw, end)
        critical = kind[:1].isupper()
        if critical or kind in _PNG_DRAWING_CHUNKS:
            out.append(raw[pos:end])
        pos = end
        if kind == b"IEND":
            return b"".join(out)


def _strip_jpeg(raw: bytes) -> bytes:
    """Segments up to each scan, the scans' coded data; APPn (but JFIF APP0, ICC APP2, Adobe
    APP14) and COM segments dropped, nothing kept after the end-of-image marker."""
    out, pos, n = [raw[:2]], 2, len(raw)
    while True:
        _need(raw, pos + 2)
        if raw[pos] != 0xFF:
            raise _Malformed
        marker = raw[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xD9:
            out.append(raw[pos : pos + 2])
            return b"".join(out)
        if 0xD0 <= marker <= 0xD7 or marker == 0x01:
            out.append(raw[pos : pos + 2])
            pos += 2
            continue
        _need(raw, pos + 4)
        end = pos + 2 + int.from_bytes(raw[pos + 2 : pos + 4], "big")
        _need(raw, end)
        if _jpeg_segment_kept(marker, raw[pos + 4 : end]):
            out.append(raw[pos:end])
        pos = end
        if marker == 0xDA:  # start of scan: coded data up to the next marker that is not a restart
            scan = pos
            while True:
                pos = raw.find(b"\xff", pos)
                if pos < 0 or pos + 1 >= n:
                    raise _Malformed
                following = raw[pos + 1]
                if following == 0x00 or 0xD0 <= following <= 0xD7:
                    pos += 2
                    continue
                break
            out.append(raw[scan:pos])


def _jpeg_segment_kept(marker: int, body: bytes) -> bool:
    if marker == 0xFE:  # COM
        return False
    if 0xE0 <= marker <= 0xEF:
        return (marker == 0xE0 and body.startswith(b"JFIF\0")) or (marker == 0xE2 and body.startswith(
            b"ICC_PROFILE\0")) or (marker == 0xEE and body.startswith(b"Adobe"))
    return True


def _strip_webp(raw: bytes) -> bytes:
    end = min(len(raw), 8 + int.from_bytes(raw[4:8], "little"))
    chunks, pos = [], 12
    while pos < end:
        _need(raw, pos + 8)
        kind, size = raw[pos : pos + 4], int.from_bytes(raw[pos + 4 : pos + 8], "little")
        stop = pos + 8 + size + (size & 1)  # chunks are padded to an even size
        _need(raw, stop)
        chunk = raw[pos:stop]
        if kind == b"VP8X" and size >= 1:
            chunk = chunk[:8] + bytes((chunk[8] & ~_WEBP_EXIF_XMP_FLAGS,)) + chunk[9:]
        if kind in _WEBP_DRAWING_CHUNKS:
            chunks.append(chunk)
        pos = stop
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + len(body).to_bytes(4, "little") + body


def _strip_gif(raw: bytes) -> bytes:
    """Header, screen descriptor, colour tables, graphic controls and images; comments, plain
    text and application extensions (but looping) dropped, nothing kept after the trailer."""
    _need(raw, 13)
    pos = 13 + (3 << ((raw[10] & 0x07) + 1) if raw[10] & 0x80 else 0)
    _need(raw, pos)
    out = [raw[:pos]]
    while True:
        _need(raw, pos + 1)
        introducer = raw[pos]
        if introducer == 0x3B:
            out.append(raw[pos : pos + 1])
            return b"".join(out)
        if introducer == 0x21:
            _need(raw, pos + 2)
            label, start = raw[pos + 1], pos
            pos = _after_sub_blocks(raw, pos + 2)
            kept = label == 0xF9 or (label == 0xFF and raw[start + 3 : start + 14] in _GIF_LOOP_APPS)
            if kept:
                out.append(raw[start:pos])
        elif introducer == 0x2C:
            _need(raw, pos + 10)
            flags, start = raw[pos + 9], pos
            pos += 10 + (3 << ((flags & 0x07) + 1) if flags & 0x80 else 0) + 1  # + LZW minimum code size
            pos = _after_sub_blocks(raw, pos)
            out.append(raw[start:pos])
        else:
            raise _Malformed


def _after_sub_blocks(raw: bytes, pos: int) -> int:
    while True:
        _need(raw, pos + 1)
        size = raw[pos]
        pos += 1 + size
        if size == 0:
            _need(raw, pos)
            return pos
