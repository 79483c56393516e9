"""`vae review --serve`: the review site over HTTP on 127.0.0.1 (Starlette's StaticFiles on uvicorn).

`/`, `/review` and `/review/` redirect to the site's index. Only the site and what it links to
are served: the home's `review/`, `videos/` and `frames/`
folders, each a StaticFiles root that resolves every path and refuses one that leads outside it
(a symlink out, `..`). Never the rest of the pipeline's home (the DuckDB warehouse, the Dagster
instance), no directory listing, no dotfile (`.state/`, `.cache/`). A path holding NUL or
control characters, or a Range with numbers no file has (more than 18 digits), is a 400; a
Range past the end a 416; Range requests are what let a video seek.

uvicorn serves every connection on one event loop, so idle ones hold no thread; at most
`max_connections` are open at once (more get a 503), and a connection that sends no complete
request for `idle_timeout_s` is closed — from its first byte, not only between requests.
"""

from __future__ import annotations

import re
import resource
import socket
import threading
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from vae_pipeline.domain.review.site import SITE_DIR

SERVED = (SITE_DIR, "videos", "frames")
IDLE_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 2048  # a reviewer's browser opens a handful; a flood gets 503s, never a hang
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_LONG_NUMBER = re.compile(r"\d{19}")  # past 2^63: no file is that large
INDEX = f"/{SITE_DIR}/index.html"
INDEX_PATHS = ("/", f"/{SITE_DIR}", f"/{SITE_DIR}/")  # each redirects to the index


class SiteFolder(StaticFiles):
    """One served folder. Symlinks are resolved, and a file that resolves outside the folder is
    a 404 (`follow_symlink=False`); a folder not written yet is a 404, not a server error."""

    def __init__(self, directory: Path):
        super().__init__(directory=directory, html=False, check_dir=False, follow_symlink=False)

    async def check_config(self) -> None:
        """No start-up check: the folder may appear after the server starts (a first build)."""


class ServeOnlyTheSite:
    """Refuses before a path reaches a folder: bad characters or an absurd Range (400), a
    dotfile or anything outside the served folders (404), a method other than GET and HEAD (405)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await PlainTextResponse("not served", status_code=404)(scope, receive, send)
        refusal = _refusal(scope)
        if refusal is not None:
            return await PlainTextResponse(refusal[1], status_code=refusal[0])(scope, receive, send)
        await self.app(scope, receive, send)


def _refusal(scope: Scope) -> tuple[int, str] | None:
    path = scope["path"]
    if _CONTROL.search(path) or _CONTROL.search(scope.get("raw_path", b"").decode("latin-1")):
        return 400, "bad path"
    if any(_LONG_NUMBER.search(value.decode("latin-1")) for name, value in scope["headers"] if name == b"range"):
        return 400, "bad range"
    if scope["method"] not in ("GET", "HEAD"):
        return 405, "only GET and HEAD"
    if path in INDEX_PATHS:
        return None
    parts = path.split("/")[1:]
    if not parts or parts[0] not in SERVED or any(part.startswith(".") for part in parts):
        return 404, "not part of the review site"
    return None


async def _to_index(request) -> RedirectResponse:
    return RedirectResponse(INDEX, status_code=302)


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol with the idle timeout counted from the moment a connection opens or
    its last response ends: uvicorn itself only times out a keep-alive connection that stays
    silent, so one that never sends, or sends a request head a byte at a time, would stay open."""

    _deadline: object = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.timeout_keep_alive, self._expire)

    def _expire(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered; the end of its response arms the timer again
        self.timeout_keep_alive_handler()


class ReviewServer:
    """The review site of `home` on 127.0.0.1:`port` (0: any free port), bound when made, so
    `server_port` is known before it serves. `serve_forever` blocks until `shutdown` (from another
    thread) or Ctrl-C."""

    def __init__(self, home: Path, port: int = 0, *, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS):
        home = Path(home).resolve()
        routes = [Route(path, _to_index, methods=["GET", "HEAD"]) for path in INDEX_PATHS]
        routes += [Mount(f"/{name}", app=SiteFolder(home / name)) for name in SERVED]
        app = ServeOnlyTheSite(Starlette(routes=routes))
        _allow_open_files(max_connections + 64)
        self.config = uvicorn.Config(app, http=_Protocol, ws="none", lifespan="off", loop="asyncio",
                                     timeout_keep_alive=idle_timeout_s, limit_concurrency=max_connections,
                                     backlog=max_connections, log_level="warning", access_log=False,
                                     server_header=False)
        self._server = uvicorn.Server(self.config)
        self._socket = socket.create_server(("127.0.0.1", port), backlog=max_connections)
        self.server_port: int = self._socket.getsockname()[1]
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving and wait (a few seconds at most) until `serve_forever` has returned."""
        self._server.should_exit = True
        self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        self._socket.close()


def _allow_open_files(wanted: int) -> None:
    """Raise the soft limit on open files to `wanted` (within the hard limit): each connection
    is a file, and a common soft limit of 1024 would run out before the connection limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def review_server(home: Path, port: int = 0, **limits: float) -> ReviewServer:
    """A server for `home`'s review site on 127.0.0.1; not started (see `ReviewServer`)."""
    return ReviewServer(home, port, **limits)
