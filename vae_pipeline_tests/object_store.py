"""An S3-compatible server for the tests: moto's, in this process, on 127.0.0.1.

Registered from conftest.py, so every test can ask for its fixtures:

- `s3_endpoint` (once per session, so once per xdist worker, each on a port of its own): the URL;
- `s3_environ`: the standard AWS variables pointing boto3, s3fs and dagster-aws at that server,
  set for one test (subprocesses inherit them);
- `s3_client`: a boto3 S3 client for that server, whatever the environment;
- `make_bucket`: makes a uniquely named bucket, deleted with everything in it after the test.

`aws_environ` and `fresh_bucket` are the same for module-scoped fixtures; `refusals_without_message`
puts a proxy in front of the server that answers every 412 as Ceph's RGW does, with an empty message. boto3 and moto are
imported when first used: the rest of the suite loads this module too.
"""

import functools
import http.client
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
# Variables of the developer's own environment that would take the clients elsewhere: a
# service-specific endpoint wins over AWS_ENDPOINT_URL, a profile or token over the test keys.
OVERRIDING = ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN",
              "AWS_SECURITY_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_REGION")


def aws_environ(endpoint: str) -> dict[str, str]:
    """The variables to set: endpoint and keys through the standard names (boto3, aiobotocore and
    so s3fs read AWS_ENDPOINT_URL themselves), and no config or credentials file of the machine."""
    return {"AWS_ENDPOINT_URL": endpoint, **CREDENTIALS,
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


@functools.cache
def client(endpoint: str):
    """A boto3 S3 client for `endpoint` with the test keys, whatever the environment says (one per
    endpoint: making one reads botocore's service model, a quarter of a second)."""
    import boto3

    return boto3.session.Session(aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                 aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                                 region_name=CREDENTIALS["AWS_DEFAULT_REGION"]).client("s3", endpoint_url=endpoint)


def delete_bucket(s3, name: str) -> None:
    """Every object version, delete marker and unfinished upload, then the bucket."""
    for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=name):
        for upload in page.get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=name):
        doomed = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                  for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if doomed:
            s3.delete_objects(Bucket=name, Delete={"Objects": doomed, "Quiet": True})
    s3.delete_bucket(Bucket=name)


@contextmanager
def fresh_bucket(endpoint: str, versioned: bool = False) -> Iterator[str]:
    """A new bucket with a unique name; yields the name and deletes it with all it holds."""
    s3 = client(endpoint)
    name = f"vae-test-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    try:
        if versioned:
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        yield name
    finally:
        delete_bucket(s3, name)


# A 412 as Ceph's RGW words it: the code, an empty message and no `Condition` element (AWS and moto
# add `If-None-Match` / `If-Match` there, which s3fs reads to raise FileExistsError)
RGW_412 = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message></Message>'
           b'<RequestId>tx0000000000000000000a1-0</RequestId><HostId>rgw</HostId></Error>')


@contextmanager
def refusals_without_message(endpoint: str, body: bytes = RGW_412) -> Iterator[str]:
    """The URL of a proxy on 127.0.0.1 (a free port) passing every request to `endpoint` as it is,
    and every answer back, except that a 412's body becomes `body`."""
    upstream = urlsplit(endpoint)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            try:
                conn.request(self.command, self.path, body=self.rfile.read(length) if length else None,
                             headers=dict(self.headers.items()))
                answer = conn.getresponse()
                payload = body if answer.status == 412 else answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """`http://127.0.0.1:PORT` of a moto server; the port is the one the system gave (port 0)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_environ(s3_endpoint, monkeypatch) -> dict[str, str]:
    """Sets `aws_environ(s3_endpoint)` and removes OVERRIDING for the test; returns what it set."""
    values = aws_environ(s3_endpoint)
    for name in OVERRIDING:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def s3_client(s3_endpoint):
    return client(s3_endpoint)


@pytest.fixture
def make_bucket(s3_endpoint) -> Iterator[Callable[..., str]]:
    """`make_bucket(versioned=False) -> name`, as many as the test wants, all deleted after it."""
    with ExitStack() as stack:
        yield lambda versioned=False: stack.enter_context(fresh_bucket(s3_endpoint, versioned))
