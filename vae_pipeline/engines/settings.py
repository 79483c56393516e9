"""Environment variables that configure the resources, and their defaults for local use.

Read when a command starts (never at import), so the code location loads without them. Relative
paths are made absolute against the folder the command runs in, once, when it starts: the runs,
the webserver and the daemon a command starts then all see the same folders.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from botocore.exceptions import BotoCoreError

from vae_pipeline.domain.files import write_if_changed
from vae_pipeline.domain.objects import absolute, is_local, location, machine_folder, missing_bucket
from vae_pipeline.domain.project import PROJECT_META, PROJECT_ROOT

# Settings that name a folder: a relative value is resolved against the current folder.
PATH_SETTINGS = ("VAE_HOME", "VAE_META_DIR", "VAE_RUNS_ROOT", "VAE_DATASET_DIR", "DAGSTER_HOME", "VAE_SCRATCH")

DEFAULTS = {
    "VAE_HOME": ".vae",  # the pipeline's own state, in the folder the command runs in (or s3://bucket/prefix)
    "VAE_SCRATCH": "",  # this machine's own working folder; empty: $VAE_HOME/scratch, or a temp folder for a bucket
    "VAE_SHARED_INPUTS": "",  # a prefix where machines leave the runs root's files they fetched; `vae worker`: $VAE_HOME/inputs
    "VAE_META_DIR": str(PROJECT_META),
    "VAE_RUBRIC_VERSION": "latest",  # or a version such as 1.0
    "VAE_HARNESS_HOSTNAME": "",  # the harness machine's host name, for the scrub
    "VAE_HARNESS_USER": "",  # the harness machine's user names (comma-separated), for the scrub
    "VAE_MAX_UNPACKED_BYTES": str(4 * 1024**3),
    "VAE_MAX_LINE_BYTES": str(64 * 1024**2),  # a longer JSONL line makes its episode invalid
    "VAE_HUB_REPO": "",  # ORG/NAME of the dataset repository (vae publish --repo)
    "VAE_LEADERBOARD_ROUNDS": "1000",  # bootstrap rounds of the leaderboard's intervals
    "VAE_LEADERBOARD_SEED": "0",  # seed of the leaderboard's bootstrap
    "VAE_HUB_ENDPOINT": "",  # the Hub's address; empty: the client's default (huggingface.co or HF_ENDPOINT)
}


# Dagster's own setting: the events of one batch (a ranged run's materializations, one per series)
# are handed to the event log together, which on Postgres writes them in one statement (SQLite
# writes them one by one either way). Set for the Postgres instances: Dagster's cost per series
# of a ranged run there about 27 -> 11-13 ms (docs/decisions.md).
EVENT_BATCH = "DAGSTER_EVENT_BATCH_SIZE"
EVENT_BATCH_ON_POSTGRES = "1000"


# Settings that may name a bucket, with the option of the `vae` commands that sets each
BUCKET_SETTINGS = {"VAE_HOME": None, "VAE_RUNS_ROOT": "--runs", "VAE_DATASET_DIR": "--out / --dataset"}


def check_bucket(name: str, url: str) -> None:
    """A setting (or option) naming a bucket that does not exist is refused in one line naming it
    (the pipeline never creates a bucket: docs/deployment.md says how)."""
    option = f" ({BUCKET_SETTINGS[name]})" if BUCKET_SETTINGS.get(name) else ""
    try:
        bucket = missing_bucket(url)
    except (BotoCoreError, PermissionError) as exc:  # no credentials, no answer, access denied
        raise ValueError(f"{name}{option} is {url}, but the object store cannot be reached ({exc}): set "
                         "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE "
                         "(docs/deployment.md)") from exc
    if bucket is not None:
        raise ValueError(f"{name}{option} is {url}, but the bucket {bucket} does not exist: create it first "
                         "(docs/deployment.md, \"Creating the buckets\")")


SHARED_INPUTS = "inputs"  # under a bucket home: the runs root's files as the machines fetched them


def share_inputs(env: dict[str, str]) -> None:
    """On a bucket home, machines that share only the bucket (Celery workers, and the command
    that plans their runs) leave what they fetch of the runs root in `$VAE_HOME/inputs` for each
    other, unless VAE_SHARED_INPUTS names another prefix."""
    if not env.get("VAE_SHARED_INPUTS") and not is_local(location(env["VAE_HOME"])):
        env["VAE_SHARED_INPUTS"] = f"{env['VAE_HOME'].rstrip('/')}/{SHARED_INPUTS}"


def instance_yaml(name: str) -> Path:
    """The `dagster.yaml` variant VAE_INSTANCE names: `sqlite` (the embedded default) or one in deploy/."""
    path = PROJECT_ROOT / "dagster.yaml" if name == "sqlite" else PROJECT_ROOT / "deploy" / f"dagster.{name}.yaml"
    if not path.is_file() or "/" in name:
        choices = ["sqlite", *sorted(p.name[len("dagster."):-len(".yaml")] for p in (PROJECT_ROOT / "deploy").glob("dagster.*.yaml"))]
        raise ValueError(f"VAE_INSTANCE={name!r} names no instance configuration; use one of {', '.join(choices)}")
    return path


def apply_defaults(environ: dict[str, str] | None = None, *, instance: bool = True) -> dict[str, str]:
    """Fill unset variables with their defaults, make folder settings absolute; DAGSTER_HOME
    defaults to $VAE_HOME/dagster.

    Its `dagster.yaml` is the VAE_INSTANCE variant when that is set (replacing a different one),
    else the embedded default, copied only when the folder has none; not made at all for a
    command that opens no instance (`instance=False`). With a Postgres variant, Dagster's event
    batches are on (EVENT_BATCH) unless set.
    """
    env = os.environ if environ is None else environ
    for name, value in DEFAULTS.items():
        env.setdefault(name, value)
    # on a bucket home the instance's folder is this machine's own (its storage is Postgres there)
    env.setdefault("DAGSTER_HOME", str(machine_folder(env["VAE_HOME"], env["VAE_SCRATCH"]) / "dagster"))
    for name in PATH_SETTINGS:
        if env.get(name):
            env[name] = absolute(env[name])
    for name in BUCKET_SETTINGS:
        if env.get(name):
            check_bucket(name, env[name])
    if env.get("VAE_EXECUTOR") == "celery":
        share_inputs(env)
    if not instance:
        return env
    if env.get("VAE_INSTANCE") and env["VAE_INSTANCE"] != "sqlite":  # every deploy/ variant is Postgres
        env.setdefault(EVENT_BATCH, EVENT_BATCH_ON_POSTGRES)
    home = Path(env["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if env.get("VAE_INSTANCE"):
        write_if_changed(home / "dagster.yaml", instance_yaml(env["VAE_INSTANCE"]).read_bytes())
    elif not (home / "dagster.yaml").exists():
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    return env
