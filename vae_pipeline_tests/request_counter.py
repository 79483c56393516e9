"""A counting proxy in front of an S3 server: what a build asks of a bucket, request by request.

`CountingProxy(upstream)` listens on 127.0.0.1 (a port the system picks) and forwards every
request to `upstream` as it is (headers and body bytes, so signatures stay valid), noting for
each its time, method, status and kind:

- `LIST`: a GET on a bucket with no key (`?list-type=2`, `?prefix=`);
- `ranged GET`: a GET with a `Range` header (Parquet footers, s3fs's block reads);
- `conditional PUT`: a PUT with `If-Match` / `If-None-Match`;
- `multipart`: a POST (create / complete an upload) or a PUT of a part;
- otherwise the method itself (`GET`, `PUT`, `HEAD`, `DELETE`).

`by_stage(requests, windows)` puts each request in the Dagster step whose time window holds it
(`step_windows` reads them from an instance's event log: the build's executor runs one step at
a time, so the windows do not overlap), `outside steps` otherwise (the build's own planning,
listing the runs root, reading the tables' versions).

The proxy is bounded: at most `MAX_CONNECTIONS` connections are served at once (others wait),
and it shuts itself down after `lifetime_s` even if its owner never stops it.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_CONNECTIONS = 128  # a thread each; a real store serves far more at once
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}
OUTSIDE = "outside steps"


@dataclass(frozen=True)
class Request:
    at: float  # time.time() when it arrived
    method: str
    path: str
    status: int
    kind: str
    credential: str = ""  # SigV4's `Credential=`: access key id/date/region/service/aws4_request, or ""


def kind_of(method: str, target: str, headers) -> str:
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]
    if method == "POST" or (method == "PUT" and "partNumber" in query):
        return "multipart"
    if method == "GET" and not key and ("list-type" in query or "prefix" in query or not query):
        return "LIST"
    if method == "GET" and headers.get("Range"):
        return "ranged GET"
    if method == "PUT" and (headers.get("If-Match") or headers.get("If-None-Match")):
        return "conditional PUT"
    return method


def credential(headers) -> str:
    """The credential scope a SigV4 `Authorization` header names (whose keys, which region), or ''."""
    _, found, rest = headers.get("Authorization", "").partition("Credential=")
    return rest.split(",", 1)[0] if found else ""


class CountingProxy:
    """A forwarder to `upstream` (`http://host:port`) counting what passes; a context manager."""

    def __init__(self, upstream: str, lifetime_s: float = 3600.0):
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        daemon=True, name="counting-proxy")
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def taken(self) -> list[Request]:
        """The requests counted so far, and the count started again."""
        with self._lock:
            taken, self.requests = self.requests, []
        return taken

    def _note(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler(self):
        proxy = self

        class Forward(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the counts are the report
                pass

            def setup(self) -> None:
                proxy._slots.acquire()
                super().setup()
                self.upstream = http.client.HTTPConnection(*proxy.upstream, timeout=120)

            def finish(self) -> None:
                try:
                    super().finish()
                finally:
                    self.upstream.close()
                    proxy._slots.release()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size_line = self.rfile.readline()
                        size = int(size_line.split(b";")[0], 16)
                        chunk = self.rfile.read(size + 2)
                        chunks.append(size_line + chunk)
                        if size == 0:
                            while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                                chunks.append(line)
                            chunks.append(b"\r\n")
                            return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _forward(self) -> None:
                arrived = time.time()
                body = self._body()
                headers = {name: value for name, value in self.headers.items() if name.lower() != "connection"}
                self.upstream.request(self.command, self.path, body=body or None, headers=headers)
                answer = self.upstream.getresponse()
                data = answer.read()
                proxy._note(Request(arrived, self.command, self.path, answer.status,
                                    kind_of(self.command, self.path, self.headers), credential(self.headers)))
                self.send_response_only(answer.status, answer.reason)
                for name, value in answer.getheaders():
                    if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                length = answer.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        return Forward


def step_windows(instance) -> list[tuple[float, float, str]]:
    """(start, end, step key) of every step of every run on `instance`, from its event log."""
    from dagster import DagsterEventType

    windows = []
    for record in instance.get_run_records():
        started: dict[str, float] = {}
        for event in instance.all_logs(record.dagster_run.run_id):
            if not event.is_dagster_event or not event.step_key:
                continue
            kind = event.dagster_event.event_type
            if kind == DagsterEventType.STEP_START:
                started[event.step_key] = event.timestamp
            elif kind in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE) and event.step_key in started:
                windows.append((started.pop(event.step_key), event.timestamp, event.step_key))
    return sorted(windows)


def step_of(request: Request, windows: list[tuple[float, float, str]]) -> str:
    """The step whose time window holds the request (`OUTSIDE` for none)."""
    return next((step for start, end, step in windows if start <= request.at <= end), OUTSIDE)


def by_stage(requests: list[Request], windows: list[tuple[float, float, str]]) -> Counter:
    """How many requests each step made."""
    return Counter(step_of(request, windows) for request in requests)


def summary(requests: list[Request]) -> dict[str, Counter]:
    """The requests by method, by status and by kind (404s of HEAD counted apart)."""
    return {"method": Counter(r.method for r in requests), "status": Counter(r.status for r in requests),
            "kind": Counter(r.kind for r in requests),
            "HEAD 404": Counter({"HEAD 404": sum(r.method == "HEAD" and r.status == 404 for r in requests)})}
