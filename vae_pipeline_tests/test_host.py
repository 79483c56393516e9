"""The host verdict under rubrics 1.2 and 1.0, its gates, rehosting history, and judge.json.

Every expected label, rule and gate list below is worked out by hand from contract 2's tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.verdicts.host import carry_history, gates_failed, host_verdict
from vae_pipeline.domain.verdicts.judge import parse_judge
from vae_pipeline.domain.verdicts.rubric import load_rubric

META = Path(__file__).resolve().parents[1] / "meta"
V12 = load_rubric(META / "rubric-v1.2.json")
V10 = load_rubric(META / "rubric-archive" / "rubric-v1.0.json")
AXES = ("brief_fidelity", "composition", "typography", "motion", "craft", "engagement")

BRIEF = {"duration_s": 8.0, "aspect": "16:9", "hold": {"start_s": 6.5, "end_s": 8.0}, "loop": False}
FACTS = {
    "video_ok": True,
    "video_duration_s": 8.0,
    "fps": 30.0,
    "width": 1920,
    "height": 1080,
    "aspect": "16:9",
    "black_ranges": [],
    "freeze_ranges": [],
    "still": False,
    "loop_seam": 3.0,
}


def answer(scores: list[int], critical: int = 0, major: int = 0, minor: int = 0) -> dict:
    defects = [
        {"severity": severity, "t_s": 1.0, "text": "a defect"}
        for severity, n in (("critical", critical), ("major", major), ("minor", minor))
        for _ in range(n)
    ]
    return {"scores": dict(zip(AXES, scores, strict=True)), "defects": defects, "verdict": "PASS", "summary": ""}


def verdict(rubric=V12, *, judged=None, facts=FACTS, delivered=True, brief=BRIEF, harness_error=False) -> dict:
    return host_verdict(
        answer=judged, facts=facts, delivered=delivered, brief=brief, harness_error=harness_error, rubric=rubric
    )


# --- rules ----------------------------------------------------------------------------------

# (scores, critical, major, minor, v1.2 rule and label, v1.0 rule and label), by hand:
RULE_CASES = {
    "R1 one critical beats everything": ([9] * 6, 1, 3, 3, ("R1", "FAIL"), ("R1", "FAIL")),
    "R2 three majors": ([9] * 6, 0, 3, 0, ("R2", "FAIL"), ("R2", "FAIL")),
    "two majors is R5, not R2": ([9] * 6, 0, 2, 0, ("R5", "PASS_WITH_NITS"), ("R5", "PASS_WITH_NITS")),
    "R3 s_min 2": ([2, 9, 9, 9, 9, 9], 0, 0, 0, ("R3", "FAIL"), ("R3", "FAIL")),
    # s_min 3, mean 48/6 = 8: R3 does not hold; R6 does (3 < 6 and 3 < 5)
    "s_min 3 is not R3": ([3, 9, 9, 9, 9, 9], 0, 0, 0, ("R6", "PASS_WITH_NITS"), ("R6", "PASS_WITH_NITS")),
    # mean exactly 5.0: not < 5.0; s_min 5 < 6 -> R6 under 1.2; under 1.0 5 < 5 fails, m = 0 -> R8
    "mean exactly 5.0": ([5] * 6, 0, 0, 0, ("R6", "PASS_WITH_NITS"), ("R8", "PASS")),
    # mean 29/6 = 4.83, the nearest six integer scores get below 5.0: < 5.0 (R4 under 1.2),
    # >= 4.5 under 1.0, where s_min 4 < 5 -> R6
    "mean just below 5.0": ([4, 5, 5, 5, 5, 5], 0, 0, 0, ("R4", "FAIL"), ("R6", "PASS_WITH_NITS")),
    # mean exactly 4.5 (27/6): not < 4.5 under 1.0 -> R6 (s_min 4 < 5); R4 under 1.2
    "mean exactly 4.5": ([4, 4, 4, 5, 5, 5], 0, 0, 0, ("R4", "FAIL"), ("R6", "PASS_WITH_NITS")),
    # mean 26/6 = 4.33 < 4.5
    "mean just below 4.5": ([4, 4, 4, 4, 5, 5], 0, 0, 0, ("R4", "FAIL"), ("R4", "FAIL")),
    "R5 one major": ([9] * 6, 0, 1, 0, ("R5", "PASS_WITH_NITS"), ("R5", "PASS_WITH_NITS")),
    # s_min 5: < 6 (R6 under 1.2), not < 5 under 1.0 -> R8
    "s_min 5": ([5, 9, 9, 9, 9, 9], 0, 0, 0, ("R6", "PASS_WITH_NITS"), ("R8", "PASS")),
    # s_min 6: not < 6 -> R8 under both
    "s_min 6": ([6, 9, 9, 9, 9, 9], 0, 0, 0, ("R8", "PASS"), ("R8", "PASS")),
    "s_min 4 under 1.0": ([4, 9, 9, 9, 9, 9], 0, 0, 0, ("R6", "PASS_WITH_NITS"), ("R6", "PASS_WITH_NITS")),
    "R7 three minors": ([9] * 6, 0, 0, 3, ("R7", "PASS_WITH_NITS"), ("R7", "PASS_WITH_NITS")),
    "two minors is R8": ([9] * 6, 0, 0, 2, ("R8", "PASS"), ("R8", "PASS")),
    "R8 clean": ([10] * 6, 0, 0, 0, ("R8", "PASS"), ("R8", "PASS")),
}


@pytest.mark.parametrize("case", RULE_CASES)
def test_rules_under_both_rubrics(case):
    scores, critical, major, minor, want12, want10 = RULE_CASES[case]
    judged = answer(scores, critical, major, minor)
    for rubric, (rule, label) in ((V12, want12), (V10, want10)):
        row = verdict(rubric, judged=judged)
        assert (row["host_rule"], row["label"]) == (rule, label), rubric.version
        assert row["host_gates_failed"] == []


def test_judged_row_carries_scores_counts_and_the_rubric():
    row = verdict(judged=answer([7, 6, 8, 5, 6, 6], critical=0, major=1, minor=2))
    assert row == {
        "label": "PASS_WITH_NITS",
        "host_rule": "R5",
        "host_gates_failed": [],
        "positive_eligible": False,  # M = 1
        "score_brief_fidelity": 7,
        "score_composition": 6,
        "score_typography": 8,
        "score_motion": 5,
        "score_craft": 6,
        "score_engagement": 6,
        "defects_critical": 0,
        "defects_major": 1,
        "defects_minor": 2,
        "host_rubric_version": "1.2",
        "rubric_sha256": V12.sha256,
    }


# --- gates ----------------------------------------------------------------------------------


def failed(rubric=V12, brief=BRIEF, **changes) -> list[str]:
    return gates_failed({**FACTS, **changes}, True, brief, rubric)


def test_a_clean_video_fails_no_gate():
    assert failed() == []


@pytest.mark.parametrize(
    ("brief_s", "video_s", "fails"),
    [
        (7.0, 8.4, False),  # |diff| 1.4 = max(1.0, 0.2 × 7) exactly: not more
        (7.0, 8.401, True),
        (7.0, 5.6, False),  # short by exactly 1.4
        (7.0, 5.599, True),
        (3.0, 4.0, False),  # 0.2 × 3 = 0.6, so the 1.0 s floor applies: diff 1.0 is allowed
        (3.0, 4.001, True),
        (10.0, 12.0, False),  # 0.2 × 10 = 2.0 > 1.0
        (10.0, 12.001, True),
    ],
)
def test_duration_gate(brief_s, video_s, fails):
    got = failed(brief={**BRIEF, "duration_s": brief_s, "hold": None}, video_duration_s=video_s)
    assert got == (["duration"] if fails else [])


@pytest.mark.parametrize(("aspect", "fails"), [("16:9", False), ("9:16", True), ("4:3", True)])
def test_aspect_gate(aspect, fails):
    assert failed(aspect=aspect) == (["aspect"] if fails else [])


@pytest.mark.parametrize(
    ("ranges", "fails"),
    [
        ([[0.7, 1.69]], False),  # lasts 0.99 s
        ([[0.7, 1.7]], True),  # lasts exactly 1.0 s (1.7 - 0.7 is 0.9999… in binary floats)
        ([[0.0, 0.5], [3.0, 3.6]], False),  # two short ones do not add up
    ],
)
def test_black_gate(ranges, fails):
    assert failed(black_ranges=ranges) == (["black"] if fails else [])


@pytest.mark.parametrize(
    ("hold", "span", "fails"),
    [
        ({"start_s": 6.5, "end_s": 8.0}, [1.0, 2.99], False),  # 1.99 s: too short to matter
        ({"start_s": 6.5, "end_s": 8.0}, [1.0, 3.0], True),  # 2.0 s, outside the hold
        ({"start_s": 6.5, "end_s": 8.0}, [6.25, 8.25], False),  # exactly the hold widened by 0.25
        ({"start_s": 6.5, "end_s": 8.0}, [6.24, 8.25], True),  # starts 0.01 s too early
        ({"start_s": 6.0, "end_s": 7.5}, [5.75, 7.75], False),  # 2.0 s, exactly 5.75..7.75
        ({"start_s": 6.0, "end_s": 7.5}, [5.75, 7.76], True),  # ends 0.01 s too late
        ({"start_s": 6.0, "end_s": 8.0}, [6.0, 8.0], False),
        (None, [6.0, 8.0], True),  # no hold: nothing excuses a freeze
    ],
)
def test_freeze_gate(hold, span, fails):
    brief = {**BRIEF, "duration_s": 10.0, "hold": hold}
    assert failed(brief=brief, video_duration_s=10.0, freeze_ranges=[span]) == (["freeze"] if fails else [])


def test_still_gate():
    assert failed(still=True) == ["still"]


@pytest.mark.parametrize(
    ("rubric", "loop", "seam", "fails"),
    [
        (V12, True, 12.0, False),
        (V12, True, 12.01, True),
        (V12, False, 200.0, False),  # only a looping brief cares about the seam
        (V10, True, 12.01, False),
        (V10, True, 40.0, False),
        (V10, True, 40.01, True),
        (V12, True, None, False),  # unmeasured (a table an older version wrote): not failed, no crash
    ],
)
def test_loop_seam_gate(rubric, loop, seam, fails):
    assert failed(rubric, brief={**BRIEF, "loop": loop}, loop_seam=seam) == (["loop_seam"] if fails else [])


def test_failed_gates_come_in_the_table_order():
    got = failed(
        brief={**BRIEF, "loop": True},
        loop_seam=90.0,
        still=True,
        freeze_ranges=[[0.0, 7.9]],
        black_ranges=[[0.0, 1.5]],
        aspect="1:1",
        video_duration_s=2.0,
    )
    assert got == ["duration", "aspect", "black", "freeze", "still", "loop_seam"]


@pytest.mark.parametrize(
    ("facts", "delivered"),
    [(None, False), ({**FACTS, "video_ok": False}, True), (None, True)],
    ids=["no out.mp4", "does not decode", "no facts"],
)
def test_no_video_gate(facts, delivered):
    assert gates_failed(facts, delivered, BRIEF, V12) == ["no_video"]


# --- the label ------------------------------------------------------------------------------

CLEAN = answer([9] * 6)


def test_a_failed_gate_turns_the_label_to_fail_but_keeps_the_rule():
    row = verdict(judged=CLEAN, facts={**FACTS, "aspect": "9:16"})
    assert (row["label"], row["host_rule"], row["host_gates_failed"]) == ("FAIL", "R8", ["aspect"])
    assert row["positive_eligible"] is False
    assert row["score_craft"] == 9


def test_unjudged_with_a_video():
    row = verdict(judged=None, facts={**FACTS, "black_ranges": [[0.0, 1.0]]})
    assert (row["label"], row["host_rule"], row["host_gates_failed"]) == (None, None, ["black"])
    assert all(row[f"score_{axis}"] is None for axis in AXES)
    assert (row["defects_critical"], row["defects_major"], row["defects_minor"]) == (None, None, None)
    assert row["positive_eligible"] is False
    assert (row["host_rubric_version"], row["rubric_sha256"]) == ("1.2", V12.sha256)


def test_unjudged_and_no_video_is_fail_without_a_rule():
    row = verdict(judged=None, facts=None, delivered=False)
    assert (row["label"], row["host_rule"], row["host_gates_failed"]) == ("FAIL", None, ["no_video"])
    assert row["score_motion"] is None and row["defects_major"] is None
    assert row["positive_eligible"] is False


def test_judged_but_undecodable_is_fail_without_a_rule():
    row = verdict(judged=CLEAN, facts={**FACTS, "video_ok": False})
    assert (row["label"], row["host_rule"], row["host_gates_failed"]) == ("FAIL", None, ["no_video"])
    assert row["score_motion"] == 9  # the judge's answer is still reported
    assert row["positive_eligible"] is False


@pytest.mark.parametrize(
    ("judged", "facts", "harness_error", "eligible"),
    [
        (answer([9] * 6), FACTS, False, True),  # PASS, clean
        (answer([5, 9, 9, 9, 9, 9]), FACTS, False, True),  # PASS_WITH_NITS by R6, M = 0
        (answer([9] * 6, minor=3), FACTS, False, True),  # PASS_WITH_NITS by R7, minors allowed
        (answer([9] * 6, major=1), FACTS, False, False),  # PASS_WITH_NITS by R5: M = 1
        (answer([9] * 6), {**FACTS, "still": True}, False, False),  # a failed gate
        (answer([9] * 6), FACTS, True, False),  # harness error
        (answer([1] * 6), FACTS, False, False),  # FAIL
    ],
)
def test_positive_eligible(judged, facts, harness_error, eligible):
    assert verdict(judged=judged, facts=facts, harness_error=harness_error)["positive_eligible"] is eligible


def test_a_harness_error_does_not_change_the_label():
    row = verdict(judged=CLEAN, harness_error=True)
    assert (row["label"], row["host_rule"], row["positive_eligible"]) == ("PASS", "R8", False)


# --- rehosting history ----------------------------------------------------------------------

NOW, BEFORE = "2026-11-02T10:00:00Z", "2026-10-30T09:00:00Z"


@pytest.mark.parametrize(
    ("new", "previous", "stored", "want"),
    [
        # first computation: the label before is judge.json's host.label
        ("PASS", None, "PASS", (None, "PASS")),
        ("FAIL", None, "PASS", (NOW, "PASS")),
        # first computation without judge.json: no label before, nothing changed
        (None, None, None, (None, None)),
        ("FAIL", None, None, (None, None)),
        # later: unchanged keeps what it had
        ("FAIL", {"label": "FAIL", "rehosted_at": BEFORE, "previous_final_label": "PASS"}, "PASS", (BEFORE, "PASS")),
        ("PASS", {"label": "PASS", "rehosted_at": None, "previous_final_label": "PASS"}, "PASS", (None, "PASS")),
        # later: a change records now and the label it replaced (not judge.json's)
        ("PASS", {"label": "FAIL", "rehosted_at": BEFORE, "previous_final_label": "PASS"}, "PASS", (NOW, "FAIL")),
        ("FAIL", {"label": "PASS_WITH_NITS", "rehosted_at": None, "previous_final_label": "PASS_WITH_NITS"},
         "PASS_WITH_NITS", (NOW, "PASS_WITH_NITS")),
    ],
)
def test_carry_history(new, previous, stored, want):
    got = carry_history(new_label=new, previous=previous, stored_host_label=stored, now=NOW)
    assert got == {"rehosted_at": want[0], "previous_final_label": want[1]}


def test_rehosting_from_1_0_to_1_2():
    # All scores 5, no defects: PASS under 1.0 (R8), PASS_WITH_NITS under 1.2 (R6: 5 < 6).
    judged = answer([5] * 6)
    under_10 = verdict(V10, judged=judged)
    assert (under_10["label"], under_10["host_rule"]) == ("PASS", "R8")
    under_12 = verdict(V12, judged=judged)
    assert (under_12["label"], under_12["host_rule"]) == ("PASS_WITH_NITS", "R6")
    assert under_12["host_rubric_version"] == "1.2"
    assert under_12["rubric_sha256"] != under_10["rubric_sha256"]
    first = carry_history(new_label=under_10["label"], previous=None, stored_host_label="PASS", now=BEFORE)
    assert first == {"rehosted_at": None, "previous_final_label": "PASS"}
    second = carry_history(
        new_label=under_12["label"], previous={"label": "PASS", **first}, stored_host_label="PASS", now=NOW
    )
    assert second == {"rehosted_at": NOW, "previous_final_label": "PASS"}


# --- judge.json -----------------------------------------------------------------------------

JUDGE = {
    "judge_model": "claude-fable-5.1",
    "rubric_version": "1.2",
    "rubric_sha256": "ab" * 32,
    "judged_at": "2026-10-21T08:40:00Z",
    "frames": [{"t_s": 0.0, "reason": "first"}],
    "answer": {
        "scores": {"brief_fidelity": 7, "composition": 6, "typography": 8, "motion": 5, "craft": 6, "engagement": 6},
        "defects": [{"severity": "major", "t_s": 2.1, "text": "title clips the right edge"}],
        "verdict": "PASS_WITH_NITS",
        "summary": "fine",
    },
    "host": {"label": "PASS_WITH_NITS", "rule": "R5", "gates_failed": [], "rubric_version": "1.2"},
}


def test_parse_judge_returns_the_normalised_record():
    got = parse_judge(json.dumps(JUDGE, indent=2))
    assert got == {
        "judge_model": "claude-fable-5.1",
        "rubric_version": "1.2",
        "judged_at": "2026-10-21T08:40:00Z",
        "answer": JUDGE["answer"],
        "stored_host_label": "PASS_WITH_NITS",
    }
    # the parsed answer feeds the host directly
    assert verdict(judged=got["answer"])["host_rule"] == "R5"


def test_parse_judge_reports_the_line_of_a_syntax_error():
    text = '{\n  "judge_model": "m",\n  "rubric_version": "1.2" "judged_at": "t"\n}\n'
    with pytest.raises(BadInput) as caught:
        parse_judge(text, file="ep-s1/judge.json")
    assert (caught.value.file, caught.value.line) == ("ep-s1/judge.json", 3)
    assert caught.value.reason.startswith("not valid JSON")


def _broken(change) -> str:
    doc = json.loads(json.dumps(JUDGE))
    change(doc)
    return json.dumps(doc, indent=2)


BAD = {
    "score 11": (lambda d: d["answer"]["scores"].update(motion=11), "answer.scores.motion must be an integer"),
    "score -1": (lambda d: d["answer"]["scores"].update(motion=-1), "answer.scores.motion must be an integer"),
    "score 7.5": (lambda d: d["answer"]["scores"].update(craft=7.5), "answer.scores.craft must be an integer"),
    "score 7.0": (lambda d: d["answer"]["scores"].update(craft=7.0), "answer.scores.craft must be an integer"),
    "bool score": (lambda d: d["answer"]["scores"].update(typography=True), "answer.scores.typography must be"),
    "string score": (lambda d: d["answer"]["scores"].update(typography="8"), "answer.scores.typography must be"),
    "missing axis": (lambda d: d["answer"]["scores"].pop("engagement"), "missing field answer.scores.engagement"),
    "extra axis": (lambda d: d["answer"]["scores"].update(pacing=5),
                   "answer.scores holds a key that is not one of brief_fidelity, composition, typography"),
    "unknown severity": (
        lambda d: d["answer"]["defects"][0].update(severity="catastrophic"),
        "answer.defects[0].severity must be one of critical, major, minor",
    ),
    "defect t_s text": (lambda d: d["answer"]["defects"][0].update(t_s="2.1"), "answer.defects[0].t_s must be a number"),
    "defect without text": (lambda d: d["answer"]["defects"][0].pop("text"), "missing field answer.defects[0].text"),
    "defects not a list": (lambda d: d["answer"].update(defects={}), "answer.defects must be a list"),
    "unknown verdict": (lambda d: d["answer"].update(verdict="GREAT"), "answer.verdict must be one of"),
    "missing judge_model": (lambda d: d.pop("judge_model"), "missing field judge_model"),
    "numeric rubric_version": (lambda d: d.update(rubric_version=1.2), "rubric_version must be a string"),
    "judged_at null": (lambda d: d.update(judged_at=None), "judged_at must be a string"),
    "no answer": (lambda d: d.pop("answer"), "missing field answer"),
    "no host": (lambda d: d.pop("host"), "missing field host"),
    "host label unknown": (lambda d: d["host"].update(label="OK"), "host.label must be one of"),
    "host rule number": (lambda d: d["host"].update(rule=5), "host.rule must be a string or null"),
    "host gates not list": (lambda d: d["host"].update(gates_failed="aspect"), "host.gates_failed must be a list"),
    "frames wrong": (lambda d: d["frames"][0].update(t_s=None), "frames[0].t_s must be a number"),
}


@pytest.mark.parametrize("case", BAD)
def test_parse_judge_refuses_bad_fields(case):
    change, reason = BAD[case]
    with pytest.raises(BadInput) as caught:
        parse_judge(_broken(change))
    assert caught.value.file == "judge.json"
    assert reason in caught.value.reason
    assert "\n" not in caught.value.reason
    # the reason names the field, never the value found there
    assert not any(word in caught.value.reason for word in ("catastrophic", "GREAT", "pacing", "7.5"))


def test_a_bad_judge_field_is_reported_on_its_line():
    # json.dumps(JUDGE, indent=2): line numbers counted in that layout
    lines = json.dumps(JUDGE, indent=2).splitlines()

    def line(needle: str) -> int:
        return next(n for n, text in enumerate(lines, start=1) if needle in text)

    cases = [
        (lambda d: d["answer"]["scores"].update(motion=11), line('"motion"')),
        (lambda d: d["answer"]["defects"][0].update(severity="catastrophic"), line('"severity"')),
        (lambda d: d["host"].update(rule=5), line('"rule"')),
        (lambda d: d["answer"]["scores"].pop("engagement"), line('"scores"')),  # missing: its object's line
    ]
    for change, expected in cases:
        with pytest.raises(BadInput) as caught:
            parse_judge(_broken(change))
        assert caught.value.line == expected, caught.value


def test_parse_judge_refuses_nan_and_non_objects():
    with pytest.raises(BadInput, match="NaN"):
        parse_judge(json.dumps(JUDGE).replace('"t_s": 2.1', '"t_s": NaN'))
    with pytest.raises(BadInput, match="the file must be a JSON object"):
        parse_judge("[]")


def test_a_host_rule_may_be_null():
    # a judged episode whose host saw no video stored FAIL with no rule
    got = parse_judge(_broken(lambda d: d.update(host={**d["host"], "label": "FAIL", "rule": None})))
    assert got["stored_host_label"] == "FAIL"


def test_a_judge_answer_gone_since_the_episode_was_parsed_is_said_missing(tmp_path):
    """The verdicts row of a judged episode whose judge.json is no longer there names the file and
    says it is missing (not an error of the pipeline's own), and the row alone is invalid."""
    from vae_pipeline.assets.verdicts import read_verdict
    from vae_pipeline.domain.scrub.texts import ScrubConfig
    from vae_pipeline.storage.resources import RunsRoot

    (tmp_path / "2026-10-21-s1" / "title-card-001-s1").mkdir(parents=True)
    row = {"series": "2026-10-21-s1", "id": "title-card-001-s1", "source": "title-card-001-s1", "is_archive": False}
    verdict = read_verdict(RunsRoot(path=str(tmp_path)), row, ScrubConfig())
    assert (verdict["judge_valid"], verdict["judge_error_file"], verdict["judge_error_reason"]) == \
        (False, "judge.json", "required file is missing")
