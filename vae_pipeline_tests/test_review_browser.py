"""The review site in a real browser — Debian's Chromium driven by Playwright: every page of the
sample dataset loads with no console error and no failed request, every link, image and video
source resolves, the videos play with the measured duration, the timeline and the judge's defects
seek, a long transcript shows every tool call with the subagent's nested under its `Task` call and
its images, the search finds episodes by a failed gate, nothing planted appears (transcripts
included), the index names the failing blocking checks and links the episodes they name, and
`vae review --serve` serves the same.

One build for the whole module: the sample runs, with credentials and a home path planted in one
brief (the site shows the brief, scrubbed) and one episode's messages.jsonl replaced by a long log
in the CLI's real shapes (`long_transcript.py`); the index shows the leaderboard the build wrote.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

import polars as pl
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, sync_playwright

from vae_pipeline.cli.build import build
from vae_pipeline.domain.review.site import page_name
from vae_pipeline.review.server import review_server
from vae_pipeline.sample.generator import FPS, SampleRun
from vae_pipeline.sample.planted import planted_text, planted_values
from vae_pipeline_tests.conftest import copy_runs, isolate
from vae_pipeline_tests.long_transcript import SUBAGENT_CALL, plant_long_episode

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
MAX_PAGE_BYTES = 2 * 1024 * 1024


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
        build(runs, paths["dataset"])
        table = pl.read_parquet(paths["home"] / "tables" / "episode_table" / "table.parquet")
        yield {"home": paths["home"], "root": paths["home"] / "review", "table": table, "dataset": paths["dataset"],
               "rows": {r["id"]: r for r in table.iter_rows(named=True)},
               "planted_episode": planted_episode, "planted": planted, "runs": runs,
               "long": long, "long_plan": long_plan, "long_values": long_values}


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


def transcript_pages(site: dict, plan) -> list[Path]:
    folder = site["root"] / "episodes" / plan.series / plan.episode_id
    return sorted(folder.glob("transcript-*.html"), key=lambda p: int(p.stem.split("-")[1]))


def test_every_page_loads_clean_and_every_reference_resolves(site, sample_runs, page):
    expected = {"index.html", "search.html", *(f"series/{s}.html" for s in sample_runs.series),
                *(f"episodes/{p.series}/{p.episode_id}.html" for p in sample_runs.episodes if p.bad is None),
                *(f"episodes/{p.series}/invalid/{page_name(p.episode_id)}" for p in sample_runs.episodes if p.bad)}
    pages = {p.relative_to(site["root"]).as_posix() for p in site["root"].rglob("*.html")}
    transcripts = {name for name in pages if "/transcript-" in name}
    assert pages - transcripts == expected
    for plan in (p for p in sample_runs.episodes if p.bad is None):  # pages 1…n of every archive
        numbers = sorted(int(p.stem.split("-")[1]) for p in transcript_pages(site, plan))
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
        text = page.inner_text(f"tr[data-series='{series}']")
        if status == "completed":
            assert all(check in text for check in FAILING_CHECKS), text
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
    page.click("[data-filter=FAIL]")
    shown = page.eval_on_selector_all("tr[data-label]:not([hidden])", "rows => rows.map(r => r.dataset.label)")
    assert shown == ["FAIL"] * labels.count("FAIL") and shown
    page.click("[data-filter=all]")
    assert page.locator("tr[data-label]:not([hidden])").count() == len(labels)
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
    calls, nested = [], []
    for path in pages:
        assert path.stat().st_size <= MAX_PAGE_BYTES, path.name
        assert not open_page(page, path.as_uri()), path.name
        assert not page.evaluate("[...document.images].filter(i => !i.naturalWidth).map(i => i.src)")
        calls += page.eval_on_selector_all(".transcript > .msg .tool-call", "cs => cs.map(c => c.dataset.call)")
        nested += page.eval_on_selector_all(f".subagent[data-subagent='{SUBAGENT_CALL}'] .tool-call",
                                            "cs => cs.map(c => c.dataset.call)")
        if page.locator(".observation").count():
            images = page.eval_on_selector_all("img.observation", "is => is.map(i => i.naturalWidth)")
            assert all(width == 160 for width in images)  # the planted 160×90 pictures, slimmed to WebP
        assert "data:" not in path.read_text().replace('href="data:,"', "")  # no inline picture
    assert calls == [*planned.main_calls[:12], *planned.subagent_calls, *planned.main_calls[12:]]
    assert nested == planned.subagent_calls
    # the episode's page links every transcript page; the scrub's placeholder is highlighted
    assert not open_page(page, episode_page(site, plan).as_uri())
    assert page.locator("#transcript a").count() == len(pages)
    assert not open_page(page, pages[0].as_uri())
    assert page.locator("mark.scrubbed", has_text="<home>").count() > 0
    page.locator(".msg.system summary").first.click()  # system lines folded away, opened on a click
    assert "hook_started" in page.inner_text(".msg.system")


def test_search_finds_episodes_by_a_failed_gate(site, sample_runs, page):
    judged = [p for p in sample_runs.episodes if p.bad is None and p.host]
    gate = next(g for p in judged for g in p.host["host_gates_failed"] if g != "no_video")
    assert not open_page(page, (site["root"] / "search.html").as_uri())
    assert page.locator("#search-results tbody tr").count() == len(sample_runs.episodes)
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
