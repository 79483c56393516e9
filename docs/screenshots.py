"""Screenshots of the review site for the README: the index, a series page, an episode page, and
what the archive publishes — a transcript page, the judge's answer, the findings in context — the
search over every series and an invalid episode's page.

    make demo && .venv/bin/python docs/screenshots.py [--site .vae/review] [--out docs]

Uses Debian's Chromium through Playwright (the test extra), like the browser tests. Each shot is
the top of the page at 1280×900, scaled to 960 wide and stored as a palette PNG, so it stays small.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vae_pipeline_tests.test_review_browser import CHROMIUM, LAUNCH_ARGS, open_page  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]


def pages(site: Path) -> dict[str, tuple[Path, str | None]]:
    """The first completed series with invalid episodes, its episode with a freeze range, and the
    place on a page each shot shows (an element to scroll to, or `?q=` for the search)."""
    series = sorted((site / "series").glob("*.html"))[0]
    episodes = sorted((site / "episodes" / series.stem).glob("*.html"))
    with_freeze = next((p for p in episodes if 'class="mark freeze' in p.read_text()), episodes[0])
    with_findings = next((p for p in episodes if 'class="command"' in p.read_text()), with_freeze)
    transcripts = sorted((site / "episodes" / series.stem).glob("*/transcript-1.html"))
    with_subagent = next((p for p in transcripts if 'class="subagent"' in p.read_text()), transcripts[0])
    invalid = sorted((site / "episodes" / series.stem / "invalid").glob("*.html"))
    shots = {"review-index": (site / "index.html", None), "review-series": (series, None),
             "review-episode": (with_freeze, None), "review-judge": (with_freeze, "#judge"),
             "review-findings": (with_findings, "#scrub"),
             "review-transcript": (with_subagent, ".subagent" if 'class="subagent"' in with_subagent.read_text() else None),
             "review-search": (site / "index.html", "?q=freeze#search")}
    if invalid:
        shots["review-invalid"] = (invalid[0], None)
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=PROJECT / ".vae" / "review")
    parser.add_argument("--out", type=Path, default=PROJECT / "docs")
    args = parser.parse_args(argv)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, (path, place) in pages(args.site).items():
            query = place if place and place.startswith("?") else ""  # `?q=…#section`: searched, scrolled to
            problems = open_page(page, path.as_uri() + query)
            if problems:
                raise SystemExit(f"{path}: {problems}")
            if page.locator(".mark.freeze").count():  # show the playhead where a click took the video
                page.locator(".mark.freeze").first.click()
                page.wait_for_timeout(500)
            where = place if place and not query else (f"#{query.split('#', 1)[1]}" if "#" in query else None)
            if where:
                page.locator(where).first.scroll_into_view_if_needed()
                page.evaluate(f"document.querySelector('{where}').scrollIntoView({{block: 'start'}})")
            shot = Image.open(io.BytesIO(page.screenshot()))
            shot = shot.resize((960, round(shot.height * 960 / shot.width)), Image.LANCZOS)
            shot.convert("RGB").quantize(colors=256).save(args.out / f"{name}.png", optimize=True)
            print(f"{args.out / f'{name}.png'}: {(args.out / f'{name}.png').stat().st_size:,} bytes")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
