"""`vae review --serve`: the review site over HTTP on 127.0.0.1, with byte ranges so videos seek.

Only the site and what it links to (staged videos, frames) are served — never the rest of the
pipeline's home (the DuckDB warehouse, the Dagster instance).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
from pathlib import Path

from vae_pipeline.domain.review_site import SITE_DIR

SERVED = (SITE_DIR, "videos", "frames")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class ReviewHandler(http.server.SimpleHTTPRequestHandler):
    """Static files under the home's served folders; a `Range: bytes=a-b` request gets a 206."""

    remaining: int | None = None

    def send_head(self):
        path = Path(self.translate_path(self.path))
        relative = path.relative_to(self.directory).parts if path.is_relative_to(self.directory) else ()
        if not relative or relative[0] not in SERVED:
            self.send_error(404, "not part of the review site")
            return None
        match = _RANGE.fullmatch(self.headers.get("Range", "").strip())
        if not match or not (match[1] or match[2]) or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start, end = (int(match[1]), int(match[2] or size - 1)) if match[1] else (max(size - int(match[2]), 0), size - 1)
        end = min(end, size - 1)
        if start > end:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return None
        handle = path.open("rb")
        handle.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.remaining = end - start + 1
        return handle

    def end_headers(self) -> None:
        self.send_header("Accept-Ranges", "bytes")
        super().end_headers()

    def copyfile(self, source, outputfile) -> None:
        if self.remaining is None:
            shutil.copyfileobj(source, outputfile)
            return
        while self.remaining > 0:
            chunk = source.read(min(self.remaining, 1 << 16))
            if not chunk:
                break
            outputfile.write(chunk)
            self.remaining -= len(chunk)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 — the base class's name
        """Quiet: a page load is dozens of requests."""


def review_server(home: Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server for `home`'s review site on 127.0.0.1 (`port` 0: any free port); not started."""
    handler = functools.partial(ReviewHandler, directory=os.fspath(Path(home).resolve()))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
