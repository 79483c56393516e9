"""`hub_release`: the dataset folder on the Hugging Face Hub, published in one commit.

The publish checks are not blocking (a failure fails no run, see publish_checks): the release
itself refuses. It runs in the `publish` job after the checks (lowest step priority, in-process)
and publishes only if every check was evaluated in the same run, against the files it is about
to send, and passed; launched any other way (the asset graph's *Materialize* of hub_release
alone) it refuses and says to launch the `publish` job.
"""

from collections.abc import Iterable

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import dataset_rows, read_withheld
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.meta import dataset_meta, published_meta_files, rubric_file
from vae_pipeline.assets.publish_checks import AFTER_THE_CHECKS, PUBLISH_CHECKS
from vae_pipeline.domain.dataset_files import DatasetFolderError, produced_files
from vae_pipeline.domain.publish import (
    PublishError,
    execute_plan,
    format_plan,
    hub_api,
    plan_publish,
)
from vae_pipeline.domain.series import discover_series
from vae_pipeline.storage.resources import DatasetFolder, HubRepo, ProjectMeta, RunsRoot


class PublishConfig(dg.Config):
    dry_run: bool = True  # plan only: print what would be sent, send nothing
    create_pr: bool = False  # open a pull request instead of committing to main
    message: str = "Refresh the dataset"


def failing_publish_checks(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Every publish check whose latest evaluation failed, is missing, or is not from `run_id`."""
    reasons = []
    for key in sorted((key for check in PUBLISH_CHECKS for key in check.check_keys),
                      key=lambda k: (k.asset_key.to_user_string(), k.name)):
        record = instance.get_latest_asset_check_evaluation_record(key)
        evaluation = record.evaluation if record else None
        name = f"{key.asset_key.to_user_string()}.{key.name}"
        if record is None or record.run_id != run_id:
            reasons.append(f"{name}: not evaluated in this run; launch the `publish` job (or `vae publish`), "
                           "which runs every publish check before the release")
        elif getattr(evaluation, "passed", None) is None:
            reasons.append(f"{name}: did not finish in this run (see the run's logs)")
        elif not evaluation.passed:
            reasons.append(f"{name}: {evaluation.description}")
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
    """The dataset folder on the Hub: only files whose sha256 differs are sent, in one commit."""
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
