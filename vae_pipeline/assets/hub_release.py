"""`hub_release`: the dataset folder on the Hugging Face Hub, published in one commit.

The publish checks are not blocking (a failure fails no run, see publish_checks): the release
itself refuses unless every check's latest result passed (see `failing_publish_checks`). In
the `publish` job it runs after the checks (lowest step priority, in-process), so `vae publish`
checks the files it is about to send. Swept into any other run (the asset graph's *Materialize
all*), it attempts nothing and says so in the run's log, so that run still ends green.
"""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import dataset_rows, read_withheld
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.meta import dataset_meta, published_meta_files, rubric_file
from vae_pipeline.assets.publish_checks import AFTER_THE_CHECKS, PUBLISH_CHECKS, PUBLISH_JOB
from vae_pipeline.domain.dataset.dataset_files import DatasetFolderError, produced_files
from vae_pipeline.domain.dataset.publish import (
    PublishError,
    execute_plan,
    format_plan,
    hub_api,
    plan_publish,
)
from vae_pipeline.domain.episodes.series import discover_series
from vae_pipeline.storage.checks import RUNNING, check_outcomes
from vae_pipeline.storage.resources import DatasetFolder, HubRepo, ProjectMeta, RunsRoot


NOT_ATTEMPTED = "not attempted"  # the mode of a hub_release materialized outside the publish job


class PublishConfig(dg.Config):
    dry_run: bool = True  # plan only: print what would be sent, send nothing
    create_pr: bool = False  # open a pull request instead of committing to main
    message: str = "Refresh the dataset"


def failing_publish_checks(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Every publish check that does not let the release go, and why.

    A check that ran in this run (the `publish` job as `vae publish` and the sensors launch it)
    must have passed in it. The UI launches the job's asset alone (its Launchpad sends no check),
    so a check that did not run in it counts by its latest evaluation, which must have passed
    and be newer than the latest materialization of the asset it checks (about the files as
    they are now)."""
    keys = sorted((key for check in PUBLISH_CHECKS for key in check.check_keys),
                  key=lambda k: (k.asset_key.to_user_string(), k.name))
    reasons = []
    for key, outcome in check_outcomes(instance, keys).items():
        name = f"{key.asset_key.to_user_string()}.{key.name}"
        materialized = instance.get_latest_materialization_event(key.asset_key)
        if outcome.status == RUNNING and outcome.run_id != run_id:
            reasons.append(f"{name}: still running (run {outcome.run_id}); wait for it")
        elif outcome.passed is None:
            reasons.append(f"{name}: not evaluated{' to the end in this run' if outcome.run_id == run_id else ''}"
                           "; run `vae build` or `vae publish`")
        elif not outcome.passed:
            reasons.append(f"{name}: {outcome.description}")
        elif outcome.run_id != run_id and materialized and outcome.timestamp < materialized.timestamp:
            reasons.append(f"{name}: passed before {key.asset_key.to_user_string()} was last materialized; "
                           "run `vae publish` (or materialize the asset with its checks) to check the current files")
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
          kinds={"huggingface"}, op_tags=AFTER_THE_CHECKS)
def hub_release(context: dg.AssetExecutionContext, config: PublishConfig, hub_repo: HubRepo,
                dataset_folder: DatasetFolder, project_meta: ProjectMeta, runs_root: RunsRoot,
                episode_table: pl.DataFrame) -> dg.MaterializeResult:
    """The dataset folder on the Hub: only files whose sha256 differs are sent, in one commit.
    Only from the `publish` job; swept into another run (*Materialize all*), nothing is attempted
    (recorded as mode "not attempted", like a dry run, so that run and its backfill end green)."""
    if context.job_name != PUBLISH_JOB:
        why = (f"not attempted in a `{context.job_name}` run: the release goes out only from the `{PUBLISH_JOB}` "
               "job (or `vae publish`), which runs the publish checks first")
        context.log.warning(f"hub_release: {why}")
        return dg.MaterializeResult(metadata={"mode": NOT_ATTEMPTED, "why": why})
    return release(context, config, hub_repo, dataset_folder, project_meta, runs_root, episode_table)


def release(context: dg.AssetExecutionContext, config: PublishConfig, hub_repo: HubRepo, dataset_folder: DatasetFolder,
            project_meta: ProjectMeta, runs_root: RunsRoot, episode_table: pl.DataFrame) -> dg.MaterializeResult:
    """The release itself: refused unless every publish check passed in this run."""
    if not hub_repo.repo_id:
        raise dg.Failure(description="no dataset repository: set VAE_HUB_REPO (ORG/NAME) or use vae publish --repo")
    not_published = left_out(project_meta, series_statuses(episode_table), runs_root)
    reasons = failing_publish_checks(context.instance, context.run_id)
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
