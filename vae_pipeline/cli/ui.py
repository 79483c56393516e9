"""`vae ui`: the Dagster UI (webserver and daemon) on the same instance and settings as `vae build`."""

from __future__ import annotations

import argparse
import os
import sys

from vae_pipeline.cli.common import paths_of, recovered_instance, say
from vae_pipeline.definitions import resources_from_environ
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.settings import apply_defaults


def cmd_ui(args: argparse.Namespace) -> int:
    os.environ.update(paths_of(args.runs, args.out))  # for the process exec'd below
    if args.rubric_version:
        os.environ["VAE_RUBRIC_VERSION"] = args.rubric_version
    env = apply_defaults()
    # what the UI builds, `vae publish` then knows the runs root of
    resources_from_environ(env)["warehouse"].record_build(env["VAE_RUNS_ROOT"], env["VAE_DATASET_DIR"])
    # the instance is created (and reconciled) here, before the webserver, the daemon and the code
    # server each open it: never by several processes at once
    recovered_instance(env).dispose()
    workspace = PROJECT_ROOT / "workspace.yaml"
    # the interpreter running `vae`, not a `dagster` on PATH: `dagster dev` starts the webserver,
    # the daemon and the code server with its own interpreter, so all of them run in this venv
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "--host", args.host,
               "--port", str(args.port)]
    say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command)}")
    os.execv(command[0], command)
    return 0
