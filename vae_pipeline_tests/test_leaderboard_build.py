"""The leaderboard end to end on the generator's contest sample: the planted order comes out,
the files are in the dataset and load, and only a new series or comparisons batch recomputes it."""

import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from huggingface_hub import DatasetCard

from vae_pipeline.cli import main
from vae_pipeline.cli.build import build
from vae_pipeline.domain.leaderboard.ratings import PAIRWISE_AXES
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META, isolate

LEADERBOARD_ASSETS = {"entrants", "pairwise_judgments", "human_votes", "leaderboard", "judge_agreement"}


@pytest.fixture(scope="module")
def contest(tmp_path_factory):
    root = tmp_path_factory.mktemp("contest")
    run = generate(root / "runs", META, series=1, episodes=2, seed=5, bad=True, contest=True)
    with pytest.MonkeyPatch.context() as monkeypatch:
        paths = isolate(root, monkeypatch)
        monkeypatch.setenv("VAE_LEADERBOARD_ROUNDS", "100")
        summary = build(run.root, paths["dataset"])
        yield {**paths, "run": run, "summary": summary, "monkeypatch": monkeypatch}


def board(contest) -> pl.DataFrame:
    return pl.read_parquet(contest["dataset"] / "data" / "leaderboard.parquet")


def order(table: pl.DataFrame, source: str, axis: str) -> list[str]:
    rows = table.filter((pl.col("source") == source) & (pl.col("axis") == axis)).sort("rating", descending=True)
    return rows["model"].to_list()


def test_the_planted_order_comes_out(contest):
    plan, table = contest["run"].contest, board(contest)
    assert order(table, "scores", "overall") == plan.truth("overall")
    for axis in (*PAIRWISE_AXES, "overall"):
        assert order(table, "pairwise", axis) == plan.truth(axis), axis
    # on temporal the planted order differs: gamma beats beta
    assert plan.truth("temporal") != plan.truth("craft")
    rated = table.filter(pl.col("rating").is_not_null())
    assert (rated["lo"] <= rated["rating"] + 1e-6).all() and (rated["rating"] <= rated["hi"] + 1e-6).all()
    for (source, axis), group in rated.group_by(["source", "axis"]):
        for row in group.iter_rows(named=True):
            assert row["rank"] == 1 + sum(1 for other in group.iter_rows(named=True) if other["lo"] > row["hi"])


def test_battle_counts_follow_the_plan(contest):
    plan, table = contest["run"].contest, board(contest)
    samples = {}
    for episode in plan.episodes:
        samples.setdefault(episode.brief["brief_id"], []).append(episode.model)
    expected = {model: sum(models.count(model) * sum(1 for m in models if m != model)
                           for models in samples.values()) for model in plan.truth("overall")}
    for row in table.iter_rows(named=True):
        per_axis = expected[row["model"]]
        axes = (len(SCORE_AXES) if row["source"] == "scores" else len(PAIRWISE_AXES)) if row["axis"] == "overall" else 1
        assert row["battles"] == per_axis * axes, row
        assert row["briefs"] == len(samples)
        assert row["wins"] + row["losses"] + row["ties"] == row["battles"]
    pairwise = table.filter(pl.col("source") == "pairwise")
    assert pairwise["vs_reference"].null_count() == 0  # every model met the reference videos


def test_planted_bad_lines_block_publishing(contest):
    plan = contest["run"].contest
    check = next(c for c in contest["summary"]["checks"] if c["check"] == "no_bad_comparisons")
    assert check["passed"] is False and check["asset"] == "dataset_card"
    for file, line, _ in plan.bad_lines:
        assert f"comparisons/{file}:{line} " in check["description"]
    assert check["description"].startswith(f"{len(plan.bad_lines)} bad comparisons line(s)")
    assert not any(s["name"] == "comparisons" for s in contest["summary"]["skipped_folders"])


def test_configs_load_and_the_card_shows_the_leaderboard(contest, tmp_path, monkeypatch):
    from datasets import load_dataset

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dataset = contest["dataset"]
    loaded = load_dataset(str(dataset), "leaderboard", split="train")
    assert loaded.num_rows == board(contest).height and "rating" in loaded.column_names
    agreement = load_dataset(str(dataset), "judge_agreement", split="train")
    assert agreement.num_rows == len(PAIRWISE_AXES) * 4
    card = DatasetCard.load(dataset / "README.md")
    assert [c["config_name"] for c in card.data.to_dict()["configs"]] == ["default", "leaderboard", "judge_agreement"]
    section = card.text.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert "(leaderboard.png)" in section and "### pairwise · temporal" in section
    # every series of the sample is of benchmark 1.2.0 (contract 4: the section names the version it ranks)
    assert "Ranked within benchmark version 1.2 (series.json `benchmark_version` 1.2.x)" in section
    assert "Not ranked:" not in section
    assert "| axis | confidence | lines | agreement |" in section
    assert (dataset / "leaderboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_materialization_shows_the_table_and_the_chart(contest):
    records = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("leaderboard"), limit=1).records
    metadata = records[0].asset_materialization.metadata
    assert "| 1 | vidgen-alpha |" in metadata["overall"].value
    assert metadata["chart"].value.startswith("![leaderboard](data:image/png;base64,")


def test_vae_leaderboard_prints_the_latest_table(contest, capsys):
    assert main(["leaderboard", "--source", "pairwise", "--axis", "temporal"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("pairwise · temporal")
    models = [line.split()[1] for line in out[2:5]]
    assert models == contest["run"].contest.truth("temporal")


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_only_new_series_and_batches_recompute_it(contest):
    """(runs last: it changes the runs) a second build, a rehost, a new batch, a new series."""
    runs, dataset = contest["run"].root, contest["dataset"]
    before = snapshot(dataset)
    assert build(runs, dataset)["materialized"] == {}
    assert snapshot(dataset) == before

    rehost = build(runs, dataset, rubric_version="1.0")
    assert "labels" in rehost["materialized"]
    assert not LEADERBOARD_ASSETS & set(rehost["materialized"])
    assert snapshot(dataset)["data/leaderboard.parquet"] == before["data/leaderboard.parquet"]

    gamma = next(e for e in contest["run"].contest.episodes if e.model == "vidgen-gamma")
    beta = next(e for e in contest["run"].contest.episodes if e.model == "vidgen-beta" and e.brief == gamma.brief)
    (runs / "comparisons" / "batch-3.jsonl").write_text(json.dumps({
        "first": gamma.episode_id, "second": beta.episode_id, "judge_model": "pairjudge-2",
        "judged_at": "2026-10-29T10:00:00Z", "p_first": {"craft": 0.5}}) + "\n")
    batch = build(runs, dataset, rubric_version="1.0")
    assert {"pairwise_judgments", "leaderboard"} <= set(batch["materialized"])
    assert "entrants" not in batch["materialized"]

    # a new series: a copy of gamma's under a new model name gets gamma's scores rating
    source = runs / gamma.series
    sample = "s9"
    target = runs / f"2026-10-30-{sample}"
    shutil.copytree(source, target)
    for folder in target.iterdir():
        if folder.is_dir():
            folder.rename(target / f"{folder.name.rsplit('-', 1)[0]}-{sample}")
    info = json.loads((target / "series.json").read_text())
    info.update(series_id=target.name, sample=sample, actor={**info["actor"], "model": "vidgen-delta"})
    (target / "series.json").write_text(json.dumps(info))
    grown = build(runs, dataset, rubric_version="1.0")
    assert {"entrants", "leaderboard"} <= set(grown["materialized"])
    overall = {r["model"]: r for r in board(contest).filter(
        (pl.col("source") == "scores") & (pl.col("axis") == "overall")).to_dicts()}
    assert overall["vidgen-delta"]["rating"] == pytest.approx(overall["vidgen-gamma"]["rating"], abs=0.05)

    # the same series under an older benchmark minor version: listed as not ranked, with the reason
    (target / "series.json").write_text(json.dumps({**info, "benchmark_version": "1.1.7"}))
    older = build(runs, dataset, rubric_version="1.0")
    assert {"entrants", "leaderboard", "dataset_card"} <= set(older["materialized"])
    assert "vidgen-delta" not in set(board(contest)["model"]) and "vidgen-gamma" in set(board(contest)["model"])
    section = (dataset / "README.md").read_text().split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert "Ranked within benchmark version 1.2 " in section
    assert (f"- {target.name} (vidgen-delta, benchmark 1.1.7): benchmark 1.1.7: the leaderboard ranks benchmark "
            "1.2, the newest minor version") in section
