"""`vae publish` end to end: refused while a publish check fails, then a dry run and one commit
to the Hub stand-in, through the real huggingface_hub client."""

import importlib
import json
import os
from pathlib import Path

import dagster as dg
import huggingface_hub.constants
import polars as pl
import pytest

from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.assets import publish_checks
from vae_pipeline.cli.common import settings
from vae_pipeline.definitions import defs
from vae_pipeline.storage.checks import check_outcomes
from vae_pipeline_tests.conftest import copy_runs
from vae_pipeline_tests.hub_standin import HubStandin

TOKEN = "hf_standinPublishFlowToken0123456789"  # not a real token
REPO = "vae-lab/agent-episodes"


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-stored-token"))
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with HubStandin(TOKEN) as standin:
        monkeypatch.setenv("VAE_HUB_ENDPOINT", standin.endpoint)
        yield standin
        assert standin.violations == []


def _publish(capsys, dataset: Path, *extra: str) -> tuple[int, str]:
    code = main(["publish", "--dataset", str(dataset), "--repo", REPO, *extra])
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    return code, captured.out


def reason(out: str, check: str) -> list[str]:
    """The lines of one check's reason in a refusal: its first line (the count), then one problem
    a line and the way out, indented under it."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"- dataset_episodes.{check}: "))
    block = [lines[first]]
    for line in lines[first + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


def launchpad_release(repo: str) -> str:
    """The `publish` job alone, as the UI's Launchpad launches it (no check in its run), with
    `repo` as VAE_HUB_REPO: the description of its failure."""
    with settings(VAE_HUB_REPO=repo):
        result = defs.resolve_job_def("publish").execute_in_process(instance=dg.DagsterInstance.get(),
                                                                    raise_on_error=False)
    assert not result.success
    (failure,) = [e.step_failure_data.user_failure_data.description for e in result.all_events if e.is_step_failure]
    return failure


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_publish_is_refused_with_every_reason_then_goes_out_in_one_commit(sample_runs, pipeline_env, tmp_path,
                                                                          hub, capsys):
    runs = copy_runs(sample_runs, tmp_path / "runs")
    (runs / "2026-10-30-s9").mkdir()  # a series folder the harness has not described yet
    dataset = pipeline_env["dataset"]
    summary = build(runs, dataset)
    invalid = [i for i in summary["invalid_episodes"] if sample_runs.series[i["series"]] == "completed"]
    assert invalid
    not_completed = sorted(s for s, status in sample_runs.series.items() if status != "completed")
    assert not_completed

    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1 and "publishing refused" in out
    assert "dataset_episodes.no_invalid_episodes" in out and all(i["episode"] in out for i in invalid)
    assert "dataset_episodes.no_scrub_findings" in out and "scrub-allow.jsonl" in out
    # the generator's provenance faults: a dirty series, an unversioned one, an episode of another model
    planted = {"harness_committed": sample_runs.dirty_series, "benchmark_versioned": sample_runs.unversioned_series,
               "one_actor_per_series": sample_runs.odd_actor_ids}
    for check, names in planted.items():
        assert names and all(any(n in line for line in reason(out, check)) for n in names)
    # issue 29 item 4: the count first, then one finding a line, then the way out
    findings_reason = reason(out, "no_scrub_findings")
    count = int(findings_reason[0].removeprefix("- dataset_episodes.no_scrub_findings: ").split(" ")[0])
    assert count > 1 and findings_reason[0].endswith(f"{count} finding(s):"), findings_reason
    listed = findings_reason[1:-1]
    assert len(listed) == min(count, 26) and all(line.startswith("  - ") for line in listed), findings_reason
    assert "scrub-allow.jsonl" in findings_reason[-1]
    # issue 29 item 4: the Launchpad's release (the job alone, no repository set) names the failing
    # checks before anything else is missing
    failure = launchpad_release("")
    assert failure.startswith("publishing refused:\n- ") and "no dataset repository" not in failure, failure
    assert "dataset_episodes.no_invalid_episodes:" in failure and "dataset_episodes.no_scrub_findings:" in failure
    # the refusal names what is left out, as the plan does
    left = out[out.index("left out:"):].splitlines()[1:]
    assert [line.split(":")[0].strip() for line in left] == \
        [f"series {s}" for s in not_completed] + ["folder 2026-10-30-s9"], out
    assert "running, not completed" in out and "no readable series.json" in out
    # issue 19 item 5: run as the README shows it, without --runs, it names the same (the runs
    # root the dataset was built from, which `vae build` recorded)
    code, out_without_runs = _publish(capsys, dataset)
    assert code == 1 and out_without_runs[out_without_runs.index("left out:"):] == out[out.index("left out:"):]
    assert hub.routes() == [], "a refused publish must not talk to the Hub"

    # the operator's ways out: withhold the invalid episodes and the odd actor's, withhold the
    # unversioned series, run the dirty series again from committed code, accept the reviewed findings
    _write_jsonl(pipeline_env["meta"] / "withheld.jsonl",
                 [{"episode": i["episode"], "reason": "planted bad input"} for i in invalid]
                 + [{"episode": e, "reason": "ran another model"} for e in sample_runs.odd_actor_ids]
                 + [{"series": s, "reason": "no benchmark version"} for s in sample_runs.unversioned_series])
    for series in sample_runs.dirty_series:
        info = json.loads((runs / series / "series.json").read_text())
        (runs / series / "series.json").write_text(json.dumps({**info, "harness": {**info["harness"], "dirty": False}}))
    findings = [f for manifest in dataset.glob("episodes/*/*.json")
                for f in json.loads(manifest.read_text())["scrub"]["findings"]]
    assert findings and all(set(f) >= {"file", "line", "kind", "sha256s"} for f in findings)
    _write_jsonl(pipeline_env["meta"] / "scrub-allow.jsonl",
                 [{"file": f["file"], "kind": f["kind"], "sha256s": f["sha256s"]} for f in findings])
    rebuilt = build(runs, dataset)
    # the allow list re-bundles without parsing again; only the re-run series is parsed again
    assert "bundles" in rebuilt["materialized"] and rebuilt["materialized"]["episodes"] == sample_runs.dirty_series
    assert all(c["passed"] for c in rebuilt["checks"] if c["check"] in ("no_invalid_episodes", "no_scrub_findings",
                                                                         *planted))

    local = {p.relative_to(dataset).as_posix(): p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    # what the pipeline did not write stays home: a killed write's temp file, an editor's backup
    strays = {"README.md~": b"# my edit\n", "data/.episodes.parquet.x1.part": b"PAR1"}
    for rel, content in strays.items():
        (dataset / rel).write_bytes(content)
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 0 and "dry run: nothing was sent" in out, out
    assert all(f"episode {i['episode']}: withheld" in out for i in invalid) and "folder 2026-10-30-s9" in out
    assert all(f"series {s}: withheld" in out for s in sample_runs.unversioned_series)
    assert all(f"  + {path} (" in out for path in local)
    assert "not ours, not sent: 2 files" in out and all(f"  ! {path} (" in out for path in strays)

    # episodes.jsonl and data/episodes.parquet that disagree (a write killed between the two) block
    parquet = dataset / "data" / "episodes.parquet"
    written = parquet.read_bytes()
    rows = pl.read_parquet(parquet)
    rows.slice(1).write_parquet(parquet)
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1 and "publishing refused" in out
    assert f"  - {rows['series'][0]}/{rows['id'][0]}: only in episodes.jsonl" in reason(out, "jsonl_and_parquet_agree"), out
    parquet.write_bytes(written)
    assert "left out:" in out and "running" in out
    assert not hub.exists(REPO)
    assert {r.method for r in hub.requests} <= {"GET"}

    code, out = _publish(capsys, dataset, "--yes")
    assert code == 0 and "published:" in out
    assert len(hub.recorded("commit")) == 1
    remote = hub.files(REPO)
    assert {k: v for k, v in remote.items() if k != ".gitattributes"} == local

    commits_before = len(hub.recorded("commit"))
    code, out = _publish(capsys, dataset, "--yes")
    assert code == 0 and len(hub.recorded("commit")) == commits_before

    # every check passed (vae publish ran them): the Launchpad's release without a repository asks for one
    assert launchpad_release("").startswith("no dataset repository: start `vae ui` with --repo ORG/NAME")
    # hub_release is materialized by the releases alone (the second found nothing to send), never by an asset job
    # (issue 29 item 4: not by the asset graph's Materialize all, which only runs executable assets)
    instance = dg.DagsterInstance.get()
    records = instance.fetch_materializations(dg.AssetKey("hub_release"), limit=10).records
    assert [r.asset_materialization.metadata["mode"].value for r in records] == ["unchanged", "commit"]
    assert not defs.resolve_asset_graph().get(dg.AssetKey("hub_release")).is_executable


def test_the_publish_job_reads_every_archive_that_builds_found_alike(sample_runs, pipeline_env, tmp_path, hub,
                                                                     capsys):
    """A build's check reads again only the archives written since it found them right (by size,
    mtime and inode); the release reads every byte: an archive changed in place, its size and
    mtime kept, is refused."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    dataset = pipeline_env["dataset"]
    build(runs, dataset)
    archive = sorted(dataset.glob("episodes/*/*.tar.zst"))[0]
    before = archive.stat()
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(archive, "r+b") as handle:  # the same file, its size and mtime kept
        handle.write(data)
    os.utime(archive, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert build(runs, dataset)["materialized"] == {}
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1
    refusal = out.split("dataset_episodes.files_match_manifests: ", 1)[1].split("\n- ", 1)[0]
    assert f"{archive.relative_to(dataset).as_posix()}: sha256 differs from its manifest" in refusal, out


def test_the_rows_check_reads_only_the_manifests_written_since_and_the_release_reads_every_one(
        sample_runs, pipeline_env, tmp_path, hub, monkeypatch, capsys):
    """`rows_and_archives_agree` in a build reads again only the manifests written since it found
    them agree with their rows (by size, mtime and inode): after one episode changes, its manifest
    alone. The release reads every manifest: one changed in place, its size and mtime kept, is
    refused."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    dataset = pipeline_env["dataset"]
    build(runs, dataset)
    series = next(s for s, status in sample_runs.series.items() if status == "completed")
    changed = next(p for p in sample_runs.episodes if p.series == series and p.bad is None and not p.archive)
    (runs / series / changed.episode_id / "work" / "README.txt").write_text("a note added after the run\n")
    tampered = next(p for p in sorted(dataset.glob("episodes/*/*.json")) if p.stem != changed.episode_id)
    before, data = tampered.stat(), tampered.read_text()
    sha = json.loads(data)["archive_sha256"]
    with open(tampered, "r+", encoding="utf-8") as handle:  # the same file, its size and mtime kept
        handle.write(data.replace(sha, sha[::-1]))
    os.utime(tampered, ns=(before.st_atime_ns, before.st_mtime_ns))
    read = []
    module = importlib.import_module("vae_pipeline.assets.dataset_episodes")  # the package names the asset so
    real = module.manifest_archive_sha256
    monkeypatch.setattr(module, "manifest_archive_sha256",
                        lambda path, *rest: read.append(Path(path.path).stem) or real(path, *rest))
    assert build(runs, dataset)["materialized"]["dataset_episodes"] == [None]
    assert read == [changed.episode_id]
    check = dg.DagsterInstance.get().get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), "rows_and_archives_agree"))
    assert check.evaluation.passed
    monkeypatch.setattr(module, "manifest_archive_sha256", real)  # the env the fixtures set stays
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1
    assert reason(out, "rows_and_archives_agree")[1] == \
        f"  - {json.loads(data)['series']}/{tampered.stem}: " \
        "archive_sha256 in episodes.jsonl differs from the manifest", out


def test_a_rehost_rewrites_every_manifest_and_the_build_reads_no_archive_again(sample_runs, pipeline_env, tmp_path,
                                                                              monkeypatch, capsys):
    """What a manifest says of its archive (sha256, members) does not change with the label: the
    build's check compares that part, and reads an archive again only when it moved; the release
    still reads every byte and finds them right."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    dataset = pipeline_env["dataset"]
    build(runs, dataset)
    manifests = {p: p.read_bytes() for p in dataset.glob("episodes/*/*.json")}
    read = []
    archive_problems = publish_checks.archive_problems
    monkeypatch.setattr(publish_checks, "archive_problems", lambda root, row, *rest: read.append(row["id"]) or
                        archive_problems(root, row, *rest))
    summary = build(runs, dataset, rubric_version="1.0")
    assert summary["materialized"].get("dataset_episodes")
    assert manifests and all(p.read_bytes() != data for p, data in manifests.items())  # every verdict moved
    assert read == []
    check = dg.DagsterInstance.get().get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), "files_match_manifests"))
    assert check.evaluation.passed
    monkeypatch.setattr(publish_checks, "archive_problems", archive_problems)  # the env the fixtures set stays
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1 and "publishing refused" in out  # by the sample's planted bad episodes, not this check
    assert "files_match_manifests" not in out.split("publishing refused", 1)[-1], out


def test_a_publish_check_that_cannot_run_stops_none_of_the_others_and_the_release_is_refused(
        sample_runs, pipeline_env, tmp_path, monkeypatch, capsys):
    """The publish checks of `dataset_episodes` share one step: one that raises leaves the others'
    results recorded by the same run, reads as not evaluated itself, and `vae publish` refuses,
    naming the error. One check launched alone (as from its page in the UI) runs alone."""
    runs = copy_runs(sample_runs, tmp_path / "runs")
    dataset = pipeline_env["dataset"]
    assert build(runs, dataset)["failed_runs"] == []

    keys = [dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), name) for name in publish_checks.DATASET_CHECKS]
    instance = dg.DagsterInstance.get()
    assert _publish(capsys, dataset, "--runs", str(runs))[0] == 1  # the sample plants what fails
    whole = {key.name: outcome.status for key, outcome in check_outcomes(instance, keys).items()}
    assert "not evaluated" not in whole.values() and "failed" in whole.values()

    def cannot_run(given):
        raise OSError("the dataset folder went away")

    files_match_manifests = publish_checks.DATASET_CHECKS["files_match_manifests"]
    monkeypatch.setitem(publish_checks.DATASET_CHECKS, "files_match_manifests", (cannot_run, files_match_manifests[1]))
    code, out = _publish(capsys, dataset, "--runs", str(runs))
    assert code == 1 and "OSError: the dataset folder went away" in out
    checks_run = instance.get_runs(dg.RunsFilter(job_name=publish_checks.PUBLISH_CHECKS_JOB), limit=1)[0]
    assert {key.name: (outcome.status, outcome.run_id) for key, outcome in check_outcomes(instance, keys).items()} == \
        {name: ("not evaluated" if name == "files_match_manifests" else status, checks_run.run_id)
         for name, status in whole.items()}

    monkeypatch.setitem(publish_checks.DATASET_CHECKS, "files_match_manifests", files_match_manifests)
    one = dg.AssetCheckKey(dg.AssetKey("dataset_episodes"), "no_invalid_episodes")
    with settings(VAE_DATASET_DIR=str(dataset), VAE_RUNS_ROOT=str(runs)):
        alone = defs.resolve_job_def(publish_checks.PUBLISH_CHECKS_JOB).get_subset(asset_check_selection={one}) \
            .execute_in_process(instance=instance)
    assert [e.asset_check_evaluation_data.check_name for e in alone.all_events
            if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION] == \
        ["no_invalid_episodes"]
    after = check_outcomes(instance, keys)
    assert {key.name: outcome.run_id for key, outcome in after.items()} == \
        {name: alone.run_id if name == one.name else checks_run.run_id for name in whole}
