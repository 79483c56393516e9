"""The review site in a real browser — Debian's Chromium driven by Playwright: every page of the
sample dataset loads with no console error and no failed request, every link, image and video
source resolves, the videos play with the measured duration, the timeline and the judge's defects
seek, a long transcript shows every tool call with the subagent's nested under its `Task` call and
its images, the search finds episodes by a failed gate, nothing planted appears (transcripts
included), the index names the failing blocking checks and links the episodes they name, and
`vae review --serve` serves the same. Every line of every log member of every archive appears on
some page (counted); a hand-written session log in contract 1's shapes shows its unknown line
types folded, its system lines and a `tool_reference` by their fields, and its subagent's log
linked from the `Task` call; the tool-call counts agree with the counts table and the plan; the
triage table lists exactly the plan's blocking episodes; and allowing a finding of three values
from its page, then building, clears it in one step (the last test: it builds again).

One build for the whole module: the sample runs, with credentials and a home path planted in one
brief (the site shows the brief, scrubbed), one episode's messages.jsonl replaced by a long log
in the CLI's real shapes and another's session and subagent logs by hand-written ones
(`long_transcript.py`); the index shows the leaderboard the build wrote.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import tarfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

import polars as pl
import pytest
import zstandard
from PIL import Image
from playwright.sync_api import Browser, Page, expect, sync_playwright

from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.domain.review.site import page_name
from vae_pipeline.review.server import review_server
from vae_pipeline.sample.generator import FPS, SampleRun
from vae_pipeline.sample.planted import planted_text, planted_values
from vae_pipeline_tests.conftest import copy_runs, isolate
from vae_pipeline_tests.long_transcript import (
    SESSION_AGENT,
    SESSION_REFERENCE,
    SESSION_TASK,
    SUBAGENT_CALL,
    plant_long_episode,
    plant_session_log,
)

CHROMIUM = "/usr/bin/chromium"  # Debian's package: a browser download is not possible here
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
FRAME = 1 / FPS
NO_VIDEO = ("no_video", "harness_403", "undecodable")
# the sample plants bad episodes in a completed series and an e-mail and IP in every transcript, and
# the provenance faults: a dirty series, an unversioned one, an episode of another model
FAILING_CHECKS = {"no_invalid_episodes", "no_scrub_findings", "harness_committed", "benchmark_versioned",
                  "one_actor_per_series"}
PLANTED_MODEL = "claude-opus-5.5"  # the sample generator's series.json actor.model
LONG_TURNS = 800  # ~3,200 lines of messages.jsonl
LONG_HOME = "/home/marisol"
SESSION_HOME = "/Users/tomasz"
LONG_MODEL = "claude-opus-5.5"  # the init line of long_transcript.py's messages.jsonl
MAX_PAGE_BYTES = 2 * 1024 * 1024


def blocking_episodes(sample: SampleRun) -> dict[str, set[str]]:
    """From the generator's plan: every episode of a completed series that blocks the release, and
    the checks it fails — invalid, an e-mail or IP planted in its logs (a finding), another model."""
    blocking: dict[str, set[str]] = {}
    for plan in sample.episodes:
        if sample.series[plan.series] != "completed":
            continue
        fails = {"no_invalid_episodes"} if plan.bad else {"no_scrub_findings"} if plan.secrets.get("email") else set()
        fails |= {"one_actor_per_series"} if plan.episode_id in sample.odd_actor_ids else set()
        if fails:
            blocking[plan.episode_id] = fails
    return blocking


def own_checks(sample: SampleRun, series: str) -> set[str]:
    """The checks that fail for `series` itself, from the plan."""
    plans = {p.episode_id: p for p in sample.episodes}
    own = {c for episode, fails in blocking_episodes(sample).items() if plans[episode].series == series for c in fails}
    return own | ({"harness_committed"} if series in sample.dirty_series else set()) \
        | ({"benchmark_versioned"} if series in sample.unversioned_series else set())


def archive_logs(archive: Path) -> dict[str, bytes]:
    """The log members of a staged archive, read here with tarfile (not by the code under test)."""
    logs = {}
    with archive.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream, \
            tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            name = member.name
            if member.isfile() and (name in ("messages.jsonl", "tool-events.jsonl", "transcript/session.jsonl")
                                    or re.fullmatch(r"transcript/subagents/agent-[^/]+\.jsonl", name)):
                logs[name] = tar.extractfile(member).read()
    return logs


def plant_in_brief(runs: Path, sample: SampleRun) -> tuple[str, dict[str, str]]:
    """Every planted kind in the prompt of one run folder's brief.json; (episode, values). The
    scrub replaces the credentials and the home path; the e-mail and IP stay in the brief as
    findings, which the site must show by kind only."""
    plan = next(p for p in sample.episodes if p.bad is None and not p.archive and p.variant == "clean"
                and sample.series[p.series] == "completed")
    values = planted_values(random.Random("test_review_browser"))
    path = runs / plan.series / plan.episode_id / "brief.json"
    brief = json.loads(path.read_text())
    brief["prompt"] += "\n" + planted_text(values)
    path.write_text(json.dumps(brief, indent=2) + "\n")
    return plan.episode_id, values


@pytest.fixture(scope="module")
def site(sample_runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("review")
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        runs = copy_runs(sample_runs, root / "runs")
        planted_episode, planted = plant_in_brief(runs, sample_runs)
        long = next(p for p in sample_runs.episodes if p.bad is None and not p.archive and p.variant == "clean"
                    and sample_runs.series[p.series] == "completed" and p.episode_id != planted_episode)
        long_values = planted_values(random.Random("long transcript"))
        long_plan = plant_long_episode(runs / long.series / long.episode_id, LONG_TURNS, LONG_HOME,
                                       planted_text(long_values))
        real = next(p for p in sample_runs.episodes if p.bad is None and not p.archive and p.variant == "clean"
                    and sample_runs.series[p.series] == "completed" and p.episode_id not in
                    (planted_episode, long.episode_id))
        real_plan = plant_session_log(runs / real.series / real.episode_id, SESSION_HOME)
        build(runs, paths["dataset"])
        table = pl.read_parquet(paths["home"] / "tables" / "episode_table" / "table.parquet")
        yield {"home": paths["home"], "root": paths["home"] / "review", "table": table, "dataset": paths["dataset"],
               "rows": {r["id"]: r for r in table.iter_rows(named=True)},
               "planted_episode": planted_episode, "planted": planted, "runs": runs,
               "long": long, "long_plan": long_plan, "long_values": long_values, "real": real,
               "real_plan": real_plan, "paths": paths}


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


def episode_page(site: dict, plan) -> Path:
    return site["root"] / "episodes" / plan.series / f"{plan.episode_id}.html"


def playable(sample: SampleRun) -> list:
    return [p for p in sample.episodes if p.bad is None and p.variant not in NO_VIDEO]


def open_page(page: Page, url: str) -> list[str]:
    """Load `url`, every image eagerly and every video to its first frame; the problems seen."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(url, wait_until="load")
    page.evaluate("for (const img of document.images) img.loading = 'eager'")
    page.wait_for_function("[...document.images].every(i => i.complete)")
    page.wait_for_function("[...document.querySelectorAll('video')].every(v => v.readyState >= 2 || v.error)")
    return problems


def transcript_pages(site: dict, plan, slug: str = "transcript") -> list[Path]:
    """The main pages of one log member's transcript (`slug`: transcript, session, subagent-<id>, …)."""
    folder = site["root"] / "episodes" / plan.series / plan.episode_id
    pages = [p for p in folder.glob(f"{slug}-*.html") if re.fullmatch(rf"{re.escape(slug)}-\d+", p.stem)]
    return sorted(pages, key=lambda p: int(p.stem.rsplit("-", 1)[1]))


def test_every_page_loads_clean_and_every_reference_resolves(site, sample_runs, page):
    expected = {"index.html", *(f"series/{s}.html" for s in sample_runs.series),
                *(f"episodes/{p.series}/{p.episode_id}.html" for p in sample_runs.episodes if p.bad is None),
                *(f"episodes/{p.series}/invalid/{page_name(p.episode_id)}" for p in sample_runs.episodes if p.bad)}
    pages = {p.relative_to(site["root"]).as_posix() for p in site["root"].rglob("*.html")}
    # in the folder named after the episode
    transcripts = {name for name in pages if name.count("/") == 3 and name.split("/")[2] != "invalid"}
    assert pages - transcripts == expected
    for plan in (p for p in sample_runs.episodes if p.bad is None):  # pages 1…n of every archive
        numbers = sorted(int(p.stem.rsplit("-", 1)[1]) for p in transcript_pages(site, plan))
        assert numbers == list(range(1, len(numbers) + 1)) and numbers, plan.episode_id
    assert len(transcript_pages(site, site["long"])) > 1
    for name in sorted(pages):
        problems = open_page(page, (site["root"] / name).as_uri())
        references = page.evaluate("""[
            ...[...document.querySelectorAll('a[href]')].map(a => a.href),
            ...[...document.querySelectorAll('img, video, script')].filter(e => e.src).map(e => e.src),
            ...[...document.querySelectorAll('link[href]')].map(l => l.href)]""")
        for url in references:
            parts = urlsplit(url)
            if parts.scheme == "data":
                continue
            assert parts.scheme == "file", f"{name}: {url} needs the network"
            assert Path(unquote(parts.path)).is_file(), f"{name}: {url} does not resolve"
        broken = page.evaluate("[...document.images].filter(i => !i.naturalWidth).map(i => i.src)")
        assert not problems and not broken, (name, problems, broken)


def test_videos_play_with_the_measured_duration(site, sample_runs, page):
    plans = playable(sample_runs)
    assert len(plans) >= 10
    for plan in plans:
        assert not open_page(page, episode_page(site, plan).as_uri())
        state = page.evaluate("(() => { const v = document.getElementById('video');"
                              " return {ready: v.readyState, duration: v.duration}; })()")
        planned = plan.brief["duration_s"] + (3.0 if plan.variant == "long" else 0.0)
        assert state["ready"] >= 2, plan.episode_id
        assert abs(state["duration"] - site["rows"][plan.episode_id]["video_duration_s"]) <= FRAME, plan.episode_id
        assert abs(state["duration"] - planned) <= FRAME, plan.episode_id


def test_clicking_a_freeze_range_or_a_judge_frame_seeks_the_video(site, sample_runs, page):
    plan = next(p for p in sample_runs.episodes if p.bad is None and p.variant == "freeze")
    planted_start = 1.0  # the generator's "freeze" variant freezes [1.0, 3.6)
    assert not open_page(page, episode_page(site, plan).as_uri())
    freeze = page.locator(".timeline .mark.freeze").first
    assert abs(float(freeze.get_attribute("data-seek")) - planted_start) <= FRAME
    freeze.click()
    page.wait_for_function(f"Math.abs(document.getElementById('video').currentTime - {planted_start}) <= {FRAME}")
    frame_times = [f["t_s"] for f in site["rows"][plan.episode_id]["judge_frames"]]
    assert page.locator(".frames figure").count() == len(frame_times) == 14
    page.locator(".frames button.frame").nth(9).click()
    page.wait_for_function(f"Math.abs(document.getElementById('video').currentTime - {frame_times[9]}) < 0.001")
    assert page.locator(".timeline .mark.frame").count() == 14


def needles(values: dict[str, str]) -> list[str]:
    """What must not appear: each value, and a PEM key by its body lines (line breaks may move)."""
    found = []
    for value in values.values():
        lines = value.splitlines()
        found += [line for line in lines[1:-1] if len(line) >= 40] if len(lines) > 2 else [value]
    return found


def test_no_planted_value_appears_in_any_page(site, sample_runs, page):
    values = [*needles(site["planted"]), *(n for p in sample_runs.episodes for n in needles(p.secrets))]
    assert len(values) > 100
    values += [*needles(site["long_values"]), LONG_HOME]
    files = [p for p in site["root"].rglob("*") if p.is_file() and p.suffix in (".html", ".css", ".js", ".json")]
    texts = {p.relative_to(site["root"]).as_posix(): p.read_text() for p in files}
    for path in site["root"].rglob("*.html"):
        page.goto(path.as_uri())
        texts[f"{path.relative_to(site['root']).as_posix()} (as shown)"] = page.inner_text("body")
    plan = next(p for p in sample_runs.episodes if p.episode_id == site["planted_episode"])
    shown = texts[f"episodes/{plan.series}/{plan.episode_id}.html (as shown)"]  # the planted brief, scrubbed and masked
    assert all(marker in shown for marker in ("<home>", "<finding:email>", "<finding:ip_address>"))
    long = "\n".join(text for name, text in texts.items()  # the sources: a collapsed result shows no text
                     if name.startswith(f"episodes/{site['long'].series}/{site['long'].episode_id}/")
                     and name.endswith(".html"))
    assert all(f'<mark class="{kind}">&lt;{marker}&gt;</mark>' in long for kind, marker in (
        ("scrubbed", "home"), ("finding", "finding:email"), ("scrubbed", "redacted:anthropic")))
    for name, text in texts.items():
        leaked = [v[:12] for v in values if v in text]
        assert not leaked, f"{name} shows planted values starting {leaked}"


def test_index_names_the_failing_blocking_checks_and_the_leaderboard(site, sample_runs, page):
    assert not open_page(page, (site["root"] / "index.html").as_uri())
    failed = set(page.eval_on_selector_all("tr.check.failed", "rows => rows.map(r => r.dataset.check)"))
    assert failed == FAILING_CHECKS
    reasons = page.text_content("tr.check.failed[data-check=no_invalid_episodes] .reasons")
    assert all(p.episode_id in reasons for p in sample_runs.episodes if p.bad)
    assert "meta/withheld.jsonl" in reasons  # the way out
    links = page.eval_on_selector_all("tr[data-check=no_invalid_episodes] .check-items a",
                                      "links => links.map(a => [a.textContent, a.href])")
    assert sorted(text for text, _ in links) == sorted(f"{p.series}/{p.episode_id}" for p in sample_runs.episodes
                                                     if p.bad and sample_runs.series[p.series] == "completed")
    for _, href in links:  # each to its invalid episode's page
        assert Path(unquote(urlsplit(href).path)).is_file() and "/invalid/" in href, href
    findings = page.eval_on_selector_all("tr[data-check=no_scrub_findings] .check-items a", "as => as.map(a => a.href)")
    assert findings and all(Path(unquote(urlsplit(h).path)).is_file() for h in findings)
    legend = page.inner_text("#legend")
    assert "R5: major >= 1 → PASS_WITH_NITS" in legend and "R8: otherwise → PASS" in legend  # meta/rubric-v1.2.json
    assert page.locator("#legend tr[data-gate]").count() == 7
    for series, status in sample_runs.series.items():
        text = page.inner_text(f"#series tr[data-series='{series}']")
        if status == "completed":  # only the checks that name the series (none fails for the release as a whole)
            own = own_checks(sample_runs, series)
            assert all(check in text for check in own) and not any(c in text for c in FAILING_CHECKS - own), text
        else:
            assert "only completed series are published" in text
    with Image.open(site["dataset"] / "leaderboard.png") as chart:  # the file the build wrote, shown whole
        assert page.locator("#leaderboard img.chart").evaluate("i => [i.naturalWidth, i.naturalHeight]") == list(chart.size)
    # one actor model, no comparisons: no rating to show, the agreement table has a row per axis and bucket
    shown = page.inner_text("#leaderboard")
    assert "Judge agreement with people" in shown and PLANTED_MODEL not in shown
    assert all(f"{axis}\tall\t0" in shown for axis in ("engagement", "prompt_intent", "composition", "temporal", "craft"))


def test_series_page_filters_by_label_and_lists_invalid_episodes(site, sample_runs, page):
    series = next(s for s, status in sample_runs.series.items() if status == "completed")
    assert not open_page(page, (site["root"] / "series" / f"{series}.html").as_uri())
    labels = [r["label"] or "unjudged" for r in site["table"].filter(pl.col("series") == series).to_dicts() if r["valid"]]
    shown = page.locator("tr[data-label]:not([hidden])")
    assert labels.count("FAIL")
    page.click("[data-filter=FAIL]")  # the rows are filtered on hashchange, which fires after the click returns
    expect(shown).to_have_count(labels.count("FAIL"))
    assert shown.evaluate_all("rows => rows.map(r => r.dataset.label)") == ["FAIL"] * labels.count("FAIL")
    page.click("[data-filter=all]")
    expect(shown).to_have_count(len(labels))
    invalid = set(page.eval_on_selector_all("tr[data-invalid]", "rows => rows.map(r => r.dataset.invalid)"))
    assert invalid == {p.episode_id for p in sample_runs.episodes if p.bad and p.series == series}
    broken_line = next(p for p in sample_runs.episodes if p.bad == "bad_jsonl_line" and p.series == series)
    cells = page.eval_on_selector(f"tr[data-invalid='{broken_line.episode_id}']",
                                  "row => [...row.cells].map(c => c.innerText)")
    assert cells[1:3] == ["messages.jsonl", "3"] and "not valid JSON" in cells[3]  # the generator breaks line 3


def test_served_site_plays_and_seeks_over_http_and_serves_nothing_else(site, sample_runs, page):
    server = review_server(site["home"], 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        plan = next(p for p in sample_runs.episodes if p.bad is None and p.variant == "freeze")
        url = f"{base}/review/episodes/{plan.series}/{plan.episode_id}.html"
        assert not open_page(page, url)
        page.locator(".timeline .mark.freeze").first.click()
        page.wait_for_function(f"Math.abs(document.getElementById('video').currentTime - 1.0) <= {FRAME}")
        # the seek's frame loads after currentTime moves (readyState 1 meanwhile): wait for the seek to end
        page.wait_for_function("!document.getElementById('video').seeking")
        assert page.evaluate("document.getElementById('video').readyState") >= 2
        long = site["long"]  # the transcript pages and their images are served too
        assert not open_page(page, f"{base}/review/episodes/{long.series}/{long.episode_id}/transcript-1.html")
        assert page.locator("img.observation").count() and \
            not page.evaluate("[...document.images].filter(i => !i.naturalWidth).map(i => i.src)")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/vae_warehouse.duckdb")
        assert refused.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_screenshots_of_the_three_kinds_of_page(site, sample_runs, page, tmp_path):
    plan = next(p for p in sample_runs.episodes if p.bad is None and p.variant == "freeze")
    shots = {"index": site["root"] / "index.html", "series": site["root"] / "series" / f"{plan.series}.html",
             "episode": episode_page(site, plan)}
    for name, path in shots.items():
        open_page(page, path.as_uri())
        page.screenshot(path=tmp_path / f"{name}.png", full_page=True)
        with Image.open(tmp_path / f"{name}.png") as picture:
            assert picture.width == 1280 and picture.height >= 600


def test_a_long_transcript_shows_every_call_the_nested_subagent_and_its_images(site, page):
    plan, planned = site["long"], site["long_plan"]
    pages = transcript_pages(site, plan)
    calls, nested, widths = [], [], []
    for path in pages:
        assert path.stat().st_size <= MAX_PAGE_BYTES, path.name
        assert not open_page(page, path.as_uri()), path.name
        assert not page.evaluate("[...document.images].filter(i => !i.naturalWidth).map(i => i.src)")
        calls += page.eval_on_selector_all(".transcript > .msg .tool-call", "cs => cs.map(c => c.dataset.call)")
        nested += page.eval_on_selector_all(f".subagent[data-subagent='{SUBAGENT_CALL}'] .tool-call",
                                            "cs => cs.map(c => c.dataset.call)")
        widths += page.eval_on_selector_all("img.observation", "is => is.map(i => i.naturalWidth)")
        assert "data:" not in path.read_text().replace('href="data:,"', "")  # no inline picture
    assert calls == [*planned.main_calls[:12], *planned.subagent_calls, *planned.main_calls[12:]]
    assert nested == planned.subagent_calls
    assert widths and set(widths) == {160}  # the planted 160×90 pictures, slimmed to WebP
    # the episode's page links every transcript page; the scrub's placeholder is highlighted
    assert not open_page(page, episode_page(site, plan).as_uri())
    assert page.locator("#transcript tr[data-member='messages.jsonl'] td a").count() == len(pages)
    assert not open_page(page, pages[0].as_uri())
    assert page.locator("mark.scrubbed", has_text="<home>").count() > 0
    page.locator(".msg.system summary").first.click()  # system lines folded away, opened on a click
    assert "hook_started" in page.inner_text(".msg.system")
    assert page.locator(".msg.system .system-line dl.fields", has_text="SessionStart").count() == 1  # by its fields


def test_search_finds_episodes_by_a_failed_gate(site, sample_runs, page):
    judged = [p for p in sample_runs.episodes if p.bad is None and p.host]
    gate = next(g for p in judged for g in p.host["host_gates_failed"] if g != "no_video")
    assert not open_page(page, (site["root"] / "index.html").as_uri() + "#search")
    assert page.locator("#search-results tbody tr").count() == len(sample_runs.episodes)
    assert sorted(p.name for p in (site["root"] / "search").iterdir()) == sorted(f"{s}.js" for s in sample_runs.series)
    page.fill("#search-query", gate)
    shown = set(page.eval_on_selector_all("#search-results tbody tr:not([hidden])", "rs => rs.map(r => r.dataset.episode)"))
    assert shown == {p.episode_id for p in judged if gate in p.host["host_gates_failed"]}
    page.fill("#search-query", "")
    page.click("#search-results th:text-is('episode')")
    page.click("#search-results th:text-is('episode')")  # a second click sorts the other way
    order = page.eval_on_selector_all("#search-results tbody tr", "rs => rs.map(r => r.dataset.episode)")
    assert order == sorted((p.episode_id for p in sample_runs.episodes), key=str.lower, reverse=True)
    page.fill("#search-query", gate)
    first = page.locator("#search-results tbody tr:not([hidden]) a").first
    first.click()
    page.wait_for_load_state("load")
    assert page.url.endswith(".html") and "/episodes/" in page.url


def test_clicking_a_defect_seeks_the_video(site, sample_runs, page):
    def defects(plan) -> list[dict]:
        judge = site["runs"] / plan.series / plan.episode_id / "judge.json"
        return json.loads(judge.read_text())["answer"]["defects"] if judge.exists() else []

    plan = next(p for p in playable(sample_runs) if not p.archive and defects(p))
    planned = defects(plan)
    assert not open_page(page, episode_page(site, plan).as_uri())
    rows = page.eval_on_selector_all("#judge tr.defect", "rs => rs.map(r => [...r.cells].map(c => c.innerText))")
    assert rows == [[f"{d['t_s']:.2f} s", d["severity"], d["text"]] for d in planned]
    last = planned[-1]["t_s"]
    page.locator("#judge button.seek").last.click()
    page.wait_for_function(f"Math.abs(document.getElementById('video').currentTime - {last}) <= {FRAME}")


def test_every_line_of_every_log_member_appears_on_some_page(site, sample_runs, page):
    plans = {p.episode_id: p for p in sample_runs.episodes}
    checked = 0
    for row in (r for r in site["rows"].values() if r["valid"] and r["staged_archive"]):
        plan = plans[row["id"]]
        logs = archive_logs(site["home"] / row["staged_archive"])
        assert {"messages.jsonl", "transcript/session.jsonl"} <= set(logs), row["id"]
        folder = site["root"] / "episodes" / plan.series / plan.episode_id
        seen: dict[str, set[int]] = {}
        for path in sorted(folder.glob("*.html")):
            assert path.stat().st_size <= MAX_PAGE_BYTES, path
            page.goto(path.as_uri(), wait_until="load")
            for member, lines in page.evaluate("""[...document.querySelectorAll('.transcript')].map(t =>
                    [t.dataset.member, [...t.querySelectorAll('[data-line]')].map(e => +e.dataset.line)])"""):
                seen.setdefault(member, set()).update(lines)
        assert set(seen) == set(logs), row["id"]  # a page for every log member, and only for them
        for member, data in logs.items():
            written = {n for n, line in enumerate(data.splitlines(), start=1) if line.strip()}
            assert seen[member] == written, (row["id"], member, sorted(written - seen[member])[:5])
            checked += len(written)
    real, planned = site["real"], site["real_plan"]
    logs = archive_logs(site["home"] / site["rows"][real.episode_id]["staged_archive"])
    assert {name: len(logs[name].splitlines()) for name in planned.lines} == planned.lines  # the hand-written log
    assert checked > 5_000


def test_unknown_line_types_are_folded_and_system_lines_tool_references_and_subagent_logs_readable(site, page):
    real, planned = site["real"], site["real_plan"]
    (session,) = transcript_pages(site, real, "session")
    assert not open_page(page, session.as_uri())
    for kind, line in planned.unknown.items():  # each shown, folded, named by its type
        row = page.locator(f"#L{line}")
        assert row.evaluate("e => [e.tagName, e.dataset.type, e.open]") == ["DETAILS", kind, False], kind
        assert kind in row.locator("summary").inner_text()
    for line in planned.system:  # a system line by its fields
        fields = page.locator(f"#L{line} dl.fields")
        assert fields.count() == 1 and "content" in fields.text_content()
    assert "Conversation compacted" in page.locator(f"#L{planned.system[-1]}").text_content()
    assert '"type": "system"' not in page.content() and '{"type"' not in page.inner_text(".transcript")
    assert page.inner_text(".tool-reference") == f"tool reference: {SESSION_REFERENCE}"
    # the Task call links the subagent's own log, which links back to the call
    task = page.locator(f".tool-call[data-call='{SESSION_TASK}']")
    task.locator(".subagent-log a").click()
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/subagent-{SESSION_AGENT}-1.html")
    assert page.eval_on_selector_all(".tool-call", "cs => cs.map(c => c.dataset.call)") == planned.subagent_calls
    page.locator(".started-by a").click()
    page.wait_for_load_state("load")
    assert urlsplit(page.url).fragment.startswith("L") and page.url.split("#")[0].endswith("/session-1.html")


def test_tool_call_counts_agree_with_the_counts_table(site, sample_runs, page):
    for plan in (p for p in sample_runs.episodes if p.bad is None and p.counts):
        planned = plan.counts if plan is not site["long"] else {
            "tool_calls": len(site["long_plan"].main_calls), "subagent_tool_calls": len(site["long_plan"].subagent_calls)}
        assert not open_page(page, episode_page(site, plan).as_uri())
        calls = page.inner_text("#transcript tr[data-member='messages.jsonl'] td.calls")
        assert calls == f"{planned['tool_calls']} of the main agent, {planned['subagent_tool_calls']} in subagent lines"
        heads = page.eval_on_selector_all("h2:text-is('Counts') + table th", "hs => hs.map(h => h.innerText)")
        cells = page.eval_on_selector_all("h2:text-is('Counts') + table td", "ds => ds.map(d => d.innerText)")
        counts = dict(zip(heads, cells, strict=True))
        assert (counts["tool calls"], counts["subagent tool calls"]) == \
            (f"{planned['tool_calls']:,}", f"{planned['subagent_tool_calls']:,}"), plan.episode_id
        recorded = page.inner_text("#transcript p.model")
        model = LONG_MODEL if plan is site["long"] else plan.init.model
        assert f"The log records the model {model}" in recorded and PLANTED_MODEL in recorded


def test_the_triage_table_lists_exactly_the_plans_blocking_episodes(site, sample_runs, page):
    assert not open_page(page, (site["root"] / "index.html").as_uri())
    assert page.evaluate("document.querySelector('main section').id") == "triage"  # the first thing shown
    blocking = blocking_episodes(sample_runs)
    # the fixture's long messages.jsonl names another working folder in its init line than the run's
    # request shape: the shape's hash (the folder replaced) is not its series'
    long = site["long"].episode_id
    blocking[long].add("one_actor_per_series")
    assert "disagrees on the system prompt and tool definitions" in \
        page.text_content(f"#triage tr[data-episode='{long}']")
    shown = page.eval_on_selector_all("#triage tr.triage-row[data-episode]", """rs => rs.map(r =>
        [r.closest('tbody').dataset.series, r.dataset.episode, [...r.querySelectorAll('code.fails')].map(c => c.textContent)])""")
    plans = {p.episode_id: p for p in sample_runs.episodes}
    assert {episode: set(fails) for _, episode, fails in shown} == blocking
    assert all(plans[episode].series == series for series, episode, _ in shown) and len(shown) == len(blocking)
    for series in {plans[e].series for e in blocking} | set(sample_runs.dirty_series) | set(sample_runs.unversioned_series):
        head = page.inner_text(f"#triage tbody[data-series='{series}'] tr.triage-series")
        assert {c for c in FAILING_CHECKS if c in head} == own_checks(sample_runs, series), series
    for series in (*sample_runs.dirty_series, *sample_runs.unversioned_series):  # a fault of the series itself
        assert page.locator(f"#triage tbody[data-series='{series}'] tr[data-about=series]").count() == 1
    links = page.eval_on_selector_all("#triage tr.triage-row[data-episode] a", "as => as.map(a => a.href)")
    assert len(links) == len(blocking) and all(Path(unquote(urlsplit(h).path)).is_file() for h in links)
    # the labels' drift warning the build prints: shown apart, never among what blocks
    assert sample_runs.drifted_ids
    warning = page.inner_text("#warnings li[data-check=no_drift_from_stored_host_label]")
    assert all(episode in warning for episode in sample_runs.drifted_ids)
    assert "no_drift_from_stored_host_label" not in page.inner_text("#triage") + page.inner_text("#checks")


def test_the_rule_column_says_a_failed_gate_decided(site, sample_runs, page):
    gated = [p for p in sample_runs.episodes if p.bad is None and p.host and p.host["host_gates_failed"]
             and p.host["host_rule"]]
    assert gated
    for plan in gated:
        assert not open_page(page, (site["root"] / "series" / f"{plan.series}.html").as_uri())
        cell = page.inner_text(f"tr[data-episode='{plan.episode_id}'] td.rule")
        assert cell.startswith(f"gate {', '.join(plan.host['host_gates_failed'])} → FAIL"), cell
        assert f"{plan.host['host_rule']} (→" not in cell and cell.count("→") == 1, cell  # no `R6 (→ PASS…)`


def test_allowing_from_the_page_clears_a_multi_value_finding_in_one_step(site, page, capsys):
    """The last test of the module: it builds again."""
    real, planned = site["real"], site["real_plan"]
    key = f"transcript/session.jsonl:{planned.email_line}:email"
    assert not open_page(page, episode_page(site, real).as_uri())
    finding = page.locator(f"tr.finding[data-finding='{key}']")
    assert "3 values" in finding.inner_text() and "failed" in finding.get_attribute("class")
    command = finding.locator("code.command").inner_text()
    finding.locator("a.to-row").click()  # to its row on the transcript page
    page.wait_for_load_state("load")
    assert page.url.split("#")[0].endswith("/session-1.html") and urlsplit(page.url).fragment == f"L{planned.email_line}"
    row = page.locator(f"#L{planned.email_line}")
    assert row.get_attribute("data-has-finding") is not None and row.is_visible()
    assert row.locator("mark.finding").count() >= len(planned.emails)  # every value masked
    assert not any(e in page.content() for e in planned.emails)
    note = page.locator(f".page-findings li[data-finding='{key}']")
    assert note.locator("code.command").inner_text() == command and "accepts all 3 at once" in note.inner_text()
    _, episode, where, kind = command.split(" --reason")[0].split(" ")[1:]
    assert main(["allow", episode, where, kind, "--reason", "invented addresses in a git log"]) == 0
    assert "(3 values)" in capsys.readouterr().out
    entry = json.loads((site["paths"]["meta"] / "scrub-allow.jsonl").read_text().splitlines()[-1])
    assert entry["sha256s"] == [hashlib.sha256(e.encode()).hexdigest() for e in planned.emails]
    build(site["runs"], site["dataset"])  # one build: the finding no longer blocks
    table = pl.read_parquet(site["home"] / "tables" / "episode_table" / "table.parquet")
    findings = {(f["file"], f["line"], f["kind"]): f["allowed"] for f in table.filter(
        pl.col("id") == real.episode_id)["findings"][0]}
    assert findings[("transcript/session.jsonl", planned.email_line, "email")] is True
    assert not open_page(page, episode_page(site, real).as_uri())
    assert "failed" not in (page.locator(f"tr.finding[data-finding='{key}']").get_attribute("class") or "")
    assert f"vae allow {real.episode_id} {where} email" not in page.content()
