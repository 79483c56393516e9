"""Episodes are partitioned by series: a batch run together, added by the series sensor."""

import warnings
from collections.abc import Sequence

import dagster as dg
from sqlalchemy.exc import IntegrityError

SERIES = "series"
series_partitions = dg.DynamicPartitionsDefinition(name=SERIES)

# A backfill over many series is one run per stage, not one per series: every series-partitioned
# asset reads `context.partition_keys` and handles each series of its run in turn.
SERIES_BACKFILL = dg.BackfillPolicy.single_run()
# Dagster marks the `backfill_policy` parameter beta; it is what this project relies on, said once here.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)


def add_series(instance: dg.DagsterInstance, series: Sequence[str]) -> None:
    """Add `series` as partitions; another process (a sensor, a second build) adding some of them
    at the same moment is no error: Dagster inserts what it did not see, and the unique key
    refuses the duplicate, so read again and add only what is still missing."""
    for _attempt in range(3):
        known = set(instance.get_dynamic_partitions(SERIES))
        missing = [s for s in series if s not in known]
        if not missing:
            return
        try:
            instance.add_dynamic_partitions(SERIES, missing)
            return
        except IntegrityError:
            continue
    raise RuntimeError(f"could not add the series partitions {', '.join(series)}: other processes keep adding them")
