"""`vae review --serve` over real HTTP: the built site and every file its pages link to, and
nothing else — not through a symlink, a listing, a dotfile, a NUL or an absurd Range — and idle
connections neither hold it up nor stay open."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from vae_pipeline.review.server import ReviewServer, review_server
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META, isolate


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """The pipeline home of one `vae build` of two small series (review site, videos, frames)."""
    from vae_pipeline.cli.build import build

    root = tmp_path_factory.mktemp("served")
    run = generate(root / "runs", META, series=2, episodes=3, seed=3, bad=False, drifted=0)
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        build(run.root, paths["dataset"])
    return paths["home"]


@contextmanager
def running(home: Path, **limits: float) -> Iterator[ReviewServer]:
    """The review server of `home` on a free port, in this process, answering until the end."""
    server = review_server(home, 0, **limits)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _wait_for_port(server.server_port)
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def serving(home):
    """The review server with a 1 s idle timeout."""
    with running(home, idle_timeout_s=1.0, max_connections=1500) as server:
        yield server


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as is on a fresh socket; the status, headers and body of the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def get(port: int, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    return raw(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra}\r\n".encode("latin-1"))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.links += [v for k, v in attrs if k in ("href", "src") and v]


def test_the_cli_serves_the_site_and_every_file_its_pages_link_to(home):
    """What `vae review --serve` prints, and a crawl of every page: each local link answers 200
    (videos and frames included), a video answers a Range with exactly those bytes."""
    env = {**os.environ, "VAE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    served = subprocess.Popen([Path(sys.executable).parent / "vae", "review", "--serve", "--port", "0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        printed = served.stdout.readline()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/review/index\.html \(Ctrl-C stops\)\n", printed)
        assert match, printed
        port = int(match[1])
        _wait_for_port(port)
        seen, pages, kinds = set(), ["/review/index.html"], set()
        while pages:
            page = pages.pop()
            status, headers, body = get(port, page)
            assert status == 200, page
            if not headers["content-type"].startswith("text/html"):
                continue
            parser = _Links()
            parser.feed(body.decode())
            for link in parser.links:
                target = urlsplit(urljoin(f"http://127.0.0.1{page}", link))
                if target.netloc != "127.0.0.1" or target.path in seen:
                    continue  # another site, or a fragment of a page already seen
                seen.add(target.path)
                kinds.add(target.path.split("/")[1])
                if target.path.endswith(".html"):
                    pages.append(target.path)
                else:
                    assert get(port, target.path)[0] == 200, (page, link)
        assert kinds == {"review", "videos", "frames"}
        video = next(p for p in seen if p.endswith(".mp4"))
        status, headers, body = get(port, video, Range="bytes=10-99")
        assert (status, headers["content-range"].split("/")[0], len(body)) == (206, "bytes 10-99", 90)
        assert body == (home / unquote(video).lstrip("/")).read_bytes()[10:100]
    finally:
        served.send_signal(signal.SIGINT)
        assert served.wait(timeout=20) == 0, served.stderr.read()[-2000:]


def test_symlinks_out_of_every_served_folder_are_not_followed(home, serving):
    series = min(p.name for p in (home / "videos").iterdir())
    planted = []
    for folder in (home / "review", home / "videos" / series, home / "frames" / series):
        for name, target in (("passwd", Path("/etc/passwd")), ("root", Path("/")), ("instance", home / "dagster")):
            link = folder / f"link-to-{name}"
            link.symlink_to(target)
            planted.append(link)
    try:
        for link in planted:
            path = "/" + link.relative_to(home).as_posix()
            for reached in (path, f"{path}/", f"{path}/etc/passwd", f"{path}/dagster.yaml"):
                status, _, body = get(serving.server_port, reached)
                assert status == 404 and b"root:" not in body and b"storage" not in body, (reached, status)
    finally:
        for link in planted:
            link.unlink()


def test_no_listing_no_dotfile_nothing_outside_the_site(home, serving):
    port = serving.server_port
    series = min(p.name for p in (home / "frames").iterdir())
    assert (home / "review" / ".state" / f"{series}.json").is_file() and (home / "vae_warehouse.duckdb").is_file()
    for path in ("/videos/", f"/frames/{series}/", "/review/episodes/", "/review/.state/",
                 f"/review/.state/{series}.json",
                 "/review/.cache/", "/vae_warehouse.duckdb", "/dagster/dagster.yaml", "/review/../dagster/dagster.yaml",
                 "/review/%2e%2e/vae_warehouse.duckdb", "/tables/"):
        status, _, body = raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert status == 404, (path, status)
        assert b"<a href" not in body and b"{" not in body, path
    assert raw(port, b"POST /review/index.html HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")[0] == 405


def test_the_root_and_the_site_folder_redirect_to_the_index(serving):
    port = serving.server_port
    for path in ("/", "/review", "/review/"):
        status, headers, _ = raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert (status, headers.get("location")) == (302, "/review/index.html"), path
    assert get(port, "/review/index.html")[0] == 200
    assert raw(port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")[0] == 405


def test_a_nul_in_the_path_or_an_absurd_range_is_a_400(home, serving):
    port = serving.server_port
    for path in ("/review/%00", "/review/index.html%00.png", "/videos/%00/x.mp4", "/review/%0d%0aX:%20y"):
        status, _, body = raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert status == 400, (path, status, body)
    video = "/" + next((home / "videos").rglob("*.mp4")).relative_to(home).as_posix()
    size = (home / video.lstrip("/")).stat().st_size
    assert get(port, video, Range=f"bytes={'9' * 4300}-")[0] == 400
    assert get(port, video, Range=f"bytes=0-{'9' * 4300}")[0] == 400
    assert get(port, video, Range="bytes=x-y")[0] == 400
    status, headers, _ = get(port, video, Range=f"bytes={size}-")
    assert (status, headers["content-range"]) == (416, f"bytes */{size}")
    assert get(port, "/review/index.html")[0] == 200  # and it still serves


def test_idle_connections_neither_exhaust_the_server_nor_stay_open(home):
    """1,000 connections that send nothing and 50 that send half a request: a request is answered
    while they are all still open (not after the server gave up on them), no thread is held for
    them, and the server closes them all after its idle timeout."""
    with running(home, idle_timeout_s=6.0, max_connections=1500) as server:
        threads_before = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", server.server_port), timeout=10) for _ in range(1000)]
        for sock in idle[:50]:
            sock.sendall(b"GET /review/index.html HTTP/1.1\r\nHost: x\r\n")  # never finished
        try:
            connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
            connection.request("GET", "/review/index.html")
            assert connection.getresponse().status == 200
            connection.close()
            for sock in idle:  # none closed yet: the answer did not wait for the idle timeout
                sock.setblocking(False)
                with pytest.raises(BlockingIOError):
                    sock.recv(1024)
            assert threading.active_count() <= threads_before + 5  # the old server held one per connection
            deadline = time.monotonic() + 20
            for sock in idle:
                sock.settimeout(max(deadline - time.monotonic(), 0.1))
                try:
                    received = sock.recv(1024)
                except ConnectionResetError:  # closed with a reset (a loaded machine's backlog): closed too
                    received = b""
                assert received == b"", "an idle connection was not closed"
        finally:
            for sock in idle:
                sock.close()


def test_connections_past_the_limit_get_a_503_until_idle_ones_are_closed(home):
    with running(home, idle_timeout_s=3.0, max_connections=20) as server:
        idle = [socket.create_connection(("127.0.0.1", server.server_port)) for _ in range(25)]
        started = time.monotonic()
        statuses = []
        while time.monotonic() - started < 2.5 and 503 not in statuses:  # until the server has them all
            statuses.append(get(server.server_port, "/review/index.html")[0])
        assert statuses[-1] == 503, statuses
        time.sleep(max(started + 3.5 - time.monotonic(), 0))
        assert get(server.server_port, "/review/index.html")[0] == 200
        for sock in idle:
            sock.close()
