"""The DuckDB warehouse: a second writer waits for the first instead of failing."""

import subprocess
import sys

import polars as pl

from vae_pipeline.assets.dataset import store_in_duckdb
from vae_pipeline.storage.resources import SERIES_VERSIONS, Warehouse

HOLD = """
import sys, time
from vae_pipeline.storage.resources import Warehouse
con = Warehouse(path=sys.argv[1]).connect()
con.execute("CREATE TABLE IF NOT EXISTS labels_latest (id VARCHAR)")
print("locked", flush=True)
time.sleep(1.5)
con.close()
"""


def test_a_second_process_waits_for_the_writer(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with Warehouse(path=str(tmp_path)).connect() as con:  # would raise duckdb.IOException without waiting
        con.execute("INSERT INTO labels_latest VALUES ('a')")
        assert con.execute("SELECT count(*) FROM labels_latest").fetchone() == (1,)
    assert holder.wait(timeout=30) == 0


def _episode_rows(con) -> list[tuple]:
    return con.execute("SELECT * FROM episode_table ORDER BY series, id").fetchall()


def test_the_duckdb_episode_table_takes_only_the_rows_of_the_series_that_changed(tmp_path):
    """A build that changes one series replaces that series' rows in DuckDB, not every series'
    (a row of another series edited by hand stays as it is); new columns or a lost record of the
    series' versions write the whole table; a series no longer there loses its rows."""
    warehouse = Warehouse(path=str(tmp_path))
    first = pl.DataFrame({"series": ["s1", "s1", "s2", "s3"], "id": ["a", "b", "c", "d"], "label": ["PASS"] * 4})
    store_in_duckdb(warehouse, first)
    with warehouse.connect() as con:
        assert _episode_rows(con) == list(first.iter_rows())
        con.execute("UPDATE episode_table SET label = 'edited' WHERE id = 'a'")
    changed = first.with_columns(label=pl.when(pl.col("series") == "s2").then(pl.lit("FAIL")).otherwise("label"))
    with_new = pl.concat([changed, pl.DataFrame({"series": ["s4"], "id": ["e"], "label": ["PASS"]})])
    store_in_duckdb(warehouse, with_new)
    with warehouse.connect() as con:
        assert _episode_rows(con) == [("s1", "a", "edited"), ("s1", "b", "PASS"), ("s2", "c", "FAIL"),
                                      ("s3", "d", "PASS"), ("s4", "e", "PASS")]
    store_in_duckdb(warehouse, with_new.filter(pl.col("series") != "s3"))  # s3 gone
    with warehouse.connect() as con:
        assert [row[1] for row in _episode_rows(con)] == ["a", "b", "c", "e"]
    widened = with_new.with_columns(turns=pl.lit(3))
    store_in_duckdb(warehouse, widened)  # a new column: every row written again
    with warehouse.connect() as con:
        assert _episode_rows(con) == list(widened.sort("series", "id").iter_rows())
        con.execute("UPDATE episode_table SET label = 'edited' WHERE id = 'b'")
        con.execute(f"DROP TABLE {SERIES_VERSIONS}")  # as a bucket home's cache reloaded from the stored table
    store_in_duckdb(warehouse, widened)
    with warehouse.connect() as con:
        assert _episode_rows(con) == list(widened.sort("series", "id").iter_rows())
