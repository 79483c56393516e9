"""Publish only what can be traced to committed code and one actor (contract 3, Publishing): the
init line and request shape as parsed, the three provenance checks on hand-written rows, then on
the generator's planted series and episode — in the build summary, the review site's index and
`vae publish`'s refusal — and withholding as the way out."""

import json
import re

import dagster as dg
import polars as pl
import pytest

from vae_pipeline.cli import main
from vae_pipeline.domain.episodes.messages import count_messages
from vae_pipeline.domain.episodes.provenance import (
    actor_disagreements,
    actor_facts,
    minor_version,
    series_facts,
    uncommitted_series,
    unrecorded_actors,
    unversioned_series,
)
from vae_pipeline.domain.review.site import SITE_DIR
from vae_pipeline.domain.dataset.rows import DATASET_COLUMNS
from vae_pipeline.domain.episodes.series import episode_entries
from vae_pipeline.sample.generator import ODD_ACTOR_MODEL
from vae_pipeline_tests.test_publish_flow import reason

CHECKS = ("harness_committed", "benchmark_versioned", "one_actor_per_series")


def facts_of(messages: bytes, shape: object | None) -> dict:
    """What the episode parser stores of what ran: the init line the counting found, and the shape."""
    return actor_facts(count_messages(messages).init, shape)


def jsonl(*lines: dict) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


INIT = {"type": "system", "subtype": "init", "cwd": "/home/ana/runs/a-s1/work", "session_id": "s",
        "tools": ["Write", "Bash", "mcp__figma__get_file", "Read"], "model": "claude-opus-4-5-20251101",
        "claude_code_version": "2.0.50", "permissionMode": "bypassPermissions"}
SHAPE = {"model": "claude-opus-4-5-20251101", "max_tokens": 32000,
         "system": [{"type": "text", "text": "You are Claude Code."},
                    {"type": "text", "text": "Working directory: /home/ana/runs/a-s1/work"}],
         "tools": [{"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object"}}]}


# ---------------------------------------------------------------- what an episode says ran


def test_the_main_agents_init_line_and_the_hashed_request_shape_say_what_ran():
    messages = jsonl({"type": "system", "subtype": "hook_started", "hook_name": "SessionStart"},
                     {**INIT, "model": "claude-haiku-4-5", "parent_tool_use_id": "toolu_01"},  # a subagent's
                     INIT, {"type": "assistant", "message": {"id": "m1", "content": []}},
                     {**INIT, "model": "a-later-init-line"})
    facts = facts_of(messages, SHAPE)
    assert facts["actor_model_id"] == "claude-opus-4-5-20251101"
    assert facts["claude_code_version"] == "2.0.50"
    assert facts["actor_tools"] == ["Bash", "Read", "Write", "mcp__figma__get_file"]
    assert re.fullmatch(r"[0-9a-f]{64}", facts["request_shape_sha256"])

    # another episode of the same actor: its own working folder, keys in another order -> same hash
    other_cwd = "/home/ana/runs/b-s1/work"
    other = {"tools": SHAPE["tools"], "model": SHAPE["model"],
             "system": [SHAPE["system"][0], {"type": "text", "text": f"Working directory: {other_cwd}"}]}
    assert facts_of(jsonl({**INIT, "cwd": other_cwd}), other)["request_shape_sha256"] == \
        facts["request_shape_sha256"]
    # a changed tool definition or system prompt is another actor
    changed_tool = {**SHAPE, "tools": [{**SHAPE["tools"][0], "description": "Run a command"}]}
    changed_prompt = {**SHAPE, "system": [{"type": "text", "text": "You are a helpful agent."}, SHAPE["system"][1]]}
    assert facts_of(messages, changed_tool)["request_shape_sha256"] != facts["request_shape_sha256"]
    assert facts_of(messages, changed_prompt)["request_shape_sha256"] != facts["request_shape_sha256"]

    none = facts_of(jsonl({"type": "assistant", "message": {"content": []}}), None)
    assert none == {"actor_model_id": None, "claude_code_version": None, "actor_tools": None,
                    "request_shape_sha256": None}


def test_what_is_stored_of_the_init_line_is_scrubbed():
    key = "sk-ant-api03-" + "a1B2c3D4" * 11 + "AA"
    facts = facts_of(jsonl({**INIT, "model": f"/home/ana/{key}", "tools": [f"Bash {key}", "/home/ana/x"]}), None)
    assert "/home/ana" not in json.dumps(facts) and key not in json.dumps(facts)
    assert facts["actor_tools"] == ["<home>/x", "Bash <redacted:anthropic>"]


def test_series_facts_and_benchmark_versions():
    info = {"actor": {"model": "m", "cli": "2.1.310"}, "harness": {"version": "1.4.2", "commit": "3f9c2e1",
                                                                   "dirty": False}, "benchmark_version": "1.2.0"}
    assert series_facts(info) == {"benchmark_version": "1.2.0", "harness_commit": "3f9c2e1", "harness_dirty": False,
                                  "actor_cli": "2.1.310", "actor_model": "m"}
    assert series_facts({"harness": {"dirty": True}}) == {"benchmark_version": None, "harness_commit": None,
                                                          "harness_dirty": True, "actor_cli": None, "actor_model": None}
    assert series_facts({"harness": "3f9c2e1", "actor": None})["harness_commit"] is None
    assert [minor_version(v) for v in ("1.2.0", "10.31.7", "1.2", "v1.2.0", "1.2.0-rc1", "1.٢.0", None)] == \
        [(1, 2), (10, 31), None, None, None, None, None]


# ---------------------------------------------------------------- the checks' reasons


def row(series: str, episode: str, **changes) -> dict:
    base = {"series": series, "id": episode, "benchmark_version": "1.2.0", "harness_commit": "3f9c2e1",
            "harness_dirty": False, "actor_cli": "2.1.310", "actor_model": "claude-opus-4.5",
            "actor_model_id": "claude-opus-4-5-20251101",
            "claude_code_version": "2.1.310", "actor_tools": ["Bash", "Read"], "request_shape_sha256": "ab" * 32}
    return {**base, **changes}


def test_uncommitted_and_unversioned_series_are_named():
    rows = [row("clean", "a-s1"), row("clean", "b-s1"), row("dirty", "a-s2", harness_dirty=True),
            row("dirty", "b-s2", harness_dirty=True), row("no-commit", "a-s3", harness_commit=None),
            row("no-version", "a-s4", benchmark_version=None), row("short", "a-s5", benchmark_version="1.2")]
    uncommitted = uncommitted_series(rows)
    assert [p.split(":")[0] for p in uncommitted] == ["dirty", "no-commit"]
    assert "harness.dirty is true" in uncommitted[0] and "no harness.commit" in uncommitted[1]
    unversioned = unversioned_series(rows)
    assert [p.split(":")[0] for p in unversioned] == ["no-version", "short"]
    assert "'1.2' is not MAJOR.MINOR.PATCH" in unversioned[1]


def test_episodes_that_disagree_on_what_ran_are_named():
    rows = [row("s", f"e{i}-s1") for i in range(4)] + [
        row("model", "a-s2"), row("model", "b-s2"), row("model", "c-s2", actor_model_id="claude-sonnet-4-5"),
        row("tools", "a-s4"), row("tools", "b-s4", actor_tools=["Bash", "Read", "WebFetch"]),
        row("prompt", "a-s5"), row("prompt", "b-s5"), row("prompt", "c-s5", request_shape_sha256="cd" * 32),
        row("version", "a-s6", claude_code_version="2.1.311", actor_cli="2.1.310"),
        row("version", "b-s6", claude_code_version="2.1.311", actor_cli="2.1.310"),
    ]
    named = {(p["series"], p["id"]): p["text"] for p in actor_disagreements(rows)}  # one per odd episode
    assert list(named) == [("model", "c-s2"), ("prompt", "c-s5"), ("tools", "a-s4"), ("tools", "b-s4"),
                           ("version", "a-s6"), ("version", "b-s6")]
    assert named["model", "c-s2"] == \
        "disagrees on the model: claude-sonnet-4-5 (series.json actor.model claude-opus-4.5; 2 of the series' episodes run it)"
    # one against one, a tie: both sides are named
    assert named["tools", "b-s4"] == \
        "disagrees on the tool names: [Bash, Read, WebFetch] (a tie: [Bash, Read] in 1, [Bash, Read, WebFetch] in 1)"
    assert named["prompt", "c-s5"].startswith("disagrees on the system prompt and tool definitions (sha256): cdcdcd")
    # they agree with each other, but not with the series' actor.cli
    assert named["version", "a-s6"] == named["version", "b-s6"] == \
        "claude_code_version 2.1.311 is not the series' actor.cli 2.1.310"


def test_an_episode_that_records_no_model_is_not_recorded_never_the_odd_one():
    # one witness, two logs without an init line: the witness agrees with series.json, nobody is blamed
    unrecorded = dict(actor_model_id=None, claude_code_version=None, actor_tools=None)
    witness = [row("w", "a-s1"), row("w", "b-s1", **unrecorded), row("w", "c-s1", **unrecorded)]
    assert actor_disagreements(witness) == []
    assert unrecorded_actors(witness) == ["w: not recorded (no system/init line), so not compared: b-s1, c-s1"]
    # the only witness runs another model than the series' actor: it is named for that, with the series' actor
    other = [row("o", "a-s2", actor_model_id="claude-sonnet-4-5"), row("o", "b-s2", **unrecorded)]
    assert [(p["id"], p["text"]) for p in actor_disagreements(other)] == [
        ("a-s2", "disagrees on the model: claude-sonnet-4-5 (series.json actor.model claude-opus-4.5; "
                 "0 of the series' episodes run it)")]
    # nobody records a model: none can be compared, and it is said
    silent = [row("n", "a-s3", **unrecorded), row("n", "b-s3", **unrecorded)]
    assert actor_disagreements(silent) == []
    assert unrecorded_actors(silent) == ["n: no episode's log records a model (no system/init line), so none can "
                                         "be compared with the series' actor.model claude-opus-4.5"]
    # series.json names no model: the largest group of those that record one decides
    unnamed = [row("u", f"{x}-s4", actor_model=None) for x in "ab"] + [
        row("u", "c-s4", actor_model=None, actor_model_id="claude-sonnet-4-5"), row("u", "d-s4", actor_model=None,
                                                                                   **unrecorded)]
    assert [(p["id"], p["text"]) for p in actor_disagreements(unnamed)] == [
        ("c-s4", "disagrees on the model: claude-sonnet-4-5 (the other 2: claude-opus-4-5-20251101)")]
    assert unrecorded_actors([row("all", "a-s5")]) == []


# ---------------------------------------------------------------- the planted faults, end to end


def named_series(text: str, run) -> set[str]:
    return {series for series in run.series if series in text}


def named_episodes(text: str, run) -> set[str]:
    return {plan.episode_id for plan in run.episodes if re.search(rf"(?<![\w.-]){re.escape(plan.episode_id)}(?![\w.-])", text)}


def check_of(summary: dict, name: str) -> dict:
    return next(c for c in summary["checks"] if c["check"] == name)


def test_the_generator_plants_one_of_each(sample_runs):
    assert len(sample_runs.dirty_series) == 1 and len(sample_runs.unversioned_series) == 1
    assert sample_runs.dirty_series != sample_runs.unversioned_series and len(sample_runs.odd_actor_ids) == 1
    planted = {*sample_runs.dirty_series, *sample_runs.unversioned_series}
    assert all(sample_runs.series[s] == "completed" for s in planted)
    for series_id in sample_runs.series:
        info = json.loads((sample_runs.root / series_id / "series.json").read_text())
        assert info["harness"]["dirty"] is (series_id in sample_runs.dirty_series)
        assert ("benchmark_version" not in info) is (series_id in sample_runs.unversioned_series)
    odd = next(p for p in sample_runs.episodes if p.episode_id in sample_runs.odd_actor_ids)
    entries, _ = episode_entries(sample_runs.root / odd.series)
    assert odd.bad is None and odd.init.model == ODD_ACTOR_MODEL and odd.episode_id in {e.episode_id for e in entries}


def test_each_check_names_exactly_the_planted_series_and_episodes(built_once, sample_runs):
    summary = built_once["summary"]
    committed, versioned, one_actor = (check_of(summary, name) for name in CHECKS)
    assert committed["asset"] == versioned["asset"] == one_actor["asset"] == "dataset_episodes"
    assert committed["passed"] is False and named_series(committed["description"], sample_runs) == \
        set(sample_runs.dirty_series)
    assert "harness.dirty is true" in committed["description"] and "meta/withheld.jsonl" in committed["description"]
    assert versioned["passed"] is False and named_series(versioned["description"], sample_runs) == \
        set(sample_runs.unversioned_series)
    assert "no benchmark_version" in versioned["description"] and "meta/withheld.jsonl" in versioned["description"]
    odd = next(p for p in sample_runs.episodes if p.episode_id in sample_runs.odd_actor_ids)
    assert one_actor["passed"] is False
    assert named_episodes(one_actor["description"], sample_runs) == set(sample_runs.odd_actor_ids)
    assert named_series(one_actor["description"], sample_runs) == {odd.series}
    assert f"{odd.series}/{odd.episode_id}: disagrees on the model: {ODD_ACTOR_MODEL}" in one_actor["description"]


def test_the_rows_carry_the_three_columns_at_the_end(built_once, sample_runs):
    # contract 3: "..., archive_sha256, brief, benchmark_version, actor_model_id, harness_commit"
    assert DATASET_COLUMNS[-5:] == ("archive_sha256", "brief", "benchmark_version", "actor_model_id", "harness_commit")
    dataset = built_once["dataset"]
    rows = [json.loads(line) for line in (dataset / "episodes.jsonl").read_text().splitlines()]
    plans = {p.episode_id: p for p in sample_runs.episodes}
    assert rows and {r["series"] for r in rows} == {s for s, status in sample_runs.series.items()
                                                    if status == "completed"}
    for r in rows:
        assert list(r)[-3:] == ["benchmark_version", "actor_model_id", "harness_commit"]
        assert r["benchmark_version"] == (None if r["series"] in sample_runs.unversioned_series else "1.2.0")
        assert r["harness_commit"] == "3f9c2e1"
        assert r["actor_model_id"] == plans[r["id"]].init.model
    parquet = pl.read_parquet(dataset / "data" / "episodes.parquet")
    assert parquet.columns[-3:] == ["benchmark_version", "actor_model_id", "harness_commit"]
    assert parquet.filter(pl.col("id").is_in(sample_runs.odd_actor_ids))["actor_model_id"].to_list() == \
        [ODD_ACTOR_MODEL]


def test_the_review_sites_index_shows_the_failing_checks(built_once, sample_runs):
    index = (built_once["home"] / SITE_DIR / "index.html").read_text()
    for name, planted in zip(CHECKS, (sample_runs.dirty_series, sample_runs.unversioned_series,
                                      sample_runs.odd_actor_ids)):
        found = re.search(rf'<tr class="check failed" data-check="{name}">(.*?)</tr>', index, re.DOTALL)
        assert found, name
        reasons = re.search(r'<td class="reasons">(.*?)</td>', found[1], re.DOTALL)[1]
        assert all(p in reasons for p in planted), name


@pytest.fixture
def offline_hub(monkeypatch, tmp_path):
    """`vae publish` refuses before it talks to any Hub: point it at a port nobody listens on."""
    monkeypatch.setenv("VAE_HUB_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_notARealTokenForTheRefusalTest0000")


def latest(name: str) -> dg.AssetCheckEvaluation:
    key = dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), name)
    return dg.DagsterInstance.get().get_latest_asset_check_evaluation_record(key).evaluation


def test_publish_refuses_with_the_reasons_and_withholding_is_the_way_out(built_once, sample_runs, offline_hub,
                                                                         capsys):
    dataset, withheld = built_once["dataset"], built_once["meta"] / "withheld.jsonl"
    assert main(["publish", "--dataset", str(dataset), "--repo", "vae-lab/x"]) == 1
    out = capsys.readouterr().out
    assert "publishing refused" in out
    for name, planted in zip(CHECKS, (sample_runs.dirty_series, sample_runs.unversioned_series,
                                      sample_runs.odd_actor_ids)):
        lines = reason(out, name)  # the count, then one problem a line
        assert all(any(p in line for line in lines[1:]) for p in planted), lines
    try:
        # the odd episode withheld: its series agrees again; the dirty series still blocks
        withheld.write_text(json.dumps({"episode": sample_runs.odd_actor_ids[0], "reason": "ran another model"}) + "\n")
        assert main(["publish", "--dataset", str(dataset), "--repo", "vae-lab/x"]) == 1
        out = capsys.readouterr().out
        assert latest("one_actor_per_series").passed is True and "one_actor_per_series" not in out
        assert latest("harness_committed").passed is False and "dataset_episodes.harness_committed" in out

        withheld.write_text("".join(json.dumps({"series": s, "reason": "not reproducible"}) + "\n"
                                    for s in (*sample_runs.dirty_series, *sample_runs.unversioned_series)))
        assert main(["publish", "--dataset", str(dataset), "--repo", "vae-lab/x"]) == 1  # other checks still fail
        out = capsys.readouterr().out
        for name in CHECKS:
            assert latest(name).passed is True and f"dataset_episodes.{name}" not in out, name
    finally:
        withheld.unlink(missing_ok=True)
