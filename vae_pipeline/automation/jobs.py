"""Jobs the sensors, the schedule and the UI launch."""

import dagster as dg

from vae_pipeline.assets.hub_release import PUBLISH_JOB

# Any subset of the graph but the release: the planner picks the stale assets of a range of series
# (or the unpartitioned ones) per run.
refresh_job = dg.define_asset_job(
    "refresh",
    selection=dg.AssetSelection.all() - dg.AssetSelection.assets("hub_release"),
    description="Materialize what is stale or missing (a stage over many series per run).",
)


# The publish checks against the current files, then the release, which refuses unless every
# check passed in this run. In-process whatever VAE_EXECUTOR says: the release must start after
# the checks have finished (hub_release's step has the lowest priority), and these steps are short.
publish_job = dg.define_asset_job(
    PUBLISH_JOB,
    selection=dg.AssetSelection.assets("hub_release")
    | dg.AssetSelection.checks_for_assets("dataset_episodes", "dataset_card"),
    executor_def=dg.in_process_executor,
    description="Run the publish checks, then publish the dataset folder to the Hub in one commit "
                "(refused unless every check passed in this run).",
)

# The rubric in force, labels and everything downstream of them (the review site and the publish
# checks included), for a backfill over every series after a rubric or gate change: nothing
# upstream of labels is recomputed. `rubric` is in it so that the rubric set when the run starts
# (VAE_RUBRIC_VERSION) is the one labels use. Not the release. The checks fail no run: the rehost
# ends green when it did its work, and the checks' results say whether the release may go.
rehost_job = dg.define_asset_job(
    "rehost",
    selection=dg.AssetSelection.assets("rubric").downstream() - dg.AssetSelection.assets("hub_release"),
    description="Recompute every label from the stored answers under the rubric in force (backfill over all "
                "series), then everything downstream: rows, card, review site and the publish checks.",
)
