"""`vae`: generate sample runs, build the dataset, open the UI, publish.

Errors are one line (no traceback) unless `--debug`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.assets.hub_release import left_out, refusal_text
from vae_pipeline.assets.meta import check_meta_folder
from vae_pipeline.definitions import defs, resources_from_environ
from vae_pipeline.domain.leaderboard import OVERALL, SOURCES
from vae_pipeline.domain.leaderboard_view import rows_of, text_table
from vae_pipeline.domain.line_scrub import scrub_line
from vae_pipeline.domain.review_site import SITE_DIR
from vae_pipeline.domain.scrub import ScrubConfig
from vae_pipeline.freshness import latest_materialization
from vae_pipeline.launch import run_job
from vae_pipeline.partitions import SERIES
from vae_pipeline.pools import ensure_pool_limits
from vae_pipeline.refresh import (
    failed_only_on_checks,
    next_runs,
    stale,
    sync_series,
)
from vae_pipeline.review_server import review_server
from vae_pipeline.sample.generator import generate
from vae_pipeline.settings import PROJECT_ROOT, apply_defaults


class CliError(Exception):
    """An error the user can act on, printed as one line."""


def _scrubbed(text: str) -> str:
    """What the CLI prints passes through the scrub: a line about an input may quote it."""
    names = ScrubConfig(hostname=os.environ.get("VAE_HARNESS_HOSTNAME") or None,
                        username=os.environ.get("VAE_HARNESS_USER") or None)
    return scrub_line(text, names)


def _say(message: str) -> None:
    print(_scrubbed(message), flush=True)


# ---------------------------------------------------------------- vae sample


def cmd_sample(args: argparse.Namespace) -> int:
    started = time.monotonic()
    env = apply_defaults()
    run = generate(Path(args.out), Path(env["VAE_META_DIR"]), series=args.series,
                   episodes=args.episodes, seed=args.seed, bad=not args.no_bad, contest=args.contest)
    _say(f"wrote {len(run.episodes)} episodes in {len(run.series)} series to {args.out} "
         f"({time.monotonic() - started:.1f} s)")
    return 0


# ---------------------------------------------------------------- vae build


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


def _paths(runs: Path, out: Path) -> dict[str, str]:
    if not runs.is_dir():
        raise CliError(f"runs root {runs} is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    return {"VAE_RUNS_ROOT": str(runs.resolve()), "VAE_DATASET_DIR": str(out.resolve())}


def build(runs: Path, out: Path, *, rubric_version: str | None = None, max_rounds: int = 20,
          log_level: str = "CRITICAL") -> dict:
    """Materialize every stale or missing asset, stage by stage, on the persistent instance."""
    with settings(**_paths(runs, out), VAE_RUBRIC_VERSION=rubric_version) as env:
        return _build(env, max_rounds, log_level)


def _build(env: dict[str, str], max_rounds: int, log_level: str) -> dict:
    resources = resources_from_environ(env)
    runs_root, project_meta = resources["runs_root"], resources["project_meta"]
    try:
        check_meta_folder(project_meta)
    except dg.Failure as exc:
        raise CliError(exc.description) from None
    instance = dg.DagsterInstance.get()
    ensure_pool_limits(instance)
    changes = sync_series(instance, runs_root)
    for skipped in changes.skipped:
        _say(f"skipped folder {skipped.name}: {skipped.reason}")
    if changes.added:
        _say(f"new series: {', '.join(changes.added)}")
    if changes.removed:
        _say(f"series gone from the runs root: {', '.join(changes.removed)}")
    materialized: dict[str, list[str | None]] = defaultdict(list)
    failed: list[dict] = []
    failed_keys: set[tuple[dg.AssetKey, str | None]] = set()
    for round_number in range(1, max_rounds + 1):
        partitions = instance.get_dynamic_partitions(SERIES)
        items = [i for i in stale(instance, runs_root, project_meta, resources["scrub_settings"])
                 if (i.key, i.partition) not in failed_keys]
        runs = next_runs(items, partitions)
        if not runs:
            break
        for run in runs:
            names = ", ".join(k.to_user_string() for k in run.keys)
            series = [] if run.first is None else partitions[partitions.index(run.first):partitions.index(run.last) + 1]
            where = "all series" if run.first is None else \
                (run.first if len(series) == 1 else f"{len(series)} series {run.first} … {run.last}")
            _say(f"[stage {round_number}] {where}: {names}")
            result = run_job("refresh", instance, partition_key=run.partition_key, asset_selection=list(run.keys),
                             tags=run.tags(), run_config={"loggers": {"console": {"config": {"log_level": log_level}}}})
            for event in result.get_asset_materialization_events():
                materialization = event.step_materialization_data.materialization
                materialized[materialization.asset_key.to_user_string()].append(materialization.partition)
            if not result.success and not failed_only_on_checks(instance, result.run_id):
                done = {(dg.AssetKey.from_user_string(k), p) for k, ps in materialized.items() for p in ps}
                for key in run.keys:
                    for partition in series or [None]:
                        if (key, partition) not in done:
                            failed_keys.add((key, partition))
                failed.append({"partition": run.first if len(series) <= 1 else f"{run.first}..{run.last}",
                               "assets": [k.to_user_string() for k in run.keys], "error": _run_error(result)})
                _say(f"  failed: {failed[-1]['error']}")
    return {
        "materialized": {k: sorted(v, key=lambda p: p or "") for k, v in sorted(materialized.items())},
        "failed_runs": failed,
        "skipped_folders": [{"name": s.name, "reason": s.reason} for s in changes.skipped],
        "invalid_episodes": invalid_episodes(resources["warehouse"]),
        "checks": check_results(instance, defs),
    }


def _run_error(result: dg.ExecuteInProcessResult) -> str:
    """The first failed step and its root cause, in one line."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            first = error.message.strip().splitlines()[0].removeprefix(f"{error.cls_name}: ")
            return _scrubbed(f"{event.step_key}: {error.cls_name}: {first}")
    return "run failed"


def _episode_table_rows(warehouse, query: str) -> list[tuple]:
    """The rows `query` selects from the warehouse's episode_table (none before the first build)."""
    if not warehouse.database.exists():
        return []
    with warehouse.connect() as con:
        tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return con.execute(query).fetchall() if "episode_table" in tables else []


def invalid_episodes(warehouse) -> list[dict]:
    rows = _episode_table_rows(warehouse, "SELECT series, id, error_file, error_line, error_reason FROM episode_table "
                                          "WHERE NOT valid ORDER BY series, id")
    return [{"series": s, "episode": e, "file": f, "line": line, "reason": r} for s, e, f, line, r in rows]


def check_results(instance: dg.DagsterInstance, defs: dg.Definitions) -> list[dict]:
    """The latest result of every asset check in the code location."""
    results = []
    for check_key in sorted(defs.resolve_asset_graph().asset_check_keys, key=lambda k: (k.asset_key.to_user_string(), k.name)):
        record = instance.get_latest_asset_check_evaluation_record(check_key)
        evaluation = record.evaluation if record else None
        results.append({
            "asset": check_key.asset_key.to_user_string(), "check": check_key.name,
            "passed": getattr(evaluation, "passed", None),
            "description": getattr(evaluation, "description", None),
        })
    return results


def cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    summary = build(Path(args.runs), Path(args.out), rubric_version=args.rubric_version,
                    log_level="DEBUG" if args.debug else "CRITICAL")
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n")
    failed = summary["failed_runs"]
    counts = ", ".join(f"{k} ×{len(v)}" for k, v in summary["materialized"].items()) \
        or ("nothing" if failed else "nothing (up to date)")
    _say(f"materialized: {counts}")
    for run in failed:
        _say(f"failed: {run['partition'] or 'all series'}: {run['error']}")
    _say(f"invalid episodes: {len(summary['invalid_episodes'])}")
    for check in summary["checks"]:
        if check["passed"] is False:
            _say(f"check failed: {check['asset']}.{check['check']}: {check['description']}")
    _say(f"dataset: {Path(args.out).resolve()} ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


# ---------------------------------------------------------------- vae demo / ui


def cmd_demo(args: argparse.Namespace) -> int:
    env = apply_defaults()
    scratch = Path(args.dir or Path(env["VAE_HOME"]) / "demo")
    runs, out = scratch / "runs", scratch / "dataset"
    if not runs.exists():
        cmd_sample(argparse.Namespace(out=runs, series=3, episodes=6, seed=0, no_bad=False, contest=True))
    args_build = argparse.Namespace(runs=runs, out=out, summary=scratch / "summary.json", rubric_version=None,
                                    debug=args.debug)
    code = cmd_build(args_build)
    _say(f"summary: {(scratch / 'summary.json').resolve()}")
    vae = sys.argv[0] if Path(sys.argv[0]).name == "vae" else "vae"
    _say(f"open the Dagster UI on the same instance: {vae} ui --runs {runs} --out {out}")
    _say(f"review site: {review_index(env).as_uri()}")
    return code


def cmd_ui(args: argparse.Namespace) -> int:
    os.environ.update(_paths(Path(args.runs), Path(args.out)))  # for the process exec'd below
    if args.rubric_version:
        os.environ["VAE_RUBRIC_VERSION"] = args.rubric_version
    apply_defaults()
    with dg.DagsterInstance.get() as instance:
        ensure_pool_limits(instance)
    workspace = PROJECT_ROOT / "workspace.yaml"
    # the interpreter running `vae`, not a `dagster` on PATH: `dagster dev` starts the webserver,
    # the daemon and the code server with its own interpreter, so all of them run in this venv
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "--host", args.host,
               "--port", str(args.port)]
    _say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command)}")
    os.execv(command[0], command)
    return 0


# ---------------------------------------------------------------- vae review


def review_index(env: dict[str, str]) -> Path:
    """The review site's index under VAE_HOME (written by the `review_site` asset)."""
    index = Path(env["VAE_HOME"]).resolve() / SITE_DIR / "index.html"
    if not index.exists():
        raise CliError(f"no review site in {index.parent}; run `vae build` first")
    return index


def cmd_review(args: argparse.Namespace) -> int:
    env = apply_defaults()
    index = review_index(env)
    if not args.serve:
        _say(index.as_uri())
        return 0
    server = review_server(Path(env["VAE_HOME"]), args.port)
    _say(f"http://127.0.0.1:{server.server_port}/{SITE_DIR}/index.html (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


# ---------------------------------------------------------------- vae worker


def cmd_worker(args: argparse.Namespace) -> int:
    """A Celery worker for the steps of runs on the Celery engine, started as
    `dagster-celery worker start` starts one, with the interpreter running `vae`."""
    os.environ.update(_paths(Path(args.runs), Path(args.out)))  # the steps' settings, for the worker exec'd below
    apply_defaults()
    command = [sys.executable, "-m", "celery", "-A", "vae_pipeline.celery_app", "worker",
               "--prefetch-multiplier=1", "--loglevel", "DEBUG" if args.debug else "INFO", "-Q", "dagster",
               "-n", f"{args.name}@%h"]
    if args.concurrency:
        command += ["--concurrency", str(args.concurrency)]
    _say(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(command[1:])}")
    os.execv(command[0], command)
    return 0


# ---------------------------------------------------------------- vae publish


def publish(dataset: Path, repo: str, *, runs: Path | None = None, yes: bool = False, pr: bool = False,
            log_level: str = "CRITICAL") -> tuple[bool, str]:
    """Run the `publish` job (blocking checks, then hub_release); (published or planned, text)."""
    if not dataset.is_dir():
        raise CliError(f"dataset folder {dataset} does not exist; run `vae build` first")
    # the runs root is only read to name its folders that are no series; empty: not known
    runs_root = str(runs.resolve()) if runs else os.environ.get("VAE_RUNS_ROOT", "")
    with settings(VAE_DATASET_DIR=str(dataset.resolve()), VAE_HUB_REPO=repo, VAE_RUNS_ROOT=runs_root) as env:
        result = defs.resolve_job_def("publish").execute_in_process(
            instance=dg.DagsterInstance.get(), raise_on_error=False,
            run_config={"ops": {"hub_release": {"config": {"dry_run": not yes, "create_pr": pr}}},
                        "loggers": {"console": {"config": {"log_level": log_level}}}})
        for event in result.get_asset_materialization_events():
            metadata = event.step_materialization_data.materialization.metadata
            text = metadata["plan"].value.strip("`\n")
            if "url" in metadata:
                text += f"\npublished: {metadata['url'].value}"
            return True, text
        failed = [f"{e.asset_key.to_user_string()}.{e.check_name}: {e.description}"
                  for e in result.get_asset_check_evaluations() if not e.passed]
        if failed:
            return False, refusal_text(failed, _left_out(env))
    return False, _failure_description(result)


def _left_out(env: dict[str, str]) -> list[str]:
    """What the plan leaves out, from the last build's episode_table (the same lines as the plan)."""
    resources = resources_from_environ(env)
    statuses = _episode_table_rows(resources["warehouse"], "SELECT DISTINCT series, series_status FROM episode_table")
    return left_out(resources["project_meta"], statuses, resources["runs_root"])


def _failure_description(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.user_failure_data:
            return event.step_failure_data.user_failure_data.description
    return _run_error(result)


def cmd_publish(args: argparse.Namespace) -> int:
    ok, text = publish(Path(args.dataset), args.repo, runs=args.runs, yes=args.yes, pr=args.pr,
                       log_level="DEBUG" if args.debug else "CRITICAL")
    _say(text)
    if ok and not args.yes:
        _say("dry run: nothing was sent (add --yes to publish)")
    return 0 if ok else 1


# ---------------------------------------------------------------- vae leaderboard


def latest_leaderboard() -> pl.DataFrame:
    """The table the last materialization of `leaderboard` wrote."""
    with settings():
        event = latest_materialization(dg.DagsterInstance.get(), dg.AssetKey("leaderboard"))
    if event is None:
        raise CliError("no leaderboard has been materialized yet: run `vae build` first")
    entry = event.metadata.get("parquet")
    path = Path(entry.value) if entry is not None else None
    if path is None or not path.is_file():
        raise CliError(f"the last leaderboard's table {path} is gone: run `vae build` again")
    return pl.read_parquet(path)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    table = latest_leaderboard()
    sources = [args.source] if args.source else [s for s in SOURCES if s in set(table["source"])]
    shown = 0
    for source in sources:
        for axis in ([args.axis] if args.axis else [OVERALL]):
            rows = rows_of(table, source, axis)
            if rows:
                _say(f"{source} · {axis} (rank, 95 % interval; models whose intervals overlap share a rank: =2)")
                _say(text_table(rows) + "\n")
                shown += 1
    if not shown:
        raise CliError("no leaderboard rows for that source and axis" if table.height else
                       "the leaderboard is empty: it needs two actor models judged on the same briefs")
    return 0


# ---------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="vae", description=__doc__)
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command", required=True)

    sample = sub.add_parser("sample", help="write a sample runs root (contract 1)")
    sample.add_argument("--out", required=True, type=Path)
    sample.add_argument("--series", type=int, default=3)
    sample.add_argument("--episodes", type=int, default=6, help="good episodes per series")
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--no-bad", action="store_true", help="plant no bad episodes (nor bad comparisons lines)")
    sample.add_argument("--contest", action="store_true",
                        help="also several actor models on shared briefs, and pairwise comparisons (leaderboard)")
    sample.set_defaults(func=cmd_sample)

    build_cmd = sub.add_parser("build", help="materialize every stale or missing asset")
    build_cmd.add_argument("--runs", required=True, type=Path)
    build_cmd.add_argument("--out", required=True, type=Path)
    build_cmd.add_argument("--summary", type=Path)
    build_cmd.add_argument("--rubric-version", help="host rubric in force (default: newest in meta/)")
    build_cmd.set_defaults(func=cmd_build)

    demo = sub.add_parser("demo", help="generate sample runs into a scratch folder and build them")
    demo.add_argument("--dir", type=Path, help="scratch folder (default $VAE_HOME/demo)")
    demo.set_defaults(func=cmd_demo)

    ui = sub.add_parser("ui", help="open the Dagster UI on the same instance and settings")
    ui.add_argument("--runs", required=True, type=Path)
    ui.add_argument("--out", required=True, type=Path)
    ui.add_argument("--rubric-version")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1", help="address the webserver listens on")
    ui.set_defaults(func=cmd_ui)

    review = sub.add_parser("review", help="print the review site's file:// URL, or serve it on 127.0.0.1")
    review.add_argument("--serve", action="store_true", help="serve the site on 127.0.0.1 instead")
    review.add_argument("--port", type=int, default=8765, help="with --serve (0: any free port)")
    review.set_defaults(func=cmd_review)

    worker = sub.add_parser("worker", help="start a Celery worker for runs on the Celery engine (VAE_EXECUTOR=celery)")
    worker.add_argument("--runs", required=True, type=Path)
    worker.add_argument("--out", required=True, type=Path)
    worker.add_argument("--name", default=f"vae-{os.getpid()}", help="worker name (before @host)")
    worker.add_argument("--concurrency", type=int, help="steps at once (default: the number of cores)")
    worker.set_defaults(func=cmd_worker)

    pub = sub.add_parser("publish", help="check, then publish the dataset folder to the Hub (dry run by default)")
    pub.add_argument("--dataset", required=True, type=Path)
    pub.add_argument("--repo", required=True, help="ORG/NAME of the dataset repository")
    pub.add_argument("--runs", type=Path, help="the runs root, to name its folders that are no series "
                     "(default: $VAE_RUNS_ROOT)")
    pub.add_argument("--yes", action="store_true", help="really publish (one commit)")
    pub.add_argument("--pr", action="store_true", help="open a pull request instead of committing to main")
    pub.set_defaults(func=cmd_publish)

    board = sub.add_parser("leaderboard", help="print the latest leaderboard (from the last build)")
    board.add_argument("--source", choices=SOURCES, help="scores or pairwise (default: both)")
    board.add_argument("--axis", help="a judging axis (default: overall)")
    board.set_defaults(func=cmd_leaderboard)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.debug:
        warnings.filterwarnings("ignore", category=dg.BetaWarning)
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    try:
        return args.func(args)
    except (CliError, OSError, ValueError, dg.DagsterError) as exc:
        if args.debug:
            raise
        print(_scrubbed(f"vae: error: {exc}"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
