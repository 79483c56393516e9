"""The rubric files hold contract 2's tables as data, and the loader refuses forms it cannot apply."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from vae_pipeline.domain.verdicts.rubric import (
    Condition,
    RubricError,
    load_rubric,
    rubric_in_force,
)

META = Path(__file__).resolve().parents[1] / "meta"
V12 = META / "rubric-v1.2.json"
V10 = META / "rubric-archive" / "rubric-v1.0.json"

# Contract 2's rule table, written out by hand: (id, metric, op, value, label); None = otherwise.
RULES_V12 = [
    ("R1", "critical", ">=", 1, "FAIL"),
    ("R2", "major", ">=", 3, "FAIL"),
    ("R3", "score_min", "<=", 2, "FAIL"),
    ("R4", "score_mean", "<", 5.0, "FAIL"),
    ("R5", "major", ">=", 1, "PASS_WITH_NITS"),
    ("R6", "score_min", "<", 6, "PASS_WITH_NITS"),
    ("R7", "minor", ">=", 3, "PASS_WITH_NITS"),
    ("R8", None, None, None, "PASS"),
]
RULES_V10 = [
    ("R1", "critical", ">=", 1, "FAIL"),
    ("R2", "major", ">=", 3, "FAIL"),
    ("R3", "score_min", "<=", 2, "FAIL"),
    ("R4", "score_mean", "<", 4.5, "FAIL"),
    ("R5", "major", ">=", 1, "PASS_WITH_NITS"),
    ("R6", "score_min", "<", 5, "PASS_WITH_NITS"),
    ("R7", "minor", ">=", 3, "PASS_WITH_NITS"),
    ("R8", None, None, None, "PASS"),
]
GATES_V12 = [
    ("no_video", {}),
    ("duration", {"min_s": 1.0, "fraction": 0.2}),
    ("aspect", {}),
    ("black", {"min_s": 1.0}),
    ("freeze", {"min_s": 2.0, "hold_margin_s": 0.25}),
    ("still", {}),
    ("loop_seam", {"max": 12.0}),
]
GATES_V10 = [*GATES_V12[:-1], ("loop_seam", {"max": 40.0})]
AXES = ("brief_fidelity", "composition", "typography", "motion", "craft", "engagement")


def _flat_rules(rubric) -> list[tuple]:
    return [
        (r.id, *((r.when.metric, r.when.op, r.when.value) if r.when else (None, None, None)), r.label)
        for r in rubric.rules
    ]


@pytest.mark.parametrize(
    ("path", "version", "rules", "gates"),
    [(V12, "1.2", RULES_V12, GATES_V12), (V10, "1.0", RULES_V10, GATES_V10)],
)
def test_rubric_files_hold_the_contract_tables(path, version, rules, gates):
    rubric = load_rubric(path)
    assert rubric.version == version
    assert rubric.axes == AXES
    assert _flat_rules(rubric) == rules
    assert [(g.id, dict(g.thresholds)) for g in rubric.gates] == gates
    assert (rubric.sampler.frames, rubric.sampler.min_gap_s, rubric.sampler.jpeg_quality) == (14, 0.1, 90)
    assert rubric.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert rubric.name == f"rubric-v{version}.json"


def test_sha256_follows_the_bytes_not_the_meaning(tmp_path):
    # Same content, different formatting: a different file, so a different rubric_sha256.
    doc = json.loads(V12.read_text())
    path = tmp_path / "rubric-v1.2.json"
    path.write_text(json.dumps(doc))
    assert load_rubric(path).sha256 == hashlib.sha256(json.dumps(doc).encode()).hexdigest()
    assert load_rubric(path).sha256 != load_rubric(V12).sha256
    assert load_rubric(path).rules == load_rubric(V12).rules


def _gate(doc, gate_id):
    return next(g for g in doc["gates"] if g["id"] == gate_id)


REFUSALS = {
    "unknown metric": (lambda d: d["rules"][0]["when"].update(metric="warnings"), "unknown metric 'warnings'"),
    "unknown op": (lambda d: d["rules"][0]["when"].update(op="=="), "unknown op '=='"),
    "unknown condition word": (lambda d: d["rules"][-1].update(when="always"), "unknown condition 'always'"),
    "compound condition": (lambda d: d["rules"][0]["when"].update(all=[]), "unknown key all"),
    "bool value": (lambda d: d["rules"][0]["when"].update(value=True), "value must be a number"),
    "string value": (lambda d: d["rules"][0]["when"].update(value="1"), "value must be a number"),
    "missing value": (lambda d: d["rules"][0]["when"].pop("value"), "missing value"),
    "unknown label": (lambda d: d["rules"][0].update(label="REJECT"), "unknown label 'REJECT'"),
    "bad rule id": (lambda d: d["rules"][0].update(id="rule1"), "id must look like R1"),
    "duplicate rule id": (lambda d: d["rules"][1].update(id="R1"), "duplicate rule id R1"),
    "no otherwise": (lambda d: d["rules"].pop(), "exactly one 'otherwise'"),
    "otherwise not last": (lambda d: d["rules"].insert(0, d["rules"].pop()), "exactly one 'otherwise'"),
    "unknown gate": (lambda d: d["gates"].append({"id": "audio", "thresholds": {}}), "unknown gate id 'audio'"),
    "duplicate gate": (lambda d: d["gates"].append({"id": "aspect", "thresholds": {}}), "duplicate gate aspect"),
    "missing threshold": (lambda d: _gate(d, "freeze")["thresholds"].pop("hold_margin_s"), "missing hold_margin_s"),
    "misspelt threshold": (
        lambda d: _gate(d, "loop_seam").update(thresholds={"maximum": 12.0}),
        "missing max",
    ),
    "extra threshold": (lambda d: _gate(d, "black")["thresholds"].update(max_s=3.0), "unknown key max_s"),
    "negative threshold": (lambda d: _gate(d, "black")["thresholds"].update(min_s=-1), "non-negative number"),
    "gate without thresholds": (lambda d: _gate(d, "duration").pop("thresholds"), "missing thresholds"),
    "no no_video gate": (lambda d: d["gates"].pop(0), "no_video gate is required"),
    "missing axis": (lambda d: d["axes"].pop(), "six axes"),
    "unknown axis": (lambda d: d["axes"].__setitem__(0, "pacing"), "six axes"),
    "sampler missing key": (lambda d: d["sampler"].pop("jpeg_quality"), "missing jpeg_quality"),
    "sampler bad quality": (lambda d: d["sampler"].update(jpeg_quality=101), "1 to 100"),
    "unknown top-level key": (lambda d: d.update(comment="x"), "unknown key comment"),
    "version not in file name": (lambda d: d.update(version="1.3"), "does not match the file name"),
    "version not numeric": (lambda d: d.update(version="v1.2"), "dot-separated numbers"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_load_rubric_refuses_forms_the_host_does_not_know(tmp_path, case):
    mutate, message = REFUSALS[case]
    doc = json.loads(V12.read_text())
    mutate(doc)
    path = tmp_path / "rubric-v1.2.json"
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    assert str(caught.value).startswith("rubric-v1.2.json: ")
    assert message in str(caught.value)


def test_load_rubric_reports_the_line_of_a_json_error(tmp_path):
    path = tmp_path / "rubric-v1.2.json"
    path.write_text('{\n  "version": "1.2",\n  "axes": [,]\n}\n')
    with pytest.raises(RubricError, match=r"^rubric-v1\.2\.json:3: not valid JSON"):
        load_rubric(path)


def test_load_rubric_refuses_nan(tmp_path):
    text = V12.read_text().replace('"value": 5.0', '"value": NaN')
    path = tmp_path / "rubric-v1.2.json"
    path.write_text(text)
    with pytest.raises(RubricError, match="NaN"):
        load_rubric(path)


def test_a_rubric_may_use_every_op(tmp_path):
    doc = json.loads(V12.read_text())
    doc["rules"][1]["when"] = {"metric": "major", "op": ">", "value": 2}
    path = tmp_path / "rubric-v1.2.json"
    path.write_text(json.dumps(doc))
    assert load_rubric(path).rules[1].when == Condition("major", ">", 2)


# --- rubric_in_force ------------------------------------------------------------------------


def _meta(tmp_path: Path, current: list[str], archived: list[str]) -> Path:
    meta = tmp_path / "meta"
    (meta / "rubric-archive").mkdir(parents=True)
    for version in current:
        (meta / f"rubric-v{version}.json").write_text("{}")
    for version in archived:
        (meta / "rubric-archive" / f"rubric-v{version}.json").write_text("{}")
    (meta / "rubric-v1.2.md").write_text("not a rubric")
    return meta


def test_the_project_rubric_in_force_is_1_2():
    assert rubric_in_force(META) == V12
    assert rubric_in_force(META, "1.0") == V10
    assert load_rubric(rubric_in_force(META)).version == "1.2"


def test_newest_is_by_numeric_version_not_by_name(tmp_path):
    meta = _meta(tmp_path, ["1.2", "1.10", "1.9"], ["2.0"])
    # "1.10" sorts before "1.9" as text; numerically it is the newest. The archive is not "in force".
    assert rubric_in_force(meta) == meta / "rubric-v1.10.json"


def test_a_named_version_comes_from_meta_or_the_archive(tmp_path):
    meta = _meta(tmp_path, ["1.2"], ["1.0", "1.1"])
    assert rubric_in_force(meta, "1.2") == meta / "rubric-v1.2.json"
    assert rubric_in_force(meta, "1.0") == meta / "rubric-archive" / "rubric-v1.0.json"


def test_a_missing_version_lists_the_available_ones(tmp_path):
    meta = _meta(tmp_path, ["1.2"], ["1.0", "1.10"])
    with pytest.raises(RubricError, match=r"'1\.3' not found.*available: 1\.0, 1\.2, 1\.10$"):
        rubric_in_force(meta, "1.3")


def test_no_rubric_at_all_is_an_error(tmp_path):
    meta = _meta(tmp_path, [], ["1.0"])
    with pytest.raises(RubricError, match="no rubric-v<version>.json"):
        rubric_in_force(meta)


def test_a_rubric_file_with_a_non_numeric_version_is_refused(tmp_path):
    meta = _meta(tmp_path, ["1.2", "1.3-draft"], [])
    with pytest.raises(RubricError, match="rubric-v1.3-draft.json"):
        rubric_in_force(meta)
