"""The scrub (contract 3, "The scrub"): placeholders, redactions and findings over a text member.

The kinds are data (`kinds.json`, the rule table): each has a regex, an action and the literal
`keywords` one of which every match contains (or, for the few shapes with no literal, regex
`triggers`). One Hyperscan pass over the text finds every keyword of every kind (`prefilter`),
however many kinds there are; the detailed regex only runs in a window of `max_len` bytes around
a keyword's hit, so text that holds nothing suspicious is scanned at memory speed and copied
untouched. A kind with no fixed prefix may set an entropy floor its value must reach.

The scrub reads what a reader of the file reads: UTF-16 and UTF-32 text as text, and around
each JSON escape that can spell part of a value (`\\u0073`, `\\/`) the decoded text, whose
matches replace the escaped bytes that spell them (`scrub_views`); decoded again where it is
JSON text inside a JSON string (`\\\\/`, `\\\\u0073`: a Read of a `.jsonl` file), deepest first.
The user names it replaces are those it is told and those of the home directories it meets in
the text; `learn_user_names` gives the latter, so that an episode's names apply to all its files.

Nothing here ever keeps or reports a matched value: a finding carries file, line, kind and
the sha256 of the value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path, PurePosixPath

from vae_pipeline.domain.scrub.measures import VALUE_CHECKS, shannon_entropy
from vae_pipeline.domain.scrub.prefilter import Prefilter
from vae_pipeline.domain.scrub.views import (
    VIEW_BYTES,
    DecodedView,
    NestedView,
    Window,
    base64_is_image,
    escape_start,
    escape_windows,
    readings,
    wide_text,
    window_pieces,
)

KINDS_PATH = Path(__file__).with_name("kinds.json")

TEXT_EXTENSIONS = frozenset(
    {".json", ".jsonl", ".md", ".txt", ".html", ".js", ".css", ".ts", ".py", ".sh", ".yaml", ".yml"}
)

# Media and archives: never scrubbed, whatever their bytes look like.
BINARY_EXTENSIONS = frozenset({".mp4", ".webm", ".mov", ".jpg", ".jpeg", ".png", ".webp", ".gif", ".zst",
                               ".gz", ".zip", ".woff", ".woff2", ".ttf", ".otf", ".wasm", ".ico"})

# Strings of 512+ base64 characters (standard or url-safe) that decode to an image are skipped.
_B64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-="
_B64_MIN_RUN = 512
_B64_RUN = re.compile(rb"[A-Za-z0-9+/_=-]*")
_DATA_IMAGE = re.compile(rb"data:image/[A-Za-z0-9.+-]+(?:;[A-Za-z0-9=.+-]+)*,[^\s\"'()\\]*")
_DATA_IMAGE_LOOKBACK = 1 << 16

# A host name is replaced only where the value it sits in holds one of these.
_VALUE_MARKS = frozenset(b"/.@:")
_VALUE_DELIMS = b" \t\r\n\"'`<>()[]{},;\\|"

# The owner of a home directory that `/home/<name>` or `/Users/<name>` names (root never is one).
_HOME_OWNER = re.compile(rb"/(?:home|Users)/([A-Za-z0-9_][A-Za-z0-9._-]{0,63})")
_NOT_A_USER = "root"
# After a user name, `@host` makes it a `user@host` prompt or address (an e-mail is reported as such).
_AT_HOST = re.compile(rb"@[A-Za-z0-9<]")  # `<`: a host name already replaced
# A backslash after a name that starts a JSON escape, not a Windows path separator.
_ESCAPE_LETTERS = frozenset(b'ntrbfu"/')

_DOC_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


@dataclass(frozen=True)
class ScrubConfig:
    """What the pipeline was told about the harness machine, and the reviewed findings.

    `usernames` are the harness's user names (VAE_HARNESS_USER, comma-separated) and, for an
    episode, those its files' home directories name. `allow` holds (file, kind, sha256 of
    value) triples from meta/scrub-allow.jsonl.
    """

    hostname: str | None = None
    usernames: tuple[str, ...] = ()
    allow: frozenset[tuple[str, str, str]] = frozenset()

    def with_usernames(self, names: Iterable[str]) -> ScrubConfig:
        return dataclasses.replace(self, usernames=user_names((*self.usernames, *names)))


def user_names(names: Iterable[str]) -> tuple[str, ...]:
    """The user names the scrub replaces, once each (case does not matter), `root` never."""
    kept: dict[str, str] = {}
    for name in names:
        name = name.strip()
        if name and name.lower() != _NOT_A_USER:
            kept.setdefault(name.lower(), name)
    return tuple(sorted(kept.values(), key=lambda n: (-len(n), n.lower())))


def parse_user_names(setting: str) -> tuple[str, ...]:
    """VAE_HARNESS_USER's names: `ana,builder`."""
    return user_names(setting.split(","))


@dataclass(frozen=True)
class Finding:
    """What blocks publishing until allowed: one file, line and kind, with the sha256 of every
    value of that kind on the line (in the order they first appear); never a value itself."""

    file: str
    line: int
    kind: str
    sha256s: tuple[str, ...]
    allowed: bool

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "kind": self.kind,
            "sha256s": list(self.sha256s),
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

    def count(self, kind: Kind) -> None:
        if kind.action == "redact":
            self.redacted += 1
            self.redacted_by_kind[kind.name] += 1
        else:
            self.placeholders[kind.name] += 1


@dataclass(frozen=True)
class Kind:
    """One compiled kind of the scrub.

    `shape` says how a match is acted on: `pattern` by `action`; `host`, a told host name,
    replaced where its value holds `/ . @ :`, else reported; `user`, a user name, replaced in a
    path or a `user@host`, else reported (unless in an e-mail address); `ls_listing`, the owner
    and group columns of an `ls -l` line; `project_folder`, a home in the CLI's folder-name form.
    """

    name: str
    action: str  # "placeholder" | "redact" | "finding"
    pattern: bytes  # compiled when first used (`regex`): most kinds meet no text of a process
    flags: int
    trigger_patterns: tuple[tuple[bytes, int], ...]  # each (pattern, flags), compiled as `triggers`
    max_len: int  # longest match
    lead: int  # farthest a trigger hit lies from the start of its match
    replacement: bytes = b""
    group: int = 0
    validate: str | None = None
    keywords: tuple[bytes, ...] = ()  # lowercase literals found by the prefilter (any case)
    scanned: tuple[bytes, ...] = ()  # regex triggers the prefilter finds (for shapes with no literal)
    own_prefilter: Prefilter | None = field(default=None, compare=False)  # a told name's, not the table's
    entropy: float = 0.0  # the least Shannon entropy (bits per character) a value must have
    shape: str = "pattern"
    learns_names: bool = False  # its matches name home directories, whose owners are user names

    @cached_property
    def regex(self) -> re.Pattern[bytes]:
        return re.compile(self.pattern, self.flags)

    @cached_property
    def triggers(self) -> tuple[re.Pattern[bytes], ...]:
        return tuple(re.compile(pattern, flags) for pattern, flags in self.trigger_patterns)

    @property
    def config_word(self) -> bool:
        """A host or user name: its plain-word occurrences are findings."""
        return self.shape in ("host", "user")


def is_text_member(path: str, data: bytes | None = None) -> bool:
    """The contract's text members (by extension) — and, beyond the contract, any other member
    that reads as text (UTF-8 with no NUL byte, or UTF-16/32): a `.log`, `.mjs`, `.svg`, a file
    with no extension. Scrubbing text the contract did not list costs nothing and leaks nothing."""
    if PurePosixPath(path).suffix.lower() in TEXT_EXTENSIONS:
        return True
    if data is None or PurePosixPath(path).suffix.lower() in BINARY_EXTENSIONS:
        return False
    head = data[:65536]
    if b"\0" in head:
        return wide_text(head) is not None
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


def _project_folder_form(name: str) -> str:
    """How a name reads in the CLI's project-folder names (every character but letters and digits → `-`)."""
    return re.sub(r"[^A-Za-z0-9]", "-", name)


# `{assign}` in a pattern: a key holding one of the row's keywords and a word that names a
# secret (`TWILIO_AUTH_TOKEN`, `"heroku_api_key"`; not `heroku_app_id`), then `=`, `:`, `:=` or
# `=>`, quoted or not (a quoted key also in brackets: `os.environ["KEY"] = …`), also inside a JSON
# string that holds JSON (`\\\\"key\\\\": \\\\"value\\\\"`);
# the value follows, as the row's group.
_ASSIGN = (
    "(?i:(?=[A-Za-z0-9_. -]{{0,40}}?(?:key|token|secret|pass|pwd|auth|api|pat|cred|private|sid))"
    "(?:{keys})[A-Za-z0-9_. -]{{0,30}}?)(?:\\\\{{0,7}}[\"']\\]?)?[ \\t]*(?:=>|:=|::|[:=])[ \\t]*(?:\\\\{{0,7}}[\"'`])?"
)


def _compile(spec: dict, value: str | None, names: tuple[str, ...]) -> Kind:
    pattern = spec["pattern"]
    flags = re.IGNORECASE if "i" in spec.get("flags", "") else 0
    keywords = tuple(k.lower().encode() for k in spec.get("keywords", ()))
    if "{assign}" in pattern:
        pattern = pattern.replace("{assign}", _ASSIGN.format(keys="|".join(re.escape(k) for k in spec["keywords"])))
    if spec.get("config"):  # a told name: its own keyword, found apart from the table's
        pattern = pattern.replace("{value}", re.escape(value or ""))
        keywords, lead = ((value or "").lower().encode(),), 0
        triggers: tuple[tuple[bytes, int], ...] = ((re.escape((value or "").encode()), re.IGNORECASE),)
    else:  # (keywords as regexes too, for those who search a kind's text alone)
        triggers = tuple((b"(?i:" + re.escape(k) + b")", 0) for k in keywords)
        triggers += tuple((t.encode(), 0) for t in spec.get("triggers", ()))
        lead = int(spec["lead"])
    if "{names}" in pattern:
        forms = sorted({f for n in names for f in (n, _project_folder_form(n))}, key=lambda f: (-len(f), f))
        pattern = pattern.replace("{names}", "(?i:" + "|".join(map(re.escape, forms)) + ")" if forms else "(?!)")
    action = spec["action"]
    replacement = spec.get("placeholder", f"<redacted:{spec['name']}>") if action != "finding" else ""
    return Kind(
        name=spec["name"],
        action=action,
        pattern=pattern.encode(),
        flags=flags,
        trigger_patterns=triggers,
        max_len=len((value or "").encode()) if spec.get("config") else int(spec["max_len"]),
        lead=lead,
        replacement=replacement.encode(),
        group=int(spec.get("group", 0)),
        validate=spec.get("validate"),
        keywords=keywords,
        scanned=() if spec.get("config") else tuple(t.encode() for t in spec.get("triggers", ())),
        entropy=float(spec.get("entropy", 0.0)),
        shape=spec.get("shape", "pattern"),
        learns_names=bool(spec.get("learns_names")),
    )


@lru_cache(maxsize=64)
def compiled_kinds(hostname: str | None, usernames: tuple[str, ...] = ()) -> tuple[Kind, ...]:
    """The kinds in application order; the host kind only when the pipeline was told the host
    name, one user-name kind per name."""
    kinds = []
    for spec, fixed in zip(kind_specs(), _fixed_kinds()):
        config_key = spec.get("config")
        if config_key == "hostname":
            kinds += [_compile(spec, hostname, usernames)] if hostname else []
        elif config_key == "usernames":
            kinds += [_compile(spec, name, usernames) for name in usernames]
        else:
            kinds.append(fixed or _compile(spec, None, usernames))
    # the told names are found by a prefilter of their own, one scan for all of them
    told = Prefilter(k for kind in kinds if kind.config_word for k in kind.keywords)
    return tuple(dataclasses.replace(kind, own_prefilter=told) if kind.config_word else kind for kind in kinds)


@lru_cache(maxsize=1)
def _fixed_kinds() -> tuple[Kind | None, ...]:
    """Each row compiled once when it does not depend on the names told or met (None when it does)."""
    return tuple(None if spec.get("config") or "{names}" in spec["pattern"] else _compile(spec, None, ())
                 for spec in kind_specs())


@lru_cache(maxsize=1)
def prefilter() -> Prefilter:
    """The prefilter of every keyword and trigger of the rule table."""
    specs = kind_specs()
    return Prefilter((k.encode() for spec in specs for k in spec.get("keywords", ())),
                     (t.encode() for spec in specs for t in spec.get("triggers", ())))


@lru_cache(maxsize=1)
def _name_free_kinds() -> tuple[tuple[Kind, ...], int]:
    """The kinds that need no names, and how far from an escape a match holding it can reach."""
    kinds = compiled_kinds(None, ())
    return kinds, max(kind.max_len + kind.lead for kind in kinds) + 8


@lru_cache(maxsize=1)
def _home_kind() -> Kind:
    """The kind whose matches name a home directory's owner."""
    return next(kind for kind in _name_free_kinds()[0] if kind.learns_names)


class _Images:
    """Where one buffer holds an image: a 512+ base64 run or a data:image URL that decodes to one."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.run: tuple[int, int, bool] = (-1, -1, False)  # the last base64 run looked at
        self.url_seen = (0, -1)  # searched up to, and the last data:image URL start found before it

    def hold(self, start: int, end: int) -> bool:
        """Whether [start, end) lies in an image (skipped); base64 that is no image is text."""
        buf = self.buf
        if not buf[start:end].translate(None, _B64_CHARS):
            lo, hi, image = self.run
            if not lo <= start < end <= hi:
                lo, hi = _run_start(buf, start), _run_end(buf, end)
                image = hi - lo >= _B64_MIN_RUN and base64_is_image(buf[lo : lo + 32])
                self.run = (lo, hi, image)
            if image:
                return True
        q = self._url_before(start)
        if q >= 0:
            url = _DATA_IMAGE.match(buf, q)
            if url is not None and url.end() >= end:
                header, _, payload = url.group().partition(b",")
                return header.endswith(b";base64") and base64_is_image(payload)
        return False

    def _url_before(self, start: int) -> int:
        """The last data:image URL starting at most 64 KiB before `start` (matches come in order:
        each byte is searched once)."""
        searched, last = self.url_seen
        lo = max(searched, start - _DATA_IMAGE_LOOKBACK)
        if start + 1 > lo:
            found = self.buf.rfind(b"data:image/", lo, start + 1)
            last = found if found >= 0 else last
            self.url_seen = (start + 1, last)
        return last if last >= start - _DATA_IMAGE_LOOKBACK else -1


def _run_start(buf: bytes, pos: int) -> int:
    while pos > 0:
        chunk = buf[max(0, pos - 4096) : pos]
        kept = len(chunk) - len(chunk.rstrip(_B64_CHARS))
        pos -= kept
        if kept < len(chunk):
            break
    return pos


def _run_end(buf: bytes, pos: int) -> int:
    return _B64_RUN.match(buf, pos).end()


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


# ---- the value of an assignment to a secret-named key ------------------------------------
# The kinds' patterns find the key, the separator and the value; these say whether the value is
# a literal secret, or a reference, placeholder, hash, path or label that stays (docs/formats.md).

# `$X`, `${…}`, `$(…)` (a whole value `$name` too), `{{ … }}`, `%X%`, `%(x)s`, `#{…}`, `<%= … %>`
_SUBSTITUTION = re.compile(
    r"\$[{(]|\$[A-Z_][A-Z0-9_]+|\A\$[A-Za-z_][A-Za-z0-9_]*\Z|\{\{|\{%|<%|#\{|%[A-Z_][A-Z0-9_]*%"
    r"|%(?:\([A-Za-z_]+\))?[-0-9.]*[sdrf]\b"  # printf: %s, %(password)s
)
_WRAPPED = re.compile(r"\A(?:<.*>|\[.*\]|\{.*\}|\(.*\))\Z", re.DOTALL)  # <your-key>, <redacted:…>, [PAD], {api_key}
_MASKED = re.compile(r"\.\.\.|\u2026|\\u2026|[xX*]{4}|\*\*\*|\A[xX*#.\u2022_-]+\Z")  # `…` also as a JSON escape
_PLACEHOLDER_WORDS = frozenset(
    "changeme changeit replaceme placeholder example sample dummy fake test testing todo tbd fixme redacted "
    "hidden masked secret secrets password passwd token apikey key none null nil undefined empty required "
    "optional default value notset unset string str bytes int number bool boolean any unknown yes no true "
    "false on off secretstr dict list tuple float object callable".split()
)
_PLACEHOLDER_FORM = re.compile(r"\A(?:your|insert|enter|replace|paste)|here\Z")
# never touched: a git object id or sha256, a UUID; and a colour (`Token: "#d8dee9"`, a style)
_HASH = re.compile(
    r"\A(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}|#[0-9a-fA-F]{3,8})\Z"
)
_PATH = re.compile(r"\A(?:~|\.\.?)?(?:/[A-Za-z0-9._@+-]*)+\Z")
_RANDOM_PART = re.compile(r"(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{10,}")
_SECRET_WORD = re.compile(r"(?i)token|secret|passw|pwd|key|passphrase")
_LABEL = re.compile(r"(?i)\A[a-z' -]*(?:token|secret|password|passphrase|api key|key)[a-z' -]*[.?!:]?\Z")
_NUMBER = re.compile(r"\A[-+]?[0-9][0-9_]*(?:\.[0-9]+)?\Z")
# a header's name, the value's own word before it (`AUTH=Authorization: token …`)
_HEADER_NAME = re.compile(r"\A[A-Za-z][A-Za-z-]*:\Z")
_REDACTED = re.compile(r"<redacted:[a-z0-9_]+>")  # a value the table's rows before have redacted inside
_EXPRESSION = re.compile(r"\A[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|->|::)[A-Za-z_$][A-Za-z0-9_$]*)+\Z")  # a.b.c
_IDENTIFIER = re.compile(r"\A[A-Za-z_]+\Z")
_SHORTEST = 4  # a value of fewer characters is no credential (`'h'`, `f"…"`'s f)


def _stays(value: str) -> bool:
    """A value that is no literal secret, however it is written: shorter than 4 characters, a
    variable or substitution, a placeholder, a git object id, sha256, UUID or colour, an identifier
    with `_` or a secret word in it, a path, a header's name, a label about the secret (`Forgot
    password?`), or a value a row before has already redacted inside (`"Authorization: token <redacted:…>"`)."""
    if len(value) < _SHORTEST or _SUBSTITUTION.search(value) or _WRAPPED.match(value) or _MASKED.search(value):
        return True
    if _REDACTED.search(value) or _HEADER_NAME.match(value):
        return True
    if _HASH.match(value) or (_IDENTIFIER.match(value) and ("_" in value or _SECRET_WORD.search(value))):
        return True  # an identifier naming a variable or a constant: `next_token`, `AWS_SECRET_ACCESS_KEY`
    word = re.sub(r"[^a-z0-9]", "", value.lower())
    if word in _PLACEHOLDER_WORDS or _PLACEHOLDER_FORM.search(word):
        return True
    if _PATH.match(value) and not _RANDOM_PART.search(value):
        return True
    return " " in value and _LABEL.match(value) is not None


def _is_secret_literal(value: bytes) -> bool:
    """A quoted value (`"…"`, `'…'`, `` `…` ``, `\\"…\\"`) is a secret unless it stays. A value
    that starts or ends with blanks or starts with `, : ] }` is the text between two JSON strings
    (the key ended one), never a value."""
    text = value.decode("utf-8", "replace")
    if text != text.strip() or text[0] in ",:]}":
        return False
    return not _stays(text)


def _is_secret_bare(value: bytes) -> bool:
    """An unquoted value (`.env`, shell, YAML, INI, a header) is a secret unless it stays, or is a
    number, or reads as code (`a.b.c`)."""
    text = value.decode("utf-8", "replace")
    return not (_stays(text) or _NUMBER.match(text) or _EXPRESSION.match(text))


def _is_person(value: bytes) -> bool:
    """A name or e-mail in version-control output, unless a placeholder (`<person>`, `…`, `$NAME`, `%an`)
    or no word at all (`{`: the next line of a file is no command's output)."""
    text = value.decode("utf-8", "replace").strip()
    if not any(c.isalnum() for c in text):
        return False
    return not (_SUBSTITUTION.search(text) or _WRAPPED.match(text) or _MASKED.search(text))


_VALIDATORS: dict[str, Callable[[bytes], bool]] = {
    "ip_address": _is_reportable_ip,
    "secret_literal": _is_secret_literal,
    "secret_bare": _is_secret_bare,
    "person": _is_person,
    **VALUE_CHECKS,
}


def _holds_value_mark(buf: bytes, start: int, end: int) -> bool:
    """Whether the value (run of non-delimiters) around [start, end) holds one of / . @ :"""
    lo = start
    while lo > 0 and buf[lo - 1] not in _VALUE_DELIMS and start - lo < 256:
        lo -= 1
    hi = end
    while hi < len(buf) and buf[hi] not in _VALUE_DELIMS and hi - end < 256:
        hi += 1
    return any(b in _VALUE_MARKS for b in buf[lo:hi])


def _in_path_or_at_host(buf: bytes, start: int, end: int) -> bool:
    """Whether a user name at [start, end) is a path segment (`/x/ana/`, `~ana`, `C:\\Users\\ana`)
    or the user of a `user@host` (a shell prompt, ssh, scp)."""
    before, after = buf[start - 1 : start], buf[end : end + 1]
    if before in (b"/", b"\\", b"~") or after == b"/":
        return True
    if after == b"\\":
        following = buf[end + 1 : end + 2]
        return following == b"\\" or (following != b"" and following[0] not in _ESCAPE_LETTERS)
    return _AT_HOST.match(buf, end) is not None


def _in_placeholder(buf: bytes, start: int, end: int) -> bool:
    """A name that spells a placeholder's word (`<user>`, `<redacted:…>`) is the scrub's own text."""
    return buf[start - 1 : start] in (b"<", b":") and buf[end : end + 1] == b">"


def _in_email(email: re.Pattern[bytes], buf: bytes, start: int, end: int) -> bool:
    return any(m.start() <= start and end <= m.end() for m in email.finditer(buf, max(0, start - 320), end + 400))


class _TriggerHits:
    """Keyword and trigger hit offsets of one text, found once and shared between kinds.

    The table's keywords and triggers are found by one prefilter pass when the text is first
    read; the told host and user names by one pass of their own, when first asked for. When a
    kind replaces spans, the hits are moved rather than searched again (each list when next
    asked for): a replacement starts with "<" and ends with ">", which no keyword or trigger
    holds at its edge, so it can make no new hit with its neighbours (and no kind matches
    inside one); hits inside a replaced span are gone.
    """

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.hits: dict[bytes, tuple[int, list[int]]] = {k: (0, v) for k, v in prefilter().hits(buf).items()}
        self.edits: list[list[tuple[int, int, int]]] = []  # the spans each replacement so far replaced
        self.scanned: set[int] = set()  # the own prefilters whose keywords were searched for

    def of(self, kind: Kind) -> list[int]:
        if kind.own_prefilter is not None and id(kind.own_prefilter) not in self.scanned:
            self.scanned.add(id(kind.own_prefilter))
            self.hits.update((k, (len(self.edits), v)) for k, v in kind.own_prefilter.hits(self.buf).items())
        if not self.hits:  # most short texts (a name, a line): no keyword of any kind is there
            return []
        present = [hits for hits in map(self._current, kind.keywords + kind.scanned) if hits]
        return list(present[0]) if len(present) == 1 else sorted({h for hits in present for h in hits})

    def _current(self, key: bytes) -> list[int]:
        """A key's hits in the text as it is now."""
        if key not in self.hits:
            return []
        done, hits = self.hits[key]
        if done < len(self.edits):
            for spans in self.edits[done:]:
                hits = _moved(hits, spans)
            self.hits[key] = (len(self.edits), hits)
        return hits

    def replaced(self, buf: bytes, spans: list[tuple[int, int, int]]) -> None:
        """The text is now `buf`: each (start, end, new length) span was replaced, in order."""
        self.buf = buf
        self.edits.append(spans)


def _moved(hits: list[int], spans: list[tuple[int, int, int]]) -> list[int]:
    """Hit offsets after each (start, end, new length) span was replaced; those inside are gone."""
    moved, i, shift = [], 0, 0
    for start, end, length in spans:
        while i < len(hits) and hits[i] < start:
            moved.append(hits[i] + shift)
            i += 1
        while i < len(hits) and hits[i] < end:
            i += 1
        shift += length - (end - start)
    moved.extend(h + shift for h in hits[i:])
    return moved


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


@dataclass(frozen=True)
class _Names:
    """The user names in force for one text, and the e-mail pattern that tells an address."""

    lowered: frozenset[bytes]
    email: re.Pattern[bytes]


def _spans(kind: Kind, m: re.Match[bytes], names: _Names) -> list[tuple[int, int]]:
    """What of a match the kind acts on. An `ls -l` line: the owner unless `root`, and the group
    when it is a user name (the owner's own group, or one the scrub knows)."""
    if kind.shape != "ls_listing":
        return [m.span(kind.group)]
    owner, group = m.group(1).lower(), m.group(2).lower()
    spans = [m.span(1)] if owner != b"root" else []
    if group != b"root" and (group == owner or group in names.lowered):
        spans.append(m.span(2))
    return spans


def _actions(kind: Kind, buf: bytes, hits: list[int], names: _Names) -> Iterator[tuple[int, int, bool]]:
    """(start, end, replace?) of each value the kind acts on in `buf`, in order: replaced, or
    (replace false) reported as a finding."""
    images = _Images(buf)
    for m in _matches(kind, buf, hits):
        for start, end in _spans(kind, m, names):
            if images.hold(start, end):
                continue
            if kind.validate and not _VALIDATORS[kind.validate](buf[start:end]):
                continue
            if kind.entropy and shannon_entropy(buf[start:end]) < kind.entropy:
                continue
            if kind.shape == "host":
                if not _in_placeholder(buf, start, end):
                    yield start, end, _holds_value_mark(buf, start, end)
            elif kind.shape == "user":
                if not _in_placeholder(buf, start, end) and not _in_email(names.email, buf, start, end):
                    yield start, end, _in_path_or_at_host(buf, start, end)
            else:
                yield start, end, kind.action != "finding"


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


# A window whose raw bytes hold none of these cannot spell a home directory.
_HOME_SPELLINGS = (b"home", b"Users", b"\\u00")


def _cut(start: int, end: int, length: int, at_start: bool, at_end: bool) -> bool:
    """Whether a match at [start, end) of a view `length` long touches an edge the view was cut at
    (its context, or its rest, lies beyond: the neighbouring view or the byte-level pass sees it)."""
    return (start == 0 and not at_start) or (end == length and not at_end)


@dataclass
class _Reading:
    """One text as the scrub reads it: its UTF-8 bytes, and around escapes the decoded stretches
    a reader reads (found and decoded one at a time: an escaped file is read in little memory)."""

    buf: bytes
    triggers: _TriggerHits
    _windows: array | None = None  # per window: start, end, edges (1: at its line's start, 2: at its end)

    @classmethod
    def of(cls, buf: bytes) -> _Reading:
        return cls(buf, _TriggerHits(buf))

    def windows(self) -> Iterator[Window]:
        """The escaped stretches, found once (three integers each, however many)."""
        if self._windows is None:
            self._windows = array("q")
            for w in escape_windows(self.buf, _name_free_kinds()[1]):
                self._windows.extend((w.start, w.end, w.at_line_start | w.at_line_end << 1))
        for i in range(0, len(self._windows), 3):
            start, end, edges = self._windows[i : i + 3]
            yield Window(start, end, bool(edges & 1), bool(edges & 2))

    def home_owners(self) -> set[str]:
        """The user names of the home directories the text names, raw or escaped (at any depth)."""
        owners = _home_owners(self.buf, self.triggers, (True, True))
        for window in self.windows():
            raw = self.buf[window.start : window.end]
            if not any(spelling in raw for spelling in _HOME_SPELLINGS):
                continue
            for start, end in window_pieces(raw, _name_free_kinds()[1]):
                edges = (start == 0 and window.at_line_start, end == len(raw) and window.at_line_end)
                for level in readings(raw[start:end]):
                    owners |= _home_owners(level.data, _TriggerHits(level.data), edges)
        return owners


def _home_owners(buf: bytes, triggers: _TriggerHits, edges: tuple[bool, bool]) -> set[str]:
    home = _home_kind()
    owners = set()
    for m in _matches(home, buf, triggers.of(home)):
        owner = _HOME_OWNER.fullmatch(m.group().rstrip(b".-"))
        if owner is not None and not _cut(*m.span(), len(buf), *edges):
            owners.add(owner.group(1).decode())
    return owners


def learn_user_names(data: bytes) -> tuple[str, ...]:
    """The user names a text member's home directories give (`/home/<name>`, `/Users/<name>`)."""
    wide = wide_text(data)
    return user_names(_Reading.of(data if wide is None else wide[1]).home_owners())


def scrub_text(
    data: bytes, file: str, config: ScrubConfig, *, line_map: Sequence[int] | None = None
) -> ScrubResult:
    """Scrub one text member: kinds apply in order, each on the output of the ones before.

    Replacements keep the line breaks of what they replace, so every line keeps its number and
    lines that need no change are copied byte for byte. `line_map`, when the text was derived
    from an input file (slimmed), gives the input line number of each line of `data`. UTF-16
    and UTF-32 text is scrubbed as text and written back in its own encoding.
    """
    wide = wide_text(data)
    if wide is None:
        return _scrub_utf8(data, file, config, line_map)
    result = _scrub_utf8(wide[1], file, config, line_map)
    result.data = data if result.data == wide[1] else wide[0].encode(result.data)
    return result


def _scrub_utf8(data: bytes, file: str, config: ScrubConfig, line_map: Sequence[int] | None) -> ScrubResult:
    reading = _Reading.of(data)
    names = user_names((*config.usernames, *reading.home_owners()))
    kinds, known, told = _in_force(config.hostname, names)
    result = ScrubResult(data=data)
    found: dict[tuple[int, str], list[bytes]] = {}
    buf = _scrub_windows(reading, kinds, known, result, found, _Lines(data, line_map))
    triggers = reading.triggers if buf is data else _TriggerHits(buf)
    # with no keyword or trigger of the table in the text, only a told name's own search can hit
    for kind in kinds if triggers.hits or told else ():
        hits = triggers.of(kind)
        if not hits:  # most kinds, in most texts: none of their keywords is there
            continue
        lines = _Lines(buf, line_map)
        pieces: list[bytes | memoryview] = []  # views: the text between replacements is copied once
        spans: list[tuple[int, int, int]] = []
        last = 0
        whole = memoryview(buf)
        for start, end, replace in _actions(kind, buf, hits, known):
            if not replace:
                found.setdefault((lines.at(start), kind.name), []).append(buf[start:end])
                continue
            replacement = kind.replacement + b"\n" * buf.count(b"\n", start, end)
            pieces += (whole[last:start], replacement)
            spans.append((start, end, len(replacement)))
            last = end
            result.count(kind)
        if pieces:
            pieces.append(whole[last:])
            buf = b"".join(pieces)
            triggers.replaced(buf, spans)
    result.data = buf
    result.findings = _findings(found, file, config.allow)
    return result


@lru_cache(maxsize=64)
def _in_force(hostname: str | None, names: tuple[str, ...]) -> tuple[tuple[Kind, ...], _Names, bool]:
    """The kinds for these names, the names as matched, and whether a kind searches for a told
    name (by a prefilter of its own): looked up once, not at every text."""
    kinds = compiled_kinds(hostname, names)
    email = next(k.regex for k in kinds if k.name == "email")
    return kinds, _Names(frozenset(n.lower().encode() for n in names), email), \
        any(k.own_prefilter is not None for k in kinds)


def _scrub_windows(reading: _Reading, kinds: tuple[Kind, ...], names: _Names, result: ScrubResult,
                   found: dict[tuple[int, str], list[bytes]], lines: _Lines) -> bytes:
    """The text with every value its escaped stretches spell, read decoded, acted on: a match
    replaces the escaped bytes that spell it (whole escapes, so the JSON stays valid and no tail
    is left); a finding names the decoded value. A match cut by a window's edge is left to the
    byte-level pass, which sees the whole of it (no escape lies near it). The text itself when
    nothing changed."""
    pieces: list[bytes | memoryview] = []
    last, whole = 0, memoryview(reading.buf)
    for window in reading.windows():
        raw = reading.buf[window.start : window.end]
        scrubbed = _scrub_window(raw, window, kinds, names, result, found, lines.at(window.start))
        if scrubbed != raw:
            pieces += (whole[last : window.start], scrubbed)
            last = window.end
    if not pieces:
        return reading.buf
    pieces.append(whole[last:])
    return b"".join(pieces)


def _scrub_window(raw: bytes, window: Window, kinds: tuple[Kind, ...], names: _Names, result: ScrubResult,
                  found: dict[tuple[int, str], list[bytes]], line: int) -> bytes:
    """One window, decoded a piece of at most VIEW_BYTES at a time. A piece settles what starts
    in it up to `reach` before its end; the rest, scrubbed so far, starts the next piece."""
    reach = _name_free_kinds()[1]
    done: list[bytes] = []
    carry, pos, at_start = b"", 0, window.at_line_start
    while True:
        piece = carry + raw[pos : pos + VIEW_BYTES - len(carry)]
        pos += len(piece) - len(carry)
        last = pos >= len(raw)
        settled = len(piece) if last else escape_start(piece, len(piece) - reach, False)[0]
        piece, settled = _scrub_piece(piece, settled, (at_start, last and window.at_line_end), kinds, names,
                                      result, found, line)
        done.append(piece[:settled])
        if last:
            return b"".join(done)
        carry, at_start = piece[settled:], False


def _scrub_piece(piece: bytes, settled: int, edges: tuple[bool, bool], kinds: tuple[Kind, ...], names: _Names,
                 result: ScrubResult, found: dict[tuple[int, str], list[bytes]], line: int) -> tuple[bytes, int]:
    """Every kind in order over the decoded piece, at each depth its escapes nest to, deepest
    first (a shallower reading sees a value cut at a deeper escape, `sk-ant-…\\\\u0041…`); only
    matches spelt from before `settled` are acted on. The new piece, and where what it settled
    now ends."""
    levels = readings(piece)
    for depth in range(len(levels), 0, -1):
        scrubbed, settled = _scrub_reading(piece, levels[:depth], settled, edges, kinds, names, result, found, line)
        if scrubbed is not piece and depth > 1:
            levels = readings(scrubbed, depth - 1)
        piece = scrubbed
    return piece, settled


def _scrub_reading(piece: bytes, levels: list[DecodedView], settled: int, edges: tuple[bool, bool],
                   kinds: tuple[Kind, ...], names: _Names, result: ScrubResult,
                   found: dict[tuple[int, str], list[bytes]], line: int) -> tuple[bytes, int]:
    """Every kind in order over one reading of the piece (`levels` deep)."""
    depth = len(levels)
    view = NestedView(levels)
    triggers = _TriggerHits(view.data)
    for kind in kinds:
        hits = triggers.of(kind)
        if not hits:
            continue
        edits = []
        for start, end, replace in _actions(kind, view.data, hits, names):
            if _cut(start, end, len(view.data), *edges):
                continue
            source = view.source_span(start, end)
            if source[0] >= settled:
                continue
            if replace:
                edits.append(source)
                result.count(kind)
            else:
                found.setdefault((line, kind.name), []).append(view.data[start:end])
        if edits:
            piece, settled = _spliced(piece, edits, kind.replacement, settled)
            view = NestedView(readings(piece, depth))
            triggers = _TriggerHits(view.data)
    return piece, settled


def _spliced(raw: bytes, spans: list[tuple[int, int]], replacement: bytes, mark: int) -> tuple[bytes, int]:
    """`raw` with each span (in order) replaced, and where offset `mark` now lies (after the
    replacement of a span that holds it). Spans that overlap (two matches spelt by one escape's
    bytes) are replaced as one."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    pieces, last, moved = [], 0, mark
    for start, end in merged:
        if start < mark:
            moved += len(replacement) - (end - start) + max(0, end - mark)
        pieces += (raw[last:start], replacement)
        last = end
    pieces.append(raw[last:])
    return b"".join(pieces), moved


def _findings(
    found: dict[tuple[int, str], list[bytes]], file: str, allow: frozenset[tuple[str, str, str]]
) -> list[Finding]:
    """One finding per line and kind, carrying every value's sha256 (each once); allowed only
    when every one of them is allowed, so one allow entry listing them all clears it."""
    findings = []
    for (line, kind), values in sorted(found.items()):
        digests = tuple(dict.fromkeys(value_sha256(v) for v in values))
        allowed = all((file, kind, d) in allow for d in digests)
        findings.append(Finding(file, line, kind, digests, allowed=allowed))
    return findings
