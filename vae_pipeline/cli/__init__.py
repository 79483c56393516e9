"""`vae`: generate sample runs, build the dataset, open the UI, publish.

Errors are one line (no traceback) unless `--debug`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from vae_pipeline.domain.leaderboard.ratings import SOURCES


def _command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand imported when it runs: importing this package stays cheap, which matters
    because a spawned worker process (the review site's) imports the `vae` script's module again."""
    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(f"vae_pipeline.cli.{module}"), name)(args)
    return run


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="vae", description=__doc__)
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command", required=True)

    sample = sub.add_parser("sample", help="write a sample runs root (contract 1)")
    sample.add_argument("--out", required=True, help="a folder or s3://bucket/prefix")
    sample.add_argument("--series", type=int, default=3)
    sample.add_argument("--episodes", type=int, default=6, help="good episodes per series")
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--no-bad", action="store_true", help="plant no bad episodes (nor bad comparisons lines)")
    sample.add_argument("--contest", action="store_true",
                        help="also several actor models on shared briefs, and pairwise comparisons (leaderboard)")
    sample.add_argument("--plants", action="store_true",
                        help="also two episodes holding a fake credential of every kind the scanners know")
    sample.set_defaults(func=_command("build", "cmd_sample"))

    build_cmd = sub.add_parser("build", help="materialize every stale or missing asset")
    build_cmd.add_argument("--runs", required=True, help="a folder or s3://bucket/prefix")
    build_cmd.add_argument("--out", required=True, help="a folder or s3://bucket/prefix")
    build_cmd.add_argument("--summary", type=Path)
    build_cmd.add_argument("--rubric-version", help="host rubric in force (default: newest in meta/)")
    build_cmd.set_defaults(func=_command("build", "cmd_build"))

    demo = sub.add_parser("demo", help="generate sample runs into a scratch folder and build them")
    demo.add_argument("--dir", type=Path, help="scratch folder (default $VAE_HOME/demo)")
    demo.set_defaults(func=_command("build", "cmd_demo"))

    ui = sub.add_parser("ui", help="open the Dagster UI on the same instance and settings")
    ui.add_argument("--runs", required=True, help="a folder or s3://bucket/prefix")
    ui.add_argument("--out", required=True, help="a folder or s3://bucket/prefix")
    ui.add_argument("--rubric-version")
    ui.add_argument("--repo", help="ORG/NAME of the dataset repository the publish job releases to")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1", help="address the webserver listens on")
    ui.set_defaults(func=_command("ui", "cmd_ui"))

    review = sub.add_parser("review", help="print the review site's file:// URL, or serve it on 127.0.0.1")
    review.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 instead")
    review.add_argument("--port", type=int, default=8765, help="with --serve (0: any free port)")
    review.set_defaults(func=_command("review", "cmd_review"))

    worker = sub.add_parser("worker", help="start a Celery worker for runs on the Celery engine (VAE_EXECUTOR=celery)")
    worker.add_argument("--runs", required=True, help="a folder or s3://bucket/prefix")
    worker.add_argument("--out", required=True, help="a folder or s3://bucket/prefix")
    worker.add_argument("--name", default=f"vae-{os.getpid()}", help="worker name (before @host)")
    worker.add_argument("--concurrency", type=int, help="steps at once in this worker (default: this machine's cores; the workers sharing a machine "
                        "run at most one step per core between them)")
    worker.set_defaults(func=_command("worker", "cmd_worker"))

    pub = sub.add_parser("publish", help="check, then publish the dataset folder to the Hub (dry run by default)")
    pub.add_argument("--dataset", required=True, help="a folder or s3://bucket/prefix")
    pub.add_argument("--repo", required=True, help="ORG/NAME of the dataset repository")
    pub.add_argument("--runs", help="the runs root (a folder or s3://bucket/prefix), to name its folders that are no series "
                     "(default: the one the home's last build read)")
    pub.add_argument("--yes", action="store_true", help="really publish (one commit)")
    pub.add_argument("--pr", action="store_true", help="open a pull request instead of committing to main")
    pub.set_defaults(func=_command("publish", "cmd_publish"))

    compare = sub.add_parser("compare", help="whether two dataset folders hold the same dataset (clock readings masked)")
    compare.add_argument("first", help="a dataset folder or s3://bucket/prefix")
    compare.add_argument("second", help="a dataset folder or s3://bucket/prefix")
    compare.set_defaults(func=_command("compare", "cmd_compare"))

    allow = sub.add_parser("allow", help="accept a reviewed scrub finding (appends it to meta/scrub-allow.jsonl)")
    allow.add_argument("episode", help="the episode id")
    allow.add_argument("where", metavar="FILE:LINE", help="the finding's file and line, as the review site shows them")
    allow.add_argument("kind", help="the finding's kind (email, ip_address, credential, user, hostname)")
    allow.add_argument("--reason", required=True, help="why the value may be published")
    allow.set_defaults(func=_command("allow", "cmd_allow"))

    board = sub.add_parser("leaderboard", help="print the latest leaderboard (from the last build)")
    board.add_argument("--source", choices=SOURCES, help="scores or pairwise (default: both)")
    board.add_argument("--axis", help="a judging axis (default: overall)")
    board.set_defaults(func=_command("leaderboard", "cmd_leaderboard"))
    return top


def main(argv: list[str] | None = None) -> int:
    import dagster as dg

    from vae_pipeline.cli.common import CliError, scrubbed

    args = parser().parse_args(argv)
    if not args.debug:
        warnings.filterwarnings("ignore", category=dg.BetaWarning)
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    try:
        return args.func(args)
    except (CliError, OSError, ValueError, dg.DagsterError) as exc:
        if args.debug:
            raise
        print(scrubbed(f"vae: error: {exc}"), file=sys.stderr)
        return 2


