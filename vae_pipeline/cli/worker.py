"""`vae worker`: a Celery worker for the steps of runs on the Celery engine."""

from __future__ import annotations

import argparse
import os
import sys

from vae_pipeline.cli.common import paths_of, recovered_instance, say
from vae_pipeline.engines.pools import machine_cores
from vae_pipeline.engines.settings import apply_defaults, share_inputs


def cmd_worker(args: argparse.Namespace) -> int:
    """A Celery worker for the steps of runs on the Celery engine, started as
    `dagster-celery worker start` starts one, with the interpreter running `vae`."""
    os.environ.update(paths_of(args.runs, args.out))  # the steps' settings, for the worker exec'd below
    env = apply_defaults()
    share_inputs(env)  # workers share only the bucket: what one fetches of the runs root, the others take
    recovered_instance(env).dispose()
    command = [sys.executable, "-m", "celery", "-A", "vae_pipeline.cli.celery_app", "worker",
               "--prefetch-multiplier=1", "--loglevel", "DEBUG" if args.debug else "INFO", "-Q", "dagster",
               "-n", f"{args.name}@%h", "--concurrency", str(args.concurrency or machine_cores())]
    say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command[1:])}")
    os.execv(command[0], command)
    return 0
