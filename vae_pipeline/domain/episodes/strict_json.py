"""Strict JSON for everything read from an episode: what Python's `json` lets through is bad input.

Python's parser accepts `NaN`, `Infinity` and `1e309` (read as infinity), keeps the last of two
equal keys, nests until the interpreter's recursion limit (a `RecursionError` that is no
`BadInput`), and reads a JSONL file whole. Here each of those is a `BadInput` naming the file and
the line: nesting deeper than `MAX_DEPTH`, a number that is not finite or an integer outside
64 bits (a Parquet column holds no more), a duplicate key, a string that is not valid Unicode (a
lone surrogate cannot be written as UTF-8), and a JSONL line longer than the line limit — that
line is never read whole: at most the limit is held before deciding.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from json.decoder import JSONArray, JSONObject
from json.scanner import py_make_scanner
from typing import BinaryIO

from vae_pipeline.domain.errors import BadInput

# Deeper than any file the harness writes (a Claude Code message nests about 8 levels), far
# below the interpreter's recursion limit.
MAX_DEPTH = 64
DEFAULT_MAX_LINE_BYTES = 64 * 1024**2
INT64 = 2**63


class _Refused(ValueError):
    """Valid for Python's `json`, not for the pipeline: the reason, and where if known."""

    def __init__(self, reason: str, pos: int | None = None):
        super().__init__(reason)
        self.reason, self.pos = reason, pos


def _constant(name: str) -> None:
    raise _Refused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused("a number is too large to be finite")
    return value


def _int(text: str) -> int:
    # the length test first: int() of 4,300+ digits is itself an error, and slow well before
    value = int(text) if len(text.lstrip("-")) <= 19 else INT64
    if not -INT64 <= value < INT64:
        raise _Refused("an integer does not fit in 64 bits")
    return value


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(f"duplicate key {_quoted(key)}")
    return value


def _quoted(key: str) -> str:
    return json.dumps(key[:40] + ("…" if len(key) > 40 else ""), ensure_ascii=False)


_HOOKS = {"object_pairs_hook": _pairs, "parse_constant": _constant, "parse_float": _float, "parse_int": _int}
_FAST = json.JSONDecoder(**_HOOKS)


def _check_tree(value: object) -> None:
    """Depth and strings of a parsed value, without recursion; only containers are stacked."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    if isinstance(value, str) and not value.isascii():
        _check_unicode(value)
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for key in node:
                if not key.isascii():
                    _check_unicode(key)
            node = node.values()
        for child in node:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif isinstance(child, str) and not child.isascii():
                _check_unicode(child)


def _check_unicode(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused("a string holds a lone surrogate (not valid Unicode)") from None


class _Locator(json.JSONDecoder):
    """The pure-Python scanner, watched: it knows where each value starts and how deep it is,
    so a refusal gets its line. Only run on a document already refused (it is slower)."""

    def __init__(self) -> None:
        super().__init__(**_HOOKS)
        self.depth, self.pos = 0, 0
        self.parse_object, self.parse_array = self._object, self._array
        self.parse_string = self._string
        self.scan_once = py_make_scanner(self)

    def _enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", pos)

    def _watched(self, scan, starts: list[int] | None = None):
        def scan_at(text: str, pos: int):
            self.pos = pos
            if starts is not None:
                starts.append(pos)
            return scan(text, pos)
        return scan_at

    def _object(self, s_and_end, strict, scan, object_hook, object_pairs_hook, memo=None, _w=None):
        self._enter(s_and_end[1])
        starts: list[int] = []  # where each of this object's values starts

        def pairs_here(pairs: list[tuple[str, object]]) -> dict:
            try:
                return _pairs(pairs)
            except _Refused as exc:
                keys = [k for k, _ in pairs]
                second = next(i for i, k in enumerate(keys) if k in keys[:i])
                raise _Refused(exc.reason, starts[second]) from None

        try:
            return JSONObject(s_and_end, strict, self._watched(scan, starts), object_hook, pairs_here, memo)
        finally:
            self.depth -= 1

    def _array(self, s_and_end, scan, _w=None):
        self._enter(s_and_end[1])
        try:
            return JSONArray(s_and_end, self._watched(scan))
        finally:
            self.depth -= 1

    def _string(self, text: str, end: int, strict: bool = True):
        value, after = json.decoder.scanstring(text, end, strict)
        if not value.isascii():
            try:
                _check_unicode(value)
            except _Refused as exc:
                raise _Refused(exc.reason, end) from None
        return value, after

    def refusal(self, text: str) -> _Refused | None:
        try:
            self.decode(text)
        except _Refused as exc:
            return _Refused(exc.reason, exc.pos if exc.pos is not None else self.pos)
        except (ValueError, RecursionError):
            return None
        return None


def loads(data: bytes | str, file: str, *, line: int | None = None) -> object:
    """`data` parsed strictly; raises BadInput naming `file` and the line (`line` for a JSONL
    line; else the line inside the document)."""
    try:
        text = data.decode(json.detect_encoding(data)) if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise BadInput(file, "not UTF-8 text", line=line) from None
    try:
        value = _FAST.decode(text)
        _check_tree(value)
        return value
    except _Refused as exc:
        refused = exc
    except RecursionError:
        refused = _Refused(f"nested deeper than {MAX_DEPTH} levels")
    except json.JSONDecodeError as exc:
        raise BadInput(file, f"not valid JSON ({exc.msg})", line=line if line is not None else exc.lineno) from None
    except ValueError as exc:  # the parser's own refusals that are not JSONDecodeError
        raise BadInput(file, f"not valid JSON ({exc})", line=line) from None
    if line is None:
        located = _Locator().refusal(text)
        if located is not None and located.pos is not None:
            refused, line = located, text.count("\n", 0, located.pos) + 1
    raise BadInput(file, f"not valid JSON: {refused.reason}", line=line)


def jsonl(stream: BinaryIO | bytes, file: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[tuple[int, object]]:
    """(line number, value) of every non-blank line, read as a stream: a line longer than
    `max_line_bytes` is refused after reading at most that many bytes of it."""
    if isinstance(stream, bytes):
        stream = io.BytesIO(stream)
    lineno = 0
    while True:
        raw = stream.readline(max_line_bytes + 2)  # the line, and its \r\n
        if not raw:
            return
        lineno += 1
        if len(raw.rstrip(b"\r\n")) > max_line_bytes:
            raise BadInput(file, f"line is longer than the line limit ({max_line_bytes:,} bytes, "
                                 "VAE_MAX_LINE_BYTES)", line=lineno)
        if raw.strip():
            yield lineno, loads(raw, file, line=lineno)
