"""The real services the scale-out tests use: a database and a Redis key prefix of their own.

PostgreSQL and Redis answer on 127.0.0.1 by default (CI's machine and the project's own);
`VAE_TEST_PG_URL` (a database the test may create databases from) and `VAE_TEST_REDIS_URL` point
elsewhere. Every test creates a uniquely named database / key prefix and drops it afterwards.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import redis
from psycopg2 import sql

ADMIN_URL = os.environ.get("VAE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("VAE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextmanager
def postgres_database() -> Iterator[str]:
    """A new empty database; yields its URL and drops it (closing what is still connected)."""
    name = f"vae_test_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(ADMIN_URL)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        yield ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.cursor() as cur:
            cur.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.close()


def query(url: str, statement: str) -> list[tuple]:
    with psycopg2.connect(url) as con, con.cursor() as cur:
        cur.execute(statement)
        rows = cur.fetchall()
    con.close()
    return rows


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A unique key prefix; every key under it is deleted afterwards."""
    prefix = f"vae-test-{uuid.uuid4().hex[:12]}:"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        yield prefix
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def graphql(port: int, text: str) -> dict:
    """The `data` of a GraphQL query to a dagster-webserver on 127.0.0.1."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": text}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["data"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def process(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """A background process in its own process group (so its children end with it), its output in `log`."""
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(wait)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue


def wait_for(predicate, what: str, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what}: exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not ready after {timeout} s:\n{log.read_text()[-3000:]}")


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False
