"""judge.json (contract 1): the judge's stored answer, checked before the host relies on it.

The host recomputes labels from this answer alone, so a wrong type here would silently change a
published label; it is refused as bad input instead, against `meta/judge.schema.json`. Reasons
name the field, never its value.
"""

from __future__ import annotations

import json

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.json_schema import contract_validator


class _NotJson(Exception):
    """NaN or Infinity: Python's json reads them, JSON has no such numbers."""


def _reject_constant(name: str) -> None:
    raise _NotJson("not valid JSON: NaN and Infinity are not JSON numbers")


def parse_judge(text: str, file: str = "judge.json") -> dict:
    """Parse and validate judge.json; return judge_model, rubric_version, judged_at, the answer
    (unchanged) and stored_host_label (the label the host computed when it was judged).

    Raises BadInput with the file, the line, and a one-line reason.
    """
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise BadInput(file, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    except _NotJson as exc:
        raise BadInput(file, str(exc)) from None
    contract_validator("judge").validate(doc, text, file)
    return {
        "judge_model": doc["judge_model"],
        "rubric_version": doc["rubric_version"],
        "judged_at": doc["judged_at"],
        "answer": doc["answer"],
        "stored_host_label": doc["host"]["label"],
    }
