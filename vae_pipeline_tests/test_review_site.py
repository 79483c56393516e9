"""The review site without a browser: incremental through `vae build` (a new series renders its
own pages and the index, nothing else), the asset's link for the Dagster UI, `vae review`,
`vae allow` accepting a finding shown on a page, the index listing the episodes each failed check
names with links to their pages, shared ranks, and the gate report an episode page shows, worked
out by hand."""

from __future__ import annotations

import hashlib
import html
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from vae_pipeline.assets.review_site import latest_checks
from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.cli.publish import publish
from vae_pipeline.domain.review import site as review_site
from vae_pipeline.domain.verdicts.host import gate_report
from vae_pipeline.domain.review.site import (
    CheckResult,
    Leaderboard,
    SiteInputs,
    leaderboard_tables,
    render_site,
)
from vae_pipeline.domain.objects import location
from vae_pipeline.domain.verdicts.rubric import load_rubric
from vae_pipeline.domain.scrub.texts import ScrubConfig
from vae_pipeline.sample.generator import ODD_ACTOR_MODEL, generate
from vae_pipeline.storage.checks import check_items
from vae_pipeline.storage.resources import Warehouse
from vae_pipeline_tests.conftest import META, isolate
from vae_pipeline_tests.render_workers import build_process_with_workers


def mtimes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def latest_site_metadata() -> dict:
    records = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("review_site"), limit=1).records
    return records[0].asset_materialization.metadata


@pytest.fixture(scope="module")
def two_then_three(tmp_path_factory):
    """Two series built, then a third added and built: the site's files after each build."""
    root = tmp_path_factory.mktemp("review_incremental")
    sample = generate(root / "sample", META, series=3, episodes=1, seed=5, bad=False)
    first, second, third = sorted(sample.series)
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        runs = root / "runs"
        for series in (first, second):
            shutil.copytree(sample.root / series, runs / series)
        build(runs, paths["dataset"])
        site = paths["home"] / "review"
        before, before_metadata = mtimes(site), latest_site_metadata()
        shutil.copytree(sample.root / third, runs / third)
        summary = build(runs, paths["dataset"])
        yield {"site": site, "before": before, "before_metadata": before_metadata, "after": mtimes(site),
               "metadata": latest_site_metadata(), "summary": summary, "series": (first, second, third),
               "paths": paths, "sample": sample, "runs": runs}


def test_a_new_series_renders_its_pages_and_the_index_only(two_then_three):
    first, second, third = two_then_three["series"]
    before, after = two_then_three["before"], two_then_three["after"]
    assert two_then_three["before_metadata"]["series_rendered"].value == [first, second]
    assert two_then_three["metadata"]["series_rendered"].value == [third]
    assert two_then_three["summary"]["materialized"]["review_site"] == [None]
    new = set(after) - set(before)
    episodes = [p.episode_id for p in two_then_three["sample"].episodes if p.series == third]
    # the series page, each episode's page and its transcript with the images it shows: nothing else
    assert {f"series/{third}.html", *(f"episodes/{third}/{e}.html" for e in episodes),
            *(f"episodes/{third}/{e}/transcript-1.html" for e in episodes)} <= new
    own = {f"series/{third}.html", f"search/{third}.js", f".state/{third}.json"}
    assert all(name in own or name.startswith(f"episodes/{third}/") for name in new), new
    assert own <= new
    # the index, and this machine's copy of its parts (the new series' part added)
    assert {name for name in before if name in after and after[name] != before[name]} == \
        {"index.html", f"{review_site.BYTECODE}/{review_site.INDEX_PARTS}"}
    assert any(name.startswith(f"episodes/{third}/{episodes[0]}/images/") for name in new)
    for series in (first, second):
        pages = [name for name in before if name.startswith((f"series/{series}", f"episodes/{series}/"))]
        assert pages and all(after[name] == before[name] for name in pages), series
    assert after["index.html"] != before["index.html"]
    assert third in (two_then_three["site"] / "index.html").read_text()


def test_the_asset_links_the_site_for_the_dagster_ui(two_then_three):
    site = two_then_three["metadata"]["site"]
    assert isinstance(site, dg.UrlMetadataValue)
    assert site.value == (two_then_three["site"] / "index.html").resolve().as_uri()
    assert not [p for p in two_then_three["site"].rglob("*.part")]  # every write went through a temp name


def test_vae_review_prints_the_site_url_or_says_to_build_first(two_then_three, capsys, tmp_path, monkeypatch):
    assert main(["review"]) == 0
    assert capsys.readouterr().out.strip() == (two_then_three["site"] / "index.html").resolve().as_uri()
    monkeypatch.setenv("VAE_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "empty" / "dagster"))
    assert main(["review"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run `vae build` first" in err


def site_inputs(home: Path, rubric_file: Path) -> SiteInputs:
    rows = pl.read_parquet(home / "tables" / "episode_table" / "table.parquet")
    return SiteInputs(rows=rows, published=set(), withheld={}, checks=[], history={},
                      rubric=load_rubric(rubric_file))


def test_unchanged_series_are_left_alone_a_template_change_renders_all_and_a_gone_series_goes(
        two_then_three, tmp_path, monkeypatch):
    home = two_then_three["paths"]["home"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    out = home / "review-copy"
    assert render_site(inputs, home, out).series_rendered == list(two_then_three["series"])
    before = mtimes(out)
    searched = []  # the series whose search entries are made
    made = review_site.search_index
    monkeypatch.setattr(review_site, "search_index",
                        lambda rows, inputs: searched.extend(sorted({r["series"] for r in rows})) or made(rows, inputs))
    again = render_site(inputs, home, out)
    assert again.series_rendered == [] and again.series_unchanged == list(two_then_three["series"])
    assert {k: v for k, v in mtimes(out).items() if k != "index.html"} == \
           {k: v for k, v in before.items() if k != "index.html"}
    assert searched == []
    lost = out / "search" / f"{two_then_three['series'][1]}.js"  # a search file gone is made again, alone
    kept = lost.read_bytes()
    lost.unlink()
    render_site(inputs, home, out)
    assert searched == [two_then_three["series"][1]] and lost.read_bytes() == kept
    monkeypatch.setattr(review_site, "templates_version", lambda: "a different template")
    assert render_site(inputs, home, out).series_rendered == list(two_then_three["series"])
    first = two_then_three["series"][0]
    inputs.rows = inputs.rows.filter(pl.col("series") != first)
    report = render_site(inputs, home, out)
    assert report.series_removed == [first] and report.series_rendered == []
    assert not (out / "series" / f"{first}.html").exists() and not (out / "episodes" / first).exists()
    assert not (out / "search" / f"{first}.js").exists() and not (out / ".state" / f"{first}.json").exists()
    assert "Leaderboard" not in (out / "index.html").read_text()


def test_the_index_keeps_each_unchanged_series_part_and_renders_a_changed_one_again(two_then_three):
    """Each series' rows under "What blocks the release" and in the series table come from this
    machine's copy of the last render while what they show is the same: a part edited in that
    copy stays on the index (it was not rendered again) until its series changes; a damaged copy,
    or a template change, renders every part, and the index comes out as from scratch."""
    home = two_then_three["paths"]["home"]
    first, second, third = two_then_three["series"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    episodes = inputs.rows.filter(pl.col("valid")).to_dicts()
    inputs.checks = [CheckResult("no_scrub_findings", "about", False, "the way out",
                                 [{"series": r["series"], "id": r["id"], "text": "an email"} for r in episodes])]
    out = home / "review-index-parts"
    render_site(inputs, home, out)
    from_scratch = (out / "index.html").read_text()
    copy = out / review_site.BYTECODE / review_site.INDEX_PARTS
    parts = json.loads(copy.read_bytes())
    assert sorted(parts["triage"]) == sorted(parts["rows"]) == [first, second, third]
    for kind in ("triage", "rows"):
        for series in (first, second):
            parts[kind][series][1] = f'<tr class="kept">{kind} {series}</tr>'
    copy.write_text(json.dumps(parts))
    inputs.published = set(inputs.rows.filter(pl.col("series") == second)["id"])  # the second's row changes
    render_site(inputs, home, out)
    index = (out / "index.html").read_text()
    assert re.findall(r'<tr class="kept">([^<]*)</tr>', index) == [f"triage {first}", f"triage {second}", f"rows {first}"]
    assert f'<tr data-series="{second}">' in index and f'<tr data-series="{third}">' in index
    copy.write_bytes(b'{"version": ')  # damaged: every part rendered again
    inputs.published = set()
    render_site(inputs, home, out)
    assert _without_clock((out / "index.html").read_text()) == _without_clock(from_scratch)


def _without_clock(index: str) -> str:
    return re.sub(r"Generated [^·]*·", "", index)


def test_a_state_is_read_whole_only_for_a_series_rendered_again_and_a_damaged_one_costs_its_transcripts(
        two_then_three, monkeypatch):
    """Which series are unchanged is read from the head of each state file (its fingerprint); what
    the episode pages said of the archives is parsed only for a series rendered again, and spares
    its transcripts. A state file cut short leaves its series alone until the series changes,
    then its transcripts are made again; one whose head is damaged renders its series again."""
    home = two_then_three["paths"]["home"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    out = home / "review-state"
    first, second, third = two_then_three["series"]
    render_site(inputs, home, out)
    parsed, transcripts = [], []
    read, render = review_site._read_episodes_said, review_site._render_transcript
    monkeypatch.setattr(review_site, "_read_episodes_said",
                        lambda out, series: parsed.append(series) or read(out, series))
    monkeypatch.setattr(review_site, "_render_transcript",
                        lambda env, folder, episode, said: transcripts.append(episode["id"]) or
                        render(env, folder, episode, said))
    state = out / ".state"
    (state / f"{second}.json").write_bytes((state / f"{second}.json").read_bytes()[:60])  # the head alone left
    (state / f"{third}.json").write_bytes(b'{"fingerprint": 1')
    assert render_site(inputs, home, out).series_rendered == [third]
    assert parsed == [] and transcripts == inputs.rows.filter(pl.col("series") == third)["id"].to_list() and transcripts
    parsed.clear(), transcripts.clear()
    inputs.published = set(inputs.rows.filter(pl.col("series").is_in([first, second]))["id"])  # their pages change
    assert render_site(inputs, home, out).series_rendered == [first, second]
    assert parsed == [first, second]
    assert transcripts == inputs.rows.filter(pl.col("series") == second)["id"].to_list() and transcripts  # not the first's


# ---------------------------------------------------------------- every check's episodes, linked


def named_on_index(index: str, check: str) -> list[tuple[str | None, str | None, str]]:
    """(link text, href, the item's text) of each item the index lists for a failed check."""
    row = re.search(rf'<tr class="check failed" data-check="{check}">(.*?)</tr>', index, re.DOTALL)
    assert row, check
    listed = re.search(r'<ul class="check-items">(.*?)</ul>', row[1], re.DOTALL)
    assert listed, check
    items = []
    for item in re.findall(r"<li>(.*?)</li>", listed[1], re.DOTALL):
        link = re.match(r'<a href="([^"]+)">([^<]+)</a>', item)
        items.append((link[2] if link else None, link[1] if link else None, html.unescape(re.sub(r"<[^>]+>", "", item))))
    return items


def test_each_check_that_names_episodes_lists_them_on_the_index_linked_to_their_pages(tmp_path, monkeypatch):
    """A series that ran two models, built; then its dataset folder damaged (a video gone, an
    archive overwritten, a manifest gone, a row gone from the parquet) and the publish checks run
    again by `vae publish`: the index lists, for each check, the episodes it names, each linked
    to that episode's page."""
    sample = generate(tmp_path / "sample", META, series=1, episodes=3, seed=7, bad=False, provenance_faults=True)
    paths = isolate(tmp_path, monkeypatch)
    build(sample.root, paths["dataset"])
    dataset = paths["dataset"]
    first, odd, last = (p.episode_id for p in sample.episodes)  # the generator gives the second episode another model
    assert sample.odd_actor_ids == [odd]
    rows = {r["id"]: r for r in map(json.loads, (dataset / "episodes.jsonl").read_text().splitlines())}
    assert sorted(rows) == sorted((first, odd, last))
    (dataset / rows[first]["video"]).unlink()
    (dataset / rows[last]["archive"]).write_bytes(b"not the archive")
    (dataset / rows[odd]["archive"]).with_name(f"{odd}.json").unlink()
    parquet = dataset / "data" / "episodes.parquet"
    pl.read_parquet(parquet).filter(pl.col("id") != first).write_parquet(parquet)
    monkeypatch.setenv("VAE_HUB_ENDPOINT", "http://127.0.0.1:9")  # refused before any Hub is asked
    monkeypatch.setenv("HF_TOKEN", "hf_notARealTokenForTheRefusalTest0000")
    assert publish(dataset, "vae-lab/x")[0] is False

    home = paths["home"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    inputs.checks = latest_checks(dg.DagsterInstance.get(), Warehouse(path=str(home)))
    site = home / "review"
    render_site(inputs, home, site)
    index = (site / "index.html").read_text()
    series = sample.episodes[0].series
    expected = {"one_actor_per_series": {odd: f"disagrees on the model: {ODD_ACTOR_MODEL}"},
                "delivered_videos_present": {first: rows[first]["video"]},
                "files_match_manifests": {odd: "archive or manifest missing", last: "sha256 differs from its manifest"},
                "rows_and_archives_agree": {odd: "archive_sha256 in episodes.jsonl differs from the manifest"},
                "jsonl_and_parquet_agree": {first: "only in episodes.jsonl"}}
    for check, said in expected.items():
        named = named_on_index(index, check)
        # every item a link, one per episode named
        assert sorted(text or item for text, _, item in named) == sorted(f"{series}/{e}" for e in said), check
        for text, href, item in named:
            episode = text.split("/")[1]
            assert said[episode] in item, (check, item)
            page = site / href
            assert page.is_file() and f"<h1>{episode} " in page.read_text(), (check, href)


def test_a_check_naming_more_than_the_index_shows_counts_the_rest_and_the_triage_lists_every_one(two_then_three):
    """A failed check that names 120 reasons: its row on the index lists the first 50 and counts
    the other 70, each of which the triage above still lists under its episode."""
    home = two_then_three["paths"]["home"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    episodes = inputs.rows.filter(pl.col("valid")).to_dicts()
    items = [{"series": r["series"], "id": r["id"], "text": f"reason {n:03d}"}
             for n, r in enumerate(episodes * (120 // len(episodes) + 1))][:120]
    inputs.checks = [CheckResult("no_scrub_findings", "about", False, "the way out", items)]
    out = home / "review-many-reasons"
    try:
        render_site(inputs, home, out)
        index = (out / "index.html").read_text()
    finally:
        shutil.rmtree(out)
    named = named_on_index(index, "no_scrub_findings")
    assert [item.rsplit(": ", 1)[1] for _, _, item in named] == [f"reason {n:03d}" for n in range(50)]
    more = re.findall(r'<li class="more">(.*?)</li>', index, re.DOTALL)
    assert [re.sub(r"<[^>]+>", "", m) for m in more] == ["and 70 more, each under its episode in What blocks the release"]
    triaged = index[index.index('<section id="triage">'):index.index('<section id="checks">')]
    assert sorted(re.findall(r"reason \d{3}", triaged)) == [f"reason {n:03d}" for n in range(120)]


# ---------------------------------------------------------------- the gate report, by hand


RUBRIC = load_rubric(META / "rubric-v1.2.json")  # duration: min_s 1.0, fraction 0.2; black: 1.0; freeze: 2.0, hold ± 0.25
BRIEF = {"duration_s": 8.0, "aspect": "16:9", "hold": {"start_s": 6.5, "end_s": 8.0}, "loop": False}


def facts(**changes) -> dict:
    return {"video_ok": True, "video_duration_s": 8.0, "fps": 15.0, "width": 192, "height": 108,
            "black_ranges": [], "freeze_ranges": [], "still": False, "loop_seam": 3.0, "aspect": "16:9", **changes}


def by_gate(report: list[dict]) -> dict[str, dict]:
    return {g["gate"]: g for g in report}


def test_gate_report_shows_each_measurement_against_its_threshold():
    report = by_gate(gate_report(facts(video_duration_s=9.7, black_ranges=[[1.0, 1.5], [2.0, 3.2]],
                                       freeze_ranges=[[0.5, 2.0], [6.3, 8.0]]), True, BRIEF, RUBRIC))
    assert [g for g in report] == ["no_video", "duration", "aspect", "black", "freeze", "still", "loop_seam"]
    # 8 s asked, allowed ± max(1.0, 0.2 × 8) = 1.6 s: 9.7 s is 1.7 s off
    assert report["duration"] == {"gate": "duration", "measured": 9.7, "threshold": "8 s ± 1.6 s", "failed": True,
                                  "result": "failed"}
    assert report["black"]["measured"] == pytest.approx(1.2) and report["black"]["failed"]
    # [6.3, 8.0] lies inside the hold widened by 0.25 s; [0.5, 2.0] lasts 1.5 s < 2 s
    assert report["freeze"]["measured"] == pytest.approx(1.5) and not report["freeze"]["failed"]
    assert report["loop_seam"] == {"gate": "loop_seam", "measured": None, "threshold": "only for a looping brief",
                                   "failed": False, "result": "not measured"}
    assert report["aspect"]["result"] == "passed"
    assert not report["no_video"]["failed"] and not report["aspect"]["failed"] and not report["still"]["failed"]


def test_gate_report_without_a_video_fails_only_no_video():
    report = by_gate(gate_report(None, False, BRIEF, RUBRIC))
    assert report["no_video"] == {"gate": "no_video", "measured": "nothing delivered",
                                  "threshold": "a decodable out.mp4", "failed": True, "result": "failed"}
    assert not any(g["failed"] for name, g in report.items() if name != "no_video")
    assert report["duration"]["measured"] is None
    # issue 19 item 4: without a video a gate is not measured, not passed
    assert {name: g["result"] for name, g in report.items() if name != "no_video"} == dict.fromkeys(
        ("duration", "aspect", "black", "freeze", "still", "loop_seam"), "not measured")


def test_values_the_scrub_leaves_as_findings_are_masked_on_the_pages():
    inputs = SiteInputs(rows=pl.DataFrame(), published=set(), withheld={}, checks=[], history={}, rubric=RUBRIC,
                        scrub=ScrubConfig(hostname="gpu-07.render.internal", usernames=("vae-runner",)))
    brief = {"prompt": "mail jane.doe@example.com from 52.14.200.1; reviewed by vae-runner",
             "beats": [{"name": "call 34.1.2.3", "start_s": 0.0}], "duration_s": 8.0}
    assert inputs.masked(brief) == {
        "prompt": "mail <finding:email> from <finding:ip_address>; reviewed by <finding:user>",
        "beats": [{"name": "call <finding:ip_address>", "start_s": 0.0}], "duration_s": 8.0}


def test_vae_allow_accepts_the_finding_a_page_shows_and_the_next_build_no_longer_blocks(two_then_three, capsys):
    """The last test of the module: it builds again."""
    paths, sample = two_then_three["paths"], two_then_three["sample"]
    plan = next(p for p in sample.episodes if sample.series[p.series] == "completed")
    page = (two_then_three["site"] / "episodes" / plan.series / f"{plan.episode_id}.html").read_text()
    command = next(line for line in page.splitlines() if 'class="command"' in line and " email " in line)
    _, where, kind = command.split("vae allow ", 1)[1].split(" --reason")[0].split(" ")[:3]  # id, FILE:LINE, kind
    assert kind == "email" and where.startswith("messages.jsonl:")
    assert main(["allow", plan.episode_id, where, kind, "--reason", "an invented address shown on screen"]) == 0
    out = capsys.readouterr().out
    assert plan.secrets["email"] not in out and "no longer blocks" in out
    allowed = [json.loads(line) for line in (paths["meta"] / "scrub-allow.jsonl").read_text().splitlines()]
    # the sha256 of the value the generator planted (the value itself is never stored)
    assert allowed[-1] | {"allowed_at": None} == {
        "file": "messages.jsonl", "kind": "email", "sha256s": [hashlib.sha256(plan.secrets["email"].encode()).hexdigest()],
        "episode": plan.episode_id, "line": int(where.split(":")[1]), "reason": "an invented address shown on screen",
        "allowed_at": None}
    assert main(["allow", plan.episode_id, where, kind, "--reason", "again"]) == 0
    assert "already accepts" in capsys.readouterr().out
    assert main(["allow", plan.episode_id, "messages.jsonl:999999", "email", "--reason", "x"]) == 2
    assert "has no finding messages.jsonl:999999 email" in capsys.readouterr().err
    build(two_then_three["runs"], paths["dataset"])
    table = pl.read_parquet(paths["home"] / "tables" / "episode_table" / "table.parquet")
    findings = {(f["file"], f["line"], f["kind"]): f["allowed"]
                for f in table.filter(pl.col("id") == plan.episode_id)["findings"][0]}
    assert findings[("messages.jsonl", int(where.split(":")[1]), "email")] is True
    assert not all(findings.values())  # the IP on that line and the session log's copy still block
    evaluation = dg.DagsterInstance.get().get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), "no_scrub_findings")).evaluation
    named = [(i["id"], i["text"]) for i in check_items(location(paths["home"]), evaluation.metadata)]
    assert (plan.episode_id, f"{where} email") not in named and (plan.episode_id, f"{where} ip_address") in named
    page = (two_then_three["site"] / "episodes" / plan.series / f"{plan.episode_id}.html").read_text()
    assert f"vae allow {plan.episode_id} {where} email" not in page and f"vae allow {plan.episode_id} {where} ip_address" in page


def test_a_shared_rank_reads_equals():
    rows = [{"source": "scores", "axis": "overall", "rank": rank, "model": m, "rating": 1000.0, "lo": 990.0,
             "hi": 1010.0, "battles": 10, "note": None} for rank, m in ((1, "a"), (1, "b"), (3, "c"), (None, "d"))]
    (table,) = leaderboard_tables(Leaderboard(chart=None, ratings=rows, agreement=[]))["tables"]
    assert [r["shown_rank"] for r in table["rows"]] == ["=1", "=1", "3", "–"]


def test_another_rubric_renders_no_transcript_again_and_the_pages_come_out_as_from_scratch(two_then_three,
                                                                                         monkeypatch):
    """A rehost: every series' pages are rendered again (labels and rules may have moved), but no
    archive is read and no transcript page written again, and every page is what a render into an
    empty folder gives."""
    home = two_then_three["paths"]["home"]
    out, fresh = home / "review-rehosted", home / "review-fresh"
    assert render_site(site_inputs(home, META / "rubric-v1.2.json"), home, out).series_rendered
    before = mtimes(out)
    transcripts = {name for name in before if name.count("/") == 3 and name.split("/")[2] != "invalid"}
    other = META / "rubric-archive" / "rubric-v1.0.json"
    read = []
    archive_review = review_site.archive_review
    monkeypatch.setattr(review_site, "archive_review", lambda row, *a: read.append(row["id"]) or archive_review(row, *a))
    report = render_site(site_inputs(home, other), home, out)
    assert read == []
    assert report.series_rendered == list(two_then_three["series"])
    after = mtimes(out)
    assert transcripts and {name: after[name] for name in transcripts} == {name: before[name] for name in transcripts}
    render_site(site_inputs(home, other), home, fresh)
    pages = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*.html") if p.name != "index.html"}
    assert {p.relative_to(out).as_posix() for p in out.rglob("*.html") if p.name != "index.html"} == pages
    assert [name for name in sorted(pages) if (out / name).read_bytes() != (fresh / name).read_bytes()] == []
    assert any("transcript-1.html" in (out / name).read_text() for name in pages if name.count("/") == 2)


def _site_files(out: Path) -> dict[str, bytes]:
    """Every file of a rendered site but the templates' compiled cache, the index's render time masked."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
             if p.is_file() and not p.relative_to(out).as_posix().startswith(f"{review_site.BYTECODE}/")}
    files["index.html"] = re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", b"<when>", files["index.html"])
    return files


def test_series_rendered_by_worker_processes_are_the_pages_one_process_renders(two_then_three, monkeypatch):
    """Past its page count the site's series are rendered by spawned workers: the same files, byte
    for byte, as this process renders alone; none of them rendered here. Either way every file
    written is made durable before the series' states, and the states after them (a fsync each:
    a new series' handful of pages must not wait for the machine's every dirty page)."""
    home = two_then_three["paths"]["home"]
    inputs = site_inputs(home, META / "rubric-v1.2.json")
    out = home / "review-workers"
    made_durable: list[list[str]] = []
    make_durable = review_site.make_durable

    def noted(paths):
        paths = list(paths)
        made_durable.append(sorted({Path(p).relative_to(out).as_posix() for p in paths}))
        make_durable(paths)

    monkeypatch.setattr(review_site, "make_durable", noted)
    monkeypatch.setattr(os, "sync", lambda: pytest.fail("a few pages synced the whole machine"))
    assert render_site(inputs, home, out, workers_from=10**9).series_rendered == list(two_then_three["series"])
    alone = _site_files(out)
    assert any(name.endswith("/transcript-1.html") for name in alone)
    states = sorted(name for name in alone if name.startswith(".state/"))
    assert len(states) == 3
    pages = sorted(name for name in alone if name not in states)
    assert made_durable == [sorted([*pages, f"{review_site.BYTECODE}/{review_site.INDEX_PARTS}"]), states]
    made_durable.clear()
    for path in out.iterdir():  # all but the compiled templates, which this process keeps using
        if path.name != review_site.BYTECODE:
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    def not_here(*args, **kwargs):
        raise RuntimeError("a series was rendered by the build's process")

    monkeypatch.setattr(review_site, "_render_series", not_here)  # the spawned workers import their own
    report = render_site(site_inputs(home, META / "rubric-v1.2.json"), home, out, workers_from=0)
    assert report.series_rendered == list(two_then_three["series"])
    assert _site_files(out) == alone
    assert made_durable == [pages, states]  # the index's parts, kept with the compiled templates, as they were


def _render_with_workers_asked(home: str, out: str) -> None:
    """In a daemonic process, as a Celery worker's: render the site asking for workers."""
    render_site(site_inputs(Path(home), META / "rubric-v1.2.json"), Path(home), Path(out), workers_from=0)


def test_a_process_that_may_not_start_workers_renders_the_series_itself(two_then_three):
    home = two_then_three["paths"]["home"]
    out = home / "review-daemon"
    render_site(site_inputs(home, META / "rubric-v1.2.json"), home, out, workers_from=10**9)
    alone = _site_files(out)
    for path in out.iterdir():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    daemon = multiprocessing.get_context("spawn").Process(target=_render_with_workers_asked,
                                                          args=(str(home), str(out)), daemon=True)
    daemon.start()
    daemon.join(timeout=120)
    assert daemon.exitcode == 0
    assert _site_files(out) == alone


def test_a_worker_spawned_by_the_vae_command_starts_without_dagster():
    """A spawned worker first runs its parent's main module again, here the `vae` script, as
    Python's spawn does (`import_main_path`); importing Dagster there (over a second, on every
    worker) would delay each worker's first page."""
    vae = Path(sys.executable).with_name("vae")
    code = ("import multiprocessing.spawn, sys; multiprocessing.spawn.import_main_path(sys.argv[1]); "
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('dagster', 'vae_pipeline')))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code, str(vae)], capture_output=True, text=True,
                                       check=True).stdout.replace("'", '"'))
    assert "vae_pipeline.cli" in loaded  # the script's module was run
    assert not [name for name in loaded if name.startswith("dagster") or name.startswith("vae_pipeline.cli.")]


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_killed_builds_render_workers_end_with_it(tmp_path):
    """Killed mid-render, the build's process leaves no worker behind (each would otherwise wait
    for its next series forever)."""
    parent = multiprocessing.get_context("spawn").Process(
        target=build_process_with_workers,
        args=(str(tmp_path / "home" / "review"), str(META / "rubric-v1.2.json"), str(tmp_path / "pids")))
    (tmp_path / "pids").mkdir()
    parent.start()
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "pids").iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = [int(path.name) for path in (tmp_path / "pids").iterdir()]
    assert len(workers) == 2 and not any(_ended(pid) for pid in workers)
    os.kill(parent.pid, signal.SIGKILL)
    parent.join()
    deadline = time.monotonic() + 30
    while not all(_ended(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_ended(pid) for pid in workers)
