"""Reading every series' tables costs the files changed since the last read, and gives what
reading every file gives; the runs root's fingerprint reads each file's metadata once."""

import hashlib
import os
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from upath import UPath

from vae_pipeline.assets.labels import label_problems
from vae_pipeline.assets.renders import facts_problems
from vae_pipeline.domain.episodes import fingerprints
from vae_pipeline.domain.episodes.fingerprints import series_fingerprint, series_fingerprints
from vae_pipeline.domain.objects import listing, listings_held
from vae_pipeline.storage import io_manager
from vae_pipeline.storage.io_manager import parquet_bytes, stored_series_tables
from vae_pipeline.storage.resources import RunsRoot, Warehouse


def _store(home: Path, stage: str, series: str, frame: pl.DataFrame) -> None:
    path = home / "tables" / stage / f"{series}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(parquet_bytes(frame))
    os.replace(tmp, path)  # as the IO manager writes: a new file under the name


def _reads(monkeypatch) -> list[str]:
    """The stage files read (the reader's own copy is read alone, not through `read_tables`)."""
    seen: list[str] = []
    original = io_manager.read_tables

    def counting(paths, found=None):
        seen.extend(Path(str(path)).stem for path in paths.values())
        return original(paths, found)

    monkeypatch.setattr(io_manager, "read_tables", counting)
    return seen


def _same(got: pl.DataFrame, expected: pl.DataFrame) -> bool:
    """The same rows in the same order, and the same columns in the same order with the same types."""
    return got.schema == expected.schema and got.equals(expected)


def test_tables_read_together_are_each_file_as_read_alone(tmp_path):
    """Files of different schemas (columns in another order, a column of nulls typed Null, one
    more column, no rows) and a missing one: each key gets what a read of its file alone gives,
    in the order asked, and the missing key is said."""
    home = tmp_path / "home"
    base = pl.DataFrame({"id": ["a", "b", "c"], "n": [1, 2, 3], "s": ["x", None, "z"]})
    frames = {"s0": base, "s1": base.with_columns(id=pl.lit("d")), "s2": base.select("n", "id", "s"),
              "s3": base.with_columns(s=pl.lit(None)), "s4": base.with_columns(extra=pl.lit(1.5)),
              "s5": base.clear(), "s6": base.tail(1)}
    for series, frame in frames.items():
        _store(home, "stage", series, frame)
    every = ["s6", "s3", "gone", "s0", "s5", "s2", "s1", "s4"]
    # all at once, and each kind of file after and before one of the base schema
    for asked in [every, *([first, then] for other in frames if other != "s0"
                           for first, then in (("s0", other), (other, "s0")))]:
        paths = {s: UPath(home / "tables" / "stage" / f"{s}.parquet") for s in asked}
        tables, missing = io_manager.read_tables(paths)
        assert missing == [s for s in asked if s == "gone"] and list(tables) == [s for s in asked if s != "gone"]
        for series, table in tables.items():
            assert _same(table, pl.read_parquet(home / "tables" / "stage" / f"{series}.parquet")), (asked, series)
            assert _same(table, frames[series]), (asked, series)


@pytest.mark.parametrize("replace, remove", [(True, False), (False, True), (True, True)])
def test_a_table_replaced_or_removed_while_they_are_read_is_read_as_it_is_then(tmp_path, monkeypatch, replace, remove):
    """Another writer replaces one file with a table of other columns, or removes another, after
    their schemas were read: the replaced key gets the new table, the removed one is said missing."""
    home = tmp_path / "home"
    base = pl.DataFrame({"id": ["a", "b"], "n": [1, 2]})
    for series in ("s0", "s1", "s2"):
        _store(home, "stage", series, base)
    replaced = pl.DataFrame({"n": [7.5], "id": ["z"], "note": ["new"]})
    schema_of = pl.read_parquet_schema

    def racing(path):
        schema = schema_of(path)
        if Path(path).stem == "s2":  # the last schema read: then the other writer acts
            if replace:
                _store(home, "stage", "s0", replaced)
            if remove:
                (home / "tables" / "stage" / "s1.parquet").unlink()
        return schema

    monkeypatch.setattr(io_manager.pl, "read_parquet_schema", racing)
    tables, missing = io_manager.read_tables({s: UPath(home / "tables" / "stage" / f"{s}.parquet")
                                              for s in ("s0", "s1", "s2")})
    assert missing == (["s1"] if remove else [])
    assert list(tables) == (["s0", "s2"] if remove else ["s0", "s1", "s2"])
    assert _same(tables["s0"], replaced if replace else base) and _same(tables["s2"], base)


def _parquet_reads(monkeypatch) -> list[str]:
    """The Parquet files read whole (a table of an unpartitioned asset on disk)."""
    reads: list[str] = []
    original = pl.read_parquet

    def counting(source, *args, **kwargs):
        reads.append(str(source))
        return original(source, *args, **kwargs)

    monkeypatch.setattr(pl, "read_parquet", counting)
    return reads


def test_an_unpartitioned_table_is_read_once_a_process_until_its_file_is_replaced(tmp_path, monkeypatch):
    """The roll-ups downstream of one table each load it: one read a process serves them all, and
    the file written again since (by this build or another process), even to the same size, is
    read again."""
    reads = _parquet_reads(monkeypatch)
    first, second = pl.DataFrame({"id": ["a", "b"], "n": [1, 2]}), pl.DataFrame({"id": ["a", "b"], "n": [2, 1]})
    assert len(parquet_bytes(first)) == len(parquet_bytes(second))  # only the file's inode and time tell them apart
    path = tmp_path / "tables" / "episode_table" / "table.parquet"
    _store(tmp_path, "episode_table", "table", first)
    reader = io_manager.ReadOnce()
    one = reader.read(UPath(path))
    again = reader.read(UPath(path))
    assert one.equals(first) and again is one
    assert reads == [str(path)]
    _store(tmp_path, "episode_table", "table", second)
    assert reader.read(UPath(path)).equals(second)
    assert reads == [str(path), str(path)]
    path.unlink()
    with pytest.raises(FileNotFoundError):  # gone: no table kept from before answers for it
        reader.read(UPath(path))


def test_steps_of_one_process_loading_one_table_on_disk_read_it_once_and_a_new_materialization_afresh(
        tmp_path, monkeypatch):
    """Two steps loading the table of an asset stored on disk (as the roll-ups load `episode_table`)
    read its file once; after the asset is materialized again with other rows, they get those."""
    import dagster as dg

    from vae_pipeline.storage.io_manager import ParquetTableIOManager

    reads = _parquet_reads(monkeypatch)
    monkeypatch.setattr(io_manager, "READ_ONCE", io_manager.ReadOnce())
    rows = {"n": [1, 2]}

    @dg.asset(io_manager_key="tables")
    def stored() -> pl.DataFrame:
        return pl.DataFrame(rows)

    @dg.asset(io_manager_key="tables")
    def first(stored: pl.DataFrame) -> pl.DataFrame:
        return stored

    @dg.asset(io_manager_key="tables")
    def second(stored: pl.DataFrame) -> pl.DataFrame:
        return stored

    warehouse = Warehouse(path=str(tmp_path / "home"))
    tables = {"tables": ParquetTableIOManager(warehouse=warehouse)}
    job = dg.Definitions(assets=[stored, first, second], resources=tables).resolve_implicit_global_asset_job_def()
    table = str(tmp_path / "home" / "tables" / "stored" / "table.parquet")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance)
        assert result.output_for_node("first").equals(pl.DataFrame({"n": [1, 2]}))
        assert result.output_for_node("second").equals(pl.DataFrame({"n": [1, 2]}))
        assert reads.count(table) == 1
        rows["n"] = [2, 1]
        result = job.execute_in_process(instance=instance)
        assert result.output_for_node("first").equals(pl.DataFrame({"n": [2, 1]}))
        assert result.output_for_node("second").equals(pl.DataFrame({"n": [2, 1]}))
        assert reads.count(table) == 2


def test_only_the_changed_series_are_read_again_and_the_rows_are_those_of_every_file(tmp_path, monkeypatch):
    home = tmp_path / "home"
    warehouse = Warehouse(path=str(home))
    for n in range(5):
        _store(home, "labels", f"s{n}", pl.DataFrame({"id": [f"e{n}a", f"e{n}b"], "label": ["PASS", "FAIL"]}))
    reads = _reads(monkeypatch)
    stages = {"labels": None}
    first, faults = stored_series_tables(warehouse, "reader", stages, [f"s{n}" for n in range(5)])
    assert sorted(reads) == [f"s{n}" for n in range(5)] and faults == {}
    assert first["labels"]["id"].to_list() == [f"e{n}{x}" for n in range(5) for x in "ab"]
    assert first["labels"]["series"].to_list() == [f"s{n}" for n in range(5) for _ in "ab"]

    reads.clear()
    again, _ = stored_series_tables(warehouse, "reader", stages, [f"s{n}" for n in range(5)])
    assert reads == [] and again["labels"].equals(first["labels"])

    _store(home, "labels", "s2", pl.DataFrame({"id": ["e2a"], "label": ["PASS_WITH_NITS"]}))
    _store(home, "labels", "s5", pl.DataFrame({"id": ["e5a"], "label": ["PASS"]}))
    reads.clear()
    later, _ = stored_series_tables(warehouse, "reader", stages, ["s0", "s2", "s3", "s4", "s5"])  # s1 gone
    assert sorted(reads) == ["s2", "s5"]
    expected = pl.concat([pl.read_parquet(home / "tables" / "labels" / f"{s}.parquet").with_columns(series=pl.lit(s))
                          for s in ("s0", "s2", "s3", "s4", "s5")])
    assert later["labels"].equals(expected)


def test_the_copy_is_written_again_once_it_is_more_than_its_lag_behind(tmp_path, monkeypatch):
    """A few new series are read from their own files, each time, beside an unchanged copy; the
    series past COPY_LAG make the copy written again with them all, and nothing is read next."""
    home = tmp_path / "home"
    warehouse = Warehouse(path=str(home))
    lag = io_manager.COPY_LAG
    names = [f"s{n:03d}" for n in range(2 * lag + 2)]
    for name in names[:lag]:
        _store(home, "labels", name, pl.DataFrame({"id": [f"{name}-e"], "label": ["PASS"]}))
    reads = _reads(monkeypatch)
    stored_series_tables(warehouse, "reader", {"labels": None}, names[:lag])
    copy = home / "rollups" / "reader" / "labels.parquet"
    written = copy.stat().st_mtime_ns, copy.stat().st_ino

    added = names[lag:2 * lag]  # as many new series as the copy may lag
    for name in added:
        _store(home, "labels", name, pl.DataFrame({"id": [f"{name}-e"], "label": ["FAIL"]}))
    for _ in range(2):
        reads.clear()
        tables, _ = stored_series_tables(warehouse, "reader", {"labels": None}, names[:2 * lag])
        assert sorted(reads) == added and (copy.stat().st_mtime_ns, copy.stat().st_ino) == written
        assert tables["labels"]["id"].to_list() == [f"{name}-e" for name in names[:2 * lag]]

    _store(home, "labels", names[-2], pl.DataFrame({"id": [f"{names[-2]}-e"], "label": ["PASS"]}))
    stored_series_tables(warehouse, "reader", {"labels": None}, names[:2 * lag + 1])
    assert (copy.stat().st_mtime_ns, copy.stat().st_ino) != written
    reads.clear()
    tables, _ = stored_series_tables(warehouse, "reader", {"labels": None}, names[:2 * lag + 1])
    assert reads == [] and tables["labels"]["label"].to_list() == ["PASS"] * lag + ["FAIL"] * lag + ["PASS"]


def test_a_missing_file_or_a_lacking_column_is_said_each_time(tmp_path, monkeypatch):
    home = tmp_path / "home"
    warehouse = Warehouse(path=str(home))
    _store(home, "episodes", "s0", pl.DataFrame({"id": ["a"], "valid": [True]}))
    _store(home, "episodes", "s1", pl.DataFrame({"id": ["b"]}))  # written by an older version: no `valid`
    for _ in range(2):
        tables, faults = stored_series_tables(warehouse, "checks", {"episodes": ("id", "valid")}, ["s0", "s1", "s2"])
        assert faults == {"s1": ["episodes.valid"], "s2": ["episodes missing"]}
        assert tables["episodes"].select("series", "id", "valid").rows() == [("s0", "a", True)]


def _fingerprint_by_pathlib(series_path: Path) -> str:
    """The fingerprint as first defined: every path under the series (sorted `Path`s), lstat'ed."""
    digest = hashlib.sha256()
    for path in sorted(series_path.rglob("*")):
        stat = path.lstat()
        digest.update(f"{path.relative_to(series_path).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\0"
                      f"{stat.st_mode}\n".encode())
    return digest.hexdigest()[:24]


def test_the_series_fingerprint_is_the_one_recorded_before(tmp_path):
    series = tmp_path / "2026-10-21-s1"
    for name in ("ep-a/out.mp4", "ep-a/transcript/x.jsonl", "ep-a-b/judge.json", "ep-a.b/y", ".hidden/z", "Z"):
        (series / name).parent.mkdir(parents=True, exist_ok=True)
        (series / name).write_bytes(name.encode())
    (series / "link").symlink_to(series / "ep-a")  # listed, never followed
    assert series_fingerprint(series) == _fingerprint_by_pathlib(series)
    before = series_fingerprint(series)
    (series / "ep-a" / "out.mp4").write_bytes(b"longer than before")
    assert series_fingerprint(series) != before


def test_many_series_are_fingerprinted_by_child_processes_as_one_process_would(tmp_path, monkeypatch):
    """Past `parallel_from` folders, child processes take shares of them: the same value for
    each folder, in order, as the definition gives (a folder gone meanwhile has no entries)."""
    folders = []
    for n in range(40):
        series = tmp_path / f"2026-10-21-s{n:02d}"
        for name in (f"ep-{n}/out.mp4", f"ep-{n}/transcript/x.jsonl", f"ep-{n}-b/judge.json", "series.json"):
            (series / name).parent.mkdir(parents=True, exist_ok=True)
            (series / name).write_bytes(name.encode() * n)
        folders.append(series)
    folders.append(tmp_path / os.fsdecode(b"gone-\xff"))  # a name that is no UTF-8
    expected = [_fingerprint_by_pathlib(folder) if folder.exists() else hashlib.sha256(b"").hexdigest()[:24]
                for folder in folders]
    assert series_fingerprints(folders) == expected  # fewer than PARALLEL_FROM: this process
    with monkeypatch.context() as patched:  # this process cannot: every value is a child's
        patched.setattr(fingerprints, "series_fingerprint", lambda folder: pytest.fail("fingerprinted in the parent"))
        assert series_fingerprints(folders, parallel_from=2) == expected


def test_the_labels_checks_over_many_series_at_once_name_each_series_that_does_not_add_up():
    """The labels' checks over every series in one pass say, per series, what they said one series
    at a time: worked out by hand below (rubric in force 1.1)."""
    episodes = pl.DataFrame({"series": ["A"] * 4 + ["B"] * 2 + ["C"] * 2 + ["E"],
                             "id": ["a1", "a2", "a3", "a4", "b1", "b2", "c1", "c2", "e1"],
                             "valid": [True, True, True, False, True, True, True, True, True]})
    verdicts = pl.DataFrame({"series": ["A"] * 3 + ["B"] * 2 + ["C"] * 2 + ["E"],
                             "id": ["a1", "a2", "a3", "b1", "b2", "c1", "c2", "e1"],
                             "judge_valid": [True, True, False, True, True, True, True, True]})
    labels = pl.DataFrame({
        "series": ["A", "A", "B", "B", "C", "E"], "id": ["a1", "a2", "b1", "b2", "c1", "e1"],
        "label": ["positive", "negative", "positive", None, "positive", None],
        "label_error": [None, None, None, "judge.json: no axes", None, None],
        "stored_host_label": ["negative", "negative", None, None, None, None],
        "judge_rubric_version": ["1.1", "1.0", None, None, None, None]})
    # A: 3 valid - 1 invalid judge.json = 2 labels; B: 2 - 1 label error = 1; C: 1 of 2; D: nothing at all
    problems, drifted, compared = label_problems(["A", "B", "C", "D", "E"], episodes, verdicts, labels, "1.1")
    assert problems == ["C: {'positive': 1} add up to 1 of 2 labelled episodes"]
    assert [(row["id"], row["stored_host_label"], row["label"]) for row in drifted] == [("a1", "negative", "positive")]
    assert compared == Counter({"1.1": 1, "1.0": 1})


def test_the_renders_checks_over_many_series_at_once_name_missing_and_impossible_facts():
    """Worked out by hand: a2 was delivered and has no facts (a3 was not delivered, a4 is invalid);
    b1's black range ends before it starts, b2 has no width, c1's freeze range runs past its end."""
    episodes = pl.DataFrame({"series": ["A"] * 4 + ["B"] * 2 + ["C"], "id": ["a1", "a2", "a3", "a4", "b1", "b2", "c1"],
                             "valid": [True, True, True, False, True, True, True],
                             "delivered": [True, True, False, True, True, True, True]})
    ranges = pl.List(pl.Array(pl.Float64, 2))
    facts = pl.DataFrame({
        "series": ["A", "B", "B", "C"], "id": ["a1", "b1", "b2", "c1"], "video_ok": [True] * 4,
        "video_duration_s": [8.0] * 4, "fps": [30.0] * 4, "width": [1920, 1920, 0, 1920], "height": [1080] * 4,
        "black_ranges": [[[0.0, 0.5]], [[2.0, 1.0]], [], []], "freeze_ranges": [[], [], [], [[7.0, 9.0]]]},
        schema_overrides={"black_ranges": ranges, "freeze_ranges": ranges})
    missing, impossible = facts_problems(episodes, facts)
    assert missing == ["a2"]
    assert impossible == ["b1: black_ranges [2.0, 1.0] outside [0, 8.0] or unordered", "b2: non-positive size or fps",
                          "c1: freeze_ranges [7.0, 9.0] outside [0, 8.0] or unordered"]


def test_the_renders_checks_name_a_size_or_fps_not_positive_on_a_video_without_ranges():
    """The checks read closely only the videos with a range or a size or fps not positive: a
    missing width, a zero height and a fps that is not a number are each named; a video with
    neither is not."""
    ids = ["d1", "d2", "d3", "d4"]
    episodes = pl.DataFrame({"series": ["D"] * 4, "id": ids, "valid": [True] * 4, "delivered": [True] * 4})
    ranges = pl.List(pl.Array(pl.Float64, 2))
    facts = pl.DataFrame({
        "series": ["D"] * 4, "id": ids, "video_ok": [True] * 4, "video_duration_s": [8.0] * 4,
        "fps": [30.0, 30.0, float("nan"), 30.0], "width": [None, 1920, 1920, 1920], "height": [1080, 0, 1080, 1080],
        "black_ranges": [[]] * 4, "freeze_ranges": [None] * 4},
        schema_overrides={"black_ranges": ranges, "freeze_ranges": ranges, "width": pl.Int64})
    assert facts_problems(episodes, facts) == ([], ["d1: non-positive size or fps", "d2: non-positive size or fps",
                                                    "d3: non-positive size or fps"])


def test_a_series_fingerprint_is_taken_once_while_the_runs_root_is_held_and_afresh_after(tmp_path):
    """A build holds the runs root: its planning rounds and steps see each series as first read
    (one walk of its files, not one a round); outside a hold, and in the next build, a change shows."""
    (tmp_path / "s1" / "ep").mkdir(parents=True)
    (tmp_path / "s1" / "ep" / "brief.json").write_text("{}")
    runs_root = RunsRoot(path=str(tmp_path))
    before = runs_root.fingerprint("s1")
    with listings_held(str(tmp_path)):
        assert runs_root.fingerprint("s1") == before
        (tmp_path / "s1" / "ep" / "judge.json").write_text("{}")
        assert runs_root.fingerprint("s1") == before
    after = runs_root.fingerprint("s1")
    assert after != before and after == series_fingerprint(tmp_path / "s1")
    (tmp_path / "s1" / "ep" / "out.mp4").write_bytes(b"x")
    assert runs_root.fingerprint("s1") not in (before, after)  # not held: each call looks again


def test_the_runs_roots_series_fingerprinted_at_once_are_the_ones_asked_one_by_one_and_kept_while_held(tmp_path):
    for series in ("s1", "s2"):
        (tmp_path / series / "ep").mkdir(parents=True)
        (tmp_path / series / "ep" / "brief.json").write_text(series)
    runs_root = RunsRoot(path=str(tmp_path))
    each = {series: runs_root.fingerprint(series) for series in ("s1", "s2")}
    with listings_held(str(tmp_path)):
        assert runs_root.fingerprints(["s1", "s2"]) == each
        (tmp_path / "s2" / "ep" / "judge.json").write_text("{}")
        assert runs_root.fingerprint("s2") == each["s2"]  # the planning pass's value, for the run's steps
    assert runs_root.fingerprints(["s2", "s1"]) == {"s1": each["s1"], "s2": series_fingerprint(tmp_path / "s2")}
    assert runs_root.fingerprints(["s2"])["s2"] != each["s2"]


def test_the_rows_check_asks_for_the_episode_rows_of_the_manifests_it_reads_alone(tmp_path):
    """`rows_vs_archives` reads only the manifests not found agreed before (by identity and row)
    and asks `written_of` once, for those rows' episodes alone (on a bucket it makes dicts of
    them, not of every row); what is wrong comes in the rows' order."""
    from upath import UPath

    from vae_pipeline.assets.dataset_episodes import rows_vs_archives

    folder = tmp_path / "episodes" / "2026-01-01"
    folder.mkdir(parents=True)
    rows = [{"series": "2026-01-01-s1", "id": f"e{i}", "archive": f"episodes/2026-01-01/e{i}.tar.zst",
             "archive_sha256": f"{i}" * 64} for i in range(4)]
    for row in rows:
        (tmp_path / row["archive"]).write_bytes(b"archive")
        (folder / f"{row['id']}.json").write_text(f'{{"archive_sha256": "{row["archive_sha256"]}"}}')
    asked: list[list[str]] = []

    def written_of(ids: list[str]) -> dict[str, dict]:
        asked.append(ids)
        return {}

    said, agreed = rows_vs_archives(UPath(tmp_path), rows, written_of)
    assert (said, asked) == ([], [["e0", "e1", "e2", "e3"]])
    asked.clear()
    assert rows_vs_archives(UPath(tmp_path), rows, written_of, agreed) == ([], agreed)
    assert asked == []  # every manifest as found agreed: none read, no row asked for

    (folder / "e2.json").unlink()  # a new file (inode) whose sha256 is another's
    (folder / "e2.json").write_text(f'{{"archive_sha256": "{"9" * 64}"}}')
    rows[0] = rows[0] | {"archive": None}
    said, _ = rows_vs_archives(UPath(tmp_path), rows, written_of, agreed)
    assert asked == [["e2"]]
    assert [(s["id"], s["text"]) for s in said] == [
        ("e0", "row has no archive"),
        ("e2", "archive_sha256 in episodes.jsonl differs from the manifest"),
        (None, "episodes/2026-01-01/e0.tar.zst: archive without a row"),
    ]


def test_a_listing_on_disk_says_what_fsspec_says_of_the_same_files(tmp_path):
    """A folder's listing on disk (one scandir pass, not fsspec's walk) holds exactly the regular
    files fsspec's `find` reports, each with the same facts: a symlink to a file or a folder is
    neither listed nor followed, nested folders are walked, an empty folder adds nothing."""
    root = tmp_path / "dataset"
    (root / "videos" / "s1").mkdir(parents=True)
    (root / "videos" / "s1" / "a.mp4").write_bytes(b"video")
    (root / "episodes" / "empty").mkdir(parents=True)
    (root / "README.md").write_text("card")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("x")
    (root / "linked-file").symlink_to(tmp_path / "outside" / "secret.txt")
    (root / "linked-folder").symlink_to(tmp_path / "outside")
    folder = UPath(root)
    expected = {name[len(folder.path):].lstrip("/"): info
                for name, info in folder.fs.find(folder.path, detail=True).items() if info["type"] == "file"}
    assert sorted(expected) == ["README.md", "videos/s1/a.mp4"]
    assert listing(folder) == expected
    assert listing(UPath(tmp_path / "absent")) == {}
