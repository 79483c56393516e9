"""Episodes are partitioned by series: a batch run together, added by the series sensor."""

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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


@contextmanager
def partitions_read_once(instance: dg.DagsterInstance) -> Iterator[None]:
    """While inside, `instance` answers the dynamic partitions from one read. Dagster's
    `add_asset_metadata(partition_key=...)` reads every partition of the run's definition three
    times a call to check the key is in the run's range (a query of all N series): called once per
    series of a ranged run, that is N^2 work (24 ms a call at 500 series). For the calls of one
    step or one in-process run, neither of which adds a partition. Inside another such scope,
    that scope's read serves."""
    if "get_dynamic_partitions" in vars(instance):
        yield
        return
    known: dict[str, list[str]] = {}

    def partitions(partitions_def_name: str) -> Sequence[str]:
        if partitions_def_name not in known:
            known[partitions_def_name] = list(type(instance).get_dynamic_partitions(instance, partitions_def_name))
        return known[partitions_def_name]

    def has_partition(partitions_def_name: str, partition_key: str) -> bool:
        return partition_key in partitions(partitions_def_name)

    instance.get_dynamic_partitions = partitions
    instance.has_dynamic_partition = has_partition
    try:
        yield
    finally:
        del instance.get_dynamic_partitions
        del instance.has_dynamic_partition
