"""`vae ui`: the Dagster UI (webserver and daemon) on the same instance and settings as `vae build`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import dagster as dg

from vae_pipeline.cli.common import paths_of, say
from vae_pipeline.definitions import resources_from_environ
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.pools import ensure_pool_limits
from vae_pipeline.engines.settings import apply_defaults


def cmd_ui(args: argparse.Namespace) -> int:
    os.environ.update(paths_of(Path(args.runs), Path(args.out)))  # for the process exec'd below
    if args.rubric_version:
        os.environ["VAE_RUBRIC_VERSION"] = args.rubric_version
    env = apply_defaults()
    # what the UI builds, `vae publish` then knows the runs root of
    resources_from_environ(env)["warehouse"].record_build(Path(env["VAE_RUNS_ROOT"]), Path(env["VAE_DATASET_DIR"]))
    with dg.DagsterInstance.get() as instance:
        ensure_pool_limits(instance)
    workspace = PROJECT_ROOT / "workspace.yaml"
    # the interpreter running `vae`, not a `dagster` on PATH: `dagster dev` starts the webserver,
    # the daemon and the code server with its own interpreter, so all of them run in this venv
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "--host", args.host,
               "--port", str(args.port)]
    say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command)}")
    os.execv(command[0], command)
    return 0
