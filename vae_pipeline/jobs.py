"""Jobs the sensors, the schedule and the UI launch."""

import dagster as dg

# Any subset of the graph: the planner picks the stale assets of one series (or the
# unpartitioned ones) per run.
refresh_job = dg.define_asset_job("refresh", selection=dg.AssetSelection.all(),
                                  description="Materialize what is stale or missing (one series per run).")
