"""`episode_table` (every series, in DuckDB and Parquet) and `dataset_rows` (the published rows)."""

import dagster as dg
import duckdb
import polars as pl

from vae_pipeline.assets.metadata import markdown_table
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import files_version, scratch_file
from vae_pipeline.domain.objects import write_if_changed
from vae_pipeline.domain.dataset.rows import dataset_frame, load_withheld, publishable
from vae_pipeline.domain.table_versions import content_version, series_versions
from vae_pipeline.storage.io_manager import parquet_bytes, stored_series_tables, stored_table
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.resources import (
    SERIES_VERSIONS,
    DatasetFolder,
    ProjectMeta,
    Warehouse,
    parquet_scan,
    sql_text,
    table_names,
)
from vae_pipeline.storage.versions import (
    cached_latest,
    frame_version,
    outdated_stages,
    record_metadata,
    written_source,
)

WITHHELD = "withheld.jsonl"


VERSIONS_SCHEMA = {"series": pl.String, "version": pl.String, "columns": pl.String}


def store_in_duckdb(warehouse: Warehouse, table: pl.DataFrame) -> None:
    """Bring DuckDB's `episode_table` to `table` in one transaction (readers see the old or the
    new); `connect` brings `label_history` up to date.

    Only the rows of the series whose version (`series_versions`, kept beside the table in
    SERIES_VERSIONS) changed are replaced: a new series costs its own rows, not a copy of every
    series. The whole table is written when its columns changed or the versions are not there.
    Rows go through a Parquet file, not a Python object (`sql_text` says why)."""
    versions = series_versions(table) if "series" in table.columns else None
    columns = content_version(str(table.schema))
    with warehouse.connect() as con, scratch_file(warehouse.database) as rows:
        con.execute("BEGIN")
        held = _held_versions(con, columns) if versions is not None else None
        replaced = sorted({s for s in versions if held.get(s) != versions[s]} | (set(held) - set(versions))) \
            if held is not None else []
        if held is None:
            table.write_parquet(rows)
            con.execute(f"CREATE OR REPLACE TABLE episode_table AS SELECT * FROM {parquet_scan([rows])}")
            con.execute(f"DROP TABLE IF EXISTS {SERIES_VERSIONS}")
        elif replaced:
            con.execute(f"DELETE FROM episode_table WHERE series IN ({', '.join(map(sql_text, replaced))})")
            incoming = table.filter(pl.col("series").is_in(replaced))
            if incoming.height:
                incoming.write_parquet(rows)
                con.execute(f"INSERT INTO episode_table SELECT * FROM {parquet_scan([rows])}")
        if versions is not None and (held is None or replaced):
            pl.DataFrame({"series": list(versions), "version": list(versions.values()), "columns": columns},
                         schema=VERSIONS_SCHEMA).write_parquet(rows)
            con.execute(f"CREATE OR REPLACE TABLE {SERIES_VERSIONS} AS SELECT * FROM {parquet_scan([rows])}")
        con.execute("COMMIT")


def _held_versions(con: duckdb.DuckDBPyConnection, columns: str) -> dict[str, str] | None:
    """Each series' version as DuckDB's `episode_table` holds it; None when the table or the
    versions are missing or were written with other columns (the whole table is then written)."""
    if not {"episode_table", SERIES_VERSIONS} <= table_names(con):
        return None
    rows = con.execute(f"SELECT series, version, columns FROM {SERIES_VERSIONS}").fetchall()
    if not rows or any(held != columns for _, _, held in rows):
        return None
    return {series: version for series, version, _ in rows}


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
    latest = cached_latest(context.instance)  # the upstream materializations, looked up once for the step
    outdated = outdated_stages(context.instance, sorted(context.instance.get_dynamic_partitions(SERIES)),
                               SERIES_STAGES, latest)
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
        **record_metadata(context, latest=latest),
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


@dg.asset(code_version="dataset_rows-2", group_name="dataset", kinds={"parquet"}, deps=["episode_table"])
def dataset_rows(context: dg.AssetExecutionContext, project_meta: ProjectMeta, dataset_folder: DatasetFolder,
                 warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """`episodes.jsonl` and `data/episodes.parquet`: valid episodes of completed series, by id."""
    episode_table = stored_table(warehouse, "episode_table", context.instance)
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
        **record_metadata(context, written_source(withheld_source(project_meta), dataset_folder.source())),
    })
