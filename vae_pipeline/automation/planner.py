"""Bringing the graph up to date: which series exist, what is stale, which runs to launch next.

Shared by `vae build`, the nightly schedule and the sensors, so that all of them agree on
what "stale" means (see `storage.versions`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from vae_pipeline.assets import ASSETS, PUBLISH_CHECKS
from vae_pipeline.assets.bundles import bundles
from vae_pipeline.assets.dataset import dataset_rows, withheld_source
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.episodes import episodes, episodes_sources
from vae_pipeline.assets.leaderboard import (
    comparisons_source,
    entrants,
    entrants_source,
    human_votes,
    judge_agreement,
    leaderboard,
    leaderboard_source,
    pairwise_judgments,
)
from vae_pipeline.assets.meta import (
    brief_bank,
    brief_bank_source,
    dataset_meta,
    dataset_meta_source,
    rubric,
    rubric_source,
)
from vae_pipeline.assets.renders import renders
from vae_pipeline.assets.review_site import review_site, review_site_source
from vae_pipeline.assets.verdicts import verdicts
from vae_pipeline.assets.scrub_settings import scrub_config, scrub_source
from vae_pipeline.domain.episodes.series import Skipped, discover_series
from vae_pipeline.storage.checks import unevaluated_partitions
from vae_pipeline.storage.partitions import SERIES, add_series
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, RunsRoot, ScrubSettings
from vae_pipeline.storage.versions import SourceVersions, StaleItem, stale_items, written_source

REFRESH_TAG = "vae/refresh"


def asset_specs() -> list[dg.AssetSpec]:
    return [spec for assets_def in ASSETS for spec in assets_def.specs]


def source_versions(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings,
                    dataset_folder: DatasetFolder, partitions: list[str]) -> SourceVersions:
    """The current version of the files (and settings) each file-reading asset reads, and which
    dataset folder each asset writing there would write; the series' folders are read all at once
    when the first is asked for."""
    by_series = functools.cache(lambda: episodes_sources(runs_root, project_meta, scrub_settings, partitions))
    folder = functools.cache(dataset_folder.source)
    return {
        bundles.key: lambda _: scrub_source(project_meta, scrub_settings),
        episodes.key: lambda series: by_series()[series],
        brief_bank.key: lambda _: brief_bank_source(project_meta),
        rubric.key: lambda _: rubric_source(project_meta),
        dataset_meta.key: lambda _: written_source(dataset_meta_source(project_meta), folder()),
        dataset_rows.key: lambda _: written_source(withheld_source(project_meta), folder()),
        dataset_episodes.key: lambda _: written_source(None, folder()),
        dataset_card.key: lambda _: written_source(None, folder()),
        judge_agreement.key: lambda _: written_source(None, folder()),
        review_site.key: lambda _: review_site_source(project_meta),
        entrants.key: lambda _: entrants_source(runs_root, project_meta, scrub_settings),
        pairwise_judgments.key: lambda _: comparisons_source(runs_root, human=False),
        human_votes.key: lambda _: comparisons_source(runs_root, human=True),
        leaderboard.key: lambda _: written_source(leaderboard_source(project_meta), folder()),
    }


@dataclass(frozen=True)
class SeriesSync:
    added: list[str]
    removed: list[str]
    skipped: list[Skipped]


def series_changes(instance: dg.DagsterInstance, runs_root: RunsRoot, scrub_settings: ScrubSettings) -> SeriesSync:
    """Series found under the runs root that are not partitions yet, and partitions whose folder is gone.

    A folder whose name the scrub would change is no series (its name would be a partition key,
    in every run's tags): it is skipped, named through the scrub. A known series whose series.json
    cannot be read now (caught half-written, a fetch cut short) is not gone: it keeps its
    partition, and its episodes read invalid, naming the file, until it reads again."""
    found, skipped = discover_series(runs_root.root, scrub_config(scrub_settings))
    known = set(instance.get_dynamic_partitions(SERIES))
    ids = {series.series_id for series in found}
    unreadable = {folder.name for folder in skipped if folder.name in known}
    skipped = [Skipped(folder.name, f"{folder.reason}; kept as a series, its episodes invalid until it reads again")
               if folder.name in unreadable else folder for folder in skipped]
    return SeriesSync(sorted(ids - known), sorted(known - ids - unreadable), skipped)


def sync_series(instance: dg.DagsterInstance, runs_root: RunsRoot, scrub_settings: ScrubSettings) -> SeriesSync:
    """Make the `series` partitions match the runs root."""
    changes = series_changes(instance, runs_root, scrub_settings)
    if changes.added:
        add_series(instance, changes.added)
    for series_id in changes.removed:
        instance.delete_dynamic_partition(SERIES, series_id)
    return changes


def check_keys() -> list[dg.AssetCheckKey]:
    """Every asset check of the graph: those inside the assets' steps and the blocking ones."""
    return [key for checks in [*ASSETS, *PUBLISH_CHECKS] for key in checks.check_keys]


def stale(instance: dg.DagsterInstance, runs_root: RunsRoot, project_meta: ProjectMeta,
          scrub_settings: ScrubSettings, dataset_folder: DatasetFolder) -> list[StaleItem]:
    partitions = instance.get_dynamic_partitions(SERIES)
    sources = source_versions(runs_root, project_meta, scrub_settings, dataset_folder, partitions)
    return stale_items(instance, asset_specs(), sources, partitions,
                       unevaluated_partitions(instance, check_keys(), partitions))


# The assets whose steps read a series' folder of the runs root (fetched first on a bucket).
READ_SERIES_FOLDERS = {episodes.key, renders.key, bundles.key, verdicts.key}

# Re-run only when their own inputs really changed, never just because an upstream in the same run
# did: these decode videos and re-pack archives.
COSTLY = {renders.key, bundles.key}


@dataclass(frozen=True)
class PlannedRun:
    """One run to launch: assets over a contiguous range of series (`first`..`last`, in partition
    order), or unpartitioned assets only (`first` None); a run over a range may also hold
    unpartitioned assets."""

    first: str | None
    last: str | None
    keys: tuple[dg.AssetKey, ...]

    @property
    def partition_key(self) -> str | None:
        """The series, when the run covers one (the UI then shows it as the run's partition)."""
        return self.first if self.first == self.last else None

    def series(self, partitions: list[str]) -> list[str]:
        """The series the run covers, in partition order (none for unpartitioned assets only)."""
        return [] if self.first is None else partitions[partitions.index(self.first):partitions.index(self.last) + 1]

    def series_folders_read(self, partitions: list[str]) -> list[str]:
        """The series whose folders the run's steps read, in the order they read them."""
        return self.series(partitions) if READ_SERIES_FOLDERS & set(self.keys) else []

    def tags(self) -> dict[str, str]:
        """The run's tags: the refresh marker and a range of series (Dagster's own range tags)."""
        tags = {REFRESH_TAG: "true"}
        if self.first != self.last:
            tags[ASSET_PARTITION_RANGE_START_TAG] = self.first
            tags[ASSET_PARTITION_RANGE_END_TAG] = self.last
        return tags


def next_runs(items: list[StaleItem], partitions: list[str]) -> list[PlannedRun]:
    """The runs to launch now: each stage over every stale series it can run for, in as few runs as
    the series' order allows (one run per contiguous range of series needing the same assets).

    A run holds the stale assets whose upstream is fresh, and the assets downstream of them that
    only wait on them (Dagster runs them in order): a downstream asset whose upstream then produced
    the same data re-runs needlessly, a cheap price for fewer runs — except the costly ones, which
    join only when their upstream is missing altogether. When everything stale fits one range of
    series, the unpartitioned assets join that run too (a rehost of every series: `rubric`,
    `labels` over all series and the roll-up in one run); otherwise the roll-up waits for the
    series' runs.
    """
    combined = _assign(items, across=True)
    series_keys = {p: keys for p, keys in combined.items() if p is not None}
    if len({tuple(keys) for keys in series_keys.values()}) <= 1:
        blocks = _contiguous(sorted(series_keys, key=partitions.index), partitions)
        if len(blocks) == 1:
            keys = tuple(dict.fromkeys([*combined.get(None, []), *next(iter(series_keys.values()))]))
            return [PlannedRun(blocks[0][0], blocks[0][-1], keys)]
    by_partition = _assign(items, across=False)
    groups: dict[tuple[dg.AssetKey, ...], list[str]] = defaultdict(list)
    for partition, keys in by_partition.items():
        if partition is not None:
            groups[tuple(keys)].append(partition)
    runs = [PlannedRun(block[0], block[-1], keys) for keys, members in groups.items()
            for block in _contiguous(sorted(members, key=partitions.index), partitions)]
    runs.sort(key=lambda run: partitions.index(run.first))
    if None in by_partition:
        runs.append(PlannedRun(None, None, tuple(by_partition[None])))
    return runs


def covers_every_item(runs: list[PlannedRun], items: list[StaleItem], partitions: list[str]) -> bool:
    """Whether `runs` materialize every one of `items`. The stale items hold everything downstream
    of a stale one, so when these runs all succeed nothing is left stale: a build need not plan
    again to find that out (a pass over every series)."""
    covered: set[tuple[dg.AssetKey, str | None]] = set()
    for run in runs:
        covered.update((key, part) for key in run.keys for part in [None, *run.series(partitions)])
    return all((item.key, item.partition) in covered for item in items)


def _assign(items: list[StaleItem], across: bool) -> dict[str | None, list[dg.AssetKey]]:
    """Which stale assets run now, by series (None: unpartitioned). With `across`, an asset may
    wait on assets of other partitions scheduled now (they will share one run)."""
    by_partition: dict[str | None, list[dg.AssetKey]] = defaultdict(list)
    scheduled: dict[tuple[dg.AssetKey, str | None], str] = {}
    for item in items:  # in dependency order
        if item.reason != "upstream stale":
            joins = True
        else:
            same_run = all((across or part == item.partition) and (key, part) in scheduled
                           for key, part in item.waits_on)
            only_missing = all(scheduled.get(wait) == "missing" for wait in item.waits_on)
            joins = same_run and (item.key not in COSTLY or only_missing)
        if joins:
            by_partition[item.partition].append(item.key)
            scheduled[item.key, item.partition] = item.reason if item.reason != "upstream stale" else \
                ("missing" if all(scheduled.get(w) == "missing" for w in item.waits_on) else "changed")
    return by_partition


def _contiguous(members: list[str], partitions: list[str]) -> list[list[str]]:
    """`members` (in partition order) cut into runs of neighbours in `partitions`."""
    blocks: list[list[str]] = []
    for series in members:
        if blocks and partitions.index(series) == partitions.index(blocks[-1][-1]) + 1:
            blocks[-1].append(series)
        else:
            blocks.append([series])
    return blocks


def run_requests(items: list[StaleItem], partitions: list[str]) -> list[dg.RunRequest]:
    return [dg.RunRequest(asset_selection=list(run.keys), partition_key=run.partition_key, tags=run.tags())
            for run in next_runs(items, partitions)]
