"""The Dagster UI as the operator's console, clicked in a real browser (Debian's Chromium through
Playwright) on `vae ui` — `dagster dev`, webserver and daemon — over a temp instance.

One build for the module (the sample runs, two judge answers planted so that rubric 1.0 labels
them differently from 1.2), then the UI started with rubric 1.0, as an operator restarts it after
a rubric change. The tests click what an operator clicks, wait for the daemon's runs and assert
the outcome; each prints the GraphQL the UI sent (operation and variables), and the launches are
compared with what the UI is expected to send, so a UI upgrade that changes them shows up. The
daemon's loop is shortened (fast_daemon/sitecustomize.py) so a backfill's stages follow each other
in seconds, not 30 s.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.execution.backfill import BulkActionStatus
from playwright.sync_api import Page, expect

from vae_pipeline.assets import publish_checks
from vae_pipeline.cli.build import build
from vae_pipeline.definitions import defs
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline_tests.conftest import copy_runs, isolate
from vae_pipeline_tests.services import answers, free_port, process, wait_for
from vae_pipeline_tests.test_ranged_runs import labels_rows, plant_rubric_flips
from vae_pipeline_tests.test_review_browser import browser  # noqa: F401 (the module's Chromium, a fixture)

VAE = Path(sys.executable).parent / "vae"
FAST_DAEMON = Path(__file__).resolve().parent / "fast_daemon"
LOCATION = {"repositoryLocationName": "vae_pipeline", "repositoryName": "__repository__"}
FROM_UI = [{"key": "dagster/from_ui", "value": "true"}]
REHOST_ASSETS = ["dataset_card", "dataset_episodes", "dataset_meta", "dataset_rows", "episode_table", "labels",
                 "review_site", "rubric"]
# the sample plants bad episodes in a completed series and an e-mail and IP in every transcript
FAILING_CHECKS = {"no_invalid_episodes", "no_scrub_findings"}
FINISHED = {BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED_FAILED, BulkActionStatus.FAILED,
            BulkActionStatus.CANCELED}
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]
UI_TIMEOUT_MS = 120_000  # the first page of a cold webserver on a busy machine


@pytest.fixture(scope="module")
def console(sample_runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("console")
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        runs = copy_runs(sample_runs, root / "runs")
        planted = plant_rubric_flips(sample_runs, runs)
        build(runs, paths["dataset"])  # under the newest rubric, 1.2
        port = free_port()
        # no repository (VAE_HUB_REPO, `vae ui --repo`): a refused release never asks for one
        env = {**{k: v for k, v in os.environ.items() if k != "VAE_HUB_REPO"},
               "PYTHONPATH": os.pathsep.join([str(PROJECT_ROOT), str(FAST_DAEMON)]), "VAE_TEST_DAEMON_TICK_S": "2",
               "VAE_HUB_ENDPOINT": "http://127.0.0.1:9"}  # nothing answers there: no release may get that far
        log = root / "vae-ui.log"
        command = [str(VAE), "ui", "--runs", str(runs), "--out", str(paths["dataset"]), "--rubric-version", "1.0",
                   "--port", str(port)]
        with process(command, env, log) as ui:
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: answers(f"{url}/server_info"), "vae ui", ui, log)
            yield {**paths, "url": url, "runs": runs, "planted": planted, "log": log, "ui": ui,
                   "instance": dg.DagsterInstance.get()}


class RecordedPage:
    """A page whose GraphQL requests are recorded (operation name and variables)."""

    def __init__(self, page: Page):
        self.page = page
        self.sent: list[dict] = []
        page.on("request", self._record)
        page.set_default_timeout(UI_TIMEOUT_MS)
        # the UI's one-time "Join the Dagster community" dialog: an operator clicks Skip
        page.add_locator_handler(page.get_by_role("button", name="Skip", exact=True), lambda skip: skip.click())

    def _record(self, request) -> None:
        if request.method == "POST" and urlsplit_path(request.url) == "/graphql":
            body = request.post_data_json or {}
            self.sent.append({"operationName": body.get("operationName"), "variables": body.get("variables")})

    def launched(self, operation: str) -> list[dict]:
        return [r["variables"] for r in self.sent if r["operationName"] == operation]


def urlsplit_path(url: str) -> str:
    return re.sub(r"^[a-z]+://[^/]+", "", url).split("?")[0]


def graphql_operation(operation: str):
    """A predicate on responses: the server's answer to the GraphQL `operation`."""
    return lambda r: urlsplit_path(r.url) == "/graphql" and (r.request.post_data_json or {}).get("operationName") == operation


@pytest.fixture(scope="module")
def nux_skipped(console, browser):  # noqa: F811 (the imported fixture)
    """The UI's one-time "Join the Dagster community" dialog, skipped on a first visit before the
    tests, as an operator does: it opens a second after a page loads, and when it opened over a
    test's launch dialog on a busy machine, neither dialog took the click. The instance then
    remembers it was seen (RecordedPage still skips it, should it come back)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    with page.expect_response(graphql_operation("ShouldShowNux")) as shown:
        page.goto(console["url"])
    if shown.value.json()["data"]["shouldShowNux"]:
        with page.expect_response(graphql_operation("SetNuxSeen")):
            page.get_by_role("button", name="Skip", exact=True).click()
    context.close()


@pytest.fixture
def ui(browser, request, nux_skipped):  # noqa: F811 (the imported fixture)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    recorded = RecordedPage(context.new_page())
    yield recorded
    # the test's output: what the UI sent, so a UI upgrade that changes it shows up — each
    # mutation in full, each query once with how often the page polled it
    print(f"GraphQL the UI sent in {request.node.name}:")
    polled = Counter(json.dumps(entry, sort_keys=True) for entry in recorded.sent
                     if not entry["operationName"] or entry["operationName"].endswith("Query"))
    for entry in recorded.sent:
        if entry["operationName"] and not entry["operationName"].endswith("Query"):
            print("  sent", json.dumps(entry, sort_keys=True))
    for entry, times in polled.items():
        print(f"  sent {times}x", entry)
    context.close()


def wait_for_backfill(console: dict, backfill_id: str, timeout_s: float = 240) -> BulkActionStatus:
    instance = console["instance"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        backfill = instance.get_backfill(backfill_id)
        in_flight = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}, statuses=IN_FLIGHT))
        if backfill.status in FINISHED and not in_flight:
            return backfill.status
        time.sleep(1)
    raise AssertionError(f"backfill {backfill_id} not finished after {timeout_s} s:\n"
                         f"{console['log'].read_text()[-4000:]}")


def wait_for_run(console: dict, run_id: str, timeout_s: float = 180) -> dg.DagsterRun:
    instance = console["instance"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            return run
        time.sleep(1)
    raise AssertionError(f"run {run_id} not finished after {timeout_s} s:\n{console['log'].read_text()[-4000:]}")


def answer_to(page: Page, operation: str, button) -> dict:
    """Click `button` and return the data of the server's answer to the GraphQL `operation` it sends."""
    with page.expect_response(graphql_operation(operation)) as response:
        button.click()
    (data,) = response.value.json()["data"].values()
    return data


def launch_backfill_from(ui: RecordedPage, url: str) -> str:
    """On a page with *Materialize all…*: click it, pick All partitions, Launch backfill; the backfill's id."""
    page = ui.page
    page.goto(url)
    page.get_by_role("button", name="Materialize all").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="All", exact=True).click()
    launched = answer_to(page, "LaunchPartitionBackfill", dialog.get_by_role("button", name="Launch backfill"))
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def latest_check(instance: dg.DagsterInstance, asset: str, name: str):
    return instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(dg.AssetKey(asset), name))


def release_modes(instance: dg.DagsterInstance) -> list[str]:
    """The mode of every hub_release materialization: only a release records one."""
    records = instance.fetch_materializations(dg.AssetKey("hub_release"), limit=100).records
    return [r.asset_materialization.metadata["mode"].value for r in records]


def unsynced(instance: dg.DagsterInstance, key: str, partition: str | None = None) -> bool:
    """What the UI shows as *Unsynced*: Dagster's stale status of the asset (partition)."""
    graph = defs.resolve_asset_graph()
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=datetime.now(UTC), last_event_id=None),
                          instance=instance, asset_graph=graph)
    resolver = CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)
    return resolver.get_status(dg.AssetKey(key), partition) == StaleStatus.STALE


def assert_release_not_attempted(console: dict) -> None:
    instance = console["instance"]
    assert release_modes(instance) == []  # issue 29 item 4: nothing that looks released
    for name in FAILING_CHECKS:  # still red on their asset
        record = latest_check(instance, "dataset_episodes", name)
        assert record.evaluation is not None and record.evaluation.passed is False, name


def test_restarted_under_another_rubric_rubric_and_labels_read_unsynced(console, ui, sample_runs):
    """Issue 29 item 4: built under 1.2, the UI started under 1.0 shows `rubric` and every
    `labels` partition unsynced, with the rubric in force upstream: the sign to rehost."""
    page = ui.page
    page.goto(f"{console['url']}/assets/rubric")
    page.get_by_text("Unsynced (1)").first.wait_for()
    page.get_by_role("link", name="rubric_in_force").first.wait_for()  # upstream, shown once the graph loads
    for series in sorted(sample_runs.series):
        page.goto(f"{console['url']}/assets/labels?view=partitions&partition={series}")
        page.get_by_text(re.compile(r"^Unsynced \(\d+\)$")).first.wait_for()  # the rubric in force changed
    # the observation `vae ui` recorded when it started, and what the UI read of it
    (observed,) = console["instance"].fetch_observations(dg.AssetKey("rubric_in_force"), limit=10).records[:1]
    assert observed.event_log_entry.asset_observation.metadata["version"].value == "1.0"
    page.goto(f"{console['url']}/assets/rubric_in_force")
    page.get_by_text("Observed").first.wait_for()
    # the description comes with the asset's definition, which may load after its events
    expect(page.locator("body")).to_contain_text("launch the rehost")
    assert unsynced(console["instance"], "rubric")
    assert [s for s in sample_runs.series if not unsynced(console["instance"], "labels", s)] == []


def test_rehost_backfill_from_the_job_page_ends_green_and_brings_the_review_site_along(
        console, ui, sample_runs):
    """Jobs → rehost → Materialize all… → All → Launch backfill."""
    instance = console["instance"]
    backfill_id = launch_backfill_from(ui, f"{console['url']}/locations/vae_pipeline/jobs/rehost")
    # what the UI sends: the job's assets named (so their checks come with them) over every series
    assert ui.launched("LaunchPartitionBackfill") == [{"backfillParams": {
        "tags": FROM_UI, "assetSelection": [{"path": [key]} for key in REHOST_ASSETS],
        "partitionNames": sorted(sample_runs.series), "fromFailure": False,
        "selector": {"partitionSetName": "rehost_partition_set", "repositorySelector": LOCATION}}}]

    status = wait_for_backfill(console, backfill_id)
    runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    assert status == BulkActionStatus.COMPLETED_SUCCESS, console["log"].read_text()[-4000:]
    # every series in one run (the rehost job's backfill policy), and it ended green
    assert [(run.job_name, run.status) for run in runs] == [("rehost", dg.DagsterRunStatus.SUCCESS)]
    written = {e.asset_key.to_user_string() for e in instance.get_records_for_run(
        runs[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records}
    assert written == set(REHOST_ASSETS)

    # every label under rubric 1.0, the planted episodes relabelled as worked out by hand
    after = labels_rows(console["home"])
    assert {row["host_rubric_version"] for row in after.values()} == {"1.0"}
    assert {i: after[i]["label"] for i in console["planted"]} == \
        {i: later for i, (_, later) in console["planted"].items()}
    rows = (console["dataset"] / "episodes.jsonl").read_text()
    assert '"host_rubric_version":"1.2"' not in rows and '"host_rubric_version":"1.0"' in rows

    # issue 19 item 2: the review site shows the new rubric and labels, read in the browser
    site = console["home"] / "review"
    ui.page.goto((site / "index.html").as_uri())
    assert "host rubric 1.0" in ui.page.locator("body").inner_text()
    for episode_id, (_, later) in console["planted"].items():
        plan = next(p for p in sample_runs.episodes if p.episode_id == episode_id)
        ui.page.goto((site / "episodes" / plan.series / f"{episode_id}.html").as_uri())
        assert ui.page.locator(f"span.label-{later}").first.is_visible()
        assert "host rubric now: 1.0" in ui.page.locator("body").inner_text()

    # the rehost cleared the sign: nothing reads unsynced for the rubric any more
    assert not unsynced(instance, "rubric")
    assert [s for s in sample_runs.series if unsynced(instance, "labels", s)] == []

    # the checks were evaluated in the rehost's run and still fail: the release is not attempted
    for name in FAILING_CHECKS:
        assert latest_check(instance, "dataset_episodes", name).run_id == runs[0].run_id
    assert_release_not_attempted(console)


def test_materialize_all_from_the_asset_graph_ends_green_and_attempts_no_release(console, ui, sample_runs):
    """Lineage (the global asset graph) → Materialize all… → All → Launch backfill."""
    instance = console["instance"]
    ui.page.goto(console["url"])
    # exact (its icon's name, then its text): "Lineage" alone also matches the Jobs link, whose
    # icon is named `column_lineage`
    ui.page.get_by_role("navigation").get_by_role("link", name="lineage Lineage", exact=True).click()
    backfill_id = launch_backfill_from(ui, ui.page.url)
    graph = defs.resolve_asset_graph()
    # issue 29 item 4: every asset but the release (which only the publish job records) and the
    # observed rubric in force
    every_asset = sorted(key.to_user_string() for key in graph.materializable_asset_keys)
    assert ui.launched("LaunchPartitionBackfill") == [{"backfillParams": {
        "tags": FROM_UI, "assetSelection": [{"path": [key]} for key in every_asset],
        "partitionNames": sorted(sample_runs.series), "fromFailure": False}}]
    assert "hub_release" not in every_asset and "rubric_in_force" not in every_asset

    status = wait_for_backfill(console, backfill_id)
    runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    assert status == BulkActionStatus.COMPLETED_SUCCESS, console["log"].read_text()[-4000:]
    assert runs and {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert [run for run in runs if dg.AssetKey("hub_release") in (run.asset_selection or ())] == []
    assert_release_not_attempted(console)
    # the asset page says never materialized, not a green Materialized
    ui.page.goto(f"{console['url']}/assets/hub_release")
    ui.page.get_by_text("Never materialized", exact=True).first.wait_for()


def test_publish_from_the_launchpad_is_refused_naming_the_failing_checks(console, ui):
    """Jobs → publish → Launchpad → Launch Run (no repository set: the checks come first)."""
    instance = console["instance"]
    page = ui.page
    page.goto(f"{console['url']}/locations/vae_pipeline/jobs/publish")
    page.get_by_role("tab", name="Launchpad").click()
    launched = answer_to(page, "LaunchPipelineExecution", page.get_by_role("button", name="Launch Run"))
    assert launched["__typename"] == "LaunchRunSuccess", launched
    (params,) = ui.launched("LaunchPipelineExecution")
    # the job's one op, the release: no check in its run, so it goes by the checks' latest results
    assert params["executionParams"]["selector"] == {**LOCATION, "pipelineName": "publish", "assetSelection": [],
                                                     "assetCheckSelection": []}
    assert "dry_run: true" in params["executionParams"]["runConfigData"]

    run = wait_for_run(console, launched["run"]["id"])
    assert run.status == dg.DagsterRunStatus.FAILURE
    failure = next(e.dagster_event.step_failure_data.user_failure_data.description
                   for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE))
    assert failure.startswith("publishing refused:\n- "), failure
    assert "no dataset repository" not in failure
    assert all(f"dataset_episodes.{name}:" in failure for name in FAILING_CHECKS), failure
    assert "left out:" in failure
    # issue 29 item 4: each reason's count first, then one problem a line under it
    lines = failure.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("- dataset_episodes.no_scrub_findings: "))
    count = int(lines[head].split(": ", 1)[1].split(" ")[0])
    assert lines[head].endswith(f"{count} finding(s):") and count > 1
    assert all(line.startswith("  - ") for line in lines[head + 1:head + 1 + min(count, 25)])
    # what the operator reads: the run's page shows the refusal
    page.goto(f"{console['url']}/runs/{run.run_id}")
    page.get_by_text("publishing refused:").first.wait_for()
    assert_release_not_attempted(console)


def test_a_failed_checks_reasons_read_on_the_asset_page(console, ui, sample_runs):
    """Catalog → dataset_episodes → Checks → no_invalid_episodes (its Latest execution)."""
    page = ui.page
    page.goto(f"{console['url']}/assets/dataset_episodes?view=checks")
    page.get_by_text("no_invalid_episodes", exact=True).first.click()
    text = page.locator("body")
    bad = sorted(p.episode_id for p in sample_runs.episodes
                 if p.bad is not None and sample_runs.series[p.series] == "completed")
    assert bad
    text.get_by_text("invalid episode(s) in completed series").first.wait_for()
    shown = text.inner_text()
    assert "This is a non-blocking asset check" in shown and "No invalid episode in a published series" in shown
    assert "Fix the input, or list the episode or series with a reason in meta/withheld.jsonl" in shown
    assert [episode for episode in bad if episode not in shown] == []


def test_one_publish_check_executed_from_its_page_runs_alone_and_leaves_the_others(console, ui):
    """Catalog → dataset_episodes → Checks → jsonl_and_parquet_agree → Execute. The checks of
    `dataset_episodes` share one step; launched alone from the UI, that step evaluates the one
    check and leaves every other check's latest result as it was."""
    instance, name = console["instance"], "jsonl_and_parquet_agree"
    others = [key for key in publish_checks.dataset_episodes_checks.check_keys if key.name != name]
    before = {key: instance.get_latest_asset_check_evaluation_record(key).run_id for key in others}
    page = ui.page
    page.goto(f"{console['url']}/assets/dataset_episodes?view=checks")
    page.get_by_text(name, exact=True).first.click()
    # the button's name begins with its icon's; "Execute all" (every check) is another button
    launched = answer_to(page, "LaunchPipelineExecution", page.get_by_role("button", name=re.compile(r"Execute$")))
    assert launched["__typename"] == "LaunchRunSuccess", launched
    (params,) = ui.launched("LaunchPipelineExecution")
    assert params["executionParams"]["selector"] == {
        **LOCATION, "jobName": "__ASSET_JOB", "assetSelection": [],
        "assetCheckSelection": [{"assetKey": {"path": ["dataset_episodes"]}, "name": name}]}

    run = wait_for_run(console, launched["run"]["id"])
    assert run.status == dg.DagsterRunStatus.SUCCESS, console["log"].read_text()[-4000:]
    evaluated = [event.dagster_event.event_specific_data
                 for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
    assert [(e.check_name, e.passed) for e in evaluated] == [(name, True)]
    assert {key: instance.get_latest_asset_check_evaluation_record(key).run_id for key in others} == before
