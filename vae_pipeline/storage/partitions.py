"""Episodes are partitioned by series: a batch run together, added by the series sensor."""

import warnings

import dagster as dg

SERIES = "series"
series_partitions = dg.DynamicPartitionsDefinition(name=SERIES)

# A backfill over many series is one run per stage, not one per series: every series-partitioned
# asset reads `context.partition_keys` and handles each series of its run in turn.
SERIES_BACKFILL = dg.BackfillPolicy.single_run()
# Dagster marks the `backfill_policy` parameter beta; it is what this project relies on, said once here.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)
