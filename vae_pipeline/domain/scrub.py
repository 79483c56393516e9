"""The scrub (contract 3, "The scrub"): placeholders, redactions and findings over a text member.

The kinds are data (`scrub_kinds.json`): each has a regex, an action and the literal-first
`triggers` that every match contains. Each kind costs one fast literal scan of the whole text
per trigger; the detailed regex only runs in a window of `max_len` bytes around a trigger hit,
so text that holds nothing suspicious is scanned at memory-search speed and copied untouched.

Nothing here ever keeps or reports a matched value: a finding carries file, line, kind and
the sha256 of the value.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath

KINDS_PATH = Path(__file__).with_name("scrub_kinds.json")

TEXT_EXTENSIONS = frozenset(
    {".json", ".jsonl", ".md", ".txt", ".html", ".js", ".css", ".ts", ".py", ".sh", ".yaml", ".yml"}
)

# Media and archives: never scrubbed, whatever their bytes look like.
BINARY_EXTENSIONS = frozenset({".mp4", ".webm", ".mov", ".jpg", ".jpeg", ".png", ".webp", ".gif", ".zst",
                               ".gz", ".zip", ".woff", ".woff2", ".ttf", ".otf", ".wasm", ".ico"})

# Strings of 512+ base64 characters (standard or url-safe) are images, not text.
_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-="
_B64_MIN_RUN = 512
_DATA_IMAGE = re.compile(rb"data:image/[A-Za-z0-9.+-]+(?:;[A-Za-z0-9=.+-]+)*,[^\s\"'()\\]*")
_DATA_IMAGE_LOOKBACK = 1 << 16

# A host or user name is replaced only where the value it sits in holds one of these.
_VALUE_MARKS = frozenset(b"/.@:")
_VALUE_DELIMS = b" \t\r\n\"'`<>()[]{},;\\|"

_DOC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


@dataclass(frozen=True)
class ScrubConfig:
    """What the pipeline was told about the harness machine, and the reviewed findings.

    `allow` holds (file, kind, sha256 of value) triples from meta/scrub-allow.jsonl.
    """

    hostname: str | None = None
    username: str | None = None
    allow: frozenset[tuple[str, str, str]] = frozenset()


@dataclass(frozen=True)
class Finding:
    """A value that blocks publishing until allowed; never holds the value itself."""

    file: str
    line: int
    kind: str
    value_sha256: str
    allowed: bool

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "kind": self.kind,
            "value_sha256": self.value_sha256,
            "allowed": self.allowed,
        }


@dataclass
class ScrubResult:
    """The scrubbed bytes and what the scrub did; `redacted` counts every replaced occurrence."""

    data: bytes
    placeholders: Counter[str] = field(default_factory=Counter)
    redacted: int = 0
    redacted_by_kind: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class Kind:
    """One compiled kind of the scrub."""

    name: str
    action: str  # "placeholder" | "redact" | "finding"
    regex: re.Pattern[bytes]
    triggers: tuple[re.Pattern[bytes], ...]
    max_len: int  # longest match
    lead: int  # farthest a trigger hit lies from the start of its match
    replacement: bytes = b""
    group: int = 0
    validate: str | None = None
    config_word: bool = False  # a host/user name: plain-word occurrences are findings


def is_text_member(path: str, data: bytes | None = None) -> bool:
    """The contract's text members (by extension) — and, beyond the contract, any other member
    that reads as UTF-8 text with no NUL byte (a `.log`, `.mjs`, `.svg`, a file with no
    extension): scrubbing text the contract did not list costs nothing and leaks nothing."""
    if PurePosixPath(path).suffix.lower() in TEXT_EXTENSIONS:
        return True
    if data is None or PurePosixPath(path).suffix.lower() in BINARY_EXTENSIONS:
        return False
    head = data[:65536]
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the 64 KiB boundary
    return True


def value_sha256(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()


def kind_specs() -> list[dict]:
    """The kinds as data, with their examples (the tests run them)."""
    return json.loads(KINDS_PATH.read_text(encoding="utf-8"))


def _compile(spec: dict, value: str | None) -> Kind:
    pattern = spec["pattern"]
    flags = re.IGNORECASE if "i" in spec.get("flags", "") else 0
    if spec.get("config"):
        pattern = pattern.replace("{value}", re.escape(value or ""))
        triggers, lead = _case_free_triggers(value or "")
    else:
        triggers, lead = tuple(re.compile(t.encode()) for t in spec["triggers"]), int(spec["lead"])
    action = spec["action"]
    replacement = spec.get("placeholder", f"<redacted:{spec['name']}>") if action != "finding" else ""
    return Kind(
        name=spec["name"],
        action=action,
        regex=re.compile(pattern.encode(), flags),
        triggers=triggers,
        max_len=len((value or "").encode()) if spec.get("config") else int(spec["max_len"]),
        lead=lead,
        replacement=replacement.encode(),
        group=int(spec.get("group", 0)),
        validate=spec.get("validate"),
        config_word=bool(spec.get("config")),
    )


_LETTER_FREQUENCY = "etaoinshrdlcumwfgypbvkjxqz"  # English, most common first


def _case_free_triggers(value: str) -> tuple[tuple[re.Pattern[bytes], ...], int]:
    """Literal-first triggers for a case-insensitive name, starting at its rarest character.

    A scan for a literal is far faster than one compiled IGNORECASE, and the rarer the literal,
    the fewer the attempts: one trigger per case of that character, which then checks the
    characters around it.
    """
    rank = {c: i for i, c in enumerate(_LETTER_FREQUENCY)}
    at = max(range(len(value)), key=lambda i: (rank.get(value[i].lower(), len(rank)), -i))
    before = value[max(0, at - 3) : at + 1]
    context = f"(?<=(?i:{re.escape(before)}))" if len(before) > 1 else ""
    rest = f"(?i:{re.escape(value[at + 1 :])})" if value[at + 1 :] else ""
    triggers = tuple(
        re.compile((re.escape(c) + context + rest).encode())
        for c in sorted({value[at].lower(), value[at].upper()})
    )
    return triggers, len(value[:at].encode())


@lru_cache(maxsize=16)
def compiled_kinds(hostname: str | None, username: str | None) -> tuple[Kind, ...]:
    """The kinds in application order; host/user kinds only when the pipeline was told them."""
    values = {"hostname": hostname, "username": username}
    kinds = []
    for spec in kind_specs():
        config_key = spec.get("config")
        if config_key and not values.get(config_key):
            continue
        kinds.append(_compile(spec, values.get(config_key) if config_key else None))
    return tuple(kinds)


def _in_image(buf: bytes, start: int, end: int) -> bool:
    """Whether [start, end) lies in a 512+ base64 run or in a data:image URL (both skipped)."""
    if not buf[start:end].translate(None, _B64_CHARS):
        left = buf[max(0, start - _B64_MIN_RUN) : start]
        right = buf[end : end + _B64_MIN_RUN]
        run = (len(left) - len(left.rstrip(_B64_CHARS))) + (end - start)
        run += len(right) - len(right.lstrip(_B64_CHARS))
        if run >= _B64_MIN_RUN:
            return True
    q = buf.rfind(b"data:image/", max(0, start - _DATA_IMAGE_LOOKBACK), start + 1)
    if q >= 0:
        url = _DATA_IMAGE.match(buf, q)
        if url is not None and url.end() >= end:
            return True
    return False


def _is_reportable_ip(value: bytes) -> bool:
    """Loopback, unspecified and documentation addresses are not findings; non-addresses neither."""
    try:
        address = ipaddress.ip_address(value.decode("ascii"))
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _is_reportable_ip(str(address.ipv4_mapped).encode())
    return not any(address.version == net.version and address in net for net in _DOC_NETWORKS)


_VALIDATORS: dict[str, Callable[[bytes], bool]] = {"ip_address": _is_reportable_ip}


def _holds_value_mark(buf: bytes, start: int, end: int) -> bool:
    """Whether the value (run of non-delimiters) around [start, end) holds one of / . @ :"""
    lo = start
    while lo > 0 and buf[lo - 1] not in _VALUE_DELIMS and start - lo < 256:
        lo -= 1
    hi = end
    while hi < len(buf) and buf[hi] not in _VALUE_DELIMS and hi - end < 256:
        hi += 1
    return any(b in _VALUE_MARKS for b in buf[lo:hi])


class _TriggerHits:
    """Trigger hit offsets, each trigger scanned once per text and shared between kinds.

    When a kind replaces spans, the hits are moved rather than rescanned: a replacement starts
    with "<" and ends with ">", which no trigger holds, so it can neither hold a new hit nor
    make one with its neighbours; hits inside a replaced span are gone.
    """

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.hits: dict[bytes, list[int]] = {}

    def of(self, kind: Kind) -> list[int]:
        found: set[int] = set()
        for trigger in kind.triggers:
            if trigger.pattern not in self.hits:
                # a trigger may start at a rarer character than its match does (scanning for
                # "J" is faster than for "e"): its group 1, in a lookbehind, marks where it starts
                group = 1 if trigger.groups else 0
                self.hits[trigger.pattern] = [m.start(group) for m in trigger.finditer(self.buf)]
            found.update(self.hits[trigger.pattern])
        return sorted(found)

    def replaced(self, buf: bytes, spans: list[tuple[int, int, int]]) -> None:
        """The text is now `buf`: each (start, end, new length) span was replaced, in order."""
        self.buf = buf
        for pattern, hits in self.hits.items():
            moved, i, shift = [], 0, 0
            for start, end, length in spans:
                while i < len(hits) and hits[i] < start:
                    moved.append(hits[i] + shift)
                    i += 1
                while i < len(hits) and hits[i] < end:
                    i += 1
                shift += length - (end - start)
            moved.extend(h + shift for h in hits[i:])
            self.hits[pattern] = moved


def _matches(kind: Kind, buf: bytes, hits: list[int]) -> Iterator[re.Match[bytes]]:
    """Every match of the kind, in order, without overlaps, found only near trigger hits.

    A match holding hit h starts at most `lead` before it and ends within `max_len` of it; a
    match ending exactly at the window's end may have been cut there and is searched again
    unbounded. Kinds whose match starts at the trigger are only tried there.
    """
    n = len(buf)
    done = 0  # nothing is matched before this offset any more
    for h in hits:
        if h < done:
            continue
        hi = min(n, h + kind.max_len + 1)
        if kind.lead == 0:
            m = kind.regex.match(buf, h, hi)
            if m is not None and m.end() == hi and hi < n:
                m = kind.regex.match(buf, h)
            if m is not None and m.end() > m.start():
                yield m
                done = m.end()
            continue
        pos = max(done, h - kind.lead)
        while True:
            m = kind.regex.search(buf, pos, hi)
            if m is not None and m.end() == hi and hi < n:
                m = kind.regex.search(buf, pos)
            if m is None or m.start() > h:
                break
            if m.end() > m.start():
                yield m
            done = max(m.end(), m.start() + 1)
            if m.end() > h:
                break
            pos = done


class _Lines:
    """Line numbers of increasing offsets in one buffer, mapped back to the input file."""

    def __init__(self, buf: bytes, line_map: Sequence[int] | None):
        self.buf, self.line_map = buf, line_map
        self.pos, self.line = 0, 1

    def at(self, offset: int) -> int:
        self.line += self.buf.count(b"\n", self.pos, offset)
        self.pos = offset
        if self.line_map is not None and 0 < self.line <= len(self.line_map):
            return self.line_map[self.line - 1]
        return self.line


def scrub_text(
    data: bytes, file: str, config: ScrubConfig, *, line_map: Sequence[int] | None = None
) -> ScrubResult:
    """Scrub one text member: kinds apply in order, each on the output of the ones before.

    Replacements keep the line breaks of what they replace, so every line keeps its number and
    lines that need no change are copied byte for byte. `line_map`, when the text was derived
    from an input file (slimmed), gives the input line number of each line of `data`.
    """
    result = ScrubResult(data=data)
    found: dict[tuple[int, str], list[bytes]] = {}
    buf = data
    triggers = _TriggerHits(buf)
    for kind in compiled_kinds(config.hostname, config.username):
        lines = _Lines(buf, line_map)
        pieces: list[bytes] = []
        spans: list[tuple[int, int, int]] = []
        last = 0
        for m in _matches(kind, buf, triggers.of(kind)):
            start, end = m.span(kind.group)
            if _in_image(buf, start, end):
                continue
            value = buf[start:end]
            if kind.validate and not _VALIDATORS[kind.validate](value):
                continue
            if kind.action == "finding" or (
                kind.config_word and not _holds_value_mark(buf, start, end)
            ):
                found.setdefault((lines.at(start), kind.name), []).append(value)
                continue
            replacement = kind.replacement + b"\n" * value.count(b"\n")
            pieces += (buf[last:start], replacement)
            spans.append((start, end, len(replacement)))
            last = end
            if kind.action == "redact":
                result.redacted += 1
                result.redacted_by_kind[kind.name] += 1
            else:
                result.placeholders[kind.name] += 1
        if pieces:
            pieces.append(buf[last:])
            buf = b"".join(pieces)
            triggers.replaced(buf, spans)
    result.data = buf
    result.findings = _findings(found, file, config.allow)
    return result


def _findings(
    found: dict[tuple[int, str], list[bytes]], file: str, allow: frozenset[tuple[str, str, str]]
) -> list[Finding]:
    """One finding per line and kind; allowed only when every value there is allowed.

    It names the first value not allowed, so allowing it brings up the next one, if any.
    """
    findings = []
    for (line, kind), values in sorted(found.items()):
        digests = [value_sha256(v) for v in values]
        blocking = [d for d in digests if (file, kind, d) not in allow]
        digest = blocking[0] if blocking else digests[0]
        findings.append(Finding(file, line, kind, digest, allowed=not blocking))
    return findings
