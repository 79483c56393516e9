"""Opening the instance, and the one-writer lock: two `vae` commands on one home never race.

Dagster creates an instance's tables (and stamps its alembic revision) the first time a process
opens it; two processes doing that at once leave two alembic heads, after which nothing opens.
So every `vae` process opens the instance under a lock, and sets the pool limits under the same
lock. Commands that write (`vae build`, `vae publish`) also hold the writer lock for their whole
run: a second one waits for the first. On one machine the locks are `fcntl.flock`s on files under
DAGSTER_HOME and VAE_HOME (the kernel drops them when the holder dies, however it dies); on a
Postgres instance, shared by several machines, they are also Postgres advisory locks, held by a
connection that closes with the process.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import dagster as dg
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

from vae_pipeline.domain.objects import machine_folder
from vae_pipeline.domain.processes import this_process
from vae_pipeline.engines.pools import ensure_pool_limits

INSTANCE_LOCK = ".vae-instance.lock"  # under DAGSTER_HOME
WRITER_LOCK = ".vae-writer.lock"  # under VAE_HOME
# Postgres advisory lock keys (any two fixed 64-bit numbers; "vae-inst" and "vae-writ" in ASCII)
INSTANCE_KEY = 0x7661652D696E7374
WRITER_KEY = 0x7661652D77726974


def postgres_url(dagster_home: Path) -> str | None:
    """The connection of the instance's Postgres storage (env values resolved), None for SQLite."""
    config, _ = dagster_instance_config(str(dagster_home))
    storage = (config.get("storage") or {}).get("postgres")
    if storage is None:
        return None
    from dagster_postgres import DagsterPostgresStorage
    from dagster_postgres.utils import pg_url_from_config

    resolved = process_config(DagsterPostgresStorage.config_type(), storage)
    if not resolved.success:
        unset = sorted(name for name in _env_names(storage) if name not in os.environ)
        if unset:  # Dagster's own message carries a stack trace: name what to set instead
            raise ValueError(f"the instance's Postgres storage ({dagster_home / 'dagster.yaml'}) reads "
                             f"{', '.join(unset)}, which is not set: set it (docs/deployment.md)")
        raise dg.DagsterInvalidConfigError("the instance's postgres storage", resolved.errors, storage)
    return pg_url_from_config(resolved.value)


def _env_names(config: object) -> list[str]:
    """The environment variables a `dagster.yaml` section reads (`{env: NAME}` values)."""
    if isinstance(config, dict):
        if set(config) == {"env"} and isinstance(config["env"], str):
            return [config["env"]]
        return [name for value in config.values() for name in _env_names(value)]
    return [name for value in config for name in _env_names(value)] if isinstance(config, list) else []


@contextmanager
def _file_lock(path: Path, on_wait: Callable[[str], None] | None, what: str) -> Iterator[None]:
    """An exclusive flock on `path`, waiting for its holder (named through `on_wait`, if given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                handle.seek(0)
                on_wait(f"waiting for {what} ({_holder(handle.read())}) to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        me = this_process()
        handle.write(json.dumps({"host": me.host, "pid": me.pid, "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _holder(text: str) -> str:
    try:
        holder = json.loads(text)
        return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
    except (ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def _advisory_lock(url: str, key: int, on_wait: Callable[[str], None] | None, what: str) -> Iterator[None]:
    """A Postgres session advisory lock on `key`, held by a connection of its own."""
    import psycopg2

    connection = psycopg2.connect(url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            if not cursor.fetchone()[0]:
                if on_wait is not None:
                    on_wait(f"waiting for {what} (on another machine or process of this Postgres instance) to finish")
                cursor.execute("SELECT pg_advisory_lock(%s)", (key,))
        yield
    finally:
        connection.close()  # releases the lock


@contextmanager
def _lock(dagster_home: Path, file: Path, key: int, on_wait: Callable[[str], None] | None,
          what: str) -> Iterator[None]:
    with ExitStack() as stack:
        stack.enter_context(_file_lock(file, on_wait, what))
        url = postgres_url(dagster_home)
        if url is not None:
            stack.enter_context(_advisory_lock(url, key, on_wait, what))
        yield


def open_instance() -> dg.DagsterInstance:
    """The instance of DAGSTER_HOME, created (tables, alembic stamp) and given its pool limits by
    one process at a time."""
    home = Path(os.environ["DAGSTER_HOME"])
    with _lock(home, home / INSTANCE_LOCK, INSTANCE_KEY, None, "the instance's creation"):
        instance = dg.DagsterInstance.get()
        ensure_pool_limits(instance)
    return instance


@contextmanager
def writer_lock(env: dict[str, str], on_wait: Callable[[str], None]) -> Iterator[None]:
    """Held by a command that writes (build, publish) for as long as it runs; a second one waits,
    saying once whom it waits for."""
    with _lock(Path(env["DAGSTER_HOME"]), machine_folder(env["VAE_HOME"], env.get("VAE_SCRATCH", "")) / WRITER_LOCK,
               WRITER_KEY, on_wait,
               "another vae command writing to this home"):
        yield


def writer_busy(env: dict[str, str]) -> bool:
    """True while a vae command holds the writer lock of this home (or of this Postgres instance):
    the sensors then leave the refresh to it rather than launch runs that would write beside it."""
    path = machine_folder(env.get("VAE_HOME") or ".vae", env.get("VAE_SCRATCH", "")) / WRITER_LOCK
    if path.exists():
        with open(path, "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    url = postgres_url(Path(env["DAGSTER_HOME"])) if env.get("DAGSTER_HOME") else None
    if url is None:
        return False
    import psycopg2

    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_KEY,))
            return not cursor.fetchone()[0]  # closing the connection releases it if taken
    finally:
        connection.close()
