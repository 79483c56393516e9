"""Finding the series under a runs root, and the episode entries inside a series.

A series id becomes a Dagster partition key, so only ids that are safe as keys get through;
everything else is reported and skipped, never guessed at.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.json_schema import contract_validator
from vae_pipeline.domain.line_scrub import scrub_line
from vae_pipeline.domain.strict_json import loads

SERIES_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
EPISODE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}\Z")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ARCHIVE_SUFFIX = ".tar.zst"
COMPARISONS_DIR = "comparisons"  # a pairwise judge's batches (contract 4), not a series


def is_series_id(name: str) -> bool:
    return bool(SERIES_ID.match(name)) and ".." not in name


def is_episode_id(name: str) -> bool:
    return bool(EPISODE_ID.match(name))


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
        object.__setattr__(self, "name", scrub_line(self.name))
        object.__setattr__(self, "reason", scrub_line(self.reason))


@dataclass(frozen=True)
class EpisodeEntry:
    """One run folder or archive inside a series folder."""

    name: str  # the folder or file name, relative to the series folder
    episode_id: str
    path: Path
    is_archive: bool


def read_series_json(path: Path) -> dict:
    """Parse series.json and validate it against `meta/series.schema.json`; raises BadInput."""
    file = "series.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(file, f"cannot be read ({type(exc).__name__})") from None
    info = loads(text, file)
    contract_validator("series").validate(info, text, file)
    return info


def discover_series(runs_root: Path) -> tuple[list[Series], list[Skipped]]:
    """Every series under the runs root, sorted by id, and the folders that are not series."""
    found: list[Series] = []
    skipped: list[Skipped] = []
    for child in sorted(Path(runs_root).iterdir(), key=lambda p: p.name):
        if not child.is_dir() or child.is_symlink() or child.name == COMPARISONS_DIR:
            continue
        if not is_series_id(child.name):
            skipped.append(Skipped(child.name, "folder name is not a valid series id"))
            continue
        try:
            info = read_series_json(child / "series.json")
        except BadInput as exc:
            skipped.append(Skipped(child.name, f"no readable series.json: {exc}"))
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


def series_fingerprint(series_path: Path) -> str:
    """A version of a series' input from its files' names, sizes and mtimes (no content read).

    Cheap enough to run on every sensor tick; any added, removed, resized or rewritten file
    changes it.
    """
    digest = hashlib.sha256()
    for path in sorted(series_path.rglob("*")):
        try:
            stat = path.lstat()
        except OSError:
            continue
        rel = path.relative_to(series_path).as_posix()
        digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_mode}\n".encode())
    return digest.hexdigest()[:24]
