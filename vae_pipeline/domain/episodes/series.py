"""Finding the series under a runs root, and the episode entries inside a series.

A series id becomes a Dagster partition key, so only ids that are safe as keys get through;
everything else is reported and skipped, never guessed at.

A name is published (an episode id is the row id and names the video, the archive and the review
pages; a file name is a manifest's `files[].path`), so a name holding a credential-shaped string
(any kind the scrub redacts, or a leftover `credential` finding) is refused: the series is
skipped, the episode invalid. So is a series or episode name that the scrub would change (a home
path, the harness's host or user name): it is a partition key, a row id and a file name, and must
stay the same everywhere it is used. Such a name is never shown as it is: `masked_name` redacts the
parts of it that hold the credential (and scrubs the rest), and an episode refused for its name is
called `redacted-<12 hex of the name's sha256>` (stable across builds, distinct per name).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.json_schema import contract_validator
from vae_pipeline.domain.scrub.lines import NO_NAMES, scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig, kind_specs, prefilter, scrub_text
from vae_pipeline.domain.episodes.strict_json import loads

SERIES_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
EPISODE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}\Z")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ARCHIVE_SUFFIX = ".tar.zst"
COMPARISONS_DIR = "comparisons"  # a pairwise judge's batches (contract 4), not a series


LEFTOVER_CREDENTIAL = "credential"  # the scrub's finding kind for a credential shape it did not redact
REDACTED_ID_PREFIX = "redacted-"


@functools.cache
def _credential_kinds() -> frozenset[str]:
    """The scrub's credential kinds."""
    return frozenset(spec["name"] for spec in kind_specs() if spec["action"] == "redact" or spec["name"] == LEFTOVER_CREDENTIAL)


def name_credentials(name: str) -> list[str]:
    """The credential kinds the scrub finds in a name (empty: none), by the scrub's own kinds."""
    text = name.encode("utf-8", errors="replace")
    if not prefilter().hits(text):  # a name with no keyword of any kind holds no credential
        return []
    result = scrub_text(text, name, ScrubConfig())
    credentials = _credential_kinds()
    found = set(result.redacted_by_kind) | {f.kind for f in result.findings if f.kind in credentials}
    return sorted(found)


def name_findings(name: str, config: ScrubConfig = NO_NAMES) -> list[str]:
    """The kinds the scrub reports, not replaces, in a name (a user name standing as a word, an
    e-mail, an IP address): a name is shown and published as it is, where no review can allow it."""
    result = scrub_text(name.encode("utf-8", errors="replace"), name, config)
    return sorted({finding.kind for finding in result.findings})


def scrub_names(names: Sequence[str], config: ScrubConfig) -> list[tuple[str, list[str]]]:
    """Each name scrubbed with `config`, and the kinds the scrub reports in it, in one pass of the
    scrub over them all (a name holding a line break, or a pass that joins lines, falls back to
    one pass each)."""
    if names and not any("\n" in name or "\r" in name for name in names):
        result = scrub_text("\n".join(names).encode("utf-8", errors="replace"), "", config)
        lines = result.data.decode("utf-8", errors="replace").split("\n")
        if len(lines) == len(names):
            kinds: list[set[str]] = [set() for _ in names]
            for finding in result.findings:
                kinds[finding.line - 1].add(finding.kind)
            return [(line, sorted(found)) for line, found in zip(lines, kinds)]
    return [(scrub_line(name, config), name_findings(name, config)) for name in names]


def masked_name(name: str, config: ScrubConfig = NO_NAMES) -> str:
    """The name as it may be shown: scrubbed, and each `/` part the scrub would leave holding a
    credential shape replaced whole by `<redacted:credential>`, or holding what it reports by
    `<KIND>` (`<user>`, `<email>`)."""
    parts = []
    for part in name.split("/"):
        shown = scrub_line(part, config)
        if name_credentials(shown):
            shown = f"<redacted:{LEFTOVER_CREDENTIAL}>"
        elif kinds := name_findings(shown, config):
            shown = "".join(f"<{kind}>" for kind in kinds)
        parts.append(shown)
    return "/".join(parts)


def credential_name_reason(what: str, kinds: list[str]) -> str:
    return f"{what} holds a credential-shaped string ({', '.join(kinds)}); rename it"


SCRUBBED_NAME_REASON = ("holds what the scrub replaces or reports (a home path, the harness's host or user "
                        "name, an e-mail or IP address); rename it")


def scrub_changes(name: str, config: ScrubConfig) -> bool:
    """Whether the scrub would change `name` (a placeholder: a home path, a host or user name) or
    report something in it (one pass of the scrub)."""
    result = scrub_text(name.encode("utf-8", errors="replace"), name, config)
    return result.data.decode("utf-8", errors="replace") != name or bool(result.findings)


@functools.lru_cache(maxsize=1 << 16)
def is_series_id(name: str, config: ScrubConfig = NO_NAMES) -> bool:
    """Whether a folder's name may stand as a series id (asked of every folder at every build and
    sensor tick: remembered, as the scrub of a name is not cheap)."""
    return bool(SERIES_ID.match(name)) and ".." not in name and not name_credentials(name) \
        and not scrub_changes(name, config)


def series_id_reason(name: str, config: ScrubConfig = NO_NAMES) -> str:
    """Why a folder under the runs root is not a series id."""
    kinds = name_credentials(name)
    if kinds:
        return credential_name_reason("the folder name", kinds)
    if SERIES_ID.match(name) and ".." not in name and scrub_changes(name, config):
        return f"the folder name {SCRUBBED_NAME_REASON}"
    return "folder name is not a valid series id"


def is_episode_id(name: str, config: ScrubConfig = NO_NAMES) -> bool:
    return bool(EPISODE_ID.match(name)) and not name_credentials(name) and not scrub_changes(name, config)


def shown_episode_id(name: str, config: ScrubConfig = NO_NAMES) -> str:
    """What an episode refused for its folder or archive name is called in every table and log."""
    if name_credentials(name) or scrub_changes(name, config):
        return REDACTED_ID_PREFIX + hashlib.sha256(name.encode("utf-8", errors="replace")).hexdigest()[:12]
    return name


def episode_id_reason(name: str, config: ScrubConfig = NO_NAMES) -> str:
    """Why a folder or archive name is not an episode id."""
    kinds = name_credentials(name)
    if kinds:
        return credential_name_reason("the folder or archive name", kinds)
    if EPISODE_ID.match(name) and scrub_changes(name, config):
        return f"the folder or archive name {SCRUBBED_NAME_REASON}"
    return "folder or archive name is not a valid episode id"


@dataclass(frozen=True)
class Series:
    series_id: str
    path: Path
    status: str
    sample: str
    info: dict


@dataclass(frozen=True)
class Skipped:
    """A folder under the runs root that is not a usable series, and why. The name is input
    (a folder named after a key is skipped, and printed): it is kept scrubbed."""

    name: str
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", masked_name(self.name))
        object.__setattr__(self, "reason", scrub_line(self.reason))


@dataclass(frozen=True)
class EpisodeEntry:
    """One run folder or archive inside a series folder."""

    name: str  # the folder or file name, relative to the series folder
    episode_id: str
    path: Path
    is_archive: bool


# series.json read before in this process, by (path, size, mtime, inode, names scrubbed), as the
# JSON text of what it gave (each caller gets its own copy: parsing it again costs half a deepcopy):
# scrubbing every string of it is most of the time of listing a runs root, which the planner, the
# sensors and `entrants` do
_READ_SERIES: dict[tuple, str] = {}


def read_series_json(path: Path, config: ScrubConfig = NO_NAMES) -> dict:
    """Parse series.json and validate it against `meta/series.schema.json`; raises BadInput.

    Every key and string of it comes back scrubbed with `config` (the harness's host and user
    names): `actor.model` reaches the entrants table, `benchmark_version` and `harness.commit`
    the episode rows and the publish checks' descriptions, all of them Dagster's event log. A
    file unchanged since this process read it is not parsed again."""
    try:
        stat = path.stat()
    except OSError:
        stat = None
    key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, config) if stat else None
    if key in _READ_SERIES:
        return json.loads(_READ_SERIES[key])
    info = _read_series_json(path, config)
    if key is not None:
        _READ_SERIES[key] = json.dumps(info)
    return info


def _read_series_json(path: Path, config: ScrubConfig) -> dict:
    file = "series.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(file, f"cannot be read ({type(exc).__name__})") from None
    info = loads(text, file)
    contract_validator("series").validate(info, text, file)
    return _scrubbed(info, config)


def _scrubbed(value: object, config: ScrubConfig) -> object:
    """A parsed JSON value with every string (keys too) through the scrub."""
    if isinstance(value, str):
        return scrub_line(value, config)
    if isinstance(value, list):
        return [_scrubbed(item, config) for item in value]
    if isinstance(value, dict):
        return {scrub_line(key, config): _scrubbed(item, config) for key, item in value.items()}
    return value


def discover_series(runs_root: Path, config: ScrubConfig = NO_NAMES) -> tuple[list[Series], list[Skipped]]:
    """Every series under the runs root, sorted by id, and the folders that are not series
    (named and explained through the scrub with `config`)."""
    found: list[Series] = []
    skipped: list[Skipped] = []
    for child in sorted(Path(runs_root).iterdir(), key=lambda p: p.name):
        if not child.is_dir() or child.is_symlink() or child.name == COMPARISONS_DIR:
            continue
        if not is_series_id(child.name, config):
            skipped.append(Skipped(masked_name(child.name, config), series_id_reason(child.name, config)))
            continue
        try:
            info = read_series_json(child / "series.json", config)
        except BadInput as exc:
            skipped.append(Skipped(child.name, scrub_line(f"no readable series.json: {exc}", config)))
            continue
        found.append(Series(child.name, child, info["status"], info["sample"], info))
    return found, skipped


def episode_entries(series_path: Path) -> tuple[list[EpisodeEntry], list[Skipped]]:
    """The run folders and archives of a series (archives recognised by name or zstd magic)."""
    entries: list[EpisodeEntry] = []
    ignored: list[Skipped] = []
    for child in sorted(series_path.iterdir(), key=lambda p: p.name):
        if child.name == "series.json":
            continue
        if child.is_dir() and not child.is_symlink():
            entries.append(EpisodeEntry(child.name, child.name, child, False))
        elif child.is_file() and not child.is_symlink():
            if child.name.endswith(ARCHIVE_SUFFIX) or _starts_with_zstd_magic(child):
                episode_id = child.name.removesuffix(ARCHIVE_SUFFIX)
                entries.append(EpisodeEntry(child.name, episode_id, child, True))
            else:
                ignored.append(Skipped(child.name, "neither a run folder nor a zstd archive"))
        else:
            ignored.append(Skipped(child.name, "is a link or special file"))
    return entries, ignored


def _starts_with_zstd_magic(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(4) == ZSTD_MAGIC
