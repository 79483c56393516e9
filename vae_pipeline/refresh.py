"""Bringing the graph up to date: which series exist, what is stale, which runs to launch next.

Shared by `vae build`, the nightly schedule and the sensors, so that all of them agree on
what "stale" means (see `freshness`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import dagster as dg

from vae_pipeline.assets import ASSETS
from vae_pipeline.assets.bundles import bundles
from vae_pipeline.assets.dataset import dataset_rows, withheld_source
from vae_pipeline.assets.episodes import episodes, episodes_source
from vae_pipeline.assets.leaderboard import (
    comparisons_source,
    entrants,
    entrants_source,
    human_votes,
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
from vae_pipeline.domain.series import Skipped, discover_series
from vae_pipeline.freshness import SourceVersions, StaleItem, stale_items
from vae_pipeline.partitions import SERIES
from vae_pipeline.resources import ProjectMeta, RunsRoot, ScrubSettings
from vae_pipeline.scrubbing import scrub_source

REFRESH_TAG = "vae/refresh"


def asset_specs() -> list[dg.AssetSpec]:
    return [spec for assets_def in ASSETS for spec in assets_def.specs]


def source_versions(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings) -> SourceVersions:
    """The current version of the files (and settings) each file-reading asset reads."""
    return {
        bundles.key: lambda _: scrub_source(project_meta, scrub_settings),
        episodes.key: lambda series: episodes_source(runs_root, project_meta, scrub_settings, series),
        brief_bank.key: lambda _: brief_bank_source(project_meta),
        rubric.key: lambda _: rubric_source(project_meta),
        dataset_meta.key: lambda _: dataset_meta_source(project_meta),
        dataset_rows.key: lambda _: withheld_source(project_meta),
        review_site.key: lambda _: review_site_source(project_meta),
        entrants.key: lambda _: entrants_source(runs_root, project_meta),
        pairwise_judgments.key: lambda _: comparisons_source(runs_root, human=False),
        human_votes.key: lambda _: comparisons_source(runs_root, human=True),
        leaderboard.key: lambda _: leaderboard_source(project_meta),
    }


@dataclass(frozen=True)
class SeriesSync:
    added: list[str]
    removed: list[str]
    skipped: list[Skipped]


def series_changes(instance: dg.DagsterInstance, runs_root: RunsRoot) -> SeriesSync:
    """Series found under the runs root that are not partitions yet, and partitions whose folder is gone."""
    found, skipped = discover_series(runs_root.root)
    known = set(instance.get_dynamic_partitions(SERIES))
    ids = {series.series_id for series in found}
    return SeriesSync(sorted(ids - known), sorted(known - ids), skipped)


def sync_series(instance: dg.DagsterInstance, runs_root: RunsRoot) -> SeriesSync:
    """Make the `series` partitions match the runs root."""
    changes = series_changes(instance, runs_root)
    if changes.added:
        instance.add_dynamic_partitions(SERIES, changes.added)
    for series_id in changes.removed:
        instance.delete_dynamic_partition(SERIES, series_id)
    return changes


def stale(instance: dg.DagsterInstance, runs_root: RunsRoot, project_meta: ProjectMeta,
          scrub_settings: ScrubSettings) -> list[StaleItem]:
    return stale_items(instance, asset_specs(), source_versions(runs_root, project_meta, scrub_settings),
                       instance.get_dynamic_partitions(SERIES))


# Re-run only when their own inputs really changed, never just because an upstream in the same run
# did: these decode videos and re-pack archives.
COSTLY = {renders.key, bundles.key}


def next_runs(items: list[StaleItem]) -> list[tuple[str | None, list[dg.AssetKey]]]:
    """The runs to launch now, one per series (and one for the unpartitioned assets).

    A run holds the stale assets whose upstream is fresh, and the assets downstream of them in
    the same run that only wait on them (Dagster runs them in order): a downstream asset whose
    upstream then produced the same data re-runs needlessly, a cheap price for fewer runs — except
    the costly ones, which join only when their upstream is missing altogether.
    """
    by_partition: dict[str | None, list[dg.AssetKey]] = defaultdict(list)
    scheduled: dict[tuple[dg.AssetKey, str | None], str] = {}
    for item in items:  # in dependency order
        if item.reason != "upstream stale":
            joins = True
        else:
            same_run = all(part == item.partition and (key, part) in scheduled for key, part in item.waits_on)
            only_missing = all(scheduled.get(wait) == "missing" for wait in item.waits_on)
            joins = same_run and (item.key not in COSTLY or only_missing)
        if joins:
            by_partition[item.partition].append(item.key)
            scheduled[item.key, item.partition] = item.reason if item.reason != "upstream stale" else \
                ("missing" if all(scheduled.get(w) == "missing" for w in item.waits_on) else "changed")
    return sorted(by_partition.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))


def run_requests(items: list[StaleItem]) -> list[dg.RunRequest]:
    return [
        dg.RunRequest(asset_selection=keys, partition_key=partition, tags={REFRESH_TAG: "true"})
        for partition, keys in next_runs(items)
    ]



CHECK_FAILED_ERROR = "DagsterAssetCheckFailedError"


def failed_only_on_checks(instance: dg.DagsterInstance, run_id: str) -> bool:
    """True when a failed run's only failures are blocking checks: its assets were materialized
    (the checks block publishing, not the refresh)."""
    failures = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    return bool(failures) and all(
        (event.dagster_event.step_failure_data.error or None) is not None
        and event.dagster_event.step_failure_data.error.cls_name == CHECK_FAILED_ERROR
        for event in failures
    )
