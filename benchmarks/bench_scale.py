"""Benchmark: cost that grows with the change, not with the dataset (1,000 and 10,000 episodes).

    python benchmarks/bench_scale.py [--episodes 1000] [--episodes 100,1000] [--profile DIR] [--floor 250]
        [--new-series-floor 2500] [--keep] [--runs-from DIR] [--cold]

For each size N (series of 4 good episodes, the generator's own thumbnail clips: 192x108 / 108x192
/ 144x144 at 15 fps, ~0.1 MB an episode, so 10,000 fit the machine), in a temp dir with its own
VAE_HOME, DAGSTER_HOME, dataset folder and copy of meta/, generates N + 4 episodes with the
project's generator, holds the last completed series back, and times `vae_pipeline.cli.build`:
  1. the full build of N episodes on a fresh instance (s / episode);
  2. a second build, unchanged (nothing may be materialized); a third, as every later unchanged
     build runs (the sweep for killed writes reads only the folders changed since the second's);
     a fourth as a user or a cron job runs it: `vae build` in a new process, which imports the
     pipeline and reads every series' series.json and folder name afresh (this process's builds
     have them remembered);
     then the same with what the instance keeps of each series stage's recorded versions
     forgotten (every event read back);
  3. the held-back series put back: one new series of 4, reported above the third build (an
     unchanged build as every later one runs; the second is the first after a full build, whose
     runs root may have left the page cache);
     the review site's files are compared before and after (mtime or bytes changed, new, gone)
     and every changed file that is not the new series' nor the index is named;
  4. a rehost, `--rubric-version 1.0` (episodes, renders, verdicts and bundles must not run);
     then back to the newest rubric with `vae build` in a new process, as a user runs a rehost
     (its imports, and the review site's worker processes starting from the `vae` script).
Each figure is printed with its ratio to the full build and its goal, and where the time went
(steps per asset, the runs' overhead outside the steps, staleness planning). `--profile DIR`
writes a cProfile of builds 2-4 to DIR (`pstats` files, `python -m pstats`).

After the builds, the listing a build takes of the runs root to find what changed (a stat of every
file, no content read) is timed against GNU `find` printing the same facts (path, size, mtime,
mode): the tool a user would reach for, and the least any stat-based listing costs. `--cold` (as
root) also times both after the kernel's page, dentry and inode caches are dropped (`sync`, then
`3 > /proc/sys/vm/drop_caches`), and runs one more unchanged build after dropping them: what a
nightly build meets when the runs root was last read a day before.

`--ui` then starts Dagster's webserver on the instance and times, in Debian's Chromium, how long
the `labels` asset page, its partitions tab and one series' materialization take to show (from
the page's request until the element an operator reads is on screen; best of 3, after one cold
visit of each, with a new tab each time).

`--floor P` measures what Dagster itself costs per partition on SQLite: one ranged run of an
empty series-partitioned asset over P partitions (each with one metadata entry, as the assets
record), against the same run over one partition; the same with Dagster's one planned event for
the whole range instead of one per partition, and how many partitions of a failing run Dagster
then marks failed; and per run and per step: a run of one empty asset, and of 20 in a chain.
`--new-series-floor P` measures what Dagster costs the run of one new series as the series grow:
a chain of 17 empty series-partitioned steps (as many as a build runs for a new series) run for a
partition just added, beside 1 series and beside P. `--floor-on postgres` measures the floors on
a new database of the PostgreSQL server on 127.0.0.1 (the instance a deployment moves to),
dropped afterwards; `--episodes ""` measures the floors alone.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import dagster as dg
from bench_rehost import META, Timing, counts, isolated_env, timed_build

from vae_pipeline.engines.settings import EVENT_BATCH, EVENT_BATCH_ON_POSTGRES

PER_SERIES = 4
UPSTREAM_OF_LABELS = ("episodes", "renders", "verdicts", "bundles")
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}  # as `vae build` runs
AGAIN = "unchanged, again"  # the third build: what every later unchanged build costs
NEW_PROCESS = "unchanged, `vae build` in a new process"  # as a user or a cron job runs it
COLD = "unchanged, kernel caches dropped"  # with --cold: as a nightly build finds the runs root
REHOST_BACK = "rehost back, `vae build` in a new process"  # to the newest rubric, as a user runs it
# (figure, goal at 1,000, goal at 10,000) in seconds
GOALS = {"unchanged": (3, 5), AGAIN: (3, 5), NEW_PROCESS: (3, 5), "new series": (3, 6), "rehost": (8, 45),
         COLD: (3, 5), REHOST_BACK: (8, 45)}
UI_GOAL_S = 3.0
READ_BACK = "unchanged, every event read back"  # the same build with the instance's recorded versions forgotten
NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}  # the instances the floors are measured on
SUBSET_PLANNED = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"


def site_files(site: Path) -> dict[str, tuple[int, str]]:
    """Every file of the review site: (mtime_ns, sha256) by path."""
    return {p.relative_to(site).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(site.rglob("*")) if p.is_file()}


def site_changes(before: dict, after: dict, series: str) -> dict[str, list[str]]:
    from vae_pipeline.domain.review.site import INDEX_PARTS

    rewritten = [p for p in after if p in before and after[p][0] != before[p][0]]
    changed = [p for p in rewritten if after[p][1] != before[p][1]]
    new = [p for p in after if p not in before]
    gone = [p for p in before if p not in after]
    others = [p for p in rewritten + new + gone if series not in p and not p.endswith(("index.html", INDEX_PARTS))]
    return {"rewritten": rewritten, "changed": changed, "new": new, "gone": gone, "others": others}


def load() -> str:
    return "load {:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


def ui_pages(root: Path, series: str) -> dict[str, float]:
    """Seconds until each page an operator opens shows what they came for, on the instance the
    builds made: Dagster's webserver (no daemon) and Chromium, best of 3 after a cold visit."""
    import re

    from playwright.sync_api import sync_playwright

    from vae_pipeline.domain.project import PROJECT_ROOT
    from vae_pipeline_tests.services import answers, free_port, process, wait_for
    from vae_pipeline_tests.test_review_browser import CHROMIUM, LAUNCH_ARGS

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "dagster_webserver", "-w", str(PROJECT_ROOT / "workspace.yaml"),
               "-h", "127.0.0.1", "-p", str(port)]
    pages = {  # page, and what shows it loaded
        "labels asset page": (f"{url}/assets/labels", lambda page: page.get_by_text("Latest materialization").first),
        "labels partitions tab": (f"{url}/assets/labels?view=partitions",  # a long list shows its first keys
                                  lambda page: page.get_by_text(re.compile(r"^\d{4}-\d\d-\d\d-s\d+$")).first),
        "one series' materialization": (f"{url}/assets/labels?view=partitions&partition={series}",
                                        lambda page: page.get_by_text(re.compile("^vae/version$")).first),
    }
    seconds: dict[str, float] = {}
    log = root / "webserver.log"
    with process(command, dict(os.environ), log) as webserver, sync_playwright() as playwright:
        wait_for(lambda: answers(f"{url}/server_info"), "dagster-webserver", webserver, log)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        for name, (address, shown) in pages.items():
            times = []
            for _ in range(4):  # a cold visit, then three
                page = context.new_page()
                page.set_default_timeout(120_000)
                page.add_locator_handler(page.get_by_role("button", name="Skip", exact=True), lambda b: b.click())
                start = time.perf_counter()
                page.goto(address)
                shown(page).wait_for()
                times.append(time.perf_counter() - start)
                page.close()
            seconds[name] = min(times[1:])
            print(f"  UI, {name}: {seconds[name]:.2f} s (cold {times[0]:.2f} s; goal <= {UI_GOAL_S:g} s "
                  f"{'✓' if seconds[name] <= UI_GOAL_S else '✗'}); {load()}", flush=True)
        browser.close()
    return seconds


def drop_kernel_caches() -> None:
    """Write dirty pages out, then drop the kernel's page cache, dentries and inodes (root only)."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def runs_root_listing(runs: Path) -> float:
    """Seconds for the listing `vae build` takes of the runs root: every series folder's
    fingerprint, taken at once (by worker processes for many series)."""
    from vae_pipeline.domain.episodes.fingerprints import series_fingerprints

    start = time.perf_counter()
    series_fingerprints(sorted(folder for folder in runs.iterdir() if folder.is_dir()))
    return time.perf_counter() - start


def find_listing(runs: Path) -> float:
    """Seconds for GNU find to print the same facts of every file under the runs root."""
    start = time.perf_counter()
    subprocess.run(["find", str(runs), "-printf", "%P\\0%s\\0%T@\\0%m\\n"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def listing_peers(runs: Path, cold: bool) -> None:
    """The runs root's listing against find: warm (best of 3) and, with `cold`, after dropping caches."""
    files = sum(1 for _ in runs.rglob("*"))
    line = (f"  runs root listing ({files} entries), warm: vae {min(runs_root_listing(runs) for _ in range(3)):.2f} s, "
            f"find {min(find_listing(runs) for _ in range(3)):.2f} s")
    if cold:
        drop_kernel_caches()
        ours = runs_root_listing(runs)
        drop_kernel_caches()
        line += f"; caches dropped: vae {ours:.2f} s, find {find_listing(runs):.2f} s"
    print(f"{line}; {load()}", flush=True)


def forget_recorded_versions() -> None:
    """Empty what the instance keeps of each series stage's recorded versions, so that the next
    build reads every partition's latest event back, as it did before they were kept."""
    from vae_pipeline.storage.versions import RECORDED_VERSIONS

    with dg.DagsterInstance.get() as instance:
        instance.run_storage.set_cursor_values({RECORDED_VERSIONS.format(key=key): "{}"
                                                for key in (*UPSTREAM_OF_LABELS, "labels")})


def cli_build(runs: Path, out: Path) -> tuple[float, float, float, str]:
    """`vae build` run as a user runs it, in a new process that imports everything and reads
    every series afresh: its wall time, its CPU time, the time it reports for the build itself
    (after its imports) and what it materialized."""
    vae = Path(sys.executable).parent / "vae"
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run([str(vae), "build", "--runs", str(runs), "--out", str(out)],
                          capture_output=True, text=True, env=os.environ)
    wall = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"vae build exited {done.returncode}: {done.stderr[-2000:]}")
    reported = re.search(r"^dataset: .* \(([0-9.]+) s\)$", done.stdout, re.M)
    materialized = re.search(r"^materialized: (.*)$", done.stdout, re.M)
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return wall, cpu, float(reported.group(1)) if reported else float("nan"), \
        materialized.group(1) if materialized else "?"


def one_size(n: int, root: Path, profile: Path | None, ui: bool = False,
             runs_from: Path | None = None, cold: bool = False) -> dict[str, float]:
    from vae_pipeline.domain.review.site import SITE_DIR
    from vae_pipeline.sample.generator import generate

    meta = root / "meta"
    shutil.copytree(META, meta)
    results: dict[str, float] = {}
    with isolated_env(root, meta):
        runs, held, out = root / "runs", root / "held", root / "dataset"
        start = time.perf_counter()
        if runs_from is not None:  # what an earlier run generated and held back, as it left them
            taken = sorted((runs_from / "held").iterdir()) if (runs_from / "held").is_dir() else []
            if len(taken) != 1 or not (runs_from / "runs").is_dir():  # checked before anything moves
                raise SystemExit(f"--runs-from: {runs_from} holds no runs/ and held/ with one series, as --keep keeps")
            (runs_from / "runs").rename(runs)
            (runs_from / "held").rename(held)
            new_series = taken[0].name
            made = f"took the runs generated in {runs_from}"
        else:
            sample = generate(runs, meta, series=n // PER_SERIES + 1, episodes=PER_SERIES, seed=0, bad=False)
            completed = sorted(s for s, status in sample.series.items() if status == "completed")
            new_series = completed[-1]
            held.mkdir()
            (runs / new_series).rename(held / new_series)
            made = f"generated {len(sample.episodes)} thumbnail episodes in {len(sample.series)} series"
        size = sum(p.stat().st_size for p in runs.rglob("*") if p.is_file())
        print(f"N={n}: {made} ({size / 1e6:.0f} MB in the runs root without {new_series}) in "
              f"{time.perf_counter() - start:.0f} s; {load()}", flush=True)
        site = Path(os.environ["VAE_HOME"]) / SITE_DIR
        problems: list[str] = []
        figures: list[tuple[str, float, Timing]] = []  # name, wall seconds, where the time went

        def step(name: str, rubric: str | None = None) -> dict:
            path = profile / f"{n}-{name.replace(' ', '-')}.pstats" if profile and name != "full build" else None
            summary, timing = timed_build(runs, out, rubric, dump=path)
            figures.append((name, timing.total, timing))
            print(f"  {name}: {timing.total:.2f} s (CPU {timing.cpu:.2f} s), materialized {counts(summary)}; {load()}", flush=True)
            for failed in summary["failed_runs"]:
                problems.append(f"{name}: failed run {failed['partition']} {failed['assets']}: {failed['error']}")
            return summary

        step("full build")
        if step("unchanged")["materialized"]:
            problems.append("the unchanged build materialized something")
        if step(AGAIN)["materialized"]:
            problems.append(f"the {AGAIN} build materialized something")
        wall, cpu, reported, materialized = cli_build(runs, out)
        figures.append((NEW_PROCESS, wall, Timing(total=wall, cpu=cpu)))
        print(f"  {NEW_PROCESS}: {wall:.2f} s (CPU {cpu:.2f} s; the build after its imports {reported:.1f} s, "
              f"as it reports), materialized {materialized}; {load()}", flush=True)
        if materialized != "nothing (up to date)":
            problems.append(f"the {NEW_PROCESS} build materialized {materialized}")
        forget_recorded_versions()
        if step(READ_BACK)["materialized"]:
            problems.append(f"the {READ_BACK} build materialized something")
        if cold:
            drop_kernel_caches()
            if step(COLD)["materialized"]:
                problems.append(f"the {COLD} build materialized something")
        before = site_files(site)
        (held / new_series).rename(runs / new_series)
        added = step("new series")
        changes = site_changes(before, site_files(site), new_series)
        rehost = step("rehost", "1.0")
        problems += [f"rehost materialized {k}" for k in UPSTREAM_OF_LABELS if rehost["materialized"].get(k)]
        wall, cpu, reported, materialized = cli_build(runs, out)  # no --rubric-version: the newest
        figures.append((REHOST_BACK, wall, Timing(total=wall, cpu=cpu)))
        print(f"  {REHOST_BACK}: {wall:.2f} s (CPU {cpu:.2f} s; the build after its imports {reported:.1f} s, "
              f"as it reports), materialized {materialized}; {load()}", flush=True)
        names = {part.split(" ×")[0] for part in materialized.split(", ")}
        problems += [f"the {REHOST_BACK} materialized {k}" for k in UPSTREAM_OF_LABELS if k in names]
        if "labels" not in names:
            problems.append(f"the {REHOST_BACK} labelled nothing: {materialized}")
        if not added["materialized"].get("labels") == [new_series]:
            problems.append(f"the new series' build labelled {added['materialized'].get('labels')}")

        full, full_cpu = figures[0][1], figures[0][2].cpu
        big = n >= 10_000
        results["full"] = full
        print(f"N={n} results (each / full build; CPU: this process's CPU time, which the load inflates less):")
        print(f"  full build: {full:.1f} s = {full / n * 1000:.1f} ms / episode (CPU {full_cpu:.1f} s = "
              f"{full_cpu / n * 1000:.1f} ms / episode)")
        base = next(figure for figure in figures if figure[0] == AGAIN)  # what the new series' build adds to
        for name, seconds, timing in figures[1:]:
            above = name == "new series"
            shown = seconds - base[1] if above else seconds
            cpu = timing.cpu - base[2].cpu if above else timing.cpu
            label = f"new series above the {AGAIN} build" if above else name
            goal = GOALS.get(name, (None, None))[big]
            results[name] = shown
            judged = f"; goal <= {goal} s {'✓' if shown <= goal else '✗'}" if goal is not None else ""
            print(f"  {label}: {shown:.2f} s ({shown / full:.1%} of full{judged}); CPU {cpu:.2f} s "
                  f"({cpu / full_cpu:.1%} of full)")
        print(f"  review site after one new series: {len(changes['rewritten'])} files rewritten "
              f"({len(changes['changed'])} with new bytes), {len(changes['new'])} new, {len(changes['gone'])} gone, "
              f"of {len(before)}; outside the new series and the index: {len(changes['others'])}")
        for path in changes["others"][:10]:
            print(f"    also rewritten: {path}")
        print("  where the time went:")
        for name, _, timing in figures:
            if name not in (NEW_PROCESS, REHOST_BACK):  # another process's steps: only its wall and CPU time are known
                timing.report(name)
        listing_peers(runs, cold)
        if ui:
            slow = [name for name, seconds in ui_pages(root, new_series).items() if seconds > UI_GOAL_S]
            problems += [f"the UI's {name} took over {UI_GOAL_S:g} s" for name in slow]
        for problem in problems:
            print(f"FAIL N={n}: {problem}")
        results["problems"] = len(problems)
        (runs / new_series).rename(held / new_series)  # held back again: a kept folder serves --runs-from
    return results


@dg.io_manager
def nothing(_):
    """An IO manager that stores nothing: the floors measure Dagster, not storage."""
    class Nothing(dg.IOManager):
        def handle_output(self, context, obj): pass
        def load_input(self, context): return None
    return Nothing()


@contextmanager
def floor_instance(home: Path, on: str) -> Iterator[dg.DagsterInstance]:
    """A fresh instance in `home`: the embedded SQLite one, or on `postgres` a new database."""
    home.mkdir()
    quiet = "telemetry:\n  enabled: false\n"  # as the project's own dagster.yaml
    if on == "sqlite":
        (home / "dagster.yaml").write_text(quiet)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            yield instance
        return
    from vae_pipeline_tests.services import postgres_database

    with postgres_database() as url:
        (home / "dagster.yaml").write_text(f"storage:\n  postgres:\n    postgres_url: {url}\n{quiet}")
        with dg.DagsterInstance.from_config(str(home)) as instance:
            yield instance


def dagster_floor(partitions: int, root: Path, on: str = "sqlite") -> None:
    """An empty series-partitioned asset in one ranged run: what Dagster costs per partition,
    without and with one `add_asset_metadata` per partition (as every series asset records its
    version), and with those calls inside `partitions_read_once` (as `series_output` makes them)."""
    from contextlib import nullcontext

    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from vae_pipeline.storage.partitions import partitions_read_once

    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    series = dg.DynamicPartitionsDefinition(name="series")
    # label: (one add_asset_metadata per partition, inside partitions_read_once, Dagster's settings:
    # one planned event for the whole range, not used by the project (see docs/decisions.md); the
    # event batches `vae` sets for a Postgres instance)
    variants = {"": (False, False, {}), ", one add_asset_metadata per partition": (True, False, {}),
                ", the same inside partitions_read_once": (True, True, {}),
                f", the same with Dagster's event batches ({EVENT_BATCH}={EVENT_BATCH_ON_POSTGRES})":
                    (True, True, {EVENT_BATCH: EVENT_BATCH_ON_POSTGRES}),
                f", one planned event for the range ({SUBSET_PLANNED})": (False, False, {SUBSET_PLANNED: "1"})}

    def job_of(name: str, metadata: bool, read_once: bool, fail: bool = False):
        @dg.asset(name=name, partitions_def=series, backfill_policy=dg.BackfillPolicy.single_run())
        def empty(context):
            if fail:
                raise RuntimeError("a failing run")
            with partitions_read_once(context.instance) if read_once else nullcontext():
                for key in context.partition_keys if metadata else ():
                    context.add_asset_metadata({"rows": 1}, partition_key=key)
            return dg.Output(None)

        return dg.Definitions(assets=[empty], resources={"io_manager": nothing}).resolve_implicit_global_asset_job_def()

    def ranged(count: int) -> dict[str, str]:
        return {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[count - 1]}

    with floor_instance(root / f"floor-{on}", on) as instance:
        keys = [f"s{i:05d}" for i in range(partitions)]
        instance.add_dynamic_partitions("series", keys)
        for index, (label, (metadata, read_once, settings)) in enumerate(variants.items()):
            job, times = job_of(f"empty_{index}", metadata, read_once), {}
            with dagster_settings(settings):
                for count in (1, partitions, 1, partitions):
                    start = time.perf_counter()
                    job.execute_in_process(instance=instance, tags=ranged(count), run_config=QUIET)
                    times.setdefault(count, []).append(time.perf_counter() - start)
            one, many = min(times[1]), min(times[partitions])
            print(f"Dagster floor on {NAMES[on]}, an empty partitioned asset in one ranged run{label}: 1 partition {one:.2f} s, "
                  f"{partitions} partitions {many:.2f} s = {(many - one) / (partitions - 1) * 1000:.1f} ms per "
                  f"partition; {load()}", flush=True)
        failed = {}
        for index, one_planned in enumerate((False, True)):  # what the UI then shows of a failed run
            name = f"failing_{index}"
            with dagster_settings({SUBSET_PLANNED: "1"} if one_planned else {}):
                job_of(name, False, False, fail=True).execute_in_process(instance=instance, tags=ranged(5),
                                                                         run_config=QUIET, raise_on_error=False)
            status = get_and_update_asset_status_cache_value(instance, dg.AssetKey(name), series)
            failed[one_planned] = len(status.deserialize_failed_partition_subsets(series).get_partition_keys())
        print(f"a ranged run over 5 partitions that fails: Dagster marks {failed[False]} of 5 failed with a planned "
              f"event per partition, {failed[True]} of 5 with one for the range", flush=True)


@contextmanager
def dagster_settings(settings: dict[str, str]) -> Iterator[None]:
    """Dagster's settings for the runs made inside (read when a run is made and as it stores its
    events), and only those of the variants: the others unset."""
    names = (SUBSET_PLANNED, EVENT_BATCH)
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)
        os.environ.update(saved)


def empty_chain(length: int, partitions_def: dg.PartitionsDefinition | None = None) -> dg.JobDefinition:
    """A job of `length` empty assets in a chain, each loading the one before through a no-op IO
    manager (partitioned by `partitions_def`, if given): steps that cost only what Dagster does."""
    assets = []
    for index in range(length):
        if index:
            @dg.asset(name=f"step_{index}", partitions_def=partitions_def,
                      ins={"upstream": dg.AssetIn(f"step_{index - 1}")})
            def empty(upstream):
                return None
        else:
            @dg.asset(name="step_0", partitions_def=partitions_def)
            def empty():
                return None
        assets.append(empty)
    return dg.Definitions(assets=assets, resources={"io_manager": nothing}).resolve_implicit_global_asset_job_def()


def dagster_step_floor(steps: int, root: Path, on: str = "sqlite") -> None:
    """What Dagster costs per run and per step on SQLite, whatever the step does: a run of one
    empty unpartitioned asset, and of `steps` of them in a chain (each loading the one before
    through a no-op IO manager), as a build's runs over one new series are."""
    with floor_instance(root / f"step-floor-{on}", on) as instance:
        times: dict[int, list[float]] = {}
        for length in (1, steps, 1, steps):
            job = empty_chain(length)
            start = time.perf_counter()
            job.execute_in_process(instance=instance, run_config=QUIET)
            times.setdefault(length, []).append(time.perf_counter() - start)
        one, many = min(times[1]), min(times[steps])
        print(f"Dagster floor on {NAMES[on]}, empty unpartitioned assets in one run: 1 step {one:.2f} s (the run), "
              f"{steps} steps {many:.2f} s = {(many - one) / (steps - 1) * 1000:.0f} ms per step; {load()}", flush=True)


def dagster_new_series_floor(steps: int, partitions: int, root: Path, on: str = "sqlite") -> None:
    """What Dagster costs the run of one new series, whatever the steps do, as the number of
    series grows: a chain of `steps` empty series-partitioned assets run for a partition just
    added, when the instance holds 1 series and when it holds `partitions` (the sizes in turns,
    best of two each)."""
    job = empty_chain(steps, dg.DynamicPartitionsDefinition(name="series"))
    times: dict[int, list[float]] = {}
    with ExitStack() as stack:
        instances = {size: stack.enter_context(floor_instance(root / f"new-series-floor-{on}-{size}", on))
                     for size in (1, partitions)}
        for size, instance in instances.items():
            instance.add_dynamic_partitions("series", [f"s{i:05d}" for i in range(size)])
        for round_ in range(2):
            for size, instance in instances.items():
                key = f"new{round_}"
                instance.add_dynamic_partitions("series", [key])
                start = time.perf_counter()
                job.execute_in_process(instance=instance, partition_key=key, run_config=QUIET)
                times.setdefault(size, []).append(time.perf_counter() - start)
    one, many = min(times[1]), min(times[partitions])
    print(f"Dagster floor on {NAMES[on]}, one new series' run of {steps} empty series-partitioned steps: "
          f"{one:.2f} s beside 1 series, {many:.2f} s beside {partitions} "
          f"({(many - one) / steps * 1000:+.0f} ms a step); "
          f"{load()}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", default="1000", help="sizes, comma-separated (multiples of 4)")
    parser.add_argument("--profile", type=Path, help="write cProfile stats of the later builds to this folder")
    parser.add_argument("--floor", type=int, default=0, help="also measure Dagster's cost per partition over P")
    parser.add_argument("--new-series-floor", type=int, default=0, metavar="P",
                        help="also measure Dagster's cost of one new series' run beside P series")
    parser.add_argument("--floor-on", choices=tuple(NAMES), default="sqlite", help="the instance the floors use")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (printed)")
    parser.add_argument("--ui", action="store_true", help="also time the Dagster UI's labels pages in Chromium")
    parser.add_argument("--cold", action="store_true", help="as root: also time the runs root's listing and an "
                                                             "unchanged build with the kernel's caches dropped")
    parser.add_argument("--runs-from", type=Path, help="a folder --keep kept: its sizes' generated runs are taken "
                                                       "(moved) instead of generating them again")
    args = parser.parse_args(argv)
    if 0 < args.floor < 5:
        parser.error("--floor needs at least 5 partitions (it also times a failing run over 5)")
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    from vae_pipeline.definitions import defs  # noqa: F401  (import cost outside the timings)

    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(f"cpus: {os.cpu_count()}; {load()}")
    root = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    failed = 0
    try:
        if args.floor:
            dagster_floor(args.floor, root, args.floor_on)
            dagster_step_floor(20, root, args.floor_on)
        if args.new_series_floor:
            dagster_new_series_floor(17, args.new_series_floor, root, args.floor_on)
        per_episode = {}
        for n in (int(s) for s in args.episodes.split(",") if s):
            results = one_size(n, root / str(n), args.profile, args.ui,
                               args.runs_from / str(n) if args.runs_from else None, args.cold)
            per_episode[n] = results["full"] / n
            failed += results["problems"]
        if len(per_episode) > 1:
            print("full build, s / episode: " + ", ".join(f"{n}: {s * 1000:.1f} ms" for n, s in per_episode.items()))
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
