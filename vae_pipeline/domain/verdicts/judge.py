"""judge.json (contract 1): the judge's stored answer, checked before the host relies on it.

The host recomputes labels from this answer alone, so a wrong type here would silently change a
published label; it is refused as bad input instead, against `meta/judge.schema.json`. Reasons
name the field, never its value.
"""

from __future__ import annotations

from vae_pipeline.domain.episodes.json_schema import contract_validator
from vae_pipeline.domain.episodes.strict_json import loads


def parse_judge(text: str, file: str = "judge.json") -> dict:
    """Parse and validate judge.json; return judge_model, rubric_version, judged_at, the answer
    (unchanged) and stored_host_label (the label the host computed when it was judged).

    Raises BadInput with the file, the line, and a one-line reason.
    """
    doc = loads(text, file)
    contract_validator("judge").validate(doc, text, file)
    return {
        "judge_model": doc["judge_model"],
        "rubric_version": doc["rubric_version"],
        "judged_at": doc["judged_at"],
        "answer": doc["answer"],
        "stored_host_label": doc["host"]["label"],
    }
