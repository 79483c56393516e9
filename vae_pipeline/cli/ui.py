"""`vae ui`: the Dagster UI (webserver and daemon) on the same instance and settings as `vae build`."""

from __future__ import annotations

import argparse
import os
import sys

import dagster as dg

from vae_pipeline.assets.meta import observe_rubric_in_force
from vae_pipeline.cli.common import paths_of, recovered_instance, say
from vae_pipeline.definitions import resources_from_environ
from vae_pipeline.domain.project import PROJECT_ROOT
from vae_pipeline.engines.settings import apply_defaults


def cmd_ui(args: argparse.Namespace) -> int:
    os.environ.update(paths_of(args.runs, args.out))  # for the process exec'd below
    if args.rubric_version:
        os.environ["VAE_RUBRIC_VERSION"] = args.rubric_version
    if args.repo:
        os.environ["VAE_HUB_REPO"] = args.repo  # the `publish` job's repository, as `vae publish --repo`
    env = apply_defaults()
    resources = resources_from_environ(env)
    # what the UI builds, `vae publish` then knows the runs root of
    resources["warehouse"].record_build(env["VAE_RUNS_ROOT"], env["VAE_DATASET_DIR"])
    # the instance is created (and reconciled) here, before the webserver, the daemon and the code
    # server each open it: never by several processes at once
    instance = recovered_instance(env)
    try:  # restarted under another rubric: `rubric` and `labels` show unsynced
        observe_rubric_in_force(instance, resources["project_meta"])
    except dg.Failure as exc:
        say(f"warning: {exc.description}")
    instance.dispose()
    workspace = PROJECT_ROOT / "workspace.yaml"
    # the interpreter running `vae`, not a `dagster` on PATH: `dagster dev` starts the webserver,
    # the daemon and the code server with its own interpreter, so all of them run in this venv
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "--host", args.host,
               "--port", str(args.port)]
    say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command)}")
    os.execv(command[0], command)
    return 0
