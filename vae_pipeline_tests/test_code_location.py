"""The code location loads the way `dagster dev -w workspace.yaml` loads it, with every asset."""

import subprocess
import sys
from pathlib import Path

from vae_pipeline.definitions import defs

PROJECT = Path(__file__).resolve().parent.parent
LINEAGE = {"brief_bank", "rubric", "episodes", "renders", "verdicts", "labels", "bundles", "episode_table",
           "dataset_rows", "dataset_episodes", "dataset_card", "dataset_meta", "hub_release", "review_site",
           "entrants", "pairwise_judgments", "human_votes", "leaderboard", "judge_agreement"}


def test_workspace_loads_without_settings(tmp_path):
    """No environment variable is read at import: the location loads with none of them set."""
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path), "DAGSTER_HOME": str(tmp_path)}
    done = subprocess.run([str(Path(sys.executable).parent / "dagster"), "definitions", "validate",
                           "-w", str(PROJECT / "workspace.yaml")],
                          cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Validation successful for code location vae_pipeline" in done.stdout + done.stderr


def test_definitions_hold_the_whole_graph():
    specs = {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}
    assert set(specs) == LINEAGE
    partitioned = {key for key, spec in specs.items() if spec.partitions_def is not None}
    assert partitioned == {"episodes", "renders", "verdicts", "labels", "bundles"}
    for job in ("refresh", "rehost", "publish"):
        assert defs.resolve_job_def(job).name == job
    assert defs.resolve_sensor_def("new_series_sensor") and defs.resolve_schedule_def("nightly_refresh")
    blocking = {key.name for key in defs.resolve_asset_graph().asset_check_keys
                if defs.resolve_asset_graph().get_check_spec(key).blocking}
    assert blocking == {"no_invalid_episodes", "no_scrub_findings", "files_match_manifests",
                        "delivered_videos_present", "rows_and_archives_agree", "jsonl_and_parquet_agree",
                        "harness_committed", "benchmark_versioned", "one_actor_per_series",
                        "ranked_series_published", "no_bad_comparisons"}
