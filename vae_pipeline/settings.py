"""Environment variables that configure the resources, and their defaults for local use.

Read when a command starts (never at import), so the code location loads without them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

DEFAULTS = {
    "VAE_HOME": ".vae",  # the pipeline's own state: tables, DuckDB, frames, Dagster instance
    "VAE_META_DIR": "meta",  # the project's meta/ folder
    "VAE_RUBRIC_VERSION": "latest",  # or a version such as 1.0
    "VAE_HARNESS_HOSTNAME": "",  # the harness machine's host name, for the scrub
    "VAE_HARNESS_USER": "",  # the harness machine's user name, for the scrub
    "VAE_MAX_UNPACKED_BYTES": str(4 * 1024**3),
    "VAE_HUB_REPO": "",  # ORG/NAME of the dataset repository (vae publish --repo)
    "VAE_LEADERBOARD_ROUNDS": "1000",  # bootstrap rounds of the leaderboard's intervals
    "VAE_LEADERBOARD_SEED": "0",  # seed of the leaderboard's bootstrap
    "VAE_HUB_ENDPOINT": "",  # the Hub's address; empty: the client's default (huggingface.co or HF_ENDPOINT)
}


def apply_defaults(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Fill unset variables with their defaults; DAGSTER_HOME defaults to $VAE_HOME/dagster."""
    env = os.environ if environ is None else environ
    for name, value in DEFAULTS.items():
        env.setdefault(name, value)
    env.setdefault("DAGSTER_HOME", str(Path(env["VAE_HOME"]).resolve() / "dagster"))
    home = Path(env["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    return env
