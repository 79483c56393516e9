"""`vae build` end to end on a persistent instance: rows, invalid episodes, README, incrementality."""

import importlib
import json
import re
import shutil
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from vae_pipeline.cli import build as build_module
from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.definitions import defs
from vae_pipeline.domain.dataset.card import CARD_COLUMNS, render_card
from vae_pipeline.domain.dataset.rows import DATASET_COLUMNS
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META, copy_runs, isolate
from vae_pipeline_tests.dataset_bytes import published

# contract 1's bad-input kinds as the generator plants them -> (file, words of the reason);
# None: the file is the archive or folder itself
EXPECTED_REASONS = {
    "missing_file": ("result.json", "required file is missing"),
    "bad_json": ("brief.json", "not valid JSON"),
    "bad_jsonl_line": ("messages.jsonl", "not valid JSON"),
    "wrong_type": ("brief.json", "duration_s"),
    "not_zstd": (None, "not a zstd archive"),
    "truncated": (None, "truncated"),
    "absolute_member": (None, "absolute path"),
    "dotdot_member": (None, "'..'"),
    "link_member": ("work/link-to-passwd", "is a link"),
    "device_member": ("work/dev-null", "device"),
    "fifo_member": ("work/pipe", "FIFO"),
    "bad_id": (None, "not a valid episode id"),
    "bad_judge": ("judge.json", "craft"),
    "sdk_objects": ("messages.jsonl", "stream-json form"),
}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture
def built(sample_runs, pipeline_env, tmp_path):
    """A private build, for tests that change the runs or rebuild."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    before = snapshot(runs)
    summary = build(runs, pipeline_env["dataset"])
    return runs, before, summary


def test_rows_are_exactly_the_valid_episodes_of_completed_series(built_once, sample_runs):
    runs, before, dataset = built_once["runs"], built_once["runs_before"], built_once["dataset"]
    rows = [json.loads(line) for line in (dataset / "episodes.jsonl").read_text().splitlines()]
    expected = sorted(p.episode_id for p in sample_runs.episodes
                      if p.bad is None and sample_runs.series[p.series] == "completed")
    assert [r["id"] for r in rows] == expected
    assert all(list(r) == list(DATASET_COLUMNS) for r in rows)
    parquet = pl.read_parquet(dataset / "data" / "episodes.parquet")
    assert parquet.columns == list(DATASET_COLUMNS) and parquet["id"].to_list() == expected
    by_id = {p.episode_id: p for p in sample_runs.episodes}
    for row in rows:
        brief = by_id[row["id"]].brief
        assert json.loads(row["brief"]) == brief
        assert (row["family"], row["aspect"], row["duration_s"]) == (brief["family"], brief["aspect"], brief["duration_s"])
        assert row["video"] == (f"videos/{row['id']}.mp4" if by_id[row["id"]].variant not in ("no_video", "harness_403") else None)
    assert snapshot(runs) == before, "the runs root was modified"


def test_every_bad_episode_is_reported_with_file_and_reason(built_once, sample_runs):
    summary = built_once["summary"]
    reported = {(i["series"], i["episode"]): i for i in summary["invalid_episodes"]}
    planted = [p for p in sample_runs.episodes if p.bad]
    assert len(reported) == len(planted)
    for plan in planted:
        entry = reported[(plan.series, plan.episode_id)]
        file, words = EXPECTED_REASONS[plan.bad]
        assert words in entry["reason"], (plan.bad, entry)
        folder_or_archive = f"{plan.episode_id}.tar.zst" if plan.archive else plan.episode_id
        assert entry["file"] == (file or folder_or_archive), (plan.bad, entry)
    broken_line = next(p for p in planted if p.bad == "bad_jsonl_line")
    assert reported[(broken_line.series, broken_line.episode_id)]["line"] == 3
    sdk_log = next(p for p in planted if p.bad == "sdk_objects")
    assert reported[(sdk_log.series, sdk_log.episode_id)]["line"] is None
    check = next(c for c in summary["checks"] if c["check"] == "no_invalid_episodes")
    assert check["passed"] is False and all(p.episode_id in check["description"] for p in planted)


def test_counting_columns_are_those_the_generator_planted(built_once, sample_runs):
    """Every count column of every published row equals what the generator's plan says it wrote
    (several lines per reply, subagent calls apart, tokens of every result line), and no
    correctly counted episode warns that result.json disagrees."""
    rows = {json.loads(line)["id"]: json.loads(line)
            for line in (built_once["dataset"] / "episodes.jsonl").read_text().splitlines()}
    published = [p for p in sample_runs.episodes if p.episode_id in rows]
    assert published and all(p.counts for p in published)
    for plan in published:
        row = rows[plan.episode_id]
        assert {c: row[c] for c in plan.counts} == plan.counts, plan.episode_id
    # the sample holds what the rules tell apart: subagent calls, runs of two prompts, final looks
    assert all(p.counts["subagent_tool_calls"] > 0 for p in published)
    assert {p.result_lines for p in published} == {1, 2}
    assert {p.counts["looked_at_final_render"] for p in published} == {True, False}
    with duckdb.connect(str(built_once["home"] / "vae_warehouse.duckdb"), read_only=True) as con:
        warned = con.execute("SELECT id, warnings FROM episode_table WHERE valid AND len(warnings) > 0").fetchall()
    assert warned == []


def test_labels_are_those_the_contract_gives_for_what_the_generator_planted(built_once, sample_runs):
    """The generator works each label out from its own plan (answer chosen, video defects planted);
    the host recomputes it from judge.json and the measured facts: the two must agree."""
    rows = {json.loads(line)["id"]: json.loads(line)
            for line in (built_once["dataset"] / "episodes.jsonl").read_text().splitlines()}
    published = [p for p in sample_runs.episodes if p.episode_id in rows]
    assert len(published) == len(rows)
    for plan in published:
        row = rows[plan.episode_id]
        assert {c: row[c] for c in plan.host} == plan.host, (plan.episode_id, plan.variant)
        # first computation: the label before is judge.json's host.label; a drifted one is a change
        assert row["previous_final_label"] == plan.stored_host_label, plan.episode_id
        assert (row["rehosted_at"] is not None) == plan.drifted, plan.episode_id
    # the sample covers every label, unjudged episodes and failed gates
    labels = {p.host["label"] for p in published}
    assert labels == {"PASS", "PASS_WITH_NITS", "FAIL", None}, labels
    assert {g for p in published for g in p.host["host_gates_failed"]} >= {"no_video", "black", "freeze", "aspect", "duration"}
    assert {p.episode_id for p in published if p.drifted} == set(sample_runs.drifted_ids)


def latest_check(instance: dg.DagsterInstance, asset: str, check: str) -> dg.AssetCheckEvaluation:
    """The latest evaluation of an asset's check (a ranged run evaluates it once for every series)."""
    key = dg.AssetCheckKey(dg.AssetKey(asset), check)
    return instance.get_latest_asset_check_evaluation_record(key).evaluation


def test_drift_check_names_exactly_the_planted_drifted_labels(built_once, sample_runs):
    """Two judged episodes of the first series store a label the contract does not give: the check,
    evaluated in the one run that labelled every series, fails naming exactly them (stored →
    recomputed) and no episode of another series."""
    by_id = {p.episode_id: p for p in sample_runs.episodes}
    first = min(sample_runs.series)
    assert len(sample_runs.drifted_ids) == 2 and {by_id[i].series for i in sample_runs.drifted_ids} == {first}
    planted = {i: (by_id[i].stored_host_label, by_id[i].host["label"]) for i in sample_runs.drifted_ids}
    with dg.DagsterInstance.from_config(str(built_once["home"] / "dagster")) as instance:
        result = latest_check(instance, "labels", "no_drift_from_stored_host_label")
    named = {m[0]: (m[1], m[2]) for m in re.findall(r"([A-Za-z0-9._-]+) \((\w+) → (\w+)\)", result.description)}
    assert named == planted
    assert result.passed is False and result.metadata["drifted"].value == len(planted)


def test_the_steps_read_their_upstream_tables_without_dagster_storing_input_events(built_once):
    """Every stage reads its upstream's stored tables itself, over its `deps` edges: the build's runs
    store no input events (Dagster stores two for each input a step loads, each a transaction of
    its own), and the edges are there for the lineage and the staleness that follow them."""
    with dg.DagsterInstance.from_config(str(built_once["home"] / "dagster")) as instance:
        runs = instance.get_runs()
        events = [e.dagster_event for run in runs for e in instance.all_logs(run.run_id) if e.dagster_event]
    materialized = {e.asset_key.to_user_string() for e in events if e.event_type_value == "ASSET_MATERIALIZATION"}
    assert {"episodes", "verdicts", "renders", "bundles", "labels", "episode_table", "dataset_rows",
            "dataset_episodes", "entrants", "pairwise_judgments", "human_votes", "leaderboard", "judge_agreement",
            "dataset_card", "review_site"} <= materialized
    assert not [e.event_type_value for e in events if e.event_type_value in ("LOADED_INPUT", "STEP_INPUT")]
    graph = defs.resolve_asset_graph()
    parents = {name: {key.to_user_string() for key in graph.get(dg.AssetKey(name)).parent_keys}
               for name in ("labels", "dataset_card", "review_site", "leaderboard", "judge_agreement")}
    assert parents["labels"] >= {"episodes", "renders", "verdicts", "rubric"}
    assert parents["dataset_card"] >= {"dataset_rows", "rubric", "leaderboard", "judge_agreement", "entrants"}
    assert parents["review_site"] >= {"episode_table", "dataset_rows", "rubric"}
    assert parents["leaderboard"] == {"entrants", "pairwise_judgments"}
    assert parents["judge_agreement"] == {"pairwise_judgments", "human_votes"}


def test_readme_stats_table_follows_the_contract(built_once):
    readme = (built_once["dataset"] / "README.md").read_text()
    rows = [json.loads(line) for line in (built_once["dataset"] / "episodes.jsonl").read_text().splitlines()]
    assert "path: data/episodes.parquet" in readme and "split: train" in readme
    table = re.search(r"\| \| \|\n\|---\|---\|\n((?:\|.*\|\n)+)", readme).group(1).splitlines()
    names = [line.split(" | ")[0].lstrip("| ") for line in table]
    assert names == ["Episodes", "Videos delivered", "Labels",
                     "Positive-eligible (pass, no major defect, no failed gate)",
                     "Agent turns / tool calls / images viewed", "hyperframes render / snapshot calls",
                     "Actor tokens (output; cache read)", "Aspect ratios"]
    values = dict(line.strip("| ").split(" | ") for line in table)
    briefs = len({r["brief_id"] for r in rows})
    assert re.fullmatch(rf"{len(rows)} \({briefs} briefs; samples s1: \d+, s2: \d+\)", values["Episodes"])
    decoded = [r for r in rows if r["video_ok"]]
    minutes = sum(r["video_duration_s"] for r in decoded) / 60
    assert values["Videos delivered"] == f"{len(decoded)} ({minutes:,.1f} min of footage)"
    labels = [r["label"] for r in rows]
    assert values["Labels"] == (f"PASS {labels.count('PASS')}, PASS_WITH_NITS {labels.count('PASS_WITH_NITS')}, "
                                f"FAIL {labels.count('FAIL')}, unjudged {labels.count(None)}")
    tokens = sum(r["cache_read_tokens"] for r in rows)
    assert values["Actor tokens (output; cache read)"].endswith(f"; {tokens:,}")
    assert "Last refreshed:" in readme and "| Family | Episodes |" in readme


def test_the_card_reads_only_the_columns_it_names(built_once):
    """The card step hands the card only CARD_COLUMNS of each row: the card made from them is the
    card made from every column of the published rows."""
    rows = pl.read_parquet(built_once["dataset"] / "data" / "episodes.parquet")
    assert set(CARD_COLUMNS) <= set(rows.columns)
    made = {name: render_card(frame.to_dicts(), refreshed_at="then", rubric_version="9", series=["s"], leaderboard="")
            for name, frame in (("every column", rows), ("its columns", rows.select(CARD_COLUMNS)))}
    assert made["its columns"] == made["every column"]
    assert f"| Episodes | {rows.height} (" in made["its columns"]


# the assets that write into the dataset folder (contract 3: rows, archives and videos, meta/, the
# card, the leaderboard's and the judge agreement's tables)
DATASET_WRITERS = {"dataset_rows", "dataset_episodes", "dataset_meta", "dataset_card", "leaderboard", "judge_agreement"}


def test_second_build_materializes_nothing_but_writes_another_or_a_deleted_folder_again(built, pipeline_env,
                                                                                         tmp_path):
    runs, _, _ = built
    dataset = pipeline_env["dataset"]
    before = snapshot(dataset)
    again = build(runs, dataset)
    assert again["materialized"] == {}
    assert snapshot(dataset) == before
    # `--out` another folder, then that folder deleted: the dataset is written there each time,
    # the same files, and no series stage runs again
    elsewhere = tmp_path / "elsewhere"
    for _ in range(2):
        moved = build(runs, elsewhere)
        assert DATASET_WRITERS <= set(moved["materialized"]), moved["materialized"]
        assert all(partitions == [None] for partitions in moved["materialized"].values()), moved["materialized"]
        assert published(elsewhere) == published(dataset)
        assert build(runs, elsewhere)["materialized"] == {}
        shutil.rmtree(elsewhere)


def test_a_changed_series_rematerializes_only_its_partition_and_downstream(built, sample_runs, pipeline_env):
    runs, _, _ = built
    changed = next(s for s, status in sample_runs.series.items() if status == "completed")
    extra = next(p for p in sample_runs.episodes if p.series == changed and p.bad is None and not p.archive)
    notes = runs / changed / extra.episode_id / "work" / "README.txt"
    notes.write_text("a note added after the run\n")
    summary = build(runs, pipeline_env["dataset"])
    partitioned = {k: v for k, v in summary["materialized"].items() if any(p is not None for p in v)}
    assert partitioned and all(v == [changed] for v in partitioned.values())
    assert "episodes" in partitioned
    # the episode's archive changed (a new work/ file): its row's archive_sha256 with it
    assert summary["materialized"]["dataset_rows"] == [None]
    # the series' videos did not change: renders re-ran without decoding any of them again
    records = dg.DagsterInstance.get().fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("renders"), asset_partitions=[changed]), limit=2).records
    latest, first = (r.asset_materialization.metadata for r in records)
    assert first["decoded"].value > 0 and latest["decoded"].value == 0
    assert latest["videos"].value == first["videos"].value


def test_a_series_whose_series_json_cannot_be_read_for_a_while_stays_a_series(built, sample_runs, pipeline_env):
    """A series.json caught half-written (a harness rewriting it, a fetch cut short) does not make
    a known series "gone": it keeps its partition, its episodes read invalid naming series.json
    and it leaves the release; once the file reads again the series comes back as it was, its
    stages run again for it alone. Only a folder that is gone removes a series."""
    runs, _, _ = built
    dataset = pipeline_env["dataset"]
    series = next(s for s, status in sample_runs.series.items() if status == "completed")
    ours = sorted(p.episode_id for p in sample_runs.episodes if p.series == series)
    published = [json.loads(line)["id"] for line in (dataset / "episodes.jsonl").read_text().splitlines()]
    assert set(published) & set(ours)
    info = runs / series / "series.json"
    whole = info.read_bytes()
    info.write_bytes(whole[: len(whole) // 2])

    summary = build(runs, dataset)
    assert series in dg.DagsterInstance.get().get_dynamic_partitions("series")
    assert summary["materialized"]["episodes"] == [series]
    assert [s for s in summary["skipped_folders"] if s["name"] == series][0]["reason"].startswith(
        "no readable series.json")
    invalid = {row["episode"]: row for row in summary["invalid_episodes"] if row["series"] == series}
    assert sorted(invalid) == ours
    assert {(row["file"], row["reason"].split(" (")[0]) for row in invalid.values()} == \
        {("series.json", "the series' series.json: not valid JSON")}
    assert [i for i in (json.loads(line)["id"] for line in (dataset / "episodes.jsonl").read_text().splitlines())
            if i in ours] == []

    info.write_bytes(whole)
    summary = build(runs, dataset)
    assert [json.loads(line)["id"] for line in (dataset / "episodes.jsonl").read_text().splitlines()] == published
    partitioned = {k: v for k, v in summary["materialized"].items() if any(p is not None for p in v)}
    assert partitioned and all(v == [series] for v in partitioned.values())


def test_a_change_makes_only_the_manifests_it_touches_and_a_damaged_one_again(built, sample_runs, pipeline_env,
                                                                            monkeypatch):
    """After one episode's archive changes, `dataset_episodes` makes that episode's manifest, and
    those whose file was deleted or cut short since, each with the bytes a full build wrote; the
    other manifests are not made again."""
    runs, _, _ = built
    dataset = pipeline_env["dataset"]
    before = {p: p.read_bytes() for p in dataset.glob("episodes/*/*.json")}
    changed = next(s for s, status in sample_runs.series.items() if status == "completed")
    extra = next(p for p in sample_runs.episodes if p.series == changed and p.bad is None and not p.archive)
    assert extra.episode_id in {p.stem for p in before}
    (runs / changed / extra.episode_id / "work" / "README.txt").write_text("a note added after the run\n")
    others = sorted(p for p in before if json.loads(before[p])["series"] != changed)
    gone, cut = others[0], others[-1]
    gone.unlink()
    cut.write_bytes(before[cut][:-10])
    made = []
    module = importlib.import_module("vae_pipeline.assets.dataset_episodes")  # the package names the asset so
    real = module.manifest_bytes
    monkeypatch.setattr(module, "manifest_bytes",
                        lambda row, parts: made.append(row["id"]) or real(row, parts))
    build(runs, dataset)
    assert sorted(made) == sorted([extra.episode_id, gone.stem, cut.stem])
    assert gone.read_bytes() == before[gone] and cut.read_bytes() == before[cut]
    assert json.loads(next(dataset.glob(f"episodes/*/{extra.episode_id}.json")).read_bytes())["archive_sha256"] != \
        json.loads(before[next(p for p in before if p.stem == extra.episode_id)])["archive_sha256"]


def test_a_build_places_again_only_the_published_files_not_found_in_place_since_the_last(built, sample_runs,
                                                                                       pipeline_env, monkeypatch):
    """`dataset_episodes` compares and writes only what changed since the last build found or put
    each file in place: the archive of the episode whose run changed, a video deleted and an
    archive overwritten in the dataset folder (each put back with the bytes the full build wrote);
    every other published video and archive is neither compared nor written, and the next build
    after another change places that one archive alone."""
    runs, _, _ = built
    dataset = pipeline_env["dataset"]
    before = {p.relative_to(dataset).as_posix(): p.read_bytes()
              for p in [*dataset.glob("videos/*.mp4"), *dataset.glob("episodes/*/*.tar.zst")]}
    completed = sorted(s for s, status in sample_runs.series.items() if status == "completed")
    good = [p for p in sample_runs.episodes if p.series in completed and p.bad is None and not p.archive]
    changed, later = good[0], good[-1]
    (runs / changed.series / changed.episode_id / "work" / "README.txt").write_text("a note added after the run\n")
    others = sorted(name for name in before if changed.episode_id not in name and later.episode_id not in name)
    gone = next(name for name in others if name.startswith("videos/"))
    damaged = next(name for name in others if name.endswith(".tar.zst"))
    (dataset / gone).unlink()
    (dataset / damaged).write_bytes(bytes(len(before[damaged])))
    module = importlib.import_module("vae_pipeline.assets.dataset_episodes")  # the package names the asset so
    real, placed = module.place_file, []
    monkeypatch.setattr(module, "place_file",
                        lambda source, target, heads=None: placed.append(Path(target.path).relative_to(dataset).as_posix())
                        or real(source, target, heads))
    build(runs, dataset)
    archive_of = {name.rsplit("/", 1)[1].split(".")[0]: name for name in before if name.endswith(".tar.zst")}
    assert sorted(placed) == sorted([archive_of[changed.episode_id], gone, damaged])
    assert (dataset / gone).read_bytes() == before[gone] and (dataset / damaged).read_bytes() == before[damaged]
    assert (dataset / archive_of[changed.episode_id]).read_bytes() != before[archive_of[changed.episode_id]]
    placed.clear()
    (runs / later.series / later.episode_id / "work" / "README.txt").write_text("another note\n")
    build(runs, dataset)
    assert placed == [archive_of[later.episode_id]]


def test_cli_build_writes_the_summary_and_says_one_line_on_error(sample_runs, pipeline_env, tmp_path, capsys):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    summary_path = tmp_path / "summary.json"
    code = main(["build", "--runs", str(runs), "--out", str(pipeline_env["dataset"]), "--summary", str(summary_path)])
    assert code == 0
    summary = json.loads(summary_path.read_text())
    assert set(summary) >= {"materialized", "invalid_episodes", "checks"}
    assert summary["materialized"]["episodes"] == sorted(sample_runs.series)
    assert all({"asset", "check", "passed", "description"} <= set(c) for c in summary["checks"])
    code = main(["build", "--runs", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_every_dataset_file_is_readable_by_others(built_once):
    """A published folder is read by other users and tools: no file keeps mkstemp's private mode."""
    modes = {p.relative_to(built_once["dataset"]).as_posix(): p.stat().st_mode & 0o777
             for p in built_once["dataset"].rglob("*") if p.is_file()}
    assert modes and {path: mode for path, mode in modes.items() if mode & 0o044 != 0o044} == {}


def test_checks_of_a_run_over_some_series_still_speak_for_every_series(built, sample_runs, pipeline_env):
    """A later run over one series evaluates the checks of `labels` and `renders` again: they still
    name the drifted labels planted in the first series, which that run did not cover, count every
    series, and name a series whose stored tables an older version wrote without a column they read
    (the run itself does not fail on it)."""
    runs = built[0]
    first, middle, other = sorted(sample_runs.series)
    tables = pipeline_env["home"] / "tables"
    for stage, column in (("labels", "stored_host_label"), ("renders", "loop_seam")):
        path = tables / stage / f"{middle}.parquet"
        pl.read_parquet(path).drop(column).write_parquet(path)
    plan = next(p for p in sample_runs.episodes if p.series == other and p.bad is None and not p.archive)
    brief_file = runs / other / plan.episode_id / "brief.json"
    brief = json.loads(brief_file.read_text())
    brief_file.write_text(json.dumps({**brief, "title": brief["title"] + " (revised)"}, indent=2) + "\n")
    summary = build(runs, pipeline_env["dataset"])
    assert summary["materialized"]["labels"] == [other] and summary["materialized"]["renders"] == [other]
    with dg.DagsterInstance.from_config(str(pipeline_env["home"] / "dagster")) as instance:
        drift = latest_check(instance, "labels", "no_drift_from_stored_host_label")
        adds_up = latest_check(instance, "labels", "labels_add_up")
        analysed = latest_check(instance, "renders", "every_delivered_video_analysed")
    named = set(re.findall(r"([A-Za-z0-9._-]+) \(\w+ → \w+\)", drift.description))
    assert drift.passed is False and named == set(sample_runs.drifted_ids)
    assert {p.series for p in sample_runs.episodes if p.episode_id in named} == {first}
    assert not summary["failed_runs"]
    assert adds_up.passed is False and f"{middle}: its stored tables lack labels.stored_host_label" in adds_up.description
    assert analysed.passed is False and f"{middle}: its stored tables lack renders.loop_seam" in analysed.description
    assert f"{middle}: its stored tables lack labels.stored_host_label" in drift.description
    for result in (drift, adds_up, analysed):
        assert result.metadata["series_checked"].value == len(sample_runs.series) - 1  # all but the outdated one
        assert result.metadata["series_in_this_run"].value == 1


def test_sample_series_are_named_after_real_calendar_days_however_many(tmp_path):
    """Before: from the twelfth series on, the sample named days October does not have (2026-10-32-s12,
    2026-10-100-s80). The first series keep their day (the contract's example is 2026-10-21-s1)."""
    run = generate(tmp_path, META, series=40, episodes=0, bad=False, contest=True)
    assert len(run.series) == 44  # 40, then one a contest series (vidgen-alpha twice, beta, gamma)
    expected = {"2026-10-21-s1", "2026-10-31-s11", "2026-11-01-s12", "2026-11-28-s39", "2026-11-29-r2",
                "2026-11-30-s40", "2026-12-03-s43"}
    assert expected <= set(run.series), sorted(run.series)
    for series_id in run.series:
        info = json.loads((tmp_path / series_id / "series.json").read_text())
        day = series_id.rsplit("-", 1)[0]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) and date.fromisoformat(day).isoformat() == day, series_id
        assert info["series_id"] == series_id and info["created_at"] == f"{day}T08:00:00Z"


def test_vae_demo_samples_its_runs_and_builds_them(tmp_path, monkeypatch, capsys):
    """`make demo`'s command, up to the build: the sample it writes takes every option `vae
    sample` reads (a new option once broke it with an AttributeError)."""
    isolate(tmp_path / "env", monkeypatch)
    built = []
    monkeypatch.setattr(build_module, "cmd_build", lambda args: built.append(args) or 0)
    monkeypatch.setattr(build_module, "review_index", lambda env: tmp_path / "review" / "index.html")
    assert main(["demo", "--dir", str(tmp_path / "demo")]) == 0
    runs = tmp_path / "demo" / "runs"
    assert [args.runs for args in built] == [runs]
    assert len([p for p in runs.iterdir() if p.is_dir() and (p / "series.json").is_file()]) >= 3
    assert "wrote" in capsys.readouterr().out
