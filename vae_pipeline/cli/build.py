"""`vae sample`, `vae build` and `vae demo`: write sample runs, materialize what is stale, show the result."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import dagster as dg

from vae_pipeline.assets.meta import check_meta_folder, observe_rubric_in_force
from vae_pipeline.domain.objects import absolute, is_local, listings_held, location, put_tree, scratch_root
from vae_pipeline.automation.planner import covers_every_item, next_runs, stale, sync_series
from vae_pipeline.cli.common import CliError, episode_table_rows, paths_of, run_error, say, settings, writing
from vae_pipeline.cli.launch import run_job
from vae_pipeline.cli.review import review_index
from vae_pipeline.definitions import defs, resources_from_environ
from vae_pipeline.engines.collector import paced_for_a_build
from vae_pipeline.engines.executor import engine_of
from vae_pipeline.engines.settings import apply_defaults, check_bucket
from vae_pipeline.storage.checks import check_outcomes
from vae_pipeline.storage.partitions import SERIES
from vae_pipeline.storage.versions import CHECKS_NOT_EVALUATED


def cmd_sample(args: argparse.Namespace) -> int:
    """Sample runs into a folder, or onto a bucket prefix (made in this machine's scratch folder,
    then uploaded: what a harness's runs root on a bucket holds)."""
    from vae_pipeline.sample.generator import SampleRun, generate  # PyAV's encoder: only when sampling

    started = time.monotonic()
    env = apply_defaults(instance=False)  # writes runs, opens no instance: no .vae/ left behind
    out = str(args.out)

    def sample(folder: Path) -> SampleRun:
        return generate(folder, Path(env["VAE_META_DIR"]), series=args.series, episodes=args.episodes,
                        seed=args.seed, bad=not args.no_bad, contest=args.contest, plants=args.plants)

    if is_local(location(out)):
        run = sample(Path(out))
    else:
        check_bucket("--out", out)
        scratch = scratch_root(env["VAE_SCRATCH"], out)
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch, prefix="sample-") as folder:
            run = sample(Path(folder))
            put_tree(Path(folder), location(out))
    say(f"wrote {len(run.episodes)} episodes in {len(run.series)} series to {out} "
         f"({time.monotonic() - started:.1f} s)")
    return 0


def build(runs: Path, out: Path, *, rubric_version: str | None = None, max_rounds: int = 20,
          log_level: str = "CRITICAL") -> dict:
    """Materialize every stale or missing asset, stage by stage, on the persistent instance."""
    with paced_for_a_build(), settings(**paths_of(runs, out), VAE_RUBRIC_VERSION=rubric_version) as env, \
            writing(env) as instance, listings_held(env["VAE_RUNS_ROOT"]):  # the runs root as one listing
        return _build(instance, env, max_rounds, log_level)


def _build(instance: dg.DagsterInstance, env: dict[str, str], max_rounds: int, log_level: str) -> dict:
    resources = resources_from_environ(env)
    runs_root, project_meta = resources["runs_root"], resources["project_meta"]
    try:
        check_meta_folder(project_meta)
        observe_rubric_in_force(instance, project_meta)  # what `rubric` records it was made from
    except dg.Failure as exc:
        raise CliError(exc.description) from None
    resources["warehouse"].record_build(env["VAE_RUNS_ROOT"], env["VAE_DATASET_DIR"])
    changes = sync_series(instance, runs_root, resources["scrub_settings"])
    for skipped in changes.skipped:
        say(f"skipped folder {skipped.name}: {skipped.reason}")
    if changes.added:
        say(f"new series: {', '.join(changes.added)}")
    if changes.removed:
        say(f"series gone from the runs root: {', '.join(changes.removed)}")
    materialized: dict[str, list[str | None]] = defaultdict(list)
    failed: list[dict] = []
    failed_keys: set[tuple[dg.AssetKey, str | None]] = set()
    rechecked: set[tuple[dg.AssetKey, str | None]] = set()  # re-run once for checks a dead run left unevaluated
    for round_number in range(1, max_rounds + 1):
        partitions = instance.get_dynamic_partitions(SERIES)
        items = [i for i in stale(instance, runs_root, project_meta, resources["scrub_settings"],
                                       resources["dataset_folder"])
                 if (i.key, i.partition) not in failed_keys
                 and not (i.reason == CHECKS_NOT_EVALUATED and (i.key, i.partition) in rechecked)]
        rechecked.update((i.key, i.partition) for i in items if i.reason == CHECKS_NOT_EVALUATED)
        runs = next_runs(items, partitions)
        if not runs:
            break
        last_round = covers_every_item(runs, items, partitions)
        for run in runs:
            names = ", ".join(k.to_user_string() for k in run.keys)
            series = run.series(partitions)
            where = "all series" if run.first is None else \
                (run.first if len(series) == 1 else f"{len(series)} series {run.first} … {run.last}")
            say(f"[stage {round_number}] {where}: {names}")
            # in-process, the steps fetch here: their series start coming while the run is made
            ahead = run.series_folders_read(partitions) if engine_of({}) == "in_process" else []
            with runs_root.fetching_ahead(ahead):
                result = run_job("refresh", instance, partition_key=run.partition_key,
                                 asset_selection=list(run.keys), tags=run.tags(),
                                 run_config={"loggers": {"console": {"config": {"log_level": log_level}}}})
            for event in result.get_asset_materialization_events():
                materialization = event.step_materialization_data.materialization
                materialized[materialization.asset_key.to_user_string()].append(materialization.partition)
            if not result.success:
                done = {(dg.AssetKey.from_user_string(k), p) for k, ps in materialized.items() for p in ps}
                for key in run.keys:
                    for partition in series or [None]:
                        if (key, partition) not in done:
                            failed_keys.add((key, partition))
                failed.append({"partition": run.first if len(series) <= 1 else f"{run.first}..{run.last}",
                               "assets": [k.to_user_string() for k in run.keys], "error": run_error(result)})
                say(f"  failed: {failed[-1]['error']}")
                last_round = False
        if last_round:
            break
    return {
        "materialized": {k: sorted(v, key=lambda p: p or "") for k, v in sorted(materialized.items())},
        "failed_runs": failed,
        "skipped_folders": [{"name": s.name, "reason": s.reason} for s in changes.skipped],
        "invalid_episodes": invalid_episodes(resources["warehouse"]),
        "checks": check_results(instance, defs),
    }


def invalid_episodes(warehouse) -> list[dict]:
    rows = episode_table_rows(warehouse, "SELECT series, id, error_file, error_line, error_reason FROM episode_table "
                                          "WHERE NOT valid ORDER BY series, id")
    return [{"series": s, "episode": e, "file": f, "line": line, "reason": r} for s, e, f, line, r in rows]


def check_results(instance: dg.DagsterInstance, defs: dg.Definitions) -> list[dict]:
    """The latest result of every asset check in the code location; `passed` is None for a check
    not evaluated (never run, or planned by a run that ended first) or still running elsewhere."""
    keys = sorted(defs.resolve_asset_graph().asset_check_keys, key=lambda k: (k.asset_key.to_user_string(), k.name))
    outcomes = check_outcomes(instance, keys)
    return [{"asset": key.asset_key.to_user_string(), "check": key.name, "status": outcomes[key].status,
             "passed": outcomes[key].passed, "description": outcomes[key].description} for key in keys]


def cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    summary = build(args.runs, args.out, rubric_version=args.rubric_version,
                    log_level="DEBUG" if args.debug else "CRITICAL")
    if args.summary:
        Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n")
    failed = summary["failed_runs"]
    counts = ", ".join(f"{k} ×{len(v)}" for k, v in summary["materialized"].items()) \
        or ("nothing" if failed else "nothing (up to date)")
    say(f"materialized: {counts}")
    for run in failed:
        say(f"failed: {run['partition'] or 'all series'}: {run['error']}")
    say(f"invalid episodes: {len(summary['invalid_episodes'])}")
    for check in summary["checks"]:
        if check["passed"] is False:
            described = (check["description"] or "").replace("\n", "\n  ")  # its lines under it
            say(f"check failed: {check['asset']}.{check['check']}: {described}")
        elif check["passed"] is None:
            say(f"check {check['status']}: {check['asset']}.{check['check']}")
    say(f"dataset: {absolute(args.out)} ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


def cmd_demo(args: argparse.Namespace) -> int:
    env = apply_defaults()
    scratch = Path(args.dir or Path(env["VAE_HOME"]) / "demo")
    runs, out = scratch / "runs", scratch / "dataset"
    if not runs.exists():
        cmd_sample(argparse.Namespace(out=runs, series=3, episodes=6, seed=0, no_bad=False, contest=True,
                                      plants=False))
    args_build = argparse.Namespace(runs=runs, out=out, summary=scratch / "summary.json", rubric_version=None,
                                    debug=args.debug)
    code = cmd_build(args_build)
    say(f"summary: {(scratch / 'summary.json').resolve()}")
    vae = sys.argv[0] if Path(sys.argv[0]).name == "vae" else "vae"
    say(f"open the Dagster UI on the same instance: {vae} ui --runs {runs} --out {out}")
    say(f"review site: {review_index(env).as_uri()}")
    return code
