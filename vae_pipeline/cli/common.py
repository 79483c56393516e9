"""What every command shares: one-line errors, printing through the scrub, settings for one command,
the instance reconciled before anything else."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from vae_pipeline.domain.files import SWEPT, sweep_temp_files
from vae_pipeline.domain.objects import absolute, is_local, location, machine_folder, scratch_root
from vae_pipeline.domain.processes import host_mark
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig, parse_user_names
from vae_pipeline.engines.instance import open_instance, postgres_url, writer_lock
from vae_pipeline.engines.recovery import reconcile
from vae_pipeline.engines.settings import apply_defaults, check_bucket
from vae_pipeline.storage.resources import table_names


class CliError(Exception):
    """An error the user can act on, printed as one line."""


def scrubbed(text: str) -> str:
    """What the CLI prints passes through the scrub: a line about an input may quote it."""
    names = ScrubConfig(hostname=os.environ.get("VAE_HARNESS_HOSTNAME") or None,
                        usernames=parse_user_names(os.environ.get("VAE_HARNESS_USER", "")))
    return scrub_line(text, names)


def say(message: str) -> None:
    print(scrubbed(message), flush=True)


@contextmanager
def settings(**values: str | None) -> Iterator[dict[str, str]]:
    """The environment with `values` set (None: left as it is) and the defaults filled in,
    restored afterwards, so one command's settings never leak into the next in a process."""
    saved = dict(os.environ)
    try:
        os.environ.update({name: value for name, value in values.items() if value is not None})
        yield dict(apply_defaults(os.environ))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def paths_of(runs: str | Path, out: str | Path) -> dict[str, str]:
    """The runs root and dataset folder settings (folders or `s3://bucket/prefix`), checked."""
    runs_at, out_at = location(absolute(str(runs))), location(absolute(str(out)))
    check_bucket("VAE_RUNS_ROOT", str(runs_at))
    check_bucket("VAE_DATASET_DIR", str(out_at))
    if not runs_at.is_dir():
        raise CliError(f"runs root {runs} (VAE_RUNS_ROOT, --runs) is not a folder"
                       + (" (no object under that prefix)" if not is_local(runs_at) else ""))
    if is_local(out_at):
        out_at.mkdir(parents=True, exist_ok=True)
    return {"VAE_RUNS_ROOT": str(runs_at), "VAE_DATASET_DIR": str(out_at)}


def run_error(result: dg.ExecuteInProcessResult) -> str:
    """The first failed step and its root cause, in one line."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            first = error.message.strip().splitlines()[0].removeprefix(f"{error.cls_name}: ")
            return scrubbed(f"{event.step_key}: {error.cls_name}: {first}")
    return "run failed"


def episode_table_rows(warehouse, query: str) -> list[tuple]:
    """The rows `query` selects from the warehouse's episode_table (none before the first build)."""
    if is_local(warehouse.home) and not warehouse.database.exists():
        return []  # never built here (on a bucket, `connect` loads this machine's cache)
    with warehouse.connect() as con:
        return con.execute(query).fetchall() if "episode_table" in table_names(con) else []


def recovered_instance(env: dict[str, str], *, holds_writer_lock: bool = False) -> dg.DagsterInstance:
    """The instance, opened safely and reconciled: runs whose process is gone failed, their pool
    slots freed, and the temp files of killed writes swept from VAE_HOME and the dataset folder.
    Every command that touches the instance or VAE_HOME starts here."""
    instance = open_instance()
    done = reconcile(instance, holds_writer_lock=holds_writer_lock,
                     local=postgres_url(Path(env["DAGSTER_HOME"])) is None)
    for run in done.failed_runs:
        say(f"recovered: run {run} marked failed")
    if done.freed_runs:
        say(f"recovered: pool slots of {len(done.freed_runs)} finished run(s) freed")
    # on disk: the home and the dataset folder; for a bucket, this machine's copy of it (a PUT
    # leaves no temp object behind)
    scratch = env.get("VAE_SCRATCH", "")
    home = machine_folder(env["VAE_HOME"], scratch)
    folders = {home}
    if env.get("VAE_DATASET_DIR"):
        folders.add(machine_folder(env["VAE_DATASET_DIR"], scratch))
    runs = env.get("VAE_RUNS_ROOT", "")
    if "://" in runs:  # a bucket's files fetched here (a runs root on disk is never written)
        folders.add(scratch_root(scratch, runs))
    # the home (many folders) read where it changed since this host's last sweep; the others whole
    swept = [path for folder in sorted(folders) if folder.is_dir()
             for path in sweep_temp_files(folder, home / SWEPT / f"{host_mark()}.json" if folder == home else None)]
    if swept:
        say(f"recovered: {len(swept)} temp file(s) of killed writes removed")
    return instance


@contextmanager
def writing(env: dict[str, str]) -> Iterator[dg.DagsterInstance]:
    """The instance for a command that writes (build, publish): one such command at a time on a
    home (and on a Postgres instance); a second one waits for the first, saying so."""
    with writer_lock(env, say):
        yield recovered_instance(env, holds_writer_lock=True)

