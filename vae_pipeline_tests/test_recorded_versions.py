"""The versions each series stage recorded, as the planner reads them back: a new process reads
only the events added since the last one read them, and never trusts a memo of an event whose
run was deleted (SQLite gives its storage ids to the next events)."""

import dagster as dg
import pytest

from vae_pipeline.storage import versions
from vae_pipeline.storage.versions import INPUTS_KEY, UPSTREAM_KEY, VERSION_KEY, latest_by_partition, recorded_value

series = dg.DynamicPartitionsDefinition(name="series")


@dg.asset(partitions_def=series)
def stage(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """Records what every series stage records, from the run's tags (the test's plan)."""
    version = context.run.tags["planned_version"]
    return dg.MaterializeResult(metadata={VERSION_KEY: version, INPUTS_KEY: f"inputs-{version}",
                                          UPSTREAM_KEY: dg.MetadataValue.json({"episodes": f"up-{version}"}),
                                          "preview": "not read back"})


def made(home, partition: str, version: str) -> str:
    """Materialize `stage` for `partition` recording `version`, on the instance in `home`; its run id."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("series", [partition])
        result = dg.materialize([stage], instance=instance, partition_key=partition,
                                tags={"planned_version": version})
        assert result.success
        return result.run_id


def read_back(home) -> tuple[dict[str, tuple], list[int]]:
    """In a fresh instance object, as a new process has: each partition's recorded
    (version, inputs, upstream), and the storage ids it asked the event log for."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        asked: list[int] = []
        fetch = instance.fetch_materializations

        def counted(records_filter, *args, **kwargs):
            asked.extend(records_filter.storage_ids or [])
            return fetch(records_filter, *args, **kwargs)

        instance.fetch_materializations = counted
        latest = latest_by_partition(instance, stage.key)
        recorded = {partition: tuple(recorded_value(event, k) for k in (VERSION_KEY, INPUTS_KEY, UPSTREAM_KEY))
                    for partition, event in latest.items()}
        return recorded, asked


def planned(version: str) -> tuple:
    return version, f"inputs-{version}", {"episodes": f"up-{version}"}


@pytest.fixture
def home(tmp_path):
    return tmp_path / "dagster"


def test_a_new_process_reads_back_only_the_events_added_since_one_last_read_them(home):
    home.mkdir()
    for partition in ("s1", "s2", "s3"):
        made(home, partition, f"v-{partition}")
    first, asked = read_back(home)
    assert first == {p: planned(f"v-{p}") for p in ("s1", "s2", "s3")}
    assert len(asked) == 3
    again, asked = read_back(home)
    assert again == first and asked == []
    made(home, "s4", "v-s4")
    made(home, "s2", "v-s2-new")
    latest, asked = read_back(home)
    assert latest == {**first, "s2": planned("v-s2-new"), "s4": planned("v-s4")}
    assert len(asked) == 2  # the two new events, not the four partitions


def test_an_event_of_a_deleted_run_is_never_answered_from_the_memo(home):
    home.mkdir()
    made(home, "s1", "v-old-s1")
    doomed = made(home, "s2", "v-old-s2")
    before, _ = read_back(home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        old_id = instance.get_latest_storage_id_by_partition(stage.key, dg.DagsterEventType.ASSET_MATERIALIZATION)["s2"]
        instance.delete_run(doomed)
    made(home, "s2", "v-new-s2")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        new_id = instance.get_latest_storage_id_by_partition(stage.key, dg.DagsterEventType.ASSET_MATERIALIZATION)["s2"]
    assert new_id == old_id  # SQLite gave the deleted run's storage id to the new event
    after, asked = read_back(home)
    assert before["s2"] == planned("v-old-s2")
    assert after == {"s1": planned("v-old-s1"), "s2": planned("v-new-s2")}
    assert asked == [new_id]


def test_one_process_reads_the_stored_versions_once_and_writes_them_when_more_than_the_lag_are_missing(
        home, monkeypatch):
    """A build's run adds an event to each asset after every step: the steps after it fetch that
    event alone, and the stored value (every partition's entry) is written again only when more
    than STORE_LAG of the events this process fetched are missing from it."""
    monkeypatch.setattr(versions, "STORE_LAG", 2)
    home.mkdir()
    made(home, "s1", "v-s1")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        reads, writes = [], []  # of the stored value (Dagster keeps values of its own there too)
        ours = versions.RECORDED_VERSIONS.format(key="stage")
        get, put = instance.run_storage.get_cursor_values, instance.run_storage.set_cursor_values
        monkeypatch.setattr(instance.run_storage, "get_cursor_values",
                            lambda keys: (reads.append(keys) if ours in keys else None) or get(keys))
        monkeypatch.setattr(instance.run_storage, "set_cursor_values",
                            lambda pairs: (writes.append(pairs) if ours in pairs else None) or put(pairs))
        assert {p: e.metadata[VERSION_KEY] for p, e in latest_by_partition(instance, stage.key).items()} == \
            {"s1": "v-s1"}
        assert (len(reads), len(writes)) == (1, 1)  # the first read of this process fetched s1 and stored it
        for number, partition in enumerate(("s2", "s3", "s4"), start=1):
            instance.add_dynamic_partitions("series", [partition])
            assert dg.materialize([stage], instance=instance, partition_key=partition,
                                  tags={"planned_version": f"v-{partition}"}).success
            latest = latest_by_partition(instance, stage.key)
            assert latest[partition].metadata[VERSION_KEY] == f"v-{partition}"
            assert len(reads) == 1
            assert len(writes) == (1 if number <= 2 else 2)  # the third event fetched is one more than the lag
    recorded, asked = read_back(home)  # a new process: the stored value holds all four
    assert recorded == {p: planned(f"v-{p}") for p in ("s1", "s2", "s3", "s4")} and asked == []
