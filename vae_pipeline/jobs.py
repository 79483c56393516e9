"""Jobs the sensors, the schedule and the UI launch."""

import dagster as dg

# Any subset of the graph but the release: the planner picks the stale assets of one series (or
# the unpartitioned ones) per run.
refresh_job = dg.define_asset_job(
    "refresh",
    selection=dg.AssetSelection.all() - dg.AssetSelection.assets("hub_release"),
    description="Materialize what is stale or missing (one series per run).",
)


# The blocking checks against the current files, then the release: a failing check stops it.
publish_job = dg.define_asset_job(
    "publish",
    selection=dg.AssetSelection.assets("hub_release")
    | dg.AssetSelection.checks_for_assets("dataset_episodes", "dataset_card"),
    description="Run the blocking checks and publish the dataset folder to the Hub in one commit.",
)

# Labels and everything downstream of them (not the release), for a backfill over every series
# after a rubric or gate change: nothing upstream of labels is recomputed.
rehost_job = dg.define_asset_job(
    "rehost",
    selection=dg.AssetSelection.assets("labels").downstream() - dg.AssetSelection.assets("hub_release"),
    description="Recompute every label from the stored answers (backfill over all series).",
)
