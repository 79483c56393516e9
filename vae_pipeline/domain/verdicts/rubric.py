"""The host rubric as data (contract 2, "The host verdict").

Every threshold of the host verdict lives in `meta/rubric-v<version>.json`, so a label can be
recomputed from a file alone and a rubric change is a data change. This module knows only which
*forms* a rule or a gate may take; a rubric using any other form is refused rather than half
applied.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AXES = ("brief_fidelity", "composition", "typography", "motion", "craft", "engagement")
LABELS = ("PASS", "PASS_WITH_NITS", "FAIL")
METRICS = ("critical", "major", "minor", "score_min", "score_mean")
OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
OTHERWISE = "otherwise"
NO_VIDEO = "no_video"
# The gates the host can evaluate, and the thresholds each one needs from the rubric.
GATE_THRESHOLDS: dict[str, tuple[str, ...]] = {
    NO_VIDEO: (),
    "duration": ("min_s", "fraction"),
    "aspect": (),
    "black": ("min_s",),
    "freeze": ("min_s", "hold_margin_s"),
    "still": (),
    "loop_seam": ("max",),
}

_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_RULE_ID = re.compile(r"R[1-9][0-9]*")
ARCHIVE_DIR = "rubric-archive"


class RubricError(ValueError):
    """A rubric the host cannot apply; the message names the file and the offending part."""


@dataclass(frozen=True)
class Condition:
    """`metric op value`, e.g. critical >= 1."""

    metric: str
    op: str
    value: int | float


@dataclass(frozen=True)
class Rule:
    """A rule; `when` is None for the catch-all `otherwise`."""

    id: str
    when: Condition | None
    label: str


@dataclass(frozen=True)
class Gate:
    """A gate and its thresholds, kept as pairs so the rubric stays hashable."""

    id: str
    thresholds: tuple[tuple[str, int | float], ...]

    def threshold(self, name: str) -> int | float:
        """The named threshold (load_rubric guarantees every one the gate needs is there)."""
        return dict(self.thresholds)[name]


@dataclass(frozen=True)
class Sampler:
    """How the judge's frames are picked and encoded."""

    frames: int
    min_gap_s: int | float
    jpeg_quality: int


@dataclass(frozen=True)
class Rubric:
    """A validated rubric file; `sha256` is of its bytes, `name` its file name."""

    version: str
    axes: tuple[str, ...]
    rules: tuple[Rule, ...]
    gates: tuple[Gate, ...]
    sampler: Sampler
    sha256: str
    name: str


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


class _Checker:
    """Builds RubricErrors that name the file and where in it the problem is."""

    def __init__(self, name: str):
        self.name = name

    def fail(self, where: str, reason: str) -> RubricError:
        return RubricError(f"{self.name}: {where}: {reason}")

    def keys(self, obj: object, where: str, required: tuple[str, ...]) -> dict:
        """An object holding exactly `required`: an unknown key is a form the host does not know."""
        if not isinstance(obj, dict):
            raise self.fail(where, "must be a JSON object")
        missing = [k for k in required if k not in obj]
        if missing:
            raise self.fail(where, f"missing {', '.join(missing)}")
        unknown = sorted(k for k in obj if k not in required)
        if unknown:
            raise self.fail(where, f"unknown key {', '.join(unknown)} (known: {', '.join(required)})")
        return obj

    def array(self, value: object, where: str) -> list:
        if not isinstance(value, list) or not value:
            raise self.fail(where, "must be a non-empty list")
        return value


def _condition(check: _Checker, value: object, where: str) -> Condition | None:
    if value == OTHERWISE:
        return None
    if isinstance(value, str):
        raise check.fail(where, f"unknown condition {value!r} (known: {OTHERWISE!r} or an object)")
    obj = check.keys(value, where, ("metric", "op", "value"))
    if obj["metric"] not in METRICS:
        raise check.fail(where, f"unknown metric {obj['metric']!r} (known: {', '.join(METRICS)})")
    if obj["op"] not in OPS:
        raise check.fail(where, f"unknown op {obj['op']!r} (known: {', '.join(OPS)})")
    if not _is_number(obj["value"]):
        raise check.fail(where, "value must be a number")
    return Condition(obj["metric"], obj["op"], obj["value"])


def _rules(check: _Checker, value: object) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for i, item in enumerate(check.array(value, "rules")):
        where = f"rules[{i}]"
        obj = check.keys(item, where, ("id", "when", "label"))
        if not isinstance(obj["id"], str) or not _RULE_ID.fullmatch(obj["id"]):
            raise check.fail(where, "id must look like R1, R2, ...")
        if any(r.id == obj["id"] for r in rules):
            raise check.fail(where, f"duplicate rule id {obj['id']}")
        if obj["label"] not in LABELS:
            raise check.fail(where, f"unknown label {obj['label']!r} (known: {', '.join(LABELS)})")
        rules.append(Rule(obj["id"], _condition(check, obj["when"], f"{where}.when"), obj["label"]))
    # Rules are tried in order, so the catch-all must come last and only last: a rule after it
    # could never decide, and without it an episode could go unlabelled.
    catch_alls = [i for i, r in enumerate(rules) if r.when is None]
    if catch_alls != [len(rules) - 1]:
        raise check.fail("rules", f"exactly one {OTHERWISE!r} rule is needed, and it must be last")
    return tuple(rules)


def _gates(check: _Checker, value: object) -> tuple[Gate, ...]:
    gates: list[Gate] = []
    for i, item in enumerate(check.array(value, "gates")):
        where = f"gates[{i}]"
        obj = check.keys(item, where, ("id", "thresholds"))
        gate_id = obj["id"]
        if gate_id not in GATE_THRESHOLDS:
            raise check.fail(where, f"unknown gate id {gate_id!r} (known: {', '.join(GATE_THRESHOLDS)})")
        if any(g.id == gate_id for g in gates):
            raise check.fail(where, f"duplicate gate {gate_id}")
        needed = GATE_THRESHOLDS[gate_id]
        thresholds = check.keys(obj["thresholds"], f"{where}.thresholds ({gate_id})", needed)
        for key in needed:
            if not _is_number(thresholds[key]) or thresholds[key] < 0:
                raise check.fail(f"{where}.thresholds.{key}", "must be a non-negative number")
        gates.append(Gate(gate_id, tuple((k, thresholds[k]) for k in needed)))
    # Without this gate the host could not tell an undelivered episode from an unjudged one.
    if not any(g.id == NO_VIDEO for g in gates):
        raise check.fail("gates", f"the {NO_VIDEO} gate is required")
    return tuple(gates)


def _sampler(check: _Checker, value: object) -> Sampler:
    obj = check.keys(value, "sampler", ("frames", "min_gap_s", "jpeg_quality"))
    if not _is_int(obj["frames"]) or obj["frames"] < 1:
        raise check.fail("sampler.frames", "must be a positive integer")
    if not _is_number(obj["min_gap_s"]) or obj["min_gap_s"] < 0:
        raise check.fail("sampler.min_gap_s", "must be a non-negative number")
    if not _is_int(obj["jpeg_quality"]) or not 1 <= obj["jpeg_quality"] <= 100:
        raise check.fail("sampler.jpeg_quality", "must be an integer from 1 to 100")
    return Sampler(obj["frames"], obj["min_gap_s"], obj["jpeg_quality"])


def load_rubric(path: Path) -> Rubric:
    """Read and validate a rubric file; refuse (RubricError) any form the host does not know."""
    path = Path(path)
    check = _Checker(path.name)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RubricError(f"{path.name}: cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise RubricError(f"{path.name}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except ValueError as exc:  # not UTF-8, or NaN/Infinity
        raise RubricError(f"{path.name}: not valid JSON: {exc}") from None
    obj = check.keys(doc, "top level", ("version", "axes", "rules", "gates", "sampler"))
    version = obj["version"]
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise check.fail("version", "must be a string of dot-separated numbers, e.g. \"1.2\"")
    # rubric_in_force picks files by name, so a name that disagrees with the content would
    # silently put the wrong rubric in force.
    if path.name != f"rubric-v{version}.json":
        expected = f"rubric-v{version}.json"
        raise check.fail("version", f"{version!r} does not match the file name (expected {expected})")
    axes = obj["axes"]
    if not isinstance(axes, list) or len(axes) != len(AXES) or set(axes) != set(AXES):
        raise check.fail("axes", f"must be the six axes {', '.join(AXES)}")
    return Rubric(
        version=version,
        axes=tuple(axes),
        rules=_rules(check, obj["rules"]),
        gates=_gates(check, obj["gates"]),
        sampler=_sampler(check, obj["sampler"]),
        sha256=hashlib.sha256(raw).hexdigest(),
        name=path.name,
    )


def _numeric(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _rubric_files(folder: Path) -> dict[str, Path]:
    """version -> path of every rubric-v<version>.json directly in `folder`."""
    found: dict[str, Path] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("rubric-v*.json")):
        version = path.name[len("rubric-v") : -len(".json")]
        if not _VERSION.fullmatch(version):
            raise RubricError(f"{path.name}: the version in the file name is not dot-separated numbers")
        found[version] = path
    return found


def rubric_in_force(meta_dir: Path, version: str | None = None) -> Path:
    """The rubric file to apply: the newest in `meta_dir` by numeric version (1.10 > 1.9), or the
    named version from `meta_dir` or its archive (older rubrics are kept there for rehosting)."""
    meta_dir = Path(meta_dir)
    current = _rubric_files(meta_dir)
    if version is None:
        if not current:
            raise RubricError(f"{meta_dir.name}/: no rubric-v<version>.json found")
        return current[max(current, key=_numeric)]
    archived = _rubric_files(meta_dir / ARCHIVE_DIR)
    for found in (current, archived):
        if version in found:
            return found[version]
    available = sorted(set(current) | set(archived), key=_numeric)
    raise RubricError(
        f"rubric version {version!r} not found in {meta_dir.name}/ or {meta_dir.name}/{ARCHIVE_DIR}/;"
        f" available: {', '.join(available) or 'none'}"
    )
