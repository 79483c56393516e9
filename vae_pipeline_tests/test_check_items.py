"""What a check says by episode: a few in its evaluation, all of them in a file of the home that
the evaluation names by sha256, read back whole by the review site (on disk and on a bucket)."""

import json

import dagster as dg
import pytest

from vae_pipeline.assets.review_site import latest_checks
from vae_pipeline.domain.check_items import said_of
from vae_pipeline.domain.objects import listing, location
from vae_pipeline.storage.checks import (
    ITEMS,
    ITEMS_IN_EVALUATION,
    check_items,
    items_folder,
    items_metadata,
)
from vae_pipeline.storage.resources import Warehouse

KEY = dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), "no_scrub_findings")


def findings(count: int, text: str = "messages.jsonl:{n} email") -> list[dict]:
    return [said_of({"series": f"s{n // 8:03d}", "id": f"ep-{n:04d}"}, text.format(n=n)) for n in range(count)]


@pytest.fixture(params=["disk", "bucket"])
def home(request, tmp_path):
    if request.param == "disk":
        return str(tmp_path / "home")
    request.getfixturevalue("s3_environ")
    return f"s3://{request.getfixturevalue('make_bucket')()}/home"


def test_past_the_limit_the_evaluation_holds_the_first_items_and_names_the_file_with_all(home):
    folder = items_folder(location(home), KEY.asset_key)
    said = findings(ITEMS_IN_EVALUATION * 3)
    metadata = items_metadata(location(home), KEY, said, listing(folder))
    assert metadata[ITEMS].value == said[:ITEMS_IN_EVALUATION]
    assert metadata["items_file"].value == "check-items/dataset_episodes/no_scrub_findings.json"
    assert json.loads((location(home) / metadata["items_file"].value).read_bytes()) == said
    assert check_items(location(home), metadata) == said

    # a later evaluation rewrites the file: the earlier one reads what it holds itself, never another's items
    later = findings(ITEMS_IN_EVALUATION * 2, "transcript/session.jsonl:{n} ip_address")
    later_metadata = items_metadata(location(home), KEY, later, listing(folder))
    assert check_items(location(home), later_metadata) == later
    assert check_items(location(home), metadata) == said[:ITEMS_IN_EVALUATION]

    # few again: all of them in the evaluation, and the file it no longer names is gone
    few = findings(3)
    few_metadata = items_metadata(location(home), KEY, few, listing(folder))
    assert few_metadata[ITEMS].value == few and "items_file" not in few_metadata
    assert listing(folder) == {}
    assert check_items(location(home), later_metadata) == later[:ITEMS_IN_EVALUATION]
    assert check_items(location(home), {}) == []


def test_the_review_site_reads_every_item_of_the_latest_evaluation_the_instance_stores_a_few(home, tmp_path):
    warehouse = Warehouse(path=home, scratch_path=str(tmp_path / "scratch"))
    said = findings(1_000)
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(str(tmp_path / "dagster")) as instance:
        instance.report_runless_asset_event(dg.AssetCheckEvaluation(
            asset_key=KEY.asset_key, check_name=KEY.name, passed=False, description="1000 finding(s)",
            metadata=items_metadata(warehouse.home, KEY, said, {})))
        stored = instance.get_latest_asset_check_evaluation_record(KEY).evaluation
        assert len(stored.metadata[ITEMS].value) == ITEMS_IN_EVALUATION
        (check,) = [c for c in latest_checks(instance, warehouse) if c.name == KEY.name]
    assert (check.passed, check.items) == (False, said)
