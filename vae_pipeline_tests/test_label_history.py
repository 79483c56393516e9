"""Label history: two processes labelling the same series at once never duplicate or lose a change."""

import json
import multiprocessing
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from upath import UPath

from vae_pipeline.assets.dataset import store_in_duckdb
from vae_pipeline.assets.labels import (
    LABELS_SCHEMA,
    latest_state,
    latest_states,
    listed_generations,
    record_labels,
)
from vae_pipeline.storage.resources import Warehouse

SERIES = "2026-10-21-s1"


def _labels(mapping: dict[str, str], previous: dict[str, dict], now: str) -> pl.DataFrame:
    """A labels frame with `mapping`'s labels and the history columns carried from `previous`."""
    rows = []
    for episode_id, label in sorted(mapping.items()):
        before = previous.get(episode_id)
        changed = before is not None and before["label"] != label
        rows.append({"id": episode_id, "label": label, "host_rubric_version": "1.0",
                     "rehosted_at": now if changed else (before or {}).get("rehosted_at"),
                     "previous_final_label": before["label"] if changed else (before or {}).get("previous_final_label")})
    return pl.DataFrame(rows, schema=LABELS_SCHEMA)


def _relabel(home: str, scratch: str, barrier, mapping: dict[str, str], calls) -> None:
    """In a process of its own: relabel the series; the first computation waits at the barrier
    until the other process has read the same state, so both race to write the same generation."""
    def compute(previous: dict[str, dict]) -> pl.DataFrame:
        with calls.get_lock():
            calls.value += 1
            first = calls.value <= 2
        if first:
            barrier.wait(timeout=60)
        return _labels(mapping, previous, "2026-12-01T00:00:00Z")

    record_labels(Warehouse(path=home, scratch_path=scratch), SERIES, compute, "2026-12-01T00:00:00Z")


@pytest.fixture(params=["folder", "bucket"])
def home(request, tmp_path: Path) -> str:
    """VAE_HOME on disk, or on a bucket of the test S3 server (If-None-Match: * then decides)."""
    if request.param == "folder":
        return str(tmp_path)
    request.getfixturevalue("s3_environ")  # inherited by the processes spawned below
    return f"s3://{request.getfixturevalue('make_bucket')()}/home"


def test_two_processes_relabelling_the_same_series_record_each_change_once(home: str, tmp_path: Path):
    warehouse = Warehouse(path=home, scratch_path=str(tmp_path / "scratch"))
    first = {"a": "PASS", "b": "FAIL", "c": "PASS_WITH_NITS"}
    record_labels(warehouse, SERIES, lambda previous: _labels(first, previous, "2026-11-30T00:00:00Z"),
                  "2026-11-30T00:00:00Z")
    rehosted = {"a": "PASS_WITH_NITS", "b": "FAIL", "c": "PASS"}
    spawn = multiprocessing.get_context("spawn")
    barrier, calls = spawn.Barrier(2), spawn.Value("i", 0)
    workers = [spawn.Process(target=_relabel, args=(home, str(tmp_path / f"scratch-{n}"), barrier, rehosted, calls))
               for n in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    # both computed from the same state; one wrote the next generation, the other computed again
    # from it (three computations) and found nothing left to record
    assert calls.value == 3
    assert sorted(p.name for p in UPath(home, "label_state", SERIES).iterdir()) == ["00000001.parquet",
                                                                                  "00000002.parquet"]
    with warehouse.connect() as con:  # the table `connect` brings up to date, on disk and on a bucket
        history = con.execute("SELECT id, old_label, new_label FROM label_history ORDER BY id")
        assert history.fetchall() == [("a", "PASS", "PASS_WITH_NITS"), ("c", "PASS_WITH_NITS", "PASS")]


def test_a_moved_or_copied_home_reads_its_own_label_history(tmp_path: Path):
    """The database names the label generations it read relative to VAE_HOME, by their identity."""
    first, moved, copied = tmp_path / "first", tmp_path / "moved", tmp_path / "copied"
    warehouse = Warehouse(path=str(first))
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "PASS"}, previous, "2026-11-30T00:00:00Z"),
                  "2026-11-30T00:00:00Z")
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "FAIL"}, previous, "2026-12-01T00:00:00Z"),
                  "2026-12-01T00:00:00Z")
    store_in_duckdb(warehouse, pl.DataFrame({"id": ["a"]}))
    with warehouse.connect() as con:
        read = con.execute("SELECT name FROM label_history_read ORDER BY name").fetchall()
    assert read == [(f"{SERIES}/00000001.parquet",), (f"{SERIES}/00000002.parquet",)]
    shutil.move(first, moved)
    shutil.copytree(moved, copied)
    # a change recorded only in the copy
    record_labels(Warehouse(path=str(copied)), SERIES,
                  lambda previous: _labels({"a": "PASS"}, previous, "2026-12-02T00:00:00Z"), "2026-12-02T00:00:00Z")
    for home, expected in ((moved, [("a", "PASS", "FAIL")]), (copied, [("a", "PASS", "FAIL"), ("a", "FAIL", "PASS")])):
        with Warehouse(path=str(home)).connect() as con:
            rows = con.execute("SELECT id, old_label, new_label FROM label_history ORDER BY changed_at").fetchall()
        assert rows == expected, home


def test_the_last_generations_of_many_series_read_together_are_each_series_own(home: str, tmp_path: Path):
    """What a run over many series reads of their last generations at once is, for each series,
    the labels its own last `record_labels` recorded (and nothing for a series never labelled)."""
    warehouse = Warehouse(path=home, scratch_path=str(tmp_path / "scratch"))
    expected = {}
    for n, relabels in enumerate((1, 3, 2)):
        series = f"2026-10-2{n}-s{n}"
        for generation in range(relabels):
            mapping = {f"{series}-e{k}": ("PASS", "FAIL")[(k + generation) % 2] for k in range(n + 2)}
            now = f"2026-12-0{generation + 1}T00:00:00Z"
            record_labels(warehouse, series, lambda previous, m=mapping, t=now: _labels(m, previous, t), now)
        expected[series] = (relabels, {episode: label for episode, label in mapping.items()})
    never = "2026-10-29-s9"
    listed = listed_generations(warehouse)
    found = latest_states(warehouse, {series: listed.get(series, {}) for series in [*expected, never]})
    assert found[never] == (0, {})
    for series, (generation, labels) in expected.items():
        assert found[series][0] == generation
        assert {episode: state["label"] for episode, state in found[series][1].items()} == labels
        assert found[series] == latest_state(warehouse, series)


def test_a_database_holding_the_label_history_as_a_view_holds_it_as_a_table_after_one_connection(tmp_path: Path):
    """A warehouse an earlier version made, whose `label_history` is a view over the generations'
    files: the next connection replaces it with the table, holding the same rows, and a generation
    recorded later is in it at the next connection."""
    import duckdb

    warehouse = Warehouse(path=str(tmp_path))
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "PASS"}, previous, "2026-11-30T00:00:00Z"),
                  "2026-11-30T00:00:00Z")
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "FAIL"}, previous, "2026-12-01T00:00:00Z"),
                  "2026-12-01T00:00:00Z")
    with duckdb.connect(str(warehouse.database)) as con:  # as the earlier version wrote it
        con.execute(f"SET file_search_path = '{tmp_path.as_posix()}'")
        con.execute("CREATE VIEW label_history AS SELECT series, id, old_label, label AS new_label, "
                    "host_rubric_version, changed_at FROM read_parquet('label_state/*/*.parquet') WHERE changed")
    with warehouse.connect() as con:
        kind = con.execute("SELECT table_type FROM information_schema.tables "
                           "WHERE table_name = 'label_history'").fetchall()
        rows = con.execute("SELECT id, old_label, new_label FROM label_history").fetchall()
    assert kind == [("BASE TABLE",)]
    assert rows == [("a", "PASS", "FAIL")]
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "PASS"}, previous, "2026-12-02T00:00:00Z"),
                  "2026-12-02T00:00:00Z")
    with warehouse.connect() as con:
        rows = con.execute("SELECT id, old_label, new_label FROM label_history ORDER BY changed_at").fetchall()
    assert rows == [("a", "PASS", "FAIL"), ("a", "FAIL", "PASS")]


def test_a_label_generation_that_cannot_be_read_is_named_relative_to_the_home(tmp_path: Path):
    """A damaged generation fails the connection with its name under label_state/, never the
    home's own path (which may name the user)."""
    home = tmp_path / "home-of-alice"
    warehouse = Warehouse(path=str(home))
    record_labels(warehouse, SERIES, lambda previous: _labels({"a": "PASS"}, previous, "2026-11-30T00:00:00Z"),
                  "2026-11-30T00:00:00Z")
    (home / "label_state" / SERIES / "00000002.parquet").write_bytes(b"not parquet")
    with pytest.raises(RuntimeError) as raised:
        warehouse.connect()
    assert f"label_state/{SERIES}/00000002.parquet" in str(raised.value)
    assert "home-of-alice" not in str(raised.value) and str(tmp_path) not in str(raised.value)


WAREHOUSE_READS = """
import json, sys
import dagster as dg
import polars as pl
from vae_pipeline.assets.dataset import store_in_duckdb
from vae_pipeline.assets.labels import record_labels
from vae_pipeline.cli.common import episode_table_rows
from vae_pipeline.storage.io_manager import parquet_bytes
from vae_pipeline.storage.resources import Warehouse, sql_text
from vae_pipeline_tests.test_label_history import SERIES, _labels

home, scratch = sys.argv[1:]
warehouse = Warehouse(path=home, scratch_path=scratch)
for now, label in (("2026-12-01T00:00:00Z", "PASS"), ("2026-12-02T00:00:00Z", "FAIL")):
    record_labels(warehouse, SERIES, lambda previous, l=label, t=now: _labels({"it's-e1": l}, previous, t), now)
table = pl.DataFrame({"series": [SERIES], "id": ["it's-e1"], "valid": [True]})
warehouse.table(dg.AssetKey("episode_table"), None).parent.mkdir(parents=True, exist_ok=True)
warehouse.table(dg.AssetKey("episode_table"), None).write_bytes(parquet_bytes(table))
store_in_duckdb(warehouse, table)
fresh = Warehouse(path=home, scratch_path=scratch + " again")  # on a bucket: a cache loaded from the stored table
episode = "it's-e1"
rows = episode_table_rows(fresh, f"SELECT id FROM episode_table WHERE id = {sql_text(episode)} AND valid")
with fresh.connect() as con:
    history = con.execute("SELECT id, old_label, new_label FROM label_history").fetchall()
print(json.dumps({"rows": rows, "history": history, "pandas": "pandas" in sys.modules}))
"""


def test_the_warehouse_reads_values_with_quotes_and_never_imports_pandas(home: str, tmp_path: Path):
    """DuckDB imports pandas (0.7 s) in a process that hands it a Python parameter or object: the
    warehouse writes its values into the statement, quoted, and reads files by their paths."""
    if home == str(tmp_path):
        home = str(tmp_path / "it's home")  # a quote in every path DuckDB is given
    done = subprocess.run([sys.executable, "-c", WAREHOUSE_READS, home, str(tmp_path / "it's scratch")],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"rows": [["it's-e1"]], "history": [["it's-e1", "PASS", "FAIL"]],
                                       "pandas": False}


def test_a_stored_episode_table_that_cannot_be_read_is_named_not_by_the_scratch_path(s3_environ, make_bucket,
                                                                                   tmp_path: Path):
    """On a bucket DuckDB reads the stored table from a copy in this machine's scratch folder: its
    error names the table in the home, never that folder (which may name the user)."""
    home = f"s3://{make_bucket()}/home"
    scratch = tmp_path / "users-own-scratch"
    warehouse = Warehouse(path=home, scratch_path=str(scratch))
    stored = warehouse.table(dg.AssetKey("episode_table"), None)
    stored.write_bytes(b"not a parquet file")
    with pytest.raises(RuntimeError) as raised:
        warehouse.connect()
    assert "tables/episode_table/table.parquet" in str(raised.value)
    assert str(scratch) not in str(raised.value) and "users-own-scratch" not in str(raised.value)
