"""Jobs the sensors, the schedule and the UI launch."""

import dagster as dg

from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS

# Any subset of the graph but the release: the planner picks the stale assets of a range of series
# (or the unpartitioned ones) per run.
refresh_job = dg.define_asset_job(
    "refresh",
    selection=dg.AssetSelection.all() - dg.AssetSelection.assets("hub_release"),
    description="Materialize what is stale or missing (a stage over many series per run).",
)


# The blocking checks against the current files, then the release: a failing check stops it.
publish_job = dg.define_asset_job(
    "publish",
    selection=dg.AssetSelection.assets("hub_release")
    | dg.AssetSelection.checks_for_assets("dataset_episodes", "dataset_card"),
    description="Run the blocking checks and publish the dataset folder to the Hub in one commit.",
)

# The rubric in force, labels and everything downstream of them, for a backfill over every series
# after a rubric or gate change: nothing upstream of labels is recomputed. `rubric` is in it so
# that the rubric set when the run starts (VAE_RUBRIC_VERSION) is the one labels use. Not the
# release, and not the blocking checks: they block publishing, not a rehost that did its work
# (`vae publish` runs them against the files).
rehost_job = dg.define_asset_job(
    "rehost",
    selection=dg.AssetSelection.assets("rubric").downstream()
    - dg.AssetSelection.assets("hub_release") - dg.AssetSelection.checks(*PUBLISH_CHECKS),
    description="Recompute every label from the stored answers under the rubric in force (backfill over all series).",
)
