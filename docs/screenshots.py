"""Screenshots of the review site for the README: the index, a series page and an episode page.

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


def pages(site: Path) -> dict[str, Path]:
    """The first completed series with invalid episodes, and its episode with a freeze range."""
    series = sorted((site / "series").glob("*.html"))[0]
    episodes = sorted((site / "episodes" / series.stem).glob("*.html"))
    with_freeze = next((p for p in episodes if 'class="mark freeze' in p.read_text()), episodes[0])
    return {"review-index": site / "index.html", "review-series": series, "review-episode": with_freeze}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=PROJECT / ".vae" / "review")
    parser.add_argument("--out", type=Path, default=PROJECT / "docs")
    args = parser.parse_args(argv)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name, path in pages(args.site).items():
            problems = open_page(page, path.as_uri())
            if problems:
                raise SystemExit(f"{path}: {problems}")
            if page.locator(".mark.freeze").count():  # show the playhead where a click took the video
                page.locator(".mark.freeze").first.click()
                page.wait_for_timeout(500)
            shot = Image.open(io.BytesIO(page.screenshot()))
            shot = shot.resize((960, round(shot.height * 960 / shot.width)), Image.LANCZOS)
            shot.convert("RGB").quantize(colors=256).save(args.out / f"{name}.png", optimize=True)
            print(f"{args.out / f'{name}.png'}: {(args.out / f'{name}.png').stat().st_size:,} bytes")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
