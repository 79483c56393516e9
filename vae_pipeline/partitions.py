"""Episodes are partitioned by series: a batch run together, added by the series sensor."""

import dagster as dg

SERIES = "series"
series_partitions = dg.DynamicPartitionsDefinition(name=SERIES)
