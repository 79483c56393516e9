"""The outside world, as resources configured from the environment (see the README's table)."""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
from upath import UPath

from vae_pipeline.domain.episodes.episode_files import (
    DEFAULT_SIZE_LIMIT,
    EpisodeFiles,
    SourceMember,
    episode_members,
    read_episode_files,
)
from vae_pipeline.domain.objects import (
    Mirror,
    etag,
    scratch_root,
    fingerprint_entries,
    is_local,
    bucket_listing,
    listed_identity,
    listing,
    local_path,
    held_fingerprints,
    listings_held,
    location,
    read_bytes,
    write_if_changed,
)
from vae_pipeline.domain.episodes.fingerprints import series_fingerprints
from vae_pipeline.domain.episodes.series import COMPARISONS_DIR, EpisodeEntry
from vae_pipeline.domain.episodes.strict_json import DEFAULT_MAX_LINE_BYTES
from vae_pipeline.domain.files import scratch_file
from vae_pipeline.domain.table_versions import content_version


SERIES_AHEAD = 2  # series of a bucket fetched ahead while `episodes` parses (3 measured no faster)


class RunsRoot(dg.ConfigurableResource):
    """The harness's runs root, a folder or an `s3://bucket/prefix`. Only ever read.

    On a bucket, what a stage reads is fetched into this machine's local copy first (a series
    when it is read, the series.json files and comparisons when the root is listed), kept by
    ETag; versions of what it holds come from names, sizes and ETags, since a bucket keeps no
    mtimes."""

    path: str
    max_unpacked_bytes: int = DEFAULT_SIZE_LIMIT
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES  # a longer JSONL line is bad input
    scratch_path: str = ""  # VAE_SCRATCH: where a bucket's files are fetched to
    shared_path: str = ""  # VAE_SHARED_INPUTS: where machines leave the files they fetched for each other

    @property
    def mirror(self) -> Mirror:
        return Mirror(location(self.path), scratch_root(self.scratch_path, self.path) / "runs")

    @property
    def shared(self) -> UPath | None:
        """The prefix where the machine that fetches a series (or the root's files) first leaves
        them as one object for the others, each file then fetched from the runs root once; None:
        each machine fetches what it lacks (one machine, or none set)."""
        return location(self.shared_path) if self.shared_path and self.mirror.is_remote else None

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[RunsRoot]:
        """A run reads the runs root as first listed: each folder listed once for all its steps."""
        with listings_held(self.path):
            yield self

    @property
    def root(self) -> Path:
        """The runs root to list: its series folders with their series.json, and comparisons/."""
        mirror = self.mirror
        if mirror.is_remote:
            # one listing of the whole root: a folder without a series.json is skipped, saying so
            listed = mirror.sync_where(lambda rel: rel.startswith(f"{COMPARISONS_DIR}/")
                                       or (rel.count("/") == 1 and rel.endswith("/series.json")), self.shared)
            for child in sorted({rel.split("/", 1)[0] for rel in listed if "/" in rel} - {COMPARISONS_DIR}):
                (mirror.local / child).mkdir(parents=True, exist_ok=True)
        return mirror.local

    def series_dir(self, series_id: str) -> Path:
        """The series' folder, every file of it here."""
        return self.mirror.sync(series_id, self.shared)

    def series_dirs(self, series_ids: list[str]) -> Iterator[tuple[str, Path]]:
        """Each series and its folder (`series_dir`), in order. On a bucket the next two series
        are fetched while the caller reads this one: the store serves while the step parses, and
        one series' listing and last requests overlap the other's."""
        if not self.mirror.is_remote:
            yield from ((series_id, self.series_dir(series_id)) for series_id in series_ids)
            return
        with ThreadPoolExecutor(SERIES_AHEAD, thread_name_prefix="vae-series-fetch") as pool:
            ahead = [pool.submit(self.series_dir, series_id) for series_id in series_ids[:SERIES_AHEAD]]
            for index, series_id in enumerate(series_ids):
                if index + SERIES_AHEAD < len(series_ids):
                    ahead.append(pool.submit(self.series_dir, series_ids[index + SERIES_AHEAD]))
                yield series_id, ahead[index].result()

    @contextmanager
    def fetching_ahead(self, series_ids: list[str]) -> Iterator[None]:
        """While inside, the series' folders are fetched in order in the background (on a bucket):
        a build starts them while Dagster creates and starts the run that reads them, time the
        store would otherwise sit idle. Leaving stops after the series being fetched. A failed
        fetch is left to the step reading that series, which fetches it again and says why."""
        if not series_ids or not self.mirror.is_remote:
            yield
            return
        leaving = threading.Event()

        def fetch() -> None:
            for series_id in series_ids:
                if leaving.is_set():
                    return
                try:
                    self.series_dir(series_id)
                except Exception:  # noqa: BLE001 (whatever it was, the step's own fetch meets it and fails, named)
                    return

        fetcher = threading.Thread(target=fetch, name="vae-series-fetch-ahead", daemon=True)
        fetcher.start()
        try:
            yield
        finally:
            leaving.set()
            fetcher.join()

    def fingerprints(self, series_ids: list[str]) -> dict[str, str]:
        """`fingerprint` of each series folder: on disk, all at once (in parallel for many, see
        `series_fingerprints`)."""
        mirror = self.mirror
        if mirror.is_remote:
            return {series_id: self.fingerprint(series_id) for series_id in series_ids}
        folders = [mirror.local / series_id for series_id in series_ids]
        found = held_fingerprints(folders, series_fingerprints)
        return {series_id: found[str(folder)] for series_id, folder in zip(series_ids, folders, strict=True)}

    def fingerprint(self, rel: str, *, top_jsonl: bool = False) -> str:
        """A version of what the folder `rel` holds (only its top-level `*.jsonl` if `top_jsonl`),
        read from its listing alone: names, sizes and mtimes on disk, names, sizes and ETags on a
        bucket."""
        mirror = self.mirror
        if not mirror.is_remote:
            folder = mirror.local / rel
            if not top_jsonl:
                return held_fingerprints([folder], series_fingerprints)[str(folder)]
            listing = repr([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.jsonl"))])
            return hashlib.sha256(listing.encode()).hexdigest()[:24]  # the names are input: never recorded
        entries = [entry for entry in fingerprint_entries(mirror.remote / rel)
                   if not top_jsonl or ("/" not in entry.split("\0")[0] and entry.split("\0")[0].endswith(".jsonl"))]
        return hashlib.sha256("".join(entries).encode()).hexdigest()[:24]

    def holds_folder(self, rel: str) -> bool:
        mirror = self.mirror
        return bool(listing(mirror.remote / rel)) if mirror.is_remote else (mirror.local / rel).is_dir()

    def episode_entry(self, row: dict) -> EpisodeEntry:
        """The run folder or archive a parsed `episodes` row came from (its series read before)."""
        return EpisodeEntry(row["source"], row["id"], self.mirror.local / row["series"] / row["source"],
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


SERIES_VERSIONS = "episode_table_series"  # DuckDB: each series' version as `episode_table` holds its rows
LABEL_STATE = "label_state"  # the label generations: <home>/label_state/<series>/<n>.parquet
# what `label_history` holds of the label generations `{source}`: their rows whose label changed
LABEL_HISTORY = ("SELECT series, id, old_label, label AS new_label, host_rubric_version, changed_at "
                 "FROM {source} WHERE changed")
HISTORY_READ = "label_history_read"  # the generations `label_history` holds: name and identity (`listed_identity`)


def sql_text(text: str) -> str:
    """`text` as a DuckDB string literal. Statements carry their values inline: a Python parameter
    or a registered Python object makes DuckDB import pandas (0.7 s in each process) to check its type."""
    return "'" + text.replace("'", "''") + "'"


def parquet_scan(files: list[Path]) -> str:
    """DuckDB's read of Parquet files as one table, their columns matched by name."""
    return f"read_parquet([{', '.join(sql_text(file.as_posix()) for file in files)}], union_by_name = true)"


def first_line(exc: duckdb.Error, path: str, name: str) -> str:
    """The first line of DuckDB's error, which names a file by its whole path (it may name the
    user), with `name` in the path's place."""
    return str(exc).splitlines()[0].replace(path, name)


EPISODE_TABLE = dg.AssetKey("episode_table")


def table_name(key: dg.AssetKey, partition: str | None) -> str:
    """An asset's (partition's) table in the home: `tables/<asset>/<series>.parquet`
    (`table.parquet` unpartitioned)."""
    return "/".join(("tables", *key.path, f"{partition}.parquet" if partition else "table.parquet"))


def table_names(con: duckdb.DuckDBPyConnection, *, with_type: bool = False) -> set:
    """The names of the tables and views (with `with_type`: (name, `BASE TABLE` or `VIEW`))."""
    rows = con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall()
    return set(rows) if with_type else {name for name, _ in rows}


class Warehouse(dg.ConfigurableResource):
    """The pipeline's own state (`VAE_HOME`, a folder or an `s3://bucket/prefix`): Parquet tables,
    label generations, frames and contact sheets, staged videos and archives, the review site.

    On a bucket, the files that code must open as real files (videos, frames, archives) are made
    in this machine's local copy (`root`, in `VAE_SCRATCH`) and uploaded as they are finished;
    a stage on another machine fetches what it reads. DuckDB is a local cache either way."""

    path: str
    scratch_path: str = ""  # VAE_SCRATCH: this machine's own folder; empty: <home>/scratch, or a temp folder

    @property
    def home(self) -> UPath:
        return location(self.path)

    @property
    def mirror(self) -> Mirror:
        return Mirror(self.home, scratch_root(self.scratch_path, self.path) / "home")

    @property
    def root(self) -> Path:
        """Where this machine reads and writes the state's files: the home itself on disk."""
        return self.mirror.local

    def fetch_all(self, rels: list[str]) -> dict[str, Path]:
        """The local files of `rels`, by name (on a bucket home: one listing per top folder, the
        missing or changed ones downloaded together)."""
        return self.mirror.fetch_all(rels)

    def table(self, key: dg.AssetKey, partition: str | None) -> UPath:
        """Where an asset's (partition's) table is stored."""
        return self.home / table_name(key, partition)

    @property
    def database(self) -> Path:
        # not named after a schema or table inside it: `episodes.duckdb` + table `episodes` is ambiguous
        return self.root / "vae_warehouse.duckdb"

    def connect(self, wait_s: float = 120.0) -> duckdb.DuckDBPyConnection:
        """A connection to the warehouse. DuckDB lets one process write at a time, and two series'
        runs may write labels at once (the UI runs two runs together): wait for the other.

        On a bucket the database is this machine's cache: DuckDB reads the Parquet objects through
        the registered s3fs file system (its httpfs extension is not in the wheel), and a missing
        cache is rebuilt from the stored `episode_table` table."""
        self.root.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                con = duckdb.connect(str(self.database))
                break
            except duckdb.IOException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        try:
            if not is_local(self.home):
                con.register_filesystem(self.home.fs)
                self._refresh_cache(con)
            self._refresh_label_history(con)
        except BaseException:
            con.close()  # DuckDB keeps a file's database open while a connection to it is
            raise
        return con

    def _refresh_cache(self, con: duckdb.DuckDBPyConnection) -> None:
        """Make this machine's DuckDB cache hold the stored `episode_table` (reloaded when its
        object's ETag is not the one the cache was loaded from) and the `label_history` table."""
        stored = self.table(EPISODE_TABLE, None)
        tag = etag(stored)
        con.execute("CREATE TABLE IF NOT EXISTS cache_source (etag VARCHAR)")
        loaded = con.execute("SELECT etag FROM cache_source").fetchall()
        if tag is not None and loaded != [(tag,)]:
            with scratch_file(self.database) as copy:
                copy.write_bytes(read_bytes(stored))
                con.execute("BEGIN")
                try:
                    con.execute(f"CREATE OR REPLACE TABLE episode_table AS SELECT * FROM {parquet_scan([copy])}")
                except duckdb.Error as exc:
                    raise RuntimeError("the stored episode_table cannot be read: "
                                       f"{first_line(exc, str(copy), table_name(EPISODE_TABLE, None))}") from None
                con.execute(f"DROP TABLE IF EXISTS {SERIES_VERSIONS}")  # the next store writes it whole
                con.execute("DELETE FROM cache_source")
                con.execute(f"INSERT INTO cache_source VALUES ({sql_text(tag)})")
                con.execute("COMMIT")

    def _refresh_label_history(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bring the table `label_history` to the changed rows of every label generation, each
        generation read once (generations are only ever added, under new names; one replaced or
        gone, as in a copied home, reads them all again), from one listing of the folder. Not a
        view over the generations' files: a view reads every generation's Parquet footer and rows
        at each query (0.6 s for the 3,000 of 10,000 episodes; on a bucket, in ranged GETs)."""
        folder = self.home / LABEL_STATE
        found = listing(folder) if is_local(folder) else bucket_listing(folder)
        current = {name: listed_identity(info) for name, info in found.items()
                   if name.endswith(".parquet") and name.count("/") == 1}
        kinds = dict(table_names(con, with_type=True))
        if kinds.get("label_history") == "VIEW" or "label_history_source" in kinds:
            # a database an earlier version made (a view on disk, a table by ETag on a bucket)
            con.execute("DROP VIEW IF EXISTS label_history" if kinds.get("label_history") == "VIEW"
                        else "DROP TABLE IF EXISTS label_history")
            con.execute("DROP TABLE IF EXISTS label_history_source")
            kinds = dict(table_names(con, with_type=True))
        loaded = dict(con.execute(f"SELECT name, identity FROM {HISTORY_READ}").fetchall()) \
            if HISTORY_READ in kinds else {}
        if loaded == current and ("label_history" in kinds or not current):
            return
        renewed = "label_history" not in kinds or any(current.get(name) != seen for name, seen in loaded.items())
        con.execute("BEGIN")
        con.execute(f"CREATE TABLE IF NOT EXISTS {HISTORY_READ} (name VARCHAR, identity VARCHAR)")
        if renewed:
            con.execute("DROP TABLE IF EXISTS label_history")
            con.execute(f"DELETE FROM {HISTORY_READ}")
        names = sorted(current) if renewed else sorted(set(current) - set(loaded))
        if names:  # in one statement (one statement a generation: 15 s in a rehost of 10,000 episodes)
            with ExitStack() as stack:
                if is_local(folder):  # DuckDB reads the files where they are (0.5 s for 3,000)
                    files, shown = [local_path(folder / name) for name in names], str(local_path(folder))
                else:  # a GET each (none for what this process wrote), read by Polars into one file
                    files = [stack.enter_context(scratch_file(self.database))]
                    shown = str(files[0])
                    generations = [pl.read_parquet(io.BytesIO(read_bytes(folder / name, found[name])))
                                   for name in names]
                    pl.concat(generations, how="diagonal_relaxed").write_parquet(files[0])
                selected = LABEL_HISTORY.format(source=parquet_scan(files))
                try:
                    con.execute(f"INSERT INTO label_history {selected}" if not renewed
                                else f"CREATE TABLE label_history AS {selected}")
                except duckdb.Error as exc:
                    reason = first_line(exc, shown, LABEL_STATE)
                    raise RuntimeError(f"the label history cannot be read: {reason}") from None
            read = ", ".join(f"({sql_text(name)}, {sql_text(current[name])})" for name in names)
            con.execute(f"INSERT INTO {HISTORY_READ} VALUES {read}")
        con.execute("COMMIT")

    @property
    def built_from(self) -> UPath:
        return self.home / "built_from.json"

    def record_build(self, runs_root: str, dataset: str) -> None:
        """Which runs root the dataset folder is built from, for `vae publish` to name the folders
        it leaves out when it is not told `--runs`."""
        record = {"runs_root": runs_root, "dataset": dataset}
        write_if_changed(self.built_from, (json.dumps(record, sort_keys=True) + "\n").encode())

    def last_build(self) -> dict[str, str] | None:
        """`{"runs_root", "dataset"}` of the last build in this home, or None (never built here)."""
        try:
            record = json.loads(read_bytes(self.built_from))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("runs_root") and record.get("dataset") else None


class DatasetFolder(dg.ConfigurableResource):
    """The dataset folder that is published (contract 3): a folder or an `s3://bucket/prefix`."""

    path: str

    @property
    def root(self) -> UPath:
        return location(self.path)

    def source(self) -> str:
        """Which folder the published files go to, in the source version of each asset that writes
        there: another `--out`, or the folder deleted and made again, is stale for all of them, so
        the next build writes the dataset there rather than find it up to date. On disk the folder
        is made here and named by its inode too (not by its device, which another machine mounting
        it numbers differently); a bucket prefix by its name. A digest: the path may name a user."""
        root = self.root
        if not is_local(root):
            return content_version(str(root))
        folder = local_path(root)
        folder.mkdir(parents=True, exist_ok=True)
        return content_version(str(folder.resolve()), folder.stat().st_ino)


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
