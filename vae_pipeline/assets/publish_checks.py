"""The blocking checks: one per reason the contract gives for refusing to publish.

They are asset checks of their own (not part of an asset's step), so the `publish` job can run
them against the current files without rebuilding anything, and a failure stops `hub_release`
in the same run. They all check `dataset_episodes`, the last asset before the release, so that a
failure during a refresh blocks nothing but the release (the leaderboard's two checks sit on
`dataset_card`, which re-renders whenever their inputs change). Each description names the
episodes and files concerned and the way out.
"""

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import WITHHELD, read_withheld
from vae_pipeline.assets.dataset_episodes import (
    archive_problems,
    dataset_episodes,
    published_rows,
    rows_vs_archives,
    video_in_place,
)
from vae_pipeline.assets.leaderboard import LEADERBOARD_CHECKS
from vae_pipeline.assets.metadata import markdown_table
from vae_pipeline.domain.dataset_files import rows_files_disagree
from vae_pipeline.domain.provenance import (
    ACTOR_COLUMNS,
    SERIES_COLUMNS,
    actor_disagreements,
    uncommitted_series,
    unversioned_series,
)
from vae_pipeline.domain.rows import publishable
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta

TABLE = {"episode_table": dg.AssetIn("episode_table")}
ITEMS = "items"  # what a check names, one {series, id, text} each: the review site links them


def _listing(problems: list[str], limit: int = 25) -> str:
    shown = "; ".join(problems[:limit])
    return shown + (f"; and {len(problems) - limit} more" if len(problems) > limit else "")


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="No invalid episode in a published series")
def no_invalid_episodes(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    withheld_episodes, withheld_series = read_withheld(project_meta)
    blocking = episode_table.filter(
        ~pl.col("valid") & (pl.col("series_status") == "completed")
        & ~pl.col("id").is_in(sorted(withheld_episodes)) & ~pl.col("series").is_in(sorted(withheld_series))
    ) if episode_table.height else episode_table
    items = [{"series": r["series"], "id": r["id"],
              "text": f"{r['error_file']}" + (f":{r['error_line']}" if r["error_line"] is not None else "")
              + f" {r['error_reason']}"} for r in blocking.iter_rows(named=True)]
    problems = [f"{i['series']}/{i['id']}: {i['text']}" for i in items]
    return dg.AssetCheckResult(
        passed=not problems,
        description="every episode of the published series is valid" if not problems else
        f"{len(problems)} invalid episode(s) in completed series: {_listing(problems)}. Fix the input, or list the "
        f"episode or series with a reason in meta/{WITHHELD} to leave it out.",
        metadata={"invalid": len(problems),
                  "episodes": markdown_table(blocking, ("series", "id", "error_file", "error_line", "error_reason")),
                  ITEMS: dg.MetadataValue.json(items)})


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="No unreviewed scrub finding (e-mail, IP, leftover credential) in a published file")
def no_scrub_findings(dataset_folder: DatasetFolder, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    items = [{"series": r["series"], "id": r["id"], "text": f"{f['file']}:{f['line']} {f['kind']}"}
             for r in published_rows(dataset_folder, episode_table) for f in r["findings"] or [] if not f["allowed"]]
    findings = [f"{i['id']}: {i['text']}" for i in items]
    return dg.AssetCheckResult(
        passed=not findings,
        description="no unreviewed finding" if not findings else
        f"{len(findings)} finding(s): {_listing(findings)}. Fix the input, list a reviewed finding in "
        "meta/scrub-allow.jsonl (file, kind and value_sha256 from the manifest's scrub.findings), or withhold "
        f"the episode in meta/{WITHHELD}.",
        metadata={"findings": len(findings), ITEMS: dg.MetadataValue.json(items)})


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="Every archive and its members have the size and sha256 their manifest lists")
def files_match_manifests(dataset_folder: DatasetFolder, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    problems = [p for row in published_rows(dataset_folder, episode_table)
                for p in archive_problems(dataset_folder.root, row)]
    return dg.AssetCheckResult(
        passed=not problems,
        description="every archive matches its manifest" if not problems else
        f"{_listing(problems)}. Rebuild (vae build) to rewrite the files, or withhold the episode.")


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="Every delivered video is in videos/, byte-identical")
def delivered_videos_present(dataset_folder: DatasetFolder, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    missing = [row["id"] for row in published_rows(dataset_folder, episode_table)
               if row["video"] and not video_in_place(dataset_folder.root, row)]
    return dg.AssetCheckResult(
        passed=not missing,
        description="every delivered video is in videos/" if not missing else
        f"missing or different in videos/: {_listing(missing)}. Rebuild, or withhold the episode.")


@dg.asset_check(asset=dataset_episodes, blocking=True,
                description="episodes.jsonl, the archives and the manifests name the same episodes")
def rows_and_archives_agree(dataset_folder: DatasetFolder) -> dg.AssetCheckResult:
    problems = rows_vs_archives(dataset_folder.root)
    return dg.AssetCheckResult(
        passed=not problems,
        description="rows, archives and manifests agree" if not problems else
        f"{_listing(problems)}. Rebuild (vae build) so rows and archives are written together.")


@dg.asset_check(asset=dataset_episodes, blocking=True,
                description="episodes.jsonl and data/episodes.parquet hold the same rows")
def jsonl_and_parquet_agree(dataset_folder: DatasetFolder) -> dg.AssetCheckResult:
    problems = rows_files_disagree(dataset_folder.root)
    return dg.AssetCheckResult(
        passed=not problems,
        description="episodes.jsonl and data/episodes.parquet hold the same rows" if not problems else
        f"{_listing(problems)}. Rebuild (vae build) so both are written again from one frame.")


def _published_provenance(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> list[dict]:
    """What the provenance checks read of the rows published as the withheld list stands now."""
    if not episode_table.height:
        return []
    withheld_episodes, withheld_series = read_withheld(project_meta)
    return publishable(episode_table, withheld_episodes, withheld_series).select(
        "series", "id", *SERIES_COLUMNS, *ACTOR_COLUMNS).to_dicts()


WITHHOLD_SERIES = f"or list the series with a reason in meta/{WITHHELD} to leave it out"


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="Every published series ran committed harness code (harness.commit, not dirty)")
def harness_committed(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    problems = uncommitted_series(_published_provenance(project_meta, episode_table))
    return dg.AssetCheckResult(
        passed=not problems,
        description="every published series names its harness commit, with no local changes" if not problems else
        f"{len(problems)} series ran harness code that was not committed: {_listing(problems)}. Run the series "
        f"again from a committed harness (series.json harness.commit, harness.dirty false), {WITHHOLD_SERIES}.",
        metadata={"series_at_fault": len(problems)})


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="Every published series has a benchmark_version MAJOR.MINOR.PATCH")
def benchmark_versioned(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    problems = unversioned_series(_published_provenance(project_meta, episode_table))
    return dg.AssetCheckResult(
        passed=not problems,
        description="every published series has a benchmark_version" if not problems else
        f"{len(problems)} series without a benchmark version: {_listing(problems)}. Record the benchmark "
        f"version the series ran (series.json benchmark_version, MAJOR.MINOR.PATCH), {WITHHOLD_SERIES}.",
        metadata={"series_at_fault": len(problems)})


@dg.asset_check(asset=dataset_episodes, additional_ins=TABLE, blocking=True,
                description="The episodes of each published series ran one actor: the same model, Claude Code "
                            "version (= actor.cli), tools, system prompt and tool definitions")
def one_actor_per_series(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> dg.AssetCheckResult:
    problems = actor_disagreements(_published_provenance(project_meta, episode_table))
    return dg.AssetCheckResult(
        passed=not problems,
        description="the episodes of every published series agree on what ran" if not problems else
        f"{len(problems)} disagreement(s) on what ran (messages.jsonl system/init line, "
        f"transcript/api-request-shape.json): {_listing(problems)}. Run the odd episodes again with the series' "
        f"actor, or list them (or the series) with a reason in meta/{WITHHELD} to leave them out.",
        metadata={"disagreements": len(problems)})


PROVENANCE_CHECKS = [harness_committed, benchmark_versioned, one_actor_per_series]
PUBLISH_CHECKS = [no_invalid_episodes, no_scrub_findings, files_match_manifests, delivered_videos_present,
                  rows_and_archives_agree, jsonl_and_parquet_agree, *PROVENANCE_CHECKS, *LEADERBOARD_CHECKS]
