"""The outside world, as resources configured from the environment (see the README's table)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import duckdb

from vae_pipeline.domain.episode_files import (
    DEFAULT_SIZE_LIMIT,
    EpisodeFiles,
    SourceMember,
    episode_members,
    read_episode_files,
)
from vae_pipeline.domain.series import EpisodeEntry
from vae_pipeline.domain.strict_json import DEFAULT_MAX_LINE_BYTES


class RunsRoot(dg.ConfigurableResource):
    """The harness's runs root. Only ever read."""

    path: str
    max_unpacked_bytes: int = DEFAULT_SIZE_LIMIT
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer JSONL line is bad input

    @property
    def root(self) -> Path:
        return Path(self.path)

    def series_dir(self, series_id: str) -> Path:
        return Path(self.path) / series_id

    def episode_entry(self, row: dict) -> EpisodeEntry:
        """The run folder or archive a parsed `episodes` row came from."""
        return EpisodeEntry(row["source"], row["id"], self.series_dir(row["series"]) / row["source"],
                            row["is_archive"])

    def read_files(self, row: dict, wanted: Callable[[str], bool], *, as_json: bool = False) -> EpisodeFiles:
        """The files `wanted` selects of a parsed episode, read safely (raises BadInput); `as_json`
        files are one JSON text each, refused past the line limit before they are read."""
        return read_episode_files(self.episode_entry(row), wanted, size_limit=self.max_unpacked_bytes,
                                  max_file_bytes=self.max_line_bytes if as_json else None)

    def members(self, row: dict) -> Iterator[SourceMember]:
        """Every file of a parsed episode as a stream, read safely (raises BadInput)."""
        return episode_members(self.episode_entry(row), size_limit=self.max_unpacked_bytes)


class ProjectMeta(dg.ConfigurableResource):
    """The project's `meta/` folder: brief banks, brief schema, rubrics, allow and withheld lists,
    `evaluation.json`; and the evaluation settings in force (rubric version, leaderboard bootstrap)."""

    path: str
    rubric_version: str = "latest"  # `latest`: the newest meta/rubric-v*.json
    leaderboard_rounds: int = 1000  # bootstrap rounds of the leaderboard's intervals
    leaderboard_seed: int = 0  # seed of the bootstrap draws: the same input gives the same intervals

    @property
    def root(self) -> Path:
        return Path(self.path)

    @property
    def pinned_rubric_version(self) -> str | None:
        return None if self.rubric_version in ("", "latest") else self.rubric_version

    def required(self, name: str) -> Path:
        """The meta file `name`, readable; otherwise a one-line failure naming it and the setting."""
        path = self.root / name
        try:
            path.open("rb").close()
        except OSError as exc:
            raise dg.Failure(description=meta_problem(f"meta file {path}: {exc.strerror or type(exc).__name__}")) from None
        return path


def meta_problem(what: str) -> str:
    """One line saying what in the meta folder cannot be used, and which setting names the folder."""
    return f"{what} (the meta folder is set by VAE_META_DIR, by default the project's meta/)"


class Warehouse(dg.ConfigurableResource):
    """The pipeline's own state: DuckDB database, frames and contact sheets, scratch space."""

    path: str

    @property
    def root(self) -> Path:
        return Path(self.path)

    @property
    def database(self) -> Path:
        # not named after a schema or table inside it: `episodes.duckdb` + table `episodes` is ambiguous
        return self.root / "vae_warehouse.duckdb"

    def connect(self, wait_s: float = 120.0) -> duckdb.DuckDBPyConnection:
        """A connection to the warehouse. DuckDB lets one process write at a time, and two series'
        runs may write labels at once (the UI runs two runs together): wait for the other."""
        self.root.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return duckdb.connect(str(self.database))
            except duckdb.IOException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def scratch(self) -> Path:
        path = self.root / "scratch"
        path.mkdir(parents=True, exist_ok=True)
        return path


class DatasetFolder(dg.ConfigurableResource):
    """The dataset folder that is published (contract 3)."""

    path: str

    @property
    def root(self) -> Path:
        return Path(self.path)



class ScrubSettings(dg.ConfigurableResource):
    """What the scrub is told about the harness machine: its host name and user names
    (`harness_user`: comma-separated, `ana,builder`; the names of the home directories an
    episode's files name are added to them for that episode).

    A host name is replaced where its value holds `/ . @ :`, a user name in paths, `user@host`
    and `ls -l` columns; a plain word is only reported.
    """

    harness_hostname: str = ""
    harness_user: str = ""


class HubRepo(dg.ConfigurableResource):
    """The Hugging Face dataset repository to publish to. The token is not a setting: the Hub
    client reads HF_TOKEN or its stored login itself, so it never passes through Dagster."""

    repo_id: str
    endpoint: str = ""  # empty: the client's default (or HF_ENDPOINT)
