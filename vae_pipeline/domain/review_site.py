"""The review site: static pages of every series and episode — the video with its facts, the
judge's frames, how the label was reached, the scrub report — for a maintainer to look at before
a release.

Pure: rows in, files out (no Dagster). Pages come from Jinja2 templates with autoescaping and
link to the staged videos and frames under the pipeline's home by relative paths, so the site
opens from `file://` or a local server with no network. A series' pages are rendered again only
when what they show changed (a fingerprint per series in `.state.json`); the index every time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import jinja2

from vae_pipeline.domain.files import write_if_changed
from vae_pipeline.domain.host import gate_report
from vae_pipeline.domain.rubric import Rubric
from vae_pipeline.domain.scrub import ScrubConfig, compiled_kinds

TEMPLATES = Path(__file__).resolve().parent.parent / "review" / "templates"
SITE_DIR = "review"  # under the pipeline's home
STATE = ".state.json"
LEADERBOARD_CHART = "leaderboard.png"
LABELS = ("PASS", "PASS_WITH_NITS", "FAIL", "unjudged")
COUNT_COLUMNS = ("turns", "tool_calls", "subagent_tool_calls", "images_read", "renders", "snapshots", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_creation_tokens")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class CheckResult:
    """The latest result of one blocking check; `passed` None when it never ran."""

    name: str
    about: str
    passed: bool | None
    description: str | None


@dataclass(frozen=True)
class Leaderboard:
    """What the dataset folder holds of the leaderboard (contract 4), when it holds any."""

    chart: Path | None
    ratings: list[dict]
    agreement: list[dict]


@dataclass
class SiteInputs:
    rows: list[dict]  # episode_table rows, every series
    published: set[str]  # ids in the dataset folder's rows
    withheld: dict[str, str]  # episode or series id -> reason
    checks: list[CheckResult]
    history: dict[str, list[dict]]  # episode id -> label changes, oldest first
    rubric: Rubric
    leaderboard: Leaderboard | None = None
    scrub: ScrubConfig = field(default_factory=ScrubConfig)  # the harness's host and user names

    @functools.cached_property
    def finding_patterns(self) -> list[tuple[re.Pattern[bytes], bytes]]:
        """The scrub's kinds whose values stay in the files as findings (e-mails, IPs, leftover
        credentials, host and user names as plain words): a page shows their kind, never a value."""
        return [(kind.regex, f"<finding:{kind.name}>".encode())
                for kind in compiled_kinds(self.scrub.hostname, self.scrub.username)
                if kind.action == "finding" or kind.config_word]

    def masked(self, value):
        """`value` (a string, or lists and objects of them) with every finding's value masked."""
        if isinstance(value, str):
            data = value.encode()
            for regex, marker in self.finding_patterns:
                data = regex.sub(marker, data)
            return data.decode()
        if isinstance(value, list):
            return [self.masked(item) for item in value]
        if isinstance(value, dict):
            return {key: self.masked(item) for key, item in value.items()}
        return value


@dataclass
class RenderReport:
    index: Path
    series_rendered: list[str] = field(default_factory=list)
    series_unchanged: list[str] = field(default_factory=list)
    series_removed: list[str] = field(default_factory=list)
    pages_written: int = 0


def page_name(episode_id: str) -> str:
    """A file name for an episode's page (valid ids are already safe; this keeps any id inside)."""
    return _UNSAFE.sub("_", episode_id) + ".html"


@functools.cache
def _environment(cache: Path) -> jinja2.Environment:
    """Templates compiled once per process, and their bytecode kept in `cache` between processes."""
    cache.mkdir(parents=True, exist_ok=True)
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              bytecode_cache=jinja2.FileSystemBytecodeCache(str(cache)))


def templates_version() -> str:
    """A hash of every template and static file: a changed template re-renders every page."""
    digest = hashlib.sha256()
    for path in sorted(p for p in TEMPLATES.rglob("*") if p.is_file()):
        digest.update(path.relative_to(TEMPLATES).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:24]


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target, start)).as_posix()


# ---------------------------------------------------------------- what a page shows


def _label(row: dict) -> str:
    return row.get("label") or "unjudged"


def _rule_text(rubric: Rubric, rule_id: str | None) -> str | None:
    rule = next((r for r in rubric.rules if r.id == rule_id), None)
    if rule is None:
        return None
    when = "otherwise" if rule.when is None else f"{rule.when.metric} {rule.when.op} {rule.when.value:g}"
    return f"{rule.id}: {when} → {rule.label}"


def _metrics(row: dict, rubric: Rubric) -> dict | None:
    scores = [row.get(f"score_{axis}") for axis in rubric.axes]
    if any(s is None for s in scores):
        return None
    return {"critical": row["defects_critical"], "major": row["defects_major"], "minor": row["defects_minor"],
            "score_min": min(scores), "score_mean": round(sum(scores) / len(scores), 3)}


def _facts(row: dict) -> dict | None:
    if row.get("video_ok") is None:
        return None
    return {"video_ok": row["video_ok"], "video_duration_s": row["video_duration_s"], "fps": row["fps"],
            "width": row["width"], "height": row["height"], "black_ranges": row["black_ranges"] or [],
            "freeze_ranges": row["freeze_ranges"] or [], "still": row["still"], "loop_seam": row["loop_seam"],
            "aspect": row["video_aspect"]}


def _mark(kind: str, start: float, end: float | None, text: str, duration: float) -> dict:
    """One clickable mark of the timeline, placed in percent of the duration."""
    left = min(max(start / duration, 0.0), 1.0) * 100
    width = None if end is None else max(min(end / duration, 1.0) * 100 - left, 0.6)
    span = f"{start:.3f}–{end:.3f} s" if end is not None else f"{start:.3f} s"
    return {"kind": kind, "seek": round(start, 3), "left": round(left, 3),
            "width": None if width is None else round(width, 3), "title": f"{text} {span}".strip()}


def _timeline(row: dict, brief: dict) -> dict:
    duration = row.get("video_duration_s") if row.get("video_ok") else None
    duration = float(duration or brief.get("duration_s") or 1.0)
    hold = brief.get("hold")
    tracks = [
        ("black", [_mark("black", s, e, "black", duration) for s, e in row.get("black_ranges") or []]),
        ("freeze", [_mark("freeze", s, e, "freeze", duration) for s, e in row.get("freeze_ranges") or []]),
        ("beats", [_mark("beat", b["start_s"], b["end_s"], b["name"], duration) for b in brief.get("beats") or []]),
        ("hold", [_mark("hold", hold["start_s"], hold["end_s"], "hold", duration)] if hold else []),
        ("events", [_mark("event", e["t_s"], None, e["name"], duration) for e in brief.get("events") or []]),
        ("criteria", [_mark("criterion", c["t_s"], None, c["text"], duration)
                      for c in brief.get("success_criteria") or []]),
        ("judge frames", [_mark("frame", f["t_s"], None, f"frame {i + 1}: {f['reason']}", duration)
                          for i, f in enumerate(row.get("judge_frames") or [])]),
    ]
    return {"duration": duration, "tracks": [{"name": name, "marks": marks} for name, marks in tracks]}


def _frames(row: dict, to_home: str) -> list[dict]:
    if not row.get("contact_sheet"):
        return []
    folder = Path(row["contact_sheet"]).parent.as_posix()
    return [{"src": f"{to_home}/{folder}/f{i:02d}.jpg", "t_s": f["t_s"], "reason": f["reason"], "number": i + 1}
            for i, f in enumerate(row.get("judge_frames") or [])]


def _scrub(row: dict, inputs: SiteInputs) -> dict | None:
    """The scrub report: counts by kind, findings by file, line and kind — never a value."""
    if not row.get("bundle_parts"):
        return None
    parts = json.loads(row["bundle_parts"])
    scrub = parts["scrub"]
    return {
        "placeholders": scrub["placeholders"], "redacted": scrub["redacted"],
        "redacted_keys": parts["redacted_keys"],
        "findings": [{"file": inputs.masked(f["file"]), "line": f["line"], "kind": f["kind"], "allowed": f["allowed"]}
                     for f in scrub["findings"]],
        "slimmed": parts["slimmed"], "excluded": inputs.masked(parts["excluded"]),
        "vendor_files": [inputs.masked(v["name"]) for v in parts["vendor_files"]],
        "manifest": row["archive"][: -len(".tar.zst")] + ".json" if row.get("archive") else None,
    }


def episode_page(row: dict, inputs: SiteInputs, to_home: str) -> dict:
    """Everything an episode's page shows, as plain values (also what its fingerprint is made of)."""
    brief = inputs.masked(json.loads(row["brief"])) if row.get("brief") else {}
    withheld = inputs.withheld.get(row["id"]) or inputs.withheld.get(row["series"])
    return {
        "id": row["id"], "series": row["series"], "page": page_name(row["id"]),
        "title": brief.get("title"), "family": brief.get("family"), "aspect": row.get("aspect"),
        "duration_s": row.get("duration_s"), "label": _label(row), "host_rule": row.get("host_rule"),
        "gates_failed": row.get("host_gates_failed") or [], "positive_eligible": row.get("positive_eligible"),
        "harness_error": row.get("harness_error"), "result_status": row.get("result_status"),
        "warnings": inputs.masked(row.get("warnings") or []), "published": row["id"] in inputs.published, "withheld": withheld,
        "video": f"{to_home}/{row['staged_video']}" if row.get("staged_video") else None,
        "video_ok": row.get("video_ok"), "video_error": row.get("video_error"),
        "video_duration_s": row.get("video_duration_s"), "fps": row.get("fps"), "width": row.get("width"),
        "height": row.get("height"), "video_aspect": row.get("video_aspect"),
        "contact_sheet": f"{to_home}/{row['contact_sheet']}" if row.get("contact_sheet") else None,
        "timeline": _timeline(row, brief),
        "frames": _frames(row, to_home),
        "verdict": {
            "rule": _rule_text(inputs.rubric, row.get("host_rule")),
            "metrics": _metrics(row, inputs.rubric),
            "scores": {axis: row.get(f"score_{axis}") for axis in inputs.rubric.axes},
            "gates": gate_report(_facts(row), bool(row.get("delivered")), brief, inputs.rubric) if brief else [],
            "judge_model": row.get("judge_model"), "judge_verdict": row.get("judge_verdict"),
            "judged_at": row.get("judged_at"), "judge_rubric_version": row.get("rubric_version"),
            "host_rubric_version": row.get("host_rubric_version"), "stored_host_label": row.get("stored_host_label"),
            "previous_final_label": row.get("previous_final_label"), "rehosted_at": row.get("rehosted_at"),
            "history": inputs.history.get(row["id"], []),
        },
        "counts": [(name, row.get(name)) for name in COUNT_COLUMNS],
        "scrub": _scrub(row, inputs),
        "brief": brief,
        "brief_json": json.dumps(brief, ensure_ascii=False),
    }


def series_summary(series: str, rows: list[dict], inputs: SiteInputs) -> dict:
    """What the index and the series page's header say about a series, from its rows alone."""
    valid = [r for r in rows if r["valid"]]
    return {"id": series, "status": rows[0]["series_status"], "withheld": inputs.withheld.get(series),
            "valid": len(valid), "invalid": len(rows) - len(valid), "labels": _label_counts(valid),
            "published": sum(1 for r in valid if r["id"] in inputs.published)}


def series_page(series: str, rows: list[dict], inputs: SiteInputs, home: Path, out: Path) -> dict:
    """The series page and its episodes' pages; paths to the home are relative to each page."""
    valid = [r for r in rows if r["valid"]]
    episodes = [episode_page(r, inputs, _relative(home, out / "episodes" / series)) for r in valid]
    from_series = _relative(home, out / "series")
    for episode, row in zip(episodes, valid, strict=True):
        episode["thumbnail"] = f"{from_series}/{row['contact_sheet']}" if row.get("contact_sheet") else None
    return {
        **series_summary(series, rows, inputs),
        "episodes": episodes,
        "invalid": [inputs.masked({"id": r["id"], "source": r["source"], "file": r["error_file"],
                                   "reason": r["error_reason"]}) | {"line": r["error_line"]}
                    for r in rows if not r["valid"]],
    }


def _label_counts(rows: list[dict]) -> dict[str, int]:
    counts = Counter(_label(r) for r in rows)
    return {label: counts.get(label, 0) for label in LABELS}


def _why_not_published(summary: dict, blocking: list[str]) -> str:
    if summary["withheld"]:
        return f"withheld: {summary['withheld']}"
    if summary["status"] != "completed":
        return f"series is {summary['status']}: only completed series are published"
    if blocking:
        return "in the dataset folder, but publishing is refused until these checks pass: " + ", ".join(blocking)
    if not summary["published"]:
        return "no valid episode to publish"
    return ""


def _index_entry(summary: dict, checks: list[CheckResult]) -> dict:
    """The index's line for a series. The release is one commit, so a failing blocking check
    holds back every series in it."""
    in_release = summary["status"] == "completed" and not summary["withheld"]
    blocking = [c.name for c in checks if c.passed is False] if in_release else []
    return {**summary, "episodes": summary["valid"] + summary["invalid"], "blocking": blocking,
            "why_not": _why_not_published(summary, blocking)}


def _series_fingerprint(version: str, series: str, rows: list[dict], inputs: SiteInputs, out: Path) -> str:
    """A hash of everything a series' pages are made from: its rows, what is said of them
    elsewhere (published, withheld, label history), the rubric, the templates and the site's place."""
    ids = [r["id"] for r in rows]
    return _fingerprint(version, str(out), inputs.rubric.sha256, inputs.scrub, rows, inputs.withheld.get(series),
                        [(i in inputs.published, inputs.withheld.get(i), inputs.history.get(i)) for i in ids])


def _leaderboard_tables(board: Leaderboard) -> dict:
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in board.ratings:
        groups.setdefault((row["source"], row["axis"]), []).append(row)
    return {"chart": board.chart is not None,
            "tables": [{"source": s, "axis": a, "rows": rows} for (s, a), rows in groups.items()],
            "agreement": board.agreement}


# ---------------------------------------------------------------- writing


def _fingerprint(*parts: object) -> str:
    """Pickle is fast; its bytes can differ for equal values (shared objects), which only costs a
    needless re-render, never a missed one."""
    return hashlib.sha256(pickle.dumps(parts, protocol=5)).hexdigest()[:24]


def _read_state(out: Path) -> dict[str, str]:
    try:
        return json.loads((out / STATE).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _copy_static(out: Path) -> int:
    return sum(write_if_changed(out / "static" / path.name, path.read_bytes(), durable=False)
               for path in sorted((TEMPLATES / "static").iterdir()))


def _render(env: jinja2.Environment, template: str, path: Path, **context: object) -> int:
    # not fsynced one by one: render_site syncs once before it records what it wrote
    return write_if_changed(path, env.get_template(template).render(**context).encode(), durable=False)


def _render_series(env: jinja2.Environment, page: dict, out: Path) -> int:
    written = _render(env, "series.html", out / "series" / f"{page['id']}.html", series=page, site="..")
    folder = out / "episodes" / page["id"]
    for episode in page["episodes"]:
        written += _render(env, "episode.html", folder / episode["page"], episode=episode, site="../..")
    keep = {e["page"] for e in page["episodes"]}
    for stale in folder.glob("*.html") if folder.exists() else []:
        if stale.name not in keep:
            stale.unlink()
    return written


def _remove_series(out: Path, series: str) -> None:
    (out / "series" / f"{series}.html").unlink(missing_ok=True)
    shutil.rmtree(out / "episodes" / series, ignore_errors=True)


def render_site(inputs: SiteInputs, home: Path, out: Path) -> RenderReport:
    """Write the site under `out` (inside `home`, the pipeline's home that holds the staged videos
    and frames). Series whose pages would come out the same are left as they are."""
    env = _environment(out / ".cache")
    version = templates_version()
    state = _read_state(out)
    report = RenderReport(index=out / "index.html")
    report.pages_written += _copy_static(out)
    by_series: dict[str, list[dict]] = {}
    for row in sorted(inputs.rows, key=lambda r: (r["series"], r["id"])):
        by_series.setdefault(row["series"], []).append(row)
    entries = []
    for series, rows in by_series.items():
        fingerprint = _series_fingerprint(version, series, rows, inputs, out)
        if state.get(series) == fingerprint and (out / "series" / f"{series}.html").exists():
            report.series_unchanged.append(series)
        else:
            report.pages_written += _render_series(env, series_page(series, rows, inputs, home, out), out)
            state[series] = fingerprint
            report.series_rendered.append(series)
        entries.append(_index_entry(series_summary(series, rows, inputs), inputs.checks))
    for series in sorted(set(state) - set(by_series)):
        _remove_series(out, series)
        del state[series]
        report.series_removed.append(series)
    board = None
    if inputs.leaderboard is not None:
        board = _leaderboard_tables(inputs.leaderboard)
        if inputs.leaderboard.chart is not None:
            report.pages_written += write_if_changed(out / LEADERBOARD_CHART, inputs.leaderboard.chart.read_bytes(),
                                                     durable=False)
    if board is None or not board["chart"]:
        (out / LEADERBOARD_CHART).unlink(missing_ok=True)
    report.pages_written += _render(
        env, "index.html", report.index, site=".", series=entries, checks=inputs.checks, leaderboard=board,
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), rubric_version=inputs.rubric.version)
    if report.pages_written:
        os.sync()  # the pages are on disk before the state says they were rendered
    write_if_changed(out / STATE, json.dumps(state, indent=2, sort_keys=True).encode())
    return report
