"""Contract 4 (the leaderboard), checked on a runs root written by hand.

The episodes are written with the plain file writers of `test_contract_independent` (no video:
the leaderboard reads scores and comparisons only). Every expected value is worked out by hand in
the comments next to the input it comes from.

    2026-11-01-s1  completed, actor-a   ui-lb-001-s1 (scores 7), ui-lb-002-s1 (scores 5)
    2026-11-02-s2  completed, actor-b   ui-lb-001-s2 (scores 6), ui-lb-002-s2 (scores 5),
                                        ui-lb-003-s2 (scores 9, harness error: published, never ranked)
    2026-11-03-s3  completed, actor-c   ui-lb-001-s3 (scores 9): not in meta/evaluation.json -> unranked
    2026-11-04-s4  running,   actor-a   ui-lb-002-s4: not published
    2026-11-05-s5  completed, actor-d   ui-lb-001-s5 (scores 10), benchmark 1.1.0 (the others 1.2.0):
                                        listed, but runs compare within the newest minor version -> unranked
    meta/evaluation.json: {"series": ["2026-11-01-s1", "2026-11-02-s2", "2026-11-05-s5"]}

Bradley–Terry with two models: σ(θa − θb) = W_ab / (W_ab + W_ba), and the ratings are
1000 ± 200·log10(W_ab / W_ba).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from vae_pipeline.cli.build import build
from vae_pipeline_tests.test_contract_independent import (
    Log,
    episode_files,
    make_brief,
    make_judge,
    make_result,
    write_folder,
)

PROJECT_META = Path(__file__).resolve().parent.parent / "meta"
S1, S2, S3, S4, S5 = "2026-11-01-s1", "2026-11-02-s2", "2026-11-03-s3", "2026-11-04-s4", "2026-11-05-s5"
A1, A2 = "ui-lb-001-s1", "ui-lb-002-s1"
B1, B2, B3 = "ui-lb-001-s2", "ui-lb-002-s2", "ui-lb-003-s2"
C1, A_RUNNING, D1 = "ui-lb-001-s3", "ui-lb-002-s4", "ui-lb-001-s5"


def write_series(root: Path, series_id: str, status: str, model: str, benchmark: str = "1.2.0") -> Path:
    folder = root / series_id
    folder.mkdir(parents=True)
    (folder / "series.json").write_text(json.dumps({
        "series_id": series_id, "sample": series_id[-2:], "status": status, "created_at": "2026-11-01T08:00:00Z",
        "actor": {"model": model, "effort": "high", "sdk": "0.2.174", "cli": "2.1.310"},
        "harness": {"version": "1.4.2", "commit": "3f9c2e1", "dirty": False}, "benchmark_version": benchmark}))
    return folder


def judged(folder: Path, episode_id: str, score: int, result: dict | None = None) -> None:
    brief = make_brief(episode_id.rsplit("-", 1)[0], aspect="16:9", duration_s=4.0)
    judge = make_judge((score,) * 6, (), verdict="PASS", host_label="FAIL", host_rule=None, gates=[])
    log = Log().assistant({"type": "text", "text": "Delivered out.mp4."})  # a log in the contract's form
    write_folder(folder / episode_id, episode_files(brief, result or make_result(), log, judge=judge))


def line(first: str, second: str, **p_first: float) -> str:
    return json.dumps({"first": first, "second": second, "judge_model": "pairjudge-2",
                       "judged_at": "2026-11-05T10:00:00Z", "p_first": p_first})


def write_runs_root(root: Path) -> None:
    s1 = write_series(root, S1, "completed", "actor-a")
    judged(s1, A1, 7)
    judged(s1, A2, 5)
    s2 = write_series(root, S2, "completed", "actor-b")
    judged(s2, B1, 6)
    judged(s2, B2, 5)
    judged(s2, B3, 9, make_result("error", "API Error: 403 Forbidden"))
    judged(write_series(root, S3, "completed", "actor-c"), C1, 9)
    judged(write_series(root, S4, "running", "actor-a"), A_RUNNING, 9)
    judged(write_series(root, S5, "completed", "actor-d", benchmark="1.1.0"), D1, 10)
    comparisons = root / "comparisons"
    (comparisons / "human").mkdir(parents=True)
    (comparisons / "batch-1.jsonl").write_text("\n".join([
        line(A1, B1, temporal=0.8, craft=0.6),      # 1: A first
        line(B1, A1, temporal=0.4, craft=0.5),      # 2: B first -> for A: temporal 0.6, craft 0.5
        line(B2, A2, temporal=0.3),                 # 3: one order only -> p_A 0.7
        line(A1, "ref:ui-lb-001", temporal=0.3, craft=0.9),  # 4: against the reference video
        line(C1, A1, temporal=0.9),                 # 5: valid, unranked (actor-c)
        line(A_RUNNING, A2, temporal=0.5),          # 6: BAD: unpublished episode
        line(A1, B2, temporal=0.5),                 # 7: BAD: different briefs
        line(A2, B2, temporal=1.2),                 # 8: BAD: p outside [0, 1]
    ]) + "\n")
    (comparisons / "human" / "votes.jsonl").write_text("\n".join(json.dumps(v) for v in [
        {"a": A1, "b": B1, "axis": "temporal", "votes_a": 4, "votes_b": 1},  # p_a 0.7: agree, conf 0.2
        {"a": B2, "b": A2, "axis": "temporal", "votes_a": 3, "votes_b": 2},  # p_a 0.3: judge b, people a
        {"a": A1, "b": B1, "axis": "craft", "votes_a": 1, "votes_b": 1},     # equal votes: left out
        {"a": C1, "b": A1, "axis": "temporal", "votes_a": 0, "votes_b": 5},  # p_a 0.9 (conf 0.4): disagree
    ]) + "\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leaderboard-contract")
    meta = tmp / "meta"
    shutil.copytree(PROJECT_META, meta)
    (meta / "evaluation.json").write_text(json.dumps({"series": [S1, S2, S5]}))
    runs, dataset = tmp / "runs", tmp / "dataset"
    write_runs_root(runs)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"VAE_HOME": tmp / "home", "DAGSTER_HOME": tmp / "home" / "dagster",
                            "VAE_META_DIR": meta, "VAE_DATASET_DIR": dataset, "VAE_RUNS_ROOT": tmp / "unset",
                            "VAE_LEADERBOARD_ROUNDS": "200", "VAE_LEADERBOARD_SEED": "0"}.items():
            mp.setenv(name, str(value))
        summary = build(runs, dataset)
        board = pl.read_parquet(dataset / "data" / "leaderboard.parquet")
        agreement = pl.read_parquet(dataset / "data" / "judge_agreement.parquet")
        readme = (dataset / "README.md").read_text()
        # a listed series the dataset does not publish blocks publishing
        (meta / "evaluation.json").write_text(json.dumps({"series": [S1, S2, S4]}))
        relisted = build(runs, dataset)
    return {"summary": summary, "board": board, "agreement": agreement, "readme": readme, "relisted": relisted}


def rows(board: pl.DataFrame, source: str, axis: str) -> dict[str, dict]:
    return {r["model"]: r for r in board.filter((pl.col("source") == source) & (pl.col("axis") == axis)).to_dicts()}


def check(summary: dict, name: str) -> dict:
    return next(c for c in summary["checks"] if c["check"] == name)


def test_scores_source_by_hand(built):
    # ranked: A (001: 7, 002: 5), B (001: 6, 002: 5). C is unranked, B3 a harness error, A_RUNNING unpublished.
    # brief 001: A beats B; brief 002: a tie -> W_ab 1.5, W_ba 0.5 -> 1000 ± 200·log10(3) = 1095.42 / 904.58.
    # Bootstrap over 2 briefs: {001, 001} has no arrow B -> A (discarded); {002, 002} gives 1000 / 1000;
    # {001, 002} the full data. So a's interval is 1000–1095.42, b's 904.58–1000: they overlap, rank 1 both.
    for axis in ("motion", "overall"):
        got = rows(built["board"], "scores", axis)
        assert set(got) == {"actor-a", "actor-b"}
        a, b = got["actor-a"], got["actor-b"]
        assert a["rating"] == pytest.approx(1095.42, abs=0.05) and b["rating"] == pytest.approx(904.58, abs=0.05)
        assert (a["lo"], a["hi"]) == pytest.approx((1000.0, 1095.42), abs=0.05)
        assert (b["lo"], b["hi"]) == pytest.approx((904.58, 1000.0), abs=0.05)
        assert a["rank"] == b["rank"] == 1
        assert 100 < a["rounds_kept"] < 200 and a["note"] is None and a["vs_reference"] is None
    motion = rows(built["board"], "scores", "motion")
    assert [motion["actor-a"][k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [2, 2, 1, 0, 1]
    assert [motion["actor-b"][k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [2, 2, 0, 1, 1]
    overall = rows(built["board"], "scores", "overall")["actor-a"]
    assert [overall[k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [12, 2, 6, 0, 6]


def test_pairwise_source_by_hand(built):
    # temporal: brief 001 p_A = (0.8 + 0.6) / 2 = 0.7, brief 002 p_A = 1 − 0.3 = 0.7
    #   -> 1000 ± 200·log10(7/3) = 1073.60 / 926.40; every draw has the same ratio -> lo = hi.
    temporal = rows(built["board"], "pairwise", "temporal")
    a, b = temporal["actor-a"], temporal["actor-b"]
    assert a["rating"] == pytest.approx(1073.60, abs=0.05) and b["rating"] == pytest.approx(926.40, abs=0.05)
    assert (a["lo"], a["hi"], b["lo"], b["hi"]) == pytest.approx((1073.60, 1073.60, 926.40, 926.40), abs=0.05)
    assert (a["rank"], b["rank"]) == (1, 2) and a["rounds_kept"] == 200
    assert [a[k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [2, 2, 2, 0, 0]
    assert a["vs_reference"] == pytest.approx(0.3) and b["vs_reference"] is None
    # craft: brief 001 only, p_A = (0.6 + 0.5) / 2 = 0.55 -> 1000 ± 200·log10(11/9) = 1017.43 / 982.57;
    # draws of {002, 002} hold no craft battle and are discarded.
    craft = rows(built["board"], "pairwise", "craft")
    assert craft["actor-a"]["rating"] == pytest.approx(1017.43, abs=0.05)
    assert craft["actor-a"]["rounds_kept"] < 200
    assert [craft["actor-b"][k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [1, 1, 0, 1, 0]
    # no battle at all on engagement: null ratings and a note naming why
    engagement = rows(built["board"], "pairwise", "engagement")
    assert all(r["rating"] is None and r["rank"] is None and "no battle" in r["note"] for r in engagement.values())
    # overall: W_ab = 0.7 + 0.7 + 0.55 = 1.95, W_ba = 1.05 -> 1000 ± 200·log10(13/7) = 1053.77 / 946.23;
    # draws: {001, 001} p 2.5/4 = 0.625 -> 1044.37; {002, 002} p 0.7 -> 1073.60 (each about a quarter).
    overall = rows(built["board"], "pairwise", "overall")
    a, b = overall["actor-a"], overall["actor-b"]
    assert a["rating"] == pytest.approx(1053.77, abs=0.05) and b["rating"] == pytest.approx(946.23, abs=0.05)
    assert (a["lo"], a["hi"]) == pytest.approx((1044.37, 1073.60), abs=0.05)
    assert (b["lo"], b["hi"]) == pytest.approx((926.40, 955.63), abs=0.05)
    assert (a["rank"], b["rank"]) == (1, 2)
    assert [a[k] for k in ("battles", "briefs", "wins", "losses", "ties")] == [3, 2, 3, 0, 0]
    # vs_reference overall: line 4's temporal 0.3 and craft 0.9
    assert a["vs_reference"] == pytest.approx(0.6)


def test_table_order_and_columns(built):
    board = built["board"]
    assert board.columns == ["source", "axis", "model", "rating", "lo", "hi", "rank", "battles", "briefs", "wins",
                             "losses", "ties", "vs_reference", "rounds_kept", "note"]
    keys = [(r["source"], r["axis"]) for r in board.to_dicts()]
    assert keys == sorted(keys)
    assert "actor-c" not in set(board["model"]) and "actor-d" not in set(board["model"])


def test_judge_agreement_by_hand(built):
    table = {(r["axis"], r["bucket"]): r for r in built["agreement"].to_dicts()}
    # vote 1 agrees (conf 0.2), vote 2 disagrees (conf 0.2), vote 4 disagrees (conf 0.4), vote 3 left out
    assert (table["temporal", "< 0.25"]["lines"], table["temporal", "< 0.25"]["agreement"]) == (2, 0.5)
    assert (table["temporal", "≥ 0.40"]["lines"], table["temporal", "≥ 0.40"]["agreement"]) == (1, 0.0)
    assert table["temporal", "0.25 – 0.40"]["lines"] == 0
    assert table["temporal", "all"]["lines"] == 3
    assert table["temporal", "all"]["agreement"] == pytest.approx(1 / 3)
    # order consistency: the one swapped pair agrees on temporal (0.8 and 0.6), not on craft (0.6 and 0.5)
    assert table["temporal", "all"]["order_consistency"] == 1.0
    assert table["craft", "all"]["order_consistency"] == 0.0
    assert table["engagement", "all"]["order_consistency"] is None
    # position bias: temporal p_first 0.8, 0.4, 0.3, 0.3, 0.9 -> mean − 0.5 = 0.04; craft 0.6, 0.5, 0.9 -> 1/6
    assert table["temporal", "all"]["position_bias"] == pytest.approx(0.04)
    assert table["craft", "< 0.25"]["position_bias"] == pytest.approx(1 / 6)
    assert len(table) == 5 * 4


def test_bad_lines_block_publishing_with_file_line_and_reason(built):
    result = check(built["summary"], "no_bad_comparisons")
    assert result["passed"] is False
    for where in ("batch-1.jsonl:6", "batch-1.jsonl:7", "batch-1.jsonl:8"):
        assert where in result["description"]
    assert "batch-1.jsonl:5" not in result["description"]
    assert check(built["summary"], "ranked_series_published")["passed"] is True


def test_a_listed_series_that_is_not_published_blocks_publishing(built):
    result = check(built["relisted"], "ranked_series_published")
    assert result["passed"] is False and S4 in result["description"]
    assert "entrants" in built["relisted"]["materialized"]


def test_card_section(built):
    readme = built["readme"]
    section = readme.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert "(leaderboard.png)" in section
    assert "| 1 | actor-a | 1074 | 1074–1074 | 2 |" in section
    assert "| =1 | actor-a | 1095 | 1000–1095 | 12 |" in section and "| =1 | actor-b | 905 | 905–1000 | 12 |" in section
    assert "| temporal | all | 3 | 33 % | 100 % | +0.040 |" in section
    # the version it ranks, and who is not ranked for a reason of their series
    assert "Ranked within benchmark version 1.2 (series.json `benchmark_version` 1.2.x)" in section
    assert ("- 2026-11-05-s5 (actor-d, benchmark 1.1.0): benchmark 1.1.0: the leaderboard ranks benchmark 1.2, "
            "the newest minor version") in section
    assert "- 2026-11-03-s3 (actor-c, benchmark 1.2.0): its series is not listed in meta/evaluation.json" in section
    assert S1 + " (" not in section and S2 + " (" not in section
