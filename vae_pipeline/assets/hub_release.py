"""`hub_release`: the dataset folder on the Hugging Face Hub, published in one commit.

It runs in the `publish` job together with the blocking checks, so a failing check stops it in
the same run; and because a blocking check only stops its own run, it also reads the latest
result of every blocking check itself and refuses on any failure.
"""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import dataset_rows, read_withheld
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.meta import dataset_meta, published_meta_files, rubric_file
from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS
from vae_pipeline.domain.dataset_files import DatasetFolderError, produced_files
from vae_pipeline.domain.publish import (
    PublishError,
    execute_plan,
    format_plan,
    hub_api,
    plan_publish,
)
from vae_pipeline.domain.series import discover_series
from vae_pipeline.storage.checks import RUNNING, check_outcomes
from vae_pipeline.storage.resources import DatasetFolder, HubRepo, ProjectMeta, RunsRoot


class PublishConfig(dg.Config):
    dry_run: bool = True  # plan only: print what would be sent, send nothing
    create_pr: bool = False  # open a pull request instead of committing to main
    message: str = "Refresh the dataset"


def failing_blocking_checks(instance: dg.DagsterInstance) -> list[str]:
    """Every blocking check whose latest result is a failure, or that was not evaluated (never
    ran, or its run ended first) or is still running."""
    keys = sorted((key for check in PUBLISH_CHECKS for key in check.check_keys),
                  key=lambda k: (k.asset_key.to_user_string(), k.name))
    reasons = []
    for key, outcome in check_outcomes(instance, keys).items():
        name = f"{key.asset_key.to_user_string()}.{key.name}"
        if outcome.status == RUNNING:
            reasons.append(f"{name}: still running (run {outcome.run_id}); wait for it")
        elif outcome.passed is None:
            reasons.append(f"{name}: not evaluated; run `vae build`")
        elif not outcome.passed:
            reasons.append(f"{name}: {outcome.description}")
    return reasons


def left_out(project_meta: ProjectMeta, series_status: Iterable[tuple[str, str]], runs_root: RunsRoot) -> list[str]:
    """What is not published, and why (contract: named in the plan): series not completed or
    withheld, folders of the runs root that are no series (no readable series.json), withheld
    episodes. `series_status` holds (series, status) pairs; a runs root with an empty path is unknown."""
    withheld_episodes, withheld_series = read_withheld(project_meta)
    lines = []
    for series, status in sorted(set(series_status)):
        if status != "completed":
            lines.append(f"series {series}: {status}, not completed")
        elif series in withheld_series:
            lines.append(f"series {series}: withheld (meta/withheld.jsonl)")
    if runs_root.path and runs_root.root.is_dir():
        lines += [f"folder {skipped.name}: {skipped.reason}" for skipped in discover_series(runs_root.root)[1]]
    lines += [f"episode {e}: withheld (meta/withheld.jsonl)" for e in sorted(withheld_episodes)]
    return lines


def series_statuses(episode_table: pl.DataFrame) -> list[tuple[str, str]]:
    return list(episode_table.select("series", "series_status").unique().iter_rows()) if episode_table.height else []


def left_out_text(lines: list[str]) -> str:
    return "\nleft out:\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


def refusal_text(reasons: list[str], not_published: list[str]) -> str:
    """Every reason publishing is refused, then what the plan would leave out."""
    return "publishing refused:\n" + "\n".join(f"- {r}" for r in reasons) + left_out_text(not_published)


@dg.asset(deps=[dataset_rows, dataset_episodes, dataset_card, dataset_meta], group_name="publish",
          kinds={"huggingface"})
def hub_release(context: dg.AssetExecutionContext, config: PublishConfig, hub_repo: HubRepo,
                dataset_folder: DatasetFolder, project_meta: ProjectMeta, runs_root: RunsRoot,
                episode_table: pl.DataFrame) -> dg.MaterializeResult:
    """The dataset folder on the Hub: only files whose sha256 differs are sent, in one commit."""
    if not hub_repo.repo_id:
        raise dg.Failure(description="no dataset repository: set VAE_HUB_REPO (ORG/NAME) or use vae publish --repo")
    not_published = left_out(project_meta, series_statuses(episode_table), runs_root)
    reasons = failing_blocking_checks(context.instance)
    if reasons:
        raise dg.Failure(description=refusal_text(reasons, not_published),
                         metadata={"reasons": dg.MetadataValue.json(reasons),
                                   "left_out": dg.MetadataValue.json(not_published)})
    api = hub_api(hub_repo.endpoint or None)
    meta_files = published_meta_files(project_meta.root, rubric_file(project_meta))
    try:
        produced = produced_files(dataset_folder.root, meta_files)
        plan = plan_publish(dataset_folder.root, api, hub_repo.repo_id, produced)
        text = format_plan(plan) + left_out_text(not_published)
        if config.dry_run:
            context.log.info("dry run: nothing sent")
            return dg.MaterializeResult(metadata={"mode": "dry run", "plan": dg.MetadataValue.md(f"```\n{text}\n```")})
        url = execute_plan(plan, api, hub_repo.repo_id, dataset_dir=dataset_folder.root,
                           create_pr=config.create_pr, message=config.message)
    except (PublishError, DatasetFolderError) as exc:
        raise dg.Failure(description=f"publishing failed: {exc}") from None
    return dg.MaterializeResult(metadata={
        "mode": "pull request" if config.create_pr else "commit", "url": dg.MetadataValue.url(url),
        "plan": dg.MetadataValue.md(f"```\n{text}\n```"),
    })
