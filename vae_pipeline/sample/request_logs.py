"""Delivery-size request logs for `generate(..., hd=True)`: ~25 MB of base64 screenshots.

The harness logs every API request whole, and each request carries the conversation so far, so
the few screenshots an episode takes come back in request after request: most of a real
episode's transcript bytes are the same base64 images over and over. Seeded by the episode id,
so the rest of the generator's random sequence is untouched.
"""

from __future__ import annotations

import base64
import io
import json
import random

from PIL import Image, ImageDraw

SCREENSHOTS = 6
SCREENSHOT_SIZE = (1280, 720)
TARGET_BYTES = 25_000_000
FIRST_BLOB = 2  # the generator's own request blobs are 0 and 1


def _screenshot(rng: random.Random) -> bytes:
    """A page-like PNG: flat panels, bars of "text", a noisy hero picture."""
    width, height = SCREENSHOT_SIZE
    picture = Image.new("RGB", SCREENSHOT_SIZE, (rng.randrange(200, 256),) * 3)
    draw = ImageDraw.Draw(picture)
    for _ in range(12):
        x, y = rng.randrange(width - 200), rng.randrange(height - 80)
        draw.rectangle((x, y, x + rng.randrange(80, 400), y + rng.randrange(20, 160)),
                       fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    for row in range(40, height - 40, 18):
        draw.rectangle((60, row, 60 + rng.randrange(200, width - 120), row + 8), fill=(40, 40, 60))
    hero = Image.frombytes("RGB", (240, 135), rng.randbytes(240 * 135 * 3))
    picture.paste(hero, (width - 300, 60))
    out = io.BytesIO()
    picture.save(out, "PNG")
    return out.getvalue()


def request_logs(episode_id: str, secrets: dict[str, str]) -> dict[str, bytes]:
    """Request blobs (and their small request records) until the blobs pass TARGET_BYTES."""
    rng = random.Random(f"request-logs-{episode_id}")
    shots = [base64.b64encode(_screenshot(rng)).decode() for _ in range(SCREENSHOTS)]
    files: dict[str, bytes] = {}
    total, n = 0, FIRST_BLOB
    while total < TARGET_BYTES:
        shown = shots[: min(len(shots), 1 + (n - FIRST_BLOB) // 4)]
        turns = [{"role": "user", "content": [
            {"type": "text", "text": f"Turn {t}: check the render at {t * 0.5:.1f} s."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": shot}}]}
            for t, shot in enumerate(shown)]
        blob = {"headers": {"Authorization": f"Bearer {secrets['bearer']}", "x-api-key": secrets["anthropic"]},
                "model": "claude-opus-5.5", "max_tokens": 32000, "messages": turns}
        data = json.dumps(blob).encode()
        files[f"transcript/api-request-blob/{n}.json"] = data
        files[f"transcript/api-request/{n}.json"] = json.dumps(
            {"url": "https://api.anthropic.com/v1/messages", "attempt": n, "bytes": len(data)}).encode()
        total += len(data)
        n += 1
    return files
