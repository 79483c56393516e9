"""`hub_release`: the dataset folder on the Hugging Face Hub, published in one commit.

It runs in the `publish` job together with the blocking checks, so a failing check stops it in
the same run; and because a blocking check only stops its own run, it also reads the latest
result of every blocking check itself and refuses on any failure.
"""

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import dataset_rows, read_withheld
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.meta import dataset_meta
from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS
from vae_pipeline.domain.publish import (
    PublishError,
    execute_plan,
    format_plan,
    hub_api,
    plan_publish,
)
from vae_pipeline.resources import DatasetFolder, HubRepo, ProjectMeta


class PublishConfig(dg.Config):
    dry_run: bool = True  # plan only: print what would be sent, send nothing
    create_pr: bool = False  # open a pull request instead of committing to main
    message: str = "Refresh the dataset"


def failing_blocking_checks(instance: dg.DagsterInstance) -> list[str]:
    """Every blocking check whose latest result is a failure, or that never ran."""
    reasons = []
    for key in sorted((key for check in PUBLISH_CHECKS for key in check.check_keys),
                      key=lambda k: (k.asset_key.to_user_string(), k.name)):
        record = instance.get_latest_asset_check_evaluation_record(key)
        evaluation = record.evaluation if record else None
        name = f"{key.asset_key.to_user_string()}.{key.name}"
        if getattr(evaluation, "passed", None) is None:
            reasons.append(f"{name}: has not run; run `vae build`")
        elif not evaluation.passed:
            reasons.append(f"{name}: {evaluation.description}")
    return reasons


def left_out(project_meta: ProjectMeta, episode_table: pl.DataFrame) -> list[str]:
    """The series not published, and why (contract: named in the plan)."""
    withheld_episodes, withheld_series = read_withheld(project_meta)
    lines = []
    for series, status in sorted(set(episode_table.select("series", "series_status").iter_rows())):
        if status != "completed":
            lines.append(f"series {series}: {status}, not completed")
        elif series in withheld_series:
            lines.append(f"series {series}: withheld (meta/withheld.jsonl)")
    lines += [f"episode {e}: withheld (meta/withheld.jsonl)" for e in sorted(withheld_episodes)]
    return lines


@dg.asset(deps=[dataset_rows, dataset_episodes, dataset_card, dataset_meta], group_name="publish",
          kinds={"huggingface"})
def hub_release(context: dg.AssetExecutionContext, config: PublishConfig, hub_repo: HubRepo,
                dataset_folder: DatasetFolder, project_meta: ProjectMeta,
                episode_table: pl.DataFrame) -> dg.MaterializeResult:
    """The dataset folder on the Hub: only files whose sha256 differs are sent, in one commit."""
    if not hub_repo.repo_id:
        raise dg.Failure(description="no dataset repository: set VAE_HUB_REPO (ORG/NAME) or use vae publish --repo")
    reasons = failing_blocking_checks(context.instance)
    if reasons:
        raise dg.Failure(description="publishing refused:\n" + "\n".join(f"- {r}" for r in reasons),
                         metadata={"reasons": dg.MetadataValue.json(reasons)})
    api = hub_api(hub_repo.endpoint or None)
    try:
        plan = plan_publish(dataset_folder.root, api, hub_repo.repo_id)
        text = format_plan(plan)
        not_published = left_out(project_meta, episode_table)
        if not_published:
            text += "\nleft out:\n" + "\n".join(f"  {line}" for line in not_published)
        if config.dry_run:
            context.log.info("dry run: nothing sent")
            return dg.MaterializeResult(metadata={"mode": "dry run", "plan": dg.MetadataValue.md(f"```\n{text}\n```")})
        url = execute_plan(plan, api, hub_repo.repo_id, dataset_dir=dataset_folder.root,
                           create_pr=config.create_pr, message=config.message)
    except PublishError as exc:
        raise dg.Failure(description=f"publishing failed: {exc}") from None
    return dg.MaterializeResult(metadata={
        "mode": "pull request" if config.create_pr else "commit", "url": dg.MetadataValue.url(url),
        "plan": dg.MetadataValue.md(f"```\n{text}\n```"),
    })
