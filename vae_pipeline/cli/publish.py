"""`vae publish`: the publish checks, then the release to the Hub (a dry run unless --yes)."""

from __future__ import annotations

import argparse
from pathlib import Path

import dagster as dg

from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS_JOB, PUBLISH_JOB
from vae_pipeline.cli.common import CliError, run_error, say, settings, writing
from vae_pipeline.definitions import defs, resources_from_environ
from vae_pipeline.domain.objects import absolute, location
from vae_pipeline.engines.recovery import process_tags
from vae_pipeline.engines.settings import check_bucket
from vae_pipeline.storage.resources import Warehouse


def publish(dataset: str | Path, repo: str, *, runs: str | Path | None = None, yes: bool = False, pr: bool = False,
            log_level: str = "CRITICAL") -> tuple[bool, str]:
    """Run the `publish_checks` job, then the `publish` job, which refuses unless every check
    passed (a refusal is its failed run); (published or planned, text).
    `dataset` (and `runs`) is a folder or an `s3://bucket/prefix`."""
    dataset_url = absolute(str(dataset))
    check_bucket("VAE_DATASET_DIR", dataset_url)
    if not location(dataset_url).is_dir():
        raise CliError(f"dataset folder {dataset} does not exist; run `vae build` first")
    with settings(VAE_DATASET_DIR=dataset_url, VAE_HUB_REPO=repo) as env:
        runs_root = _runs_root(env, dataset_url, runs)
    with settings(VAE_DATASET_DIR=dataset_url, VAE_HUB_REPO=repo, VAE_RUNS_ROOT=runs_root) as env, \
            writing(env) as instance:
        logging = {"loggers": {"console": {"config": {"log_level": log_level}}}}
        checked = defs.resolve_job_def(PUBLISH_CHECKS_JOB).execute_in_process(
            instance=instance, raise_on_error=False, tags=process_tags(writer=True), run_config=logging)
        if not checked.success:
            return False, _failure_description(checked)
        # whatever the checks said: a refusal is the release's, recorded as its failed run
        result = defs.resolve_job_def(PUBLISH_JOB).execute_in_process(
            instance=instance, raise_on_error=False, tags=process_tags(writer=True),
            run_config={"ops": {"hub_release": {"config": {"dry_run": not yes, "create_pr": pr}}}, **logging})
        for event in result.all_events:
            if event.is_successful_output:
                metadata = event.step_output_data.metadata
                text = metadata["plan"].value.strip("`\n")
                return True, text + (f"\npublished: {metadata['url'].value}" if "url" in metadata else "")
    return False, _failure_description(result)


def _runs_root(env: dict[str, str], dataset_url: str, runs: str | Path | None) -> str:
    """The runs root whose folders that are no series the plan names: `--runs`, else the one the
    home's last build read (`built_from.json`). Publishing reads that build's state, so a home that
    never built, or whose last build wrote another dataset that is still there, is refused."""
    home = env["VAE_HOME"]
    last = Warehouse(path=home, scratch_path=env["VAE_SCRATCH"]).last_build()
    if last is None:
        raise CliError(f"VAE_HOME {home} holds no build: run vae publish in the folder vae build ran in, "
                       "or set VAE_HOME to that build's home")
    if last["dataset"] != dataset_url and location(last["dataset"]).is_dir():
        raise CliError(f"the last build in VAE_HOME {home} wrote the dataset folder {last['dataset']}, not "
                       f"{dataset_url}: publish that one, or run vae build --out {dataset_url} first")
    runs_root = absolute(str(runs)) if runs else last["runs_root"]
    check_bucket("VAE_RUNS_ROOT", runs_root)
    if not location(runs_root).is_dir():
        if runs:
            raise CliError(f"runs root {runs} (--runs) is not a folder")
        raise CliError(f"runs root {runs_root} (read by the last build in VAE_HOME {home}) is not a folder: "
                       "name it with --runs")
    return runs_root


def _failure_description(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.user_failure_data:
            return event.step_failure_data.user_failure_data.description
    return run_error(result)


def cmd_publish(args: argparse.Namespace) -> int:
    ok, text = publish(args.dataset, args.repo, runs=args.runs, yes=args.yes, pr=args.pr,
                       log_level="DEBUG" if args.debug else "CRITICAL")
    say(text)
    if ok and not args.yes:
        say("dry run: nothing was sent (add --yes to publish)")
    return 0 if ok else 1
