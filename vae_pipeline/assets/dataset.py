"""`episode_table` (every series, in DuckDB and Parquet) and `dataset_rows` (the published rows)."""

import dagster as dg
import polars as pl

from vae_pipeline.assets.labels import label_history_view
from vae_pipeline.assets.metadata import markdown_table
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.objects import write_if_changed
from vae_pipeline.domain.dataset.rows import dataset_frame, load_withheld, publishable
from vae_pipeline.storage.io_manager import parquet_bytes, stored_series_tables
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, Warehouse
from vae_pipeline.storage.versions import (
    frame_version,
    outdated_stages,
    record_metadata,
)

WITHHELD = "withheld.jsonl"


def store_in_duckdb(warehouse: Warehouse, table: pl.DataFrame) -> None:
    """Replace the `episode_table` table in one transaction (readers see the old or the new), and
    point the `label_history` view at the label generations' Parquet files."""
    history = label_history_view(warehouse)
    with warehouse.connect() as con:
        con.execute("BEGIN")
        con.register("incoming", table.to_arrow())
        con.execute("CREATE OR REPLACE TABLE episode_table AS SELECT * FROM incoming")
        if history is not None:
            con.execute(f"CREATE OR REPLACE VIEW label_history AS {history}")
        con.execute("COMMIT")


# A later stage's error column, and the file it names: any error of a stage on one episode makes
# that episode (and only it) invalid. The episode's folder or archive when no one file is to blame.
STAGE_ERRORS = {"render_error": pl.lit("out.mp4"), "label_error": pl.col("source"), "bundle_error": pl.col("source")}


def join_stages(episodes: pl.DataFrame, *stages: pl.DataFrame) -> pl.DataFrame:
    """One row per episode with every stage's columns; a bad judge.json, an error of a later
    stage or an archive that cannot be bundled makes the episode invalid."""
    if not episodes.height:
        return episodes
    table = episodes
    for stage in stages:
        if stage.height:
            table = table.join(stage, on=["series", "id"], how="left", suffix="_dup")
    table = table.drop([c for c in table.columns if c.endswith("_dup")])
    # an id is the dataset's key: the same id in a later series is a duplicate, not a second row
    repeated = pl.col("valid") & (pl.col("id").cum_count().over("id", order_by="series") > 1)
    table = table.with_columns(
        error_file=pl.when(repeated).then(pl.col("source")).otherwise(pl.col("error_file")),
        error_reason=pl.when(repeated).then(pl.lit("duplicate episode id: already in an earlier series"))
        .otherwise(pl.col("error_reason")),
    ).with_columns(valid=pl.col("valid") & ~repeated)
    if "judge_valid" in table.columns:
        bad_judge = pl.col("judge_valid").fill_null(True).not_()
        table = table.with_columns(
            valid=pl.col("valid") & ~bad_judge,
            error_file=pl.when(bad_judge).then(pl.col("judge_error_file")).otherwise(pl.col("error_file")),
            error_line=pl.when(bad_judge).then(pl.col("judge_error_line")).otherwise(pl.col("error_line")),
            error_reason=pl.when(bad_judge).then(pl.col("judge_error_reason")).otherwise(pl.col("error_reason")),
        )
    for column, file in STAGE_ERRORS.items():
        if column not in table.columns:
            continue
        failed = pl.col("valid") & pl.col(column).is_not_null()
        table = table.with_columns(
            error_file=pl.when(failed).then(file).otherwise(pl.col("error_file")),
            error_line=pl.when(failed).then(None).otherwise(pl.col("error_line")),
            error_reason=pl.when(failed).then(pl.col(column)).otherwise(pl.col("error_reason")),
        ).with_columns(valid=pl.col("valid") & pl.col(column).is_null())
    return table.with_columns(
        video=pl.when(pl.col("valid") & pl.col("delivered")).then(pl.format("videos/{}.mp4", pl.col("id"))),
    ).sort("series", "id")


SERIES_STAGES = [dg.AssetKey(name) for name in ("renders", "verdicts", "labels", "bundles")]
JOINED = ("episodes", "renders", "verdicts", "labels", "bundles")  # the stages episode_table joins, in order


def stage_tables(context: dg.AssetExecutionContext, warehouse: Warehouse, stages: tuple[str, ...]
                 ) -> list[pl.DataFrame]:
    """Every series' stored table of each of `stages` (one table per stage), reading only the
    files changed since this asset last read them; a series whose table is missing fails the
    step, naming the stage and the series (as loading them as inputs would)."""
    series = sorted(context.instance.get_dynamic_partitions(SERIES))
    if not series:
        return [pl.DataFrame() for _ in stages]
    tables, faults = stored_series_tables(warehouse, context.asset_key.to_user_string(), dict.fromkeys(stages),
                                          series)
    for stage in stages:
        missing = [s for s in series if f"{stage} missing" in faults.get(s, ())]
        if missing:
            raise dg.Failure(description=f"{stage} has not been materialized for series {', '.join(missing)}: "
                                         "materialize it for them first")
    return [tables[stage] for stage in stages]


@dg.asset(code_version="episode_table-1", group_name="dataset", kinds={"duckdb", "parquet"},
          pool="warehouse", deps=JOINED)  # vae_pipeline.engines.pools
def episode_table(context: dg.AssetExecutionContext, warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """Every episode of every series, valid or not, joined across the stages; also in DuckDB.

    Refuses (naming the series and the stage) when a series' stage is missing or older than the
    upstream stages it is made from: the rows would read as unjudged or without archives."""
    outdated = outdated_stages(context.instance, sorted(context.instance.get_dynamic_partitions(SERIES)),
                               SERIES_STAGES)
    if outdated:
        raise dg.Failure(description=f"{len(outdated)} series stage(s) missing or out of date: "
                                     f"{'; '.join(outdated[:20])}. Materialize them first (vae build does).")
    table = join_stages(*stage_tables(context, warehouse, JOINED))
    store_in_duckdb(warehouse, table)
    invalid = table.filter(~pl.col("valid")) if table.height else table
    return dg.Output(table, data_version=frame_version(table), metadata={
        "episodes": table.height,
        "series": table["series"].n_unique() if table.height else 0,
        "invalid": invalid.height,
        "duckdb": dg.MetadataValue.path(str(warehouse.database)),
        "invalid_preview": markdown_table(invalid, ("series", "id", "error_file", "error_line", "error_reason")),
        **record_metadata(context),
    })


def withheld_source(project_meta: ProjectMeta) -> str:
    return files_version([project_meta.root / WITHHELD])


def jsonl_bytes(frame: pl.DataFrame) -> bytes:
    return frame.write_ndjson().encode()



def read_withheld(project_meta: ProjectMeta) -> tuple[set[str], set[str]]:
    try:
        withheld_episodes, withheld_series, _ = load_withheld(project_meta.root / WITHHELD)
    except BadInput as exc:
        raise dg.Failure(description=f"meta/{exc}") from None
    return withheld_episodes, withheld_series


@dg.asset(code_version="dataset_rows-2", group_name="dataset", kinds={"parquet"})
def dataset_rows(context: dg.AssetExecutionContext, project_meta: ProjectMeta,
                 dataset_folder: DatasetFolder, episode_table: pl.DataFrame) -> dg.Output[pl.DataFrame]:
    """`episodes.jsonl` and `data/episodes.parquet`: valid episodes of completed series, by id."""
    withheld_episodes, withheld_series = read_withheld(project_meta)
    published = publishable(episode_table, withheld_episodes, withheld_series) if episode_table.height \
        else episode_table
    rows = dataset_frame(published)
    write_if_changed(dataset_folder.root / "episodes.jsonl", jsonl_bytes(rows))
    write_if_changed(dataset_folder.root / "data" / "episodes.parquet", parquet_bytes(rows))
    return dg.Output(rows, data_version=frame_version(rows), metadata={
        "rows": rows.height,
        "series": dg.MetadataValue.json(sorted(set(rows["series"].to_list()))),
        "preview": markdown_table(rows, ("id", "series", "family", "aspect", "label", "turns", "video_ok")),
        **record_metadata(context, withheld_source(project_meta)),
    })
