"""Where data and its versions live: the resources for the outside world, the Parquet IO manager, the series partitions
and the data versions every materialization records."""
