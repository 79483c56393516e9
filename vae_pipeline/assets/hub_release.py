"""`hub_release`: the dataset folder on the Hugging Face Hub, published in one commit.

`hub_release` is an asset the pipeline does not materialize itself: only the `publish` job's one
op (`hub_release`) sends the files, and it records the asset's materialization when it did. So
the asset graph's *Materialize all* never touches it (nothing is attempted, nothing is recorded,
the backfill ends green), and a green *Materialized* on it is a release.

The publish checks fail no run (Dagster calls them non-blocking, see publish_checks): the
release refuses instead, unless every check's latest result passed and is about the files as
they are now (`failing_publish_checks`). `vae publish` runs the `publish_checks` job first, then
`publish`; the UI's Launchpad launches `publish` alone, which goes by the checks' latest results.
"""

from collections.abc import Iterable, Iterator

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import dataset_rows, read_withheld
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.meta import dataset_meta, published_meta_files, rubric_file
from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS, PUBLISH_CHECKS_JOB, PUBLISH_JOB
from vae_pipeline.domain.dataset.dataset_files import DatasetFolderError, produced_files
from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.domain.episodes.series import discover_series
from vae_pipeline.domain.objects import exists
from vae_pipeline.storage.checks import RUNNING, check_outcomes
from vae_pipeline.storage.io_manager import read_table
from vae_pipeline.storage.resources import DatasetFolder, HubRepo, ProjectMeta, RunsRoot, ScrubSettings, Warehouse


HUB_RELEASE = dg.AssetKey("hub_release")


class PublishConfig(dg.Config):
    dry_run: bool = True  # plan only: print what would be sent, send nothing
    create_pr: bool = False  # open a pull request instead of committing to main
    message: str = "Refresh the dataset"


def failing_publish_checks(instance: dg.DagsterInstance) -> list[str]:
    """Every publish check that does not let the release go, and why.

    Each check counts by its latest evaluation, which must have finished, passed and be newer
    than the latest materialization of the asset it checks (about the files as they are now).
    `vae publish` runs them all just before (the `publish_checks` job); the Launchpad does not."""
    keys = sorted((key for check in PUBLISH_CHECKS for key in check.check_keys),
                  key=lambda k: (k.asset_key.to_user_string(), k.name))
    reasons = []
    for key, outcome in check_outcomes(instance, keys).items():
        name = f"{key.asset_key.to_user_string()}.{key.name}"
        materialized = instance.get_latest_materialization_event(key.asset_key)
        if outcome.status == RUNNING:
            reasons.append(f"{name}: still running (run {outcome.run_id}); wait for it")
        elif outcome.passed is None:
            reasons.append(f"{name}: not evaluated; run `vae build` or `vae publish`")
        elif not outcome.passed:
            reasons.append(f"{name}: {outcome.description}")
        elif materialized and outcome.timestamp < materialized.timestamp:
            reasons.append(f"{name}: passed before {key.asset_key.to_user_string()} was last materialized; "
                           "run `vae publish` (or the `publish_checks` job) to check the current files")
    return reasons


def left_out(project_meta: ProjectMeta, series_status: Iterable[tuple[str, str]], runs_root: RunsRoot,
             scrub_settings: ScrubSettings) -> list[str]:
    """What is not published, and why (contract: named in the plan): series not completed or
    withheld, folders of the runs root that are no series (no readable series.json), withheld
    episodes. `series_status` holds (series, status) pairs; a runs root with an empty path is unknown.
    A folder is named through the scrub with the harness's names."""
    withheld_episodes, withheld_series = read_withheld(project_meta)
    lines = []
    for series, status in sorted(set(series_status)):
        if status != "completed":
            lines.append(f"series {series}: {status}, not completed")
        elif series in withheld_series:
            lines.append(f"series {series}: withheld (meta/withheld.jsonl)")
    if runs_root.path and runs_root.root.is_dir():
        lines += [f"folder {skipped.name}: {skipped.reason}" for skipped in discover_series(runs_root.root, scrub_config(scrub_settings))[1]]
    lines += [f"episode {e}: withheld (meta/withheld.jsonl)" for e in sorted(withheld_episodes)]
    return lines


def series_statuses(episode_table: pl.DataFrame) -> list[tuple[str, str]]:
    return list(episode_table.select("series", "series_status").unique().iter_rows()) if episode_table.height else []


def left_out_text(lines: list[str]) -> str:
    return "\nleft out:\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


def refusal_text(reasons: list[str], not_published: list[str]) -> str:
    """Every reason publishing is refused, then what the plan would leave out."""
    return "publishing refused:\n" + "\n".join("- " + r.replace("\n", "\n  ") for r in reasons) \
        + left_out_text(not_published)


hub_release_spec = dg.AssetSpec(
    HUB_RELEASE, deps=[dataset_rows, dataset_episodes, dataset_card, dataset_meta], group_name="publish",
    kinds={"huggingface"},
    description="The dataset folder on the Hub, one commit per release. Materialized only by a release: the "
                "`publish` job (or `vae publish --yes`), refused unless every publish check's latest result "
                "passed; a dry run records no materialization (its plan is the run's output).")


@dg.op(name="hub_release", out=dg.Out(dg.Nothing, description="its metadata: the plan (and the release's address)"))
def hub_release(context: dg.OpExecutionContext, config: PublishConfig, hub_repo: HubRepo,
                dataset_folder: DatasetFolder, project_meta: ProjectMeta, runs_root: RunsRoot,
                scrub_settings: ScrubSettings, warehouse: Warehouse):
    """Send the files whose sha256 differs, in one commit, when every publish check passed; a
    release records `hub_release`'s materialization, a dry run only its plan."""
    stored = warehouse.table(dg.AssetKey("episode_table"), None)
    episode_table = read_table(stored) if exists(stored) else pl.DataFrame()
    yield from release(context, config, hub_repo, dataset_folder, project_meta, runs_root, scrub_settings, episode_table)


def release(context: dg.OpExecutionContext, config: PublishConfig, hub_repo: HubRepo, dataset_folder: DatasetFolder,
            project_meta: ProjectMeta, runs_root: RunsRoot, scrub_settings: ScrubSettings,
            episode_table: pl.DataFrame) -> Iterator:
    """The release itself: refused unless every publish check's latest result passed; the
    checks first, so a refusal names them whatever else is missing."""
    not_published = left_out(project_meta, series_statuses(episode_table), runs_root, scrub_settings)
    reasons = failing_publish_checks(context.instance)
    if reasons:
        raise dg.Failure(description=refusal_text(reasons, not_published),
                         metadata={"reasons": dg.MetadataValue.json(reasons),
                                   "left_out": dg.MetadataValue.json(not_published)})
    if not hub_repo.repo_id:
        raise dg.Failure(description="no dataset repository: start `vae ui` with --repo ORG/NAME (VAE_HUB_REPO), "
                                     "or use vae publish --repo")
    # the Hub client takes a fifth of a second to import: loaded by a release, not by every process
    # that loads the definitions
    from vae_pipeline.domain.dataset.publish import PublishError, execute_plan, format_plan, hub_api, plan_publish

    api = hub_api(hub_repo.endpoint or None)
    meta_files = published_meta_files(project_meta.root, rubric_file(project_meta))
    try:
        produced = produced_files(dataset_folder.root, meta_files)
        plan = plan_publish(dataset_folder.root, api, hub_repo.repo_id, produced)
        text = format_plan(plan) + left_out_text(not_published)
        if config.dry_run:
            context.log.info("dry run: nothing sent")
            yield dg.Output(None, metadata={"mode": "dry run", "plan": dg.MetadataValue.md(f"```\n{text}\n```")})
            return
        url = execute_plan(plan, api, hub_repo.repo_id, dataset_dir=dataset_folder.root,
                           create_pr=config.create_pr, message=config.message)
    except (PublishError, DatasetFolderError) as exc:
        raise dg.Failure(description=f"publishing failed: {exc}") from None
    sent = not plan.is_empty or plan.creates_repo
    metadata = {"mode": "unchanged" if not sent else "pull request" if config.create_pr else "commit",
                "url": dg.MetadataValue.url(url), "plan": dg.MetadataValue.md(f"```\n{text}\n```")}
    yield dg.AssetMaterialization(HUB_RELEASE, metadata=metadata)
    yield dg.Output(None, metadata=metadata)
