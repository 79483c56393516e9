"""The leaderboard's statistics (contract 4) without Dagster: published test vectors, invariances,
interval coverage, connectivity, and counts worked out by hand."""

import io
import json
import math

import numpy as np
import polars as pl
import pytest
from PIL import Image

from vae_pipeline.domain.leaderboard.ratings import (
    JUDGMENT_SCHEMA,
    Entrant,
    combine_orders,
    draw_briefs,
    elo,
    fit_bradley_terry,
    judge_agreement,
    leaderboard,
    rate,
    read_judgments,
    read_votes,
)
from vae_pipeline.domain.leaderboard import tables
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES


def wins_matrix(results: list[tuple[int, int, float]], m: int) -> np.ndarray:
    """(winner, loser, count) -> one round of sums."""
    wins = np.zeros((1, m, m))
    for winner, loser, count in results:
        wins[0, winner, loser] += count
    return wins


def test_wikipedia_worked_example():
    # A–B 2–3, A–D 1–4, B–C 5–3, C–D 1–3 -> A 0.640, B 1.043, C 0.660, D 2.270 (to scale)
    a, b, c, d = range(4)
    wins = wins_matrix([(a, b, 2), (b, a, 3), (a, d, 1), (d, a, 4), (b, c, 5), (c, b, 3), (c, d, 1), (d, c, 3)], 4)
    strength = np.exp(fit_bradley_terry(wins)[0])
    expected = np.array([0.640, 1.043, 0.660, 2.270])
    assert np.allclose(strength / strength.sum() * expected.sum(), expected, atol=0.001)


def test_choix_pairwise_vector():
    # choix: [[0, 1], [0, 1], [1, 2], [2, 0]] (winner, loser) -> [0.4196, -0.4196, 0]
    theta = fit_bradley_terry(wins_matrix([(0, 1, 2), (1, 2, 1), (2, 0, 1)], 3))[0]
    assert np.allclose(theta, [0.4196, -0.4196, 0.0], atol=5e-5)


def test_elo_scale_is_400_points_for_ten_to_one():
    theta = np.array([[math.log(10.0), 0.0]])
    assert np.allclose(elo(theta), [[1200.0, 800.0]])


def episodes_frame(rows: list[tuple[str, str, str, int]]) -> pl.DataFrame:
    """(id, brief, model, score on every axis)."""
    schema = {"id": pl.String, "brief_id": pl.String, "model": pl.String, **{f"score_{a}": pl.Int64 for a in SCORE_AXES}}
    return pl.DataFrame([{"id": i, "brief_id": b, "model": m, **{f"score_{a}": s for a in SCORE_AXES}}
                         for i, b, m, s in rows], schema=schema)


def combined_frame(pairs: list[tuple[str, str, str, str, float]], axis: str = "temporal") -> pl.DataFrame:
    """Pairs (brief, x, model x, model y, p_x) as `combine_orders` would give them, one judgment each."""
    judgments = pl.DataFrame(
        [{"file": "b.jsonl", "line": n, "first": f"{brief}-{mx}-{n}", "second": f"{brief}-{my}-{n}",
          "brief_id": brief, "model_first": mx, "model_second": my, "reference": False, "ranked": True,
          "axis": axis, "p_first": p} for n, (brief, mx, my, _, p) in enumerate(pairs)],
        schema=JUDGMENT_SCHEMA)
    return combine_orders(judgments)


def pairwise_rows(table: pl.DataFrame, axis: str) -> dict[str, dict]:
    return {r["model"]: r for r in table.filter((pl.col("source") == "pairwise") & (pl.col("axis") == axis)).to_dicts()}


CYCLE = [("b1", "m1", "m2", "", 0.8), ("b1", "m2", "m3", "", 0.6), ("b2", "m3", "m1", "", 0.3),
         ("b2", "m1", "m2", "", 0.7), ("b3", "m2", "m3", "", 0.55), ("b3", "m1", "m3", "", 0.9)]


def test_swapping_a_pairs_sides_changes_nothing():
    swapped = [(b, y, x, "", 1.0 - p) if n % 2 else (b, x, y, "", p) for n, (b, x, y, _, p) in enumerate(CYCLE)]
    one = pairwise_rows(leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=50), "temporal")
    two = pairwise_rows(leaderboard(episodes_frame([]), combined_frame(swapped), rounds=50), "temporal")
    for model in ("m1", "m2", "m3"):
        assert one[model]["rating"] == pytest.approx(two[model]["rating"], abs=1e-6)
        assert (one[model]["lo"], one[model]["hi"]) == pytest.approx((two[model]["lo"], two[model]["hi"]), abs=1e-6)


def test_a_copy_of_a_model_gets_the_copys_rating():
    # m4 plays exactly as m1 against everyone else, and ties m1
    copy = CYCLE + [(b, "m4" if x == "m1" else x, "m4" if y == "m1" else y, "", p)
                    for b, x, y, _, p in CYCLE if "m1" in (x, y)] + [("b1", "m1", "m4", "", 0.5)]
    rows = pairwise_rows(leaderboard(episodes_frame([]), combined_frame(copy), rounds=20), "temporal")
    assert rows["m4"]["rating"] == pytest.approx(rows["m1"]["rating"], abs=0.05)
    assert rows["m1"]["rating"] > rows["m2"]["rating"]


def test_same_seed_same_intervals_other_seed_other_intervals():
    one = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=200, seed=3)
    two = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=200, seed=3)
    other = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=200, seed=4)
    assert one.equals(two)
    assert not one["lo"].equals(other["lo"])


def test_95_percent_intervals_cover_the_true_strengths():
    truth = np.array([-0.6, -0.2, 0.2, 0.6])
    models, briefs, reps = ["a", "b", "c", "d"], 50, 200
    rng = np.random.default_rng(7)
    covered = []
    for rep in range(reps):
        sums = np.zeros((briefs, 4, 4))
        for i in range(4):
            for j in range(i + 1, 4):
                won = rng.binomial(3, 1.0 / (1.0 + np.exp(truth[j] - truth[i])), size=briefs)
                sums[:, i, j] += won
                sums[:, j, i] += 3 - won
        ratings = rate(sums, models, draw_briefs(briefs, 200, rep))
        covered += [lo <= true <= hi for lo, hi, true in zip(ratings.lo, ratings.hi, elo(truth[None])[0])]
    assert 0.88 <= np.mean(covered) <= 0.99


def test_not_strongly_connected_gets_null_ratings_and_a_note():
    # m1 beats m2 and m3 every time: nobody ever beats m1
    pairs = [("b1", "m1", "m2", "", 1.0), ("b1", "m2", "m3", "", 0.6), ("b2", "m3", "m2", "", 0.4),
             ("b2", "m1", "m3", "", 1.0)]
    table = leaderboard(episodes_frame([]), combined_frame(pairs), rounds=20)
    rows = table.filter(pl.col("axis") == "temporal")
    assert rows["rating"].null_count() == rows["lo"].null_count() == rows["rank"].null_count() == 3
    assert all("not strongly connected" in note and "m1" in note for note in rows["note"])
    assert rows.filter(pl.col("model") == "m1")["wins"].item() == 2


def test_scores_counts_worked_by_hand():
    # brief b1: A 7 (two samples: 7, 5), B 6 -> pairs A7–B6 (A wins), A5–B6 (B wins);
    # brief b2: A 4, B 4, C 9 -> A–B tie, A–C loss, B–C loss. A and B of the same brief, same model: no pair.
    episodes = episodes_frame([("b1-a1", "b1", "A", 7), ("b1-a2", "b1", "A", 5), ("b1-b1", "b1", "B", 6),
                               ("b2-a1", "b2", "A", 4), ("b2-b1", "b2", "B", 4), ("b2-c1", "b2", "C", 9)])
    table = leaderboard(episodes, combined_frame([]), rounds=50)
    motion = {r["model"]: r for r in table.filter((pl.col("source") == "scores") & (pl.col("axis") == "motion")).to_dicts()}
    assert {m: (r["battles"], r["briefs"], r["wins"], r["losses"], r["ties"]) for m, r in motion.items()} == {
        "A": (4, 2, 1, 2, 1), "B": (4, 2, 1, 2, 1), "C": (2, 1, 2, 0, 0)}
    # C beat everyone and nobody beat C: not strongly connected
    assert all(r["rating"] is None for r in motion.values())
    overall = table.filter((pl.col("source") == "scores") & (pl.col("axis") == "overall") & (pl.col("model") == "A"))
    assert overall["battles"].item() == 4 * len(SCORE_AXES)
    assert table.filter(pl.col("source") == "pairwise").height == 0


def test_ranks_follow_intervals_and_overlapping_models_share_a_rank():
    # m1 strong everywhere; m2 and m3 even: m2 and m3 overlap and share rank 2
    pairs = []
    for n in range(12):
        pairs += [(f"b{n}", "m1", "m2", "", 0.95), (f"b{n}", "m1", "m3", "", 0.95),
                  (f"b{n}", "m2", "m3", "", 0.5 + (0.1 if n % 2 else -0.1))]
    rows = pairwise_rows(leaderboard(episodes_frame([]), combined_frame(pairs), rounds=200), "temporal")
    assert rows["m1"]["rank"] == 1 and rows["m2"]["rank"] == rows["m3"]["rank"] == 2
    for row in rows.values():
        assert row["lo"] <= row["rating"] <= row["hi"]
        assert row["rounds_kept"] == 200
    assert rows["m1"]["lo"] > max(rows["m2"]["hi"], rows["m3"]["hi"])
    assert sum(r["rating"] for r in rows.values()) == pytest.approx(3000.0)


ENTRANTS = {
    "b1-x": Entrant("b1", "X", True), "b1-y": Entrant("b1", "Y", True), "b1-y2": Entrant("b1", "Y", True),
    "b2-x": Entrant("b2", "X", True), "b2-z": Entrant("b2", "Z", False),
}


def line(first, second, **p) -> str:
    return json.dumps({"first": first, "second": second, "judge_model": "pj", "judged_at": "2026-10-28T10:00:00Z",
                       "p_first": p})


def test_bad_lines_are_reported_by_file_line_and_reason_without_values():
    secret = "sk-ant-api03-SECRETVALUE"
    text = "\n".join([
        line("b1-x", "b1-y", temporal=0.7),                # 1 ok
        '{"first": "b1-x", ',                               # 2 does not parse
        line(secret, "b1-y", temporal=0.5),                 # 3 unknown episode
        line("b1-x", "b2-x", temporal=0.5),                 # 4 different briefs
        line("b1-y", "b1-y2", temporal=0.5),                # 5 same model
        line("b1-x", "b1-y", **{secret: 0.5}),              # 6 unknown axis
        line("b1-x", "b1-y", temporal=1.5),                 # 7 p outside [0, 1]
        line("b1-x", "ref:b1", temporal=0.2),               # 8 ok (reference)
        line("ref:b1", "b1-x", temporal=0.2),               # 9 a reference shown first
        line("b1-x", "ref:b2", temporal=0.2),               # 10 reference of another brief
    ])
    judgments, bad = read_judgments([("batch-1.jsonl", text)], ENTRANTS)
    assert [b.line for b in bad] == [2, 3, 4, 5, 6, 7, 9, 10]
    assert all(b.file == "batch-1.jsonl" and secret not in b.reason for b in bad)
    reasons = [b.reason for b in bad]
    assert "not valid JSON" in reasons[0] and "not a published episode" in reasons[1]
    assert "different briefs" in reasons[2] and "same model" in reasons[3]
    assert "unknown axis" in reasons[4] and "[0, 1]" in reasons[5]
    assert judgments["line"].to_list() == [1, 8] and judgments["reference"].to_list() == [False, True]


def test_combining_orders_by_hand():
    text = "\n".join([
        line("b1-x", "b1-y", temporal=0.8, craft=0.6),   # x first
        line("b1-y", "b1-x", temporal=0.4, craft=0.7),   # y first: for x 0.6, 0.3
        line("b1-y", "b1-x", temporal=0.3),              # y first again: for x 0.7
        line("b1-x", "b1-y2", temporal=0.9),             # one order only
    ])
    judgments, bad = read_judgments([("b.jsonl", text)], ENTRANTS)
    assert not bad
    combined = {(r["x"], r["y"], r["axis"]): r for r in combine_orders(judgments).to_dicts()}
    temporal = combined["b1-x", "b1-y", "temporal"]
    assert temporal["p_x"] == pytest.approx((0.8 + 0.6 + 0.7) / 3)
    assert temporal["swapped"] and temporal["consistent"]  # 0.8 and mean(0.6, 0.7) both > 0.5
    craft = combined["b1-x", "b1-y", "craft"]
    assert craft["p_x"] == pytest.approx((0.6 + 0.3) / 2) and craft["swapped"] and not craft["consistent"]
    single = combined["b1-x", "b1-y2", "temporal"]
    assert single["p_x"] == pytest.approx(0.9) and not single["swapped"]


def test_judge_agreement_by_hand():
    text = "\n".join([
        line("b1-x", "b1-y", temporal=0.9),    # p_x 0.9, confidence 0.4 -> "≥ 0.40"
        line("b1-y2", "b1-x", temporal=0.4),   # p_x (b1-x vs b1-y2) 0.6, confidence 0.1 -> "< 0.25"
        line("b2-x", "b2-z", temporal=0.5),    # undecided judge
    ])
    votes_text = "\n".join(json.dumps(v) for v in [
        {"a": "b1-x", "b": "b1-y", "axis": "temporal", "votes_a": 4, "votes_b": 1},    # agree
        {"a": "b1-y2", "b": "b1-x", "axis": "temporal", "votes_a": 3, "votes_b": 0},   # judge picks b1-x: disagree
        {"a": "b2-x", "b": "b2-z", "axis": "temporal", "votes_a": 3, "votes_b": 0},    # left out (p = 0.5)
        {"a": "b1-x", "b": "b1-y", "axis": "temporal", "votes_a": 2, "votes_b": 2},    # left out (equal votes)
        {"a": "b1-x", "b": "b1-y", "axis": "sound", "votes_a": 2, "votes_b": 2},       # bad axis
    ])
    judgments, _ = read_judgments([("b.jsonl", text)], ENTRANTS)
    votes, bad = read_votes([("h.jsonl", votes_text)], ENTRANTS)
    assert [(b.file, b.line) for b in bad] == [("h.jsonl", 5)]
    table = judge_agreement(judgments, combine_orders(judgments), votes)
    temporal = {r["bucket"]: r for r in table.filter(pl.col("axis") == "temporal").to_dicts()}
    assert (temporal["all"]["lines"], temporal["all"]["agreement"]) == (2, 0.5)
    assert (temporal["≥ 0.40"]["lines"], temporal["≥ 0.40"]["agreement"]) == (1, 1.0)
    assert (temporal["< 0.25"]["lines"], temporal["< 0.25"]["agreement"]) == (1, 0.0)
    assert temporal["0.25 – 0.40"]["lines"] == 0 and temporal["0.25 – 0.40"]["agreement"] is None
    assert temporal["all"]["position_bias"] == pytest.approx((0.4 - 0.1 + 0.0) / 3)
    assert temporal["all"]["order_consistency"] is None  # no pair was judged in both orders
    assert table.height == 5 * 4


def test_runs_are_ranked_within_the_newest_benchmark_minor_version():
    from vae_pipeline.domain.leaderboard.ratings import (
        HARNESS_ERROR,
        NO_MODEL,
        NO_VERSION,
        NOT_LISTED,
        rank_within_minor_version,
        ranked_version,
        unranked_series,
    )
    from vae_pipeline.domain.leaderboard.tables import leaderboard_section

    entrants = pl.DataFrame([
        # series, model, harness_error, benchmark_version
        ("new-a", "m1", False, "1.3.0"), ("new-b", "m2", False, "1.3.2"),
        ("old", "m3", False, "1.2.9"),
        ("unversioned", "m4", False, None), ("malformed", "m5", False, "1.3"),
        ("crashed", "m6", True, "1.4.0"),   # a harness error of a newer version ranks nothing
        ("unlisted", "m7", False, "2.0.0"),  # nor does a series meta/evaluation.json leaves out
        ("nameless", None, False, "1.3.1"),
    ], schema=["series", "model", "harness_error", "benchmark_version"], orient="row")
    listed = [s for s in entrants["series"] if s != "unlisted"]
    ranked = rank_within_minor_version(entrants, listed)
    reasons = dict(zip(ranked["series"], ranked["not_ranked"]))
    assert reasons == {
        "new-a": None, "new-b": None,
        "old": "benchmark 1.2.9: the leaderboard ranks benchmark 1.3, the newest minor version",
        "unversioned": NO_VERSION, "malformed": NO_VERSION, "crashed": HARNESS_ERROR, "unlisted": NOT_LISTED,
        "nameless": NO_MODEL,
    }
    assert ranked.filter("ranked")["series"].to_list() == ["new-a", "new-b"]
    assert ranked_version(ranked) == "1.3"
    assert [r["series"] for r in unranked_series(ranked)] == ["malformed", "nameless", "old", "unlisted",
                                                              "unversioned"]
    section = leaderboard_section(pl.DataFrame(), pl.DataFrame(), ranked)
    assert "Ranked within benchmark version 1.3" in section
    assert ("- old (m3, benchmark 1.2.9): benchmark 1.2.9: the leaderboard ranks benchmark 1.3, the newest "
            "minor version") in section
    assert f"- unversioned (m4, benchmark none): {NO_VERSION}" in section and "crashed" not in section


def test_the_chart_names_what_it_shows_and_is_drawn_again_only_when_that_changes(monkeypatch):
    """The chart in the dataset folder is kept while it names the same rows (and drawing); other
    rows, other bytes or no chart draw it anew."""
    one = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=20, seed=1)
    other = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=20, seed=2)  # other intervals
    drawn = tables.chart_of(one, None)
    with Image.open(io.BytesIO(drawn)) as image:
        assert image.format == "PNG" and image.text[tables.CHART_OF] == tables.chart_key(one)
    assert tables.chart_key(one) != tables.chart_key(other)

    calls = []
    draw = tables.leaderboard_chart
    monkeypatch.setattr(tables, "leaderboard_chart", lambda table, key: calls.append(key) or draw(table, key))
    assert tables.chart_of(one, drawn) == drawn and calls == []
    redrawn = tables.chart_of(other, drawn)
    assert calls == [tables.chart_key(other)] and redrawn != drawn
    assert tables.drawn_from(redrawn) == tables.chart_key(other)
    for stranger in (b"not a chart", b"\x89PNG\r\n\x1a\n" + bytes(40), _png_without_key()):
        calls.clear()
        assert tables.chart_of(one, stranger) == drawn and calls == [tables.chart_key(one)]
    monkeypatch.setattr(tables, "CHART_STYLE", tables.CHART_STYLE + "-changed")  # a new drawing
    calls.clear()
    assert tables.drawn_from(tables.chart_of(one, drawn)) != tables.drawn_from(drawn) and len(calls) == 1


def _png_without_key() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="PNG")
    return out.getvalue()


def test_an_interval_that_misses_its_rating_by_rounding_still_draws():
    """A bootstrap bound equal to the rating can come out a hair past it (floating point): the bar
    is then empty on that side, not an error from matplotlib."""
    table = leaderboard(episodes_frame([]), combined_frame(CYCLE), rounds=20, seed=1)
    rated = pl.col("rating").is_not_null()
    past = table.with_columns(lo=pl.when(rated).then(pl.col("rating") + 1e-9).otherwise("lo"),
                              hi=pl.when(rated).then(pl.col("rating") - 1e-9).otherwise("hi"))
    assert past.filter(rated).height and (past.filter(rated)["lo"] > past.filter(rated)["rating"]).all()
    with Image.open(io.BytesIO(tables.chart_of(past, None))) as image:
        assert image.format == "PNG" and image.text[tables.CHART_OF] == tables.chart_key(past)
