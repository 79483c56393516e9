"""judge.json (contract 1): the judge's stored answer, checked before the host relies on it.

The host recomputes labels from this answer alone, so a wrong type here would silently change a
published label; it is refused as bad input instead. Reasons name the field, never its value.
"""

from __future__ import annotations

import json
import math

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.rubric import AXES, LABELS

SEVERITIES = ("critical", "major", "minor")
SCORE_MIN, SCORE_MAX = 0, 10


class _Invalid(Exception):
    """A field is missing or has the wrong type; parse_judge turns it into BadInput."""


def _reject_constant(name: str) -> None:
    raise _Invalid("not valid JSON: NaN and Infinity are not JSON numbers")


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise _Invalid(f"{where} must be a JSON object")
    return value


def _get(obj: dict, key: str, where: str) -> object:
    if key not in obj:
        raise _Invalid(f"missing field {where}{key}")
    return obj[key]


def _string(obj: dict, key: str, where: str = "") -> str:
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise _Invalid(f"{where}{key} must be a string")
    return value


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _one_of(obj: dict, key: str, where: str, allowed: tuple[str, ...]) -> str:
    value = _get(obj, key, where)
    if value not in allowed:
        raise _Invalid(f"{where}{key} must be one of {', '.join(allowed)}")
    return value  # type: ignore[return-value]


def _scores(value: object) -> None:
    scores = _object(value, "answer.scores")
    for axis in AXES:
        score = _get(scores, axis, "answer.scores.")
        # bool is an int subclass in Python, and 7.0 is not an integer score in JSON terms
        if not isinstance(score, int) or isinstance(score, bool) or not SCORE_MIN <= score <= SCORE_MAX:
            raise _Invalid(f"answer.scores.{axis} must be an integer from {SCORE_MIN} to {SCORE_MAX}")
    if len(scores) != len(AXES):
        raise _Invalid(f"answer.scores holds a key that is not one of the six axes ({', '.join(AXES)})")


def _defects(value: object) -> None:
    if not isinstance(value, list):
        raise _Invalid("answer.defects must be a list")
    for i, item in enumerate(value):
        where = f"answer.defects[{i}]."
        defect = _object(item, where[:-1])
        _one_of(defect, "severity", where, SEVERITIES)
        if not _number(_get(defect, "t_s", where)):
            raise _Invalid(f"{where}t_s must be a number")
        _string(defect, "text", where)


def _frames(value: object) -> None:
    if not isinstance(value, list):
        raise _Invalid("frames must be a list")
    for i, item in enumerate(value):
        where = f"frames[{i}]."
        frame = _object(item, where[:-1])
        if not _number(_get(frame, "t_s", where)):
            raise _Invalid(f"{where}t_s must be a number")
        _string(frame, "reason", where)


def _host(value: object) -> str:
    host = _object(value, "host")
    label = _one_of(host, "label", "host.", LABELS)
    rule = _get(host, "rule", "host.")
    if rule is not None and not isinstance(rule, str):
        raise _Invalid("host.rule must be a string or null")
    gates = _get(host, "gates_failed", "host.")
    if not isinstance(gates, list) or not all(isinstance(g, str) for g in gates):
        raise _Invalid("host.gates_failed must be a list of strings")
    _string(host, "rubric_version", "host.")
    return label


def _validate(doc: object) -> dict:
    top = _object(doc, "the file")
    normalised: dict = {key: _string(top, key) for key in ("judge_model", "rubric_version", "judged_at")}
    if "rubric_sha256" in top:
        _string(top, "rubric_sha256")
    if "frames" in top:
        _frames(top["frames"])
    answer = _object(_get(top, "answer", ""), "answer")
    _scores(_get(answer, "scores", "answer."))
    _defects(_get(answer, "defects", "answer."))
    _one_of(answer, "verdict", "answer.", LABELS)
    if "summary" in answer:
        _string(answer, "summary", "answer.")
    normalised["answer"] = answer
    normalised["stored_host_label"] = _host(_get(top, "host", ""))
    return normalised


def parse_judge(text: str, file: str = "judge.json") -> dict:
    """Parse and validate judge.json; return judge_model, rubric_version, judged_at, the answer
    (unchanged) and stored_host_label (the label the host computed when it was judged).

    Raises BadInput with the file, the line of a JSON syntax error, and a one-line reason.
    """
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
        return _validate(doc)
    except json.JSONDecodeError as exc:
        raise BadInput(file, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    except _Invalid as exc:
        raise BadInput(file, str(exc)) from None
