"""Jobs the sensors, the schedule and the UI launch."""

import dagster as dg

from vae_pipeline.assets.hub_release import hub_release
from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS_JOB, PUBLISH_JOB

# Any subset of the graph (the release is not one: only the `publish` job materializes
# `hub_release`): the planner picks the stale assets of a range of series (or the unpartitioned
# ones) per run.
refresh_job = dg.define_asset_job(
    "refresh",
    selection=dg.AssetSelection.all(),
    description="Materialize what is stale or missing (a stage over many series per run).",
)


# The publish checks against the current files: a failing one fails no run (Dagster calls them
# non-blocking); each result is recorded on its asset, and the release goes by them.
publish_checks_job = dg.define_asset_job(
    PUBLISH_CHECKS_JOB,
    selection=dg.AssetSelection.checks_for_assets("dataset_episodes", "dataset_card"),
    description="Run the publish checks against the current files, without rebuilding anything (what `vae "
                "publish` runs first). A failing check fails no run: it shows red on its asset and refuses the "
                "release.",
)


# In-process whatever VAE_EXECUTOR says: one short step, run where it is launched.
@dg.job(name=PUBLISH_JOB, executor_def=dg.in_process_executor,
        description="Publish the dataset folder to the Hub in one commit (a dry run unless `dry_run: false`). "
                    "Refused, naming every reason, unless every publish check's latest result passed and is newer "
                    "than its asset's last materialization: run `publish_checks` first (as `vae publish` does) "
                    "to check the current files.")
def publish_job():
    hub_release()


# The rubric in force, labels and everything downstream of them (the review site and the publish
# checks included), for a backfill over every series after a rubric or gate change: nothing
# upstream of labels is recomputed. `rubric` is in it so that the rubric set when the run starts
# (VAE_RUBRIC_VERSION) is the one labels use. Not the release. The checks fail no run: the rehost
# ends green when it did its work, and the checks' results say whether the release may go.
rehost_job = dg.define_asset_job(
    "rehost",
    selection=dg.AssetSelection.assets("rubric").downstream().materializable(),
    description="Recompute every label from the stored answers under the rubric in force (backfill over all "
                "series), then everything downstream: rows, card, review site and the publish checks.",
)
