"""Joining the stages into one row per episode (pure: no Dagster)."""

import polars as pl

from vae_pipeline.assets.dataset import join_stages

STRINGS = {"error_file": pl.String, "error_reason": pl.String, "error_line": pl.Int64}


def _episodes(rows: list[tuple[str, str, bool]]) -> pl.DataFrame:
    return pl.DataFrame(
        [{"series": s, "id": i, "valid": v, "source": i, "delivered": True, "error_file": None,
          "error_reason": None, "error_line": None} for s, i, v in rows], schema_overrides=STRINGS)


def test_stages_join_on_series_and_id_and_a_repeated_id_is_a_duplicate():
    episodes = _episodes([("2026-10-21-s1", "a-s1", True), ("2026-10-22-s1", "a-s1", True),
                          ("2026-10-22-s1", "b-s1", True)])
    renders = pl.DataFrame({"series": ["2026-10-21-s1", "2026-10-22-s1"], "id": ["a-s1", "a-s1"],
                            "video_ok": [True, False]})
    table = join_stages(episodes, renders)
    assert table.height == 3
    first, again = table.filter(pl.col("id") == "a-s1").iter_rows(named=True)
    assert (first["valid"], first["video_ok"], first["video"]) == (True, True, "videos/a-s1.mp4")
    assert (again["valid"], again["video_ok"], again["video"]) == (False, False, None)
    assert "duplicate episode id" in again["error_reason"]


def test_a_bad_judge_json_or_an_unbundled_archive_makes_the_episode_invalid():
    episodes = _episodes([("s", "a-s1", True), ("s", "b-s1", True), ("s", "c-s1", True)])
    verdicts = pl.DataFrame({"series": ["s", "s"], "id": ["a-s1", "b-s1"], "judge_valid": [False, True],
                             "judge_error_file": ["judge.json", None], "judge_error_line": [3, None],
                             "judge_error_reason": ["bad score", None]})
    bundles = pl.DataFrame({"series": ["s", "s", "s"], "id": ["a-s1", "b-s1", "c-s1"],
                            "bundle_error": [None, None, "work/x: collides with a slimmed image"]})
    rows = {r["id"]: r for r in join_stages(episodes, verdicts, bundles).iter_rows(named=True)}
    assert (rows["a-s1"]["valid"], rows["a-s1"]["error_file"], rows["a-s1"]["error_line"]) == (False, "judge.json", 3)
    assert rows["b-s1"]["valid"] is True
    assert rows["c-s1"]["valid"] is False and "collides" in rows["c-s1"]["error_reason"]
