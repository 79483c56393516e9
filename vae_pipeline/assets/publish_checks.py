"""The publish checks: one per reason the contract gives for refusing to publish.

They are asset checks of their own (not part of an asset's step), so the `publish_checks` job
can run them against the current files without rebuilding anything; those of `dataset_episodes`
share one step (`dataset_episodes_checks`, which runs the ones selected), so a run pays one
step and one load of the episode table for all of them. Dagster shows them as
non-blocking, and they are: a failure shows red on its asset but fails no run, so a build, a
rehost or a *Materialize all* that did its work ends green whichever way it was launched (a
blocking check fails its own run, and the UI brings an asset's checks along with it). It is the
release that refuses: the `publish` job's op publishes only if every check's latest result
passed (`vae publish` runs `publish_checks` first); each description ends saying so
(REFUSES_THE_RELEASE). They check `dataset_episodes`, the last asset before the release (the
leaderboard's two checks sit on `dataset_card`, which re-renders whenever their inputs change).
Each description names the episodes and files concerned and the way out.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.assets.dataset import WITHHELD, read_withheld
from vae_pipeline.assets.dataset_episodes import (
    archive_problems,
    manifest_checked_part,
    manifest_name,
    dataset_episodes,
    published_rows,
    published_table,
    rows_vs_archives,
    video_in_place,
)
from vae_pipeline.assets.leaderboard import LEADERBOARD_CHECKS
from vae_pipeline.assets.metadata import REFUSES_THE_RELEASE, markdown_table, problem_list
from vae_pipeline.domain.dataset.dataset_files import rows_files_disagree
from vae_pipeline.domain.episodes.provenance import (
    ACTOR_COLUMNS,
    SERIES_COLUMNS,
    actor_disagreements,
    uncommitted_series,
    unrecorded_actors,
    unversioned_series,
)
from vae_pipeline.domain.check_items import said_of
from vae_pipeline.domain.dataset.rows import publishable
from vae_pipeline.domain.objects import exists, is_local, listed_identity, listing, put_bytes, read_bytes
from vae_pipeline.storage.checks import items_folder, items_metadata
from vae_pipeline.storage.io_manager import ROLLUPS, stored_table
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, Warehouse

PUBLISH_JOB = "publish"  # the job of the release alone (the Launchpad's)
PUBLISH_CHECKS_JOB = "publish_checks"  # the publish checks against the current files (`vae publish` runs it first)
# The op tags of a step that reads the checks' results (the review site): in a run
# with the checks, the in-process executor starts the highest priority first, so it comes after.
AFTER_THE_CHECKS = {"dagster/priority": "-1"}


@dataclass(frozen=True)
class Given:
    """What the publish checks read: one step loads the episode table once for all of them."""

    context: dg.AssetCheckExecutionContext
    project_meta: ProjectMeta
    dataset_folder: DatasetFolder
    warehouse: Warehouse
    episode_table: pl.DataFrame
    _listings: dict[str, dict[str, dict]] = field(default_factory=dict)

    @property
    def everything_read(self) -> bool:
        """In the `publish_checks` job (what `vae publish` runs before the release) every byte is
        read again; a build's run reads only what was written since a check last found it right."""
        return self.context.run.job_name == PUBLISH_CHECKS_JOB

    @cached_property
    def published_rows(self) -> list[dict]:
        """episodes.jsonl's rows, parsed once for every check that reads them."""
        return published_rows(self.dataset_folder)

    @cached_property
    def published_provenance(self) -> list[dict]:
        """What the provenance checks read of the rows published as the withheld list stands now
        (taken once for the three of them)."""
        if not self.episode_table.height:
            return []
        withheld_episodes, withheld_series = read_withheld(self.project_meta)
        return publishable(self.episode_table, withheld_episodes, withheld_series).select(
            "series", "id", *SERIES_COLUMNS, *ACTOR_COLUMNS).to_dicts()

    @cached_property
    def published(self) -> pl.DataFrame:
        """The episode_table rows episodes.jsonl publishes."""
        return published_table(self.episode_table, self.published_rows)

    @cached_property
    def items_listed(self) -> dict[str, dict]:
        """The files of the checks' items (`items_metadata`) as the step starts: one listing."""
        return listing(items_folder(self.warehouse.home, dataset_episodes.key))

    def items(self, name: str, said: list[dict]) -> dict:
        """The ITEMS entries of the check `name`'s evaluation."""
        return items_metadata(self.warehouse.home, dg.AssetCheckKey(dataset_episodes.key, name), said,
                              self.items_listed)

    def listed(self, folder: str) -> dict[str, dict]:
        """One listing of a folder of the dataset (`listing`) for every check that reads it: the
        checks write nothing there."""
        if folder not in self._listings:
            self._listings[folder] = listing(self.dataset_folder.root / folder)
        return self._listings[folder]


def _result(name: str, passed: bool, description: str, **metadata) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(asset_key=dataset_episodes.key, check_name=name, passed=passed,
                               description=description, metadata=metadata)


def _by_episode(given: Given, name: str, passed: str, said: list[dict], failed: str, way_out: str,
                **metadata) -> dg.AssetCheckResult:
    """The result of a check that says what is wrong by episode (`said_of`): its description is
    `failed` (the count), then one problem a line, then the way out; its items give them one by
    one for the review site to link."""
    problems = [f"{i['series']}/{i['id']}: {i['text']}" if i["id"] else i["text"] for i in said]
    return _result(name, not said, passed if not said else problem_list(failed, problems, way_out),
                   **metadata, **given.items(name, said))


def no_invalid_episodes(given: Given) -> dg.AssetCheckResult:
    episode_table = given.episode_table
    withheld_episodes, withheld_series = read_withheld(given.project_meta)
    blocking = episode_table.filter(
        ~pl.col("valid") & (pl.col("series_status") == "completed")
        & ~pl.col("id").is_in(sorted(withheld_episodes)) & ~pl.col("series").is_in(sorted(withheld_series))
    ) if episode_table.height else episode_table
    said = [said_of(r, f"{r['error_file']}" + (f":{r['error_line']}" if r["error_line"] is not None else "")
                    + f" {r['error_reason']}") for r in blocking.iter_rows(named=True)]
    return _by_episode(
        given, "no_invalid_episodes", "every episode of the published series is valid", said,
        f"{len(said)} invalid episode(s) in completed series:",
        f"Fix the input, or list the episode or series with a reason in meta/{WITHHELD} to leave it out.",
        invalid=len(said),
        episodes=markdown_table(blocking, ("series", "id", "error_file", "error_line", "error_reason")))


def no_scrub_findings(given: Given) -> dg.AssetCheckResult:
    published = given.published
    # one item (as `said_of` makes it) a finding not allowed, in the rows' order, made by Polars:
    # a sample dataset holds tens of thousands
    said = published.select("series", "id", "findings").explode("findings").drop_nulls("findings") \
        .unnest("findings").filter(~pl.col("allowed")) \
        .select("series", "id", text=pl.format("{}:{} {}", "file", "line", "kind")).to_dicts() \
        if published.height else []
    return _by_episode(
        given, "no_scrub_findings", "no unreviewed finding", said, f"{len(said)} finding(s):",
        "Fix the input, accept a reviewed finding with `vae allow EPISODE FILE:LINE KIND --reason …` (it lists "
        "the finding's file, kind and every one of its sha256s from the manifest's scrub.findings in "
        f"meta/scrub-allow.jsonl, all at once), or withhold the episode in meta/{WITHHELD}.",
        findings=len(said))


def _problems_since(given: Given, name: str, folder: str, digest: str, files_of: Callable[[dict], list[str]],
                    problems_of: Callable[[dict, list[dict | None], Path | None], list[str]],
                    staged_of: Callable[[dict], str | None], columns: tuple[str, ...],
                    checked_of: Callable[[dict, dict | None], str | None] | None = None) -> list[dict]:
    """What `problems_of` says of each published row (`said_of`), asked only for the rows whose
    files (`files_of`, under `folder`) were written since the check `name` last found them right, by
    their identity (size and mtime/inode, or ETag) and the row's own `digest` column. Where the
    files after the first were rewritten but `checked_of` (what of them the check compares) and
    the first file are as they were — a manifest whose label a rehost changed — nothing is read
    again either. In the `publish_checks` job (what `vae publish` runs before the release) every
    row is asked.

    `problems_of` gets the files' entries in one listing of `folder` (None: absent) and this
    machine's copy of the row's staged file (`staged_of`, fetched from the home with one listing
    when it is a bucket): on a bucket, a file whose listed size and ETag show it holds the staged
    copy's bytes is read from that copy, not downloaded again.

    `files_of` and `staged_of` read `columns` of a row (and `series`, `id`, `digest`): every
    published row is taken with those alone; those whose files changed, with all their columns."""
    before = _found_right(given, name)
    listed = given.listed(folder)
    published = given.published
    narrow = published.select(list(dict.fromkeys(("series", "id", digest, *columns)))).to_dicts() \
        if published.height else []
    decided = []  # (row, names, listed entries, identity, what was checked, whether to ask problems_of)
    changed = []  # the indexes in `decided` of the rows whose files are not as last found right
    for row in narrow:
        names = files_of(row)
        if not names:
            continue
        found = [listed.get(name.removeprefix(f"{folder}/")) for name in names]
        identity = "|".join([*(listed_identity(info) for info in found), row[digest] or ""]) \
            if all(found) else None
        seen = before.get(names[0], [None, None])
        if identity is not None and seen[0] == identity:
            decided.append((row, names, found, identity, seen[1], False))
        else:
            changed.append(len(decided))
            decided.append((row, names, found, identity, None, True))
    whole = {r["id"]: r for r in published.filter(pl.col("id").is_in([decided[i][0]["id"] for i in changed]))
             .to_dicts()} if changed else {}
    for index in changed:
        row, names, found, identity, _, _ = decided[index]
        row, checked = whole[row["id"]], None
        if identity is not None and checked_of is not None:
            part = checked_of(row, found[-1])
            checked = None if part is None else f"{listed_identity(found[0])}|{part}|{row[digest] or ''}"
        seen = before.get(names[0], [None, None])
        decided[index] = (row, names, found, identity, checked, not (checked is not None and seen[1] == checked))
    staged = _staged_copies(given.warehouse, [staged_of(row) for row, *_, ask in decided if ask])
    said, alike = [], {}
    for row, names, found, identity, checked, ask in decided:
        problems = problems_of(row, found, staged.get(staged_of(row) or "")) if ask else []
        said += [said_of(row, p) for p in problems]
        if identity is not None and not problems:
            alike[names[0]] = [identity, checked]
    _keep_found_right(given, name, before, alike)
    return said


def _record(given: Given, name: str) -> UPath:
    return given.warehouse.home / ROLLUPS / f"{name}.json"


def _found_right(given: Given, name: str) -> dict[str, list]:
    """What the check `name` last found right, by file: [its identity (`listed_identity`), what
    was checked]; nothing in the `publish_checks` job, whose release reads every byte, nor when
    the record is gone or cannot be read (the files are then read again)."""
    record = _record(given, name)
    if given.everything_read or not exists(record):
        return {}
    try:  # an older record holds the identity alone
        return {name: seen if isinstance(seen, list) else [seen, None]
                for name, seen in dict(json.loads(read_bytes(record))).items()}
    except ValueError:
        return {}


def _keep_found_right(given: Given, name: str, before: dict[str, list], now: dict[str, list]) -> None:
    if now != before:
        put_bytes(_record(given, name), json.dumps(now, sort_keys=True).encode())


def _staged_copies(warehouse: Warehouse, names: list[str | None]) -> dict[str, Path]:
    """This machine's copies of the staged files `names` (relative to the home): none when one is
    no longer staged (the checks then read the dataset's own files)."""
    try:
        return warehouse.fetch_all(sorted({name for name in names if name}))
    except FileNotFoundError:
        return {}


def files_match_manifests(given: Given) -> dg.AssetCheckResult:
    root = given.dataset_folder.root
    said = _problems_since(given, "files_match_manifests", "episodes", "archive_sha256",
                           lambda row: [row["archive"], manifest_name(row)],
                           lambda row, found, local: archive_problems(root, row, found, local),
                           lambda row: row.get("staged_archive"), ("archive", "staged_archive"),
                           lambda row, found: manifest_checked_part(root, row, found))
    return _by_episode(given, "files_match_manifests", "every archive matches its manifest", said, f"{len(said)} archive problem(s) against the manifests:",
                       "Rebuild (vae build) to rewrite the files, or withhold the episode.")


def delivered_videos_present(given: Given) -> dg.AssetCheckResult:
    root = given.dataset_folder.root
    said = _problems_since(given, "delivered_videos_present", "videos", "video_sha256",
                           lambda row: [row["video"]] if row["video"] else [],
                           lambda row, found, local: [] if video_in_place(root, row, found[0], local) else [row["video"]],
                           lambda row: row.get("staged_video"), ("video", "staged_video"))
    return _by_episode(given, "delivered_videos_present", "every delivered video is in videos/", said,
                       f"{len(said)} delivered video(s) missing or different in videos/:",
                       "Rebuild, or withhold the episode.")


def rows_and_archives_agree(given: Given) -> dg.AssetCheckResult:
    name, root, episode_table = "rows_and_archives_agree", given.dataset_folder.root, given.episode_table

    def written_of(ids: list[str]) -> dict[str, dict]:
        """On a bucket, the rows whose manifests a listing may show stored as written (on disk, read)."""
        return {row["id"]: row for row in episode_table.filter(pl.col("id").is_in(ids)).to_dicts()}

    before = _found_right(given, name)
    said, agreed = rows_vs_archives(root, given.published_rows,
                                    written_of if episode_table.height and not is_local(root) else None, before,
                                    given.listed("episodes"))
    _keep_found_right(given, name, before, agreed)
    return _by_episode(given, name, "rows, archives and manifests agree", said,
                       f"{len(said)} disagreement(s) between episodes.jsonl, the archives and the manifests:",
                       "Rebuild (vae build) so rows and archives are written together.")


def jsonl_and_parquet_agree(given: Given) -> dg.AssetCheckResult:
    said = rows_files_disagree(given.dataset_folder.root)
    return _by_episode(given, "jsonl_and_parquet_agree", "episodes.jsonl and data/episodes.parquet hold the same rows", said,
                       f"{len(said)} row(s) that episodes.jsonl and data/episodes.parquet disagree on:",
                       "Rebuild (vae build) so both are written again from one frame.")


WITHHOLD_SERIES = f"or list the series with a reason in meta/{WITHHELD} to leave it out"


def _series_items(given: Given, name: str, problems: list[str]) -> dict:
    """The items of a check that speaks of series (`series: text` each): the review site groups them."""
    return given.items(name, [said_of({"series": p.split(": ", 1)[0]}, p.split(": ", 1)[1]) for p in problems])


def harness_committed(given: Given) -> dg.AssetCheckResult:
    problems = uncommitted_series(given.published_provenance)
    return _result(
        "harness_committed", not problems,
        "every published series names its harness commit, with no local changes" if not problems else
        problem_list(f"{len(problems)} series ran harness code that was not committed:", problems,
                     "Run the series again from a committed harness (series.json harness.commit, harness.dirty "
                     f"false), {WITHHOLD_SERIES}."),
        series_at_fault=len(problems), **_series_items(given, "harness_committed", problems))


def benchmark_versioned(given: Given) -> dg.AssetCheckResult:
    problems = unversioned_series(given.published_provenance)
    return _result(
        "benchmark_versioned", not problems,
        "every published series has a benchmark_version" if not problems else
        problem_list(f"{len(problems)} series without a benchmark version:", problems,
                     "Record the benchmark version the series ran (series.json benchmark_version, "
                     f"MAJOR.MINOR.PATCH), {WITHHOLD_SERIES}."),
        series_at_fault=len(problems), **_series_items(given, "benchmark_versioned", problems))


def one_actor_per_series(given: Given) -> dg.AssetCheckResult:
    rows = given.published_provenance
    said, unrecorded = actor_disagreements(rows), unrecorded_actors(rows)
    noted = f" Not compared — {'; '.join(unrecorded)}." if unrecorded else ""
    return _by_episode(
        given, "one_actor_per_series", "the episodes of every published series agree on what ran, as far as their logs record it" + noted, said,
        f"{len(said)} disagreement(s) on what ran (messages.jsonl system/init line against series.json's actor, "
        "transcript/api-request-shape.json):",
        f"Run the odd episodes again with the series' actor, or list them (or the series) with a reason in "
        f"meta/{WITHHELD} to leave them out.{noted}",
        disagreements=len(said), not_recorded=len(unrecorded))


# the publish checks of `dataset_episodes`, in the order they are shown: each, and what it checks
DATASET_CHECKS: dict[str, tuple[Callable[[Given], dg.AssetCheckResult], str]] = {
    "no_invalid_episodes": (no_invalid_episodes, "No invalid episode in a published series"),
    "no_scrub_findings": (no_scrub_findings,
                          "No unreviewed scrub finding (e-mail, IP, leftover credential) in a published file"),
    "files_match_manifests": (files_match_manifests,
                              "Every archive and its members have the size and sha256 their manifest lists"),
    "delivered_videos_present": (delivered_videos_present, "Every delivered video is in videos/, byte-identical"),
    "rows_and_archives_agree": (rows_and_archives_agree,
                                "episodes.jsonl, the archives and the manifests name the same episodes"),
    "jsonl_and_parquet_agree": (jsonl_and_parquet_agree, "episodes.jsonl and data/episodes.parquet hold the same rows"),
    "harness_committed": (harness_committed,
                          "Every published series ran committed harness code (harness.commit, not dirty)"),
    "benchmark_versioned": (benchmark_versioned, "Every published series has a benchmark_version MAJOR.MINOR.PATCH"),
    "one_actor_per_series": (one_actor_per_series,
                             "The episodes of each published series ran one actor: the same model, Claude Code "
                             "version (= actor.cli), tools, system prompt and tool definitions"),
}


@dg.multi_asset_check(specs=[dg.AssetCheckSpec(name, asset=dataset_episodes, additional_deps=["episode_table"],
                                              description=about + REFUSES_THE_RELEASE)
                             for name, (_, about) in DATASET_CHECKS.items()],
                      can_subset=True)
def dataset_episodes_checks(context: dg.AssetCheckExecutionContext, project_meta: ProjectMeta,
                            dataset_folder: DatasetFolder, warehouse: Warehouse):
    """The publish checks of `dataset_episodes` that the run selected, in one step: a build's run
    pays one step and one load of the episode table for all of them, not one each. A check that
    raises stops none of the others; the step then fails with its error, and it reads as not
    evaluated, which refuses the release as a failure does."""
    given = Given(context, project_meta, dataset_folder, warehouse,
                  stored_table(warehouse, "episode_table", context.instance))
    selected = {key.name for key in context.selected_asset_check_keys}
    errors = []
    for name, (check, _) in DATASET_CHECKS.items():
        if name not in selected:
            continue
        try:
            result = check(given)
        except Exception as error:  # raised below, after the other checks
            context.log.error(f"the publish check {name} could not run: {type(error).__name__}")
            errors.append(error)
            continue
        yield result
    if errors:
        raise errors[0]


PUBLISH_CHECKS = [dataset_episodes_checks, *LEADERBOARD_CHECKS]
