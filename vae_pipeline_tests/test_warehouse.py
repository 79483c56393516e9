"""The DuckDB warehouse: a second writer waits for the first instead of failing."""

import subprocess
import sys

from vae_pipeline.storage.resources import Warehouse

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
