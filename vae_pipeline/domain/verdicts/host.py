"""The host verdict (contract 2): an episode's label recomputed from the judge's stored answer
and the video's mechanical facts, under the rubric in force. It never calls a model, so every
label can be recomputed when the rubric or a gate changes (rehosting).

All thresholds come from the Rubric; this module only knows what each gate and metric means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from vae_pipeline.domain.verdicts.rubric import NO_VIDEO, OPS, Condition, Gate, Rubric

POSITIVE_LABELS = ("PASS", "PASS_WITH_NITS")


def _exact(number: int | float) -> Fraction:
    """The number as the decimal it is written as: ranges and durations are 3-decimal values, and
    in binary floats 1.7 − 0.7 < 1.0 and 8.4 − 7.0 > 0.2 × 7.0, which would flip a gate exactly at
    its threshold."""
    return Fraction(repr(number)) if isinstance(number, float) else Fraction(number)


def _lasts(span: Sequence[float]) -> Fraction:
    return _exact(span[1]) - _exact(span[0])


def _duration(facts: dict, brief: dict, gate: Gate) -> bool:
    wanted = _exact(brief["duration_s"])
    allowed = max(_exact(gate.threshold("min_s")), _exact(gate.threshold("fraction")) * wanted)
    return abs(_exact(facts["video_duration_s"]) - wanted) > allowed


def _aspect(facts: dict, brief: dict, gate: Gate) -> bool:
    return facts["aspect"] != brief["aspect"]


def _black(facts: dict, brief: dict, gate: Gate) -> bool:
    return any(_lasts(span) >= _exact(gate.threshold("min_s")) for span in facts["black_ranges"])


def _unasked_freezes(facts: dict, brief: dict, gate: Gate) -> list[Sequence[float]]:
    """The freeze ranges not inside the brief's hold, widened by the margin on each side."""
    hold, margin = brief.get("hold"), _exact(gate.threshold("hold_margin_s"))

    def asked_for(span: Sequence[float]) -> bool:
        return (
            hold is not None
            and _exact(span[0]) >= _exact(hold["start_s"]) - margin
            and _exact(span[1]) <= _exact(hold["end_s"]) + margin
        )

    return [span for span in facts["freeze_ranges"] if not asked_for(span)]


def _freeze(facts: dict, brief: dict, gate: Gate) -> bool:
    minimum = _exact(gate.threshold("min_s"))
    return any(_lasts(span) >= minimum for span in _unasked_freezes(facts, brief, gate))


def _still(facts: dict, brief: dict, gate: Gate) -> bool:
    return facts["still"] is True


def _loop_seam(facts: dict, brief: dict, gate: Gate) -> bool:
    """Unmeasured (a table an older version wrote) is not failed: `renders`' check names it."""
    seam = facts.get("loop_seam")
    return brief.get("loop") is True and seam is not None and _exact(seam) > _exact(gate.threshold("max"))


# Every gate but no_video, which is decided before any fact is read (there may be none).
_CHECKS: dict[str, Callable[[dict, dict, Gate], bool]] = {
    "duration": _duration,
    "aspect": _aspect,
    "black": _black,
    "freeze": _freeze,
    "still": _still,
    "loop_seam": _loop_seam,
}


def gates_failed(facts: dict | None, delivered: bool, brief: dict, rubric: Rubric) -> list[str]:
    """The gates the video fails, in the rubric's order. Without a decodable video only
    `no_video` is listed: the other gates have no facts to be measured on."""
    if not delivered or facts is None or not facts.get("video_ok"):
        return [NO_VIDEO]
    return [g.id for g in rubric.gates if g.id != NO_VIDEO and _CHECKS[g.id](facts, brief, g)]


def _longest(spans: Sequence[Sequence[float]]) -> float:
    return float(max((_lasts(span) for span in spans), default=Fraction(0)))


def _measured(gate: Gate, facts: dict, brief: dict) -> tuple[object, str]:
    """What `gate` measures on the video, and the threshold it is held to, for a person to read."""
    if gate.id == "duration":
        wanted = _exact(brief["duration_s"])
        allowed = max(_exact(gate.threshold("min_s")), _exact(gate.threshold("fraction")) * wanted)
        return facts["video_duration_s"], f"{float(wanted):g} s ± {float(allowed):g} s"
    if gate.id == "aspect":
        return facts["aspect"], f"= {brief['aspect']}"
    if gate.id == "black":
        return _longest(facts["black_ranges"]), f"longest black < {gate.threshold('min_s'):g} s"
    if gate.id == "freeze":
        return _longest(_unasked_freezes(facts, brief, gate)), (
            f"longest freeze outside the hold (± {gate.threshold('hold_margin_s'):g} s) "
            f"< {gate.threshold('min_s'):g} s")
    if gate.id == "still":
        return facts["still"], "not still"
    if gate.id == "loop_seam":
        if brief.get("loop") is not True:
            return None, "only for a looping brief"
        return facts["loop_seam"], f"≤ {gate.threshold('max'):g}"
    raise ValueError(f"no measurement for gate {gate.id}")


def gate_report(facts: dict | None, delivered: bool, brief: dict, rubric: Rubric) -> list[dict]:
    """Every gate of the rubric with what it measured, its threshold and whether it failed —
    the same checks as `gates_failed`, laid out for a reviewer."""
    failed = set(gates_failed(facts, delivered, brief, rubric))
    decodable = delivered and facts is not None and facts.get("video_ok")
    report = []
    for gate in rubric.gates:
        if gate.id == NO_VIDEO:
            measured = "decodable video" if decodable else ("not decodable" if delivered else "nothing delivered")
            report.append({"gate": gate.id, "measured": measured, "threshold": "a decodable out.mp4",
                           "failed": gate.id in failed})
        elif not decodable:
            report.append({"gate": gate.id, "measured": None, "threshold": "not measured without a video",
                           "failed": False})
        else:
            measured, threshold = _measured(gate, facts, brief)
            report.append({"gate": gate.id, "measured": measured, "threshold": threshold,
                           "failed": gate.id in failed})
    # what the reviewer reads: a gate with nothing measured did not pass, it was not measured
    return [{**g, "result": "failed" if g["failed"] else ("not measured" if g["measured"] is None else "passed")}
            for g in report]


def _holds(condition: Condition, metrics: dict[str, int | Fraction]) -> bool:
    return OPS[condition.op](metrics[condition.metric], _exact(condition.value))


def host_verdict(
    *,
    answer: dict | None,
    facts: dict | None,
    delivered: bool,
    brief: dict,
    harness_error: bool,
    rubric: Rubric,
) -> dict:
    """The host's columns for one episode: label, host_rule, host_gates_failed,
    positive_eligible, the six score_* columns, the defect counts and the rubric's identity.

    - no answer (no judge.json) and a decodable video: unjudged, label and rule null;
    - `no_video` fails: FAIL with rule null, judged or not (a judged episode still reports the
      judge's scores and defect counts, which are its answer, not the host's);
    - otherwise the first rule that holds decides; any failed gate turns its label into FAIL,
      and host_rule still names the rule that decided.
    harness_error does not change the label; it only keeps the episode from positive_eligible.
    """
    failed = gates_failed(facts, delivered, brief, rubric)
    label = rule_id = None
    scores: dict[str, int | None] = dict.fromkeys(rubric.axes)
    counts: dict[str, int | None] = {"critical": None, "major": None, "minor": None}
    if answer is not None:
        scores = {axis: answer["scores"][axis] for axis in rubric.axes}
        severities = [d["severity"] for d in answer["defects"]]
        counts = {kind: severities.count(kind) for kind in counts}
        values = list(scores.values())
        metrics = {
            **counts,
            "score_min": min(values),
            "score_mean": Fraction(sum(values), len(values)),
        }
        rule = next(r for r in rubric.rules if r.when is None or _holds(r.when, metrics))
        rule_id, label = rule.id, ("FAIL" if failed else rule.label)
    if NO_VIDEO in failed:
        label, rule_id = "FAIL", None
    return {
        "label": label,
        "host_rule": rule_id,
        "host_gates_failed": failed,
        "positive_eligible": (
            label in POSITIVE_LABELS
            and counts["critical"] == 0
            and counts["major"] == 0
            and not failed
            and not harness_error
        ),
        **{f"score_{axis}": score for axis, score in scores.items()},
        "defects_critical": counts["critical"],
        "defects_major": counts["major"],
        "defects_minor": counts["minor"],
        "host_rubric_version": rubric.version,
        "rubric_sha256": rubric.sha256,
    }


def carry_history(
    *, new_label: str | None, previous: dict | None, stored_host_label: str | None, now: str
) -> dict:
    """rehosted_at and previous_final_label for an episode whose label was just computed.

    `previous` is the episode's last computed {label, rehosted_at, previous_final_label}, None
    the first time. A later computation that changes the label records `now` and the old label;
    one that does not keeps the values it had.

    The first time, the label before is judge.json's host.label (`stored_host_label`), and it is
    recorded as previous_final_label. If the recomputed label differs from it, that is a label
    change, so rehosted_at is `now` (e.g. judged PASS under rubric 1.0, computed
    PASS_WITH_NITS under 1.2); if it is the same, rehosted_at is None. Without judge.json there
    is no label before, so nothing changed: both are None, even when the label is FAIL for
    want of a video.
    """
    if previous is None:
        changed = stored_host_label is not None and new_label != stored_host_label
        return {"rehosted_at": now if changed else None, "previous_final_label": stored_host_label}
    if new_label != previous["label"]:
        return {"rehosted_at": now, "previous_final_label": previous["label"]}
    return {"rehosted_at": previous["rehosted_at"], "previous_final_label": previous["previous_final_label"]}
