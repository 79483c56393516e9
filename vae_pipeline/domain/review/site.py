"""The review site: static pages of every series and episode — the video with its facts, the
judge's frames, how the label was reached, the scrub report — for a maintainer to look at before
a release.

Pure: rows in, files out (no Dagster). Pages come from Jinja2 templates with autoescaping and
link to the staged videos and frames under the pipeline's home by relative paths, so the site
opens from `file://` or a local server with no network. A series' pages are rendered again only
when what they show changed (a fingerprint per series in `.state/<series>.json`), and its search
entries (`search/<series>.js`) rewritten only when they changed; the index every time, from each
series' part as last rendered unless it changed (`.cache/index-parts.json`, this machine's). A new
series so costs its own files and the index, whatever the site holds.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import pickle
import re
import shlex
import shutil
import threading
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import markupsafe
import polars as pl

from vae_pipeline.domain.files import make_durable, noting_writes, write_if_changed
from vae_pipeline.domain.verdicts.host import gate_report
from vae_pipeline.domain.leaderboard.tables import shown_ranks
from vae_pipeline.domain.review.transcript import (
    MESSAGES,
    SESSION,
    TOOL_EVENTS,
    UnreadableArchive,
    agent_of,
    each_call,
    finding_context,
    judge_answer,
    lines_of,
    paged,
    read_archive,
    split_threads,
    transcript,
)
from vae_pipeline.domain.verdicts.rubric import Rubric
from vae_pipeline.domain.scrub.texts import ScrubConfig, compiled_kinds
from vae_pipeline.domain.table_versions import series_versions

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parents[2] / "review" / "templates"
SITE_DIR = "review"  # under the pipeline's home
STATE = ".state"  # <series>.json: the fingerprint of the series' pages as last rendered, each transcript's key
LEGACY = (".state.json", "search.html", "search.json")  # the site's whole-site files before they went per series
LEADERBOARD_CHART = "leaderboard.png"
LABELS = ("PASS", "PASS_WITH_NITS", "FAIL", "unjudged")
COUNT_COLUMNS = ("turns", "tool_calls", "subagent_tool_calls", "images_read", "renders", "snapshots", "input_tokens", "output_tokens",
                 "cache_read_tokens", "cache_creation_tokens")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
SEARCH = "search"  # <series>.js: the series' entries of the index page's search
# the reasons a failed check's row on the index lists: the triage above it lists every one, by
# episode, and a check that names every episode of a large release would double the index
INDEX_ITEMS_SHOWN = 50
BYTECODE = ".cache"  # the templates compiled, for this machine's next render
INDEX_PARTS = "index-parts.json"  # in BYTECODE: each series' part of the index as last rendered
# what the scrub wrote (placeholders, redactions) and what the site masks (findings), once escaped
_MARKERS = re.compile(r"&lt;(home|user|hostname|person|redacted:[A-Za-z0-9_]+|finding:[A-Za-z0-9_]+)&gt;")
GATE_MEANING = {
    "no_video": "no decodable out.mp4 was delivered",
    "duration": "the video's length is off the brief's by more than the allowed margin",
    "aspect": "the video's aspect ratio is not the brief's",
    "black": "a black stretch longer than the threshold",
    "freeze": "a frozen stretch longer than the threshold, outside the brief's hold",
    "still": "the whole video is one still picture",
    "loop_seam": "a looping brief whose last frame differs too much from its first",
}


@dataclass(frozen=True)
class CheckResult:
    """The latest result of one publish check; `passed` None when not evaluated (never run, or its run ended first)."""

    name: str
    about: str
    passed: bool | None
    description: str | None
    items: list[dict] = field(default_factory=list)  # {series, id, text}: what it says by episode (id None: of none)


@dataclass(frozen=True)
class Leaderboard:
    """What the dataset folder holds of the leaderboard (contract 4), when it holds any."""

    chart: Path | None
    ratings: list[dict]
    agreement: list[dict]


@dataclass
class SiteInputs:
    rows: pl.DataFrame  # episode_table rows, every series
    published: set[str]  # ids in the dataset folder's rows
    withheld: dict[str, str]  # episode or series id -> reason
    checks: list[CheckResult]
    history: dict[str, list[dict]]  # episode id -> label changes, oldest first
    rubric: Rubric
    leaderboard: Leaderboard | None = None
    scrub: ScrubConfig = field(default_factory=ScrubConfig)  # the harness's host and user names
    warnings: list[CheckResult] = field(default_factory=list)  # the build's checks that do not block a release

    @functools.cached_property
    def finding_kinds(self) -> list:
        """The scrub's kinds whose values stay in the files as findings (e-mails, IPs, leftover
        credentials, host and user names as plain words): a page shows their kind, never a value."""
        return [kind for kind in compiled_kinds(self.scrub.hostname, self.scrub.usernames)
                if kind.action == "finding" or kind.config_word]

    @functools.cached_property
    def suspicious(self) -> re.Pattern[bytes]:
        """Any of those kinds' triggers, one of which every match holds: text without one is left
        as it is after one scan (most of a transcript), not one per kind."""
        return re.compile(b"|".join(b"(?:" + t.pattern + b")" for kind in self.finding_kinds for t in kind.triggers))

    def masked(self, value, seen: dict[str, str] | None = None):
        """`value` (a string, or lists and objects of them) with every finding's value masked;
        with `seen`, each string once (the checks' items repeat series, ids and texts)."""
        if isinstance(value, str):
            if seen is None:
                return self._mask(value)
            if value not in seen:
                seen[value] = self._mask(value)
            return seen[value]
        if isinstance(value, list):
            return [self.masked(item, seen) for item in value]
        if isinstance(value, dict):
            return {key: self.masked(item, seen) for key, item in value.items()}
        return value

    def _mask(self, text: str) -> str:
        data = text.encode()
        if not self.suspicious.search(data):
            return text
        for kind in self.finding_kinds:
            data = kind.regex.sub(f"<finding:{kind.name}>".encode(), data)
        return data.decode()


@dataclass
class RenderReport:
    index: Path
    series_rendered: list[str] = field(default_factory=list)
    series_unchanged: list[str] = field(default_factory=list)
    series_removed: list[str] = field(default_factory=list)
    pages_written: int = 0


def page_stem(episode_id: str) -> str:
    """A file name for an episode (valid ids are already safe; this keeps any id inside)."""
    return _UNSAFE.sub("_", episode_id)


def page_name(episode_id: str) -> str:
    return page_stem(episode_id) + ".html"


def log_slug(member: str) -> str:
    """The name a log member's transcript pages start with."""
    agent = agent_of(member)
    if agent is not None:
        return "subagent-" + _UNSAFE.sub("_", agent)
    return {MESSAGES: "transcript", SESSION: "session", TOOL_EVENTS: "tool-events"}.get(member,
                                                                                        _UNSAFE.sub("_", member))


def log_page(member: str, number: int, thread: int | None = None) -> str:
    """A page of a log member's transcript (`thread`: of a subagent thread of it too long to show
    under its call), in the folder named after the episode next to its page."""
    return f"{log_slug(member)}-{number}.html" if thread is None else f"{log_slug(member)}-agent-{thread}-{number}.html"


def invalid_page(episode_id: str) -> str:
    return f"invalid/{page_name(episode_id)}"


def marked(text: object) -> markupsafe.Markup:
    """`text` escaped, with what the scrub wrote and what the site masked highlighted."""
    def mark(match: re.Match[str]) -> str:
        kind = "finding" if match[1].startswith("finding:") else "scrubbed"
        return f'<mark class="{kind}">{match[0]}</mark>'
    return markupsafe.Markup(_MARKERS.sub(mark, str(markupsafe.escape(text))))


def clipped_html(value: dict) -> markupsafe.Markup:
    """A text `clipped` cut, marked, with a note of what the cut left out (a filter: a template
    macro per text costs more than the text)."""
    html = marked(value["text"])
    if value["hidden"]:
        html += markupsafe.Markup(f'<span class="clipped">… {value["hidden"]:,} more characters not shown '
                                  f'({value["size"]:,} in all; the archive holds them)</span>')
    return html


def line_at(line: int, anchor: bool, noted: list[int]) -> markupsafe.Markup:
    """The attributes of the element that shows `line` of a log: `data-line`, the `L<line>` target
    on its first element, and `data-has-finding` when a finding is on it."""
    return markupsafe.Markup(f' data-line="{int(line)}"' + (f' id="L{int(line)}"' if anchor else "")
                             + (" data-has-finding" if line in noted else ""))


@functools.cache
def _environment(cache: Path) -> jinja2.Environment:
    """Templates compiled once per process, and their bytecode kept in `cache` between processes.
    Jinja is imported here, by a render: planning asks only for `templates_version`."""
    import jinja2

    cache.mkdir(parents=True, exist_ok=True)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             bytecode_cache=jinja2.FileSystemBytecodeCache(str(cache)))
    env.filters.update(marked=marked, clipped=clipped_html, line_at=line_at)
    return env


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


def decision(row: dict, rubric: Rubric) -> dict:
    """What decided the label, for a table's rule column: the rule, or the failed gates when they
    made it FAIL (then the rule's own label is a note, never shown as the outcome)."""
    rule = next((r for r in rubric.rules if r.id == row.get("host_rule")), None)
    gates = row.get("host_gates_failed") or []
    if gates and _label(row) == "FAIL":
        return {"text": f"gate {', '.join(gates)} → FAIL",
                "note": f"rule {rule.id} alone: {rule.label}" if rule is not None and rule.label != "FAIL" else None}
    if rule is None:
        return {"text": row.get("host_rule") or "–", "note": None}
    return {"text": f"{rule.id} → {rule.label}", "note": None}


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
        "decision": decision(row, inputs.rubric),
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
        "actor": inputs.masked({"model": row.get("actor_model_id"), "version": row.get("claude_code_version"),
                                "series_model": row.get("actor_model"), "cli": row.get("actor_cli")}),
        "scrub": _scrub(row, inputs),
        "brief": brief,
        "brief_json": json.dumps(brief, ensure_ascii=False),
    }


def series_summaries(table: pl.DataFrame, inputs: SiteInputs) -> dict[str, dict]:
    """What the index and each series page's header say about every series, from its rows alone
    (in one pass over the table, not a row at a time)."""
    if not table.height:
        return {}
    valid = pl.col("valid").fill_null(False)
    label = pl.col("label").fill_null("") if "label" in table.columns else pl.lit("")
    label = pl.when(label == "").then(pl.lit("unjudged")).otherwise(label)
    counted = table.group_by("series", maintain_order=True).agg(
        status=pl.col("series_status").first(), episodes=pl.len(), valid=valid.sum(),
        published=(valid & pl.col("id").is_in(sorted(inputs.published))).sum(),
        **{name: (valid & (label == name)).sum() for name in LABELS})
    return {row["series"]: {"id": row["series"], "status": row["status"], "withheld": inputs.withheld.get(row["series"]),
                            "valid": row["valid"], "invalid": row["episodes"] - row["valid"],
                            "labels": {name: row[name] for name in LABELS}, "published": row["published"]}
            for row in counted.iter_rows(named=True)}


def series_page(summary: dict, rows: list[dict], inputs: SiteInputs, home: Path, out: Path) -> dict:
    """The series page (headed by its `series_summaries` entry) and its episodes' pages; paths to
    the home are relative to each page."""
    series = summary["id"]
    valid = [r for r in rows if r["valid"]]
    episodes = [episode_page(r, inputs, _relative(home, out / "episodes" / series)) for r in valid]
    from_series = _relative(home, out / "series")
    for episode, row in zip(episodes, valid, strict=True):
        episode["thumbnail"] = f"{from_series}/{row['contact_sheet']}" if row.get("contact_sheet") else None
    return {
        **summary,
        "episodes": episodes,
        "invalid": [inputs.masked({"id": r["id"], "source": r["source"], "file": r["error_file"],
                                   "reason": r["error_reason"]}) | {"line": r["error_line"], "page": invalid_page(r["id"]),
                                                                     "series": series}
                    for r in rows if not r["valid"]],
    }


def _why_not_published(summary: dict, own: list[str], release: list[str]) -> str:
    if summary["withheld"]:
        return f"withheld: {summary['withheld']}"
    if summary["status"] != "completed":
        return f"series is {summary['status']}: only completed series are published"
    if own or release:
        said = ([f"its own: {', '.join(own)}"] if own else []) + \
            ([f"the release's as a whole: {', '.join(release)}"] if release else [])
        return "in the dataset folder, but publishing is refused until these checks pass — " + "; ".join(said)
    if not summary["published"]:
        return "no valid episode to publish"
    return ""


def _index_entry(summary: dict, triaged: dict) -> dict:
    """The index's line for a series: the failing checks that name it, and those that name no
    series (the release is one commit, so they hold back every series in it)."""
    in_release = summary["status"] == "completed" and not summary["withheld"]
    group = triaged["groups"].get(summary["id"])
    own = group["checks"] if in_release and group else []
    release = triaged["release"] if in_release else []
    return {**summary, "episodes": summary["valid"] + summary["invalid"], "blocking": own + release,
            "why_not": _why_not_published(summary, own, release)}


def triage(checks: list[CheckResult], links: dict[str, str]) -> dict:
    """What blocks the release, by series: each episode a failing check names, with every check
    it fails and what each says; what a check says of a series as a whole; and the failing checks
    that name no series (about the release as a whole)."""
    groups: dict[str, dict] = {}
    release = []
    for check in checks:
        if check.passed is not False:
            continue
        if not any(item.get("series") for item in check.items):
            release.append(check.name)
        for item in check.items:
            if not item.get("series"):
                continue
            group = groups.setdefault(item["series"], {"series": item["series"], "episodes": {}, "itself": {},
                                                       "checks": []})
            if check.name not in group["checks"]:
                group["checks"].append(check.name)
            key = f"{item['series']}/{item['id']}" if item.get("id") else None
            said = group["episodes"].setdefault(key, {"id": item["id"], "href": links.get(key), "checks": {}})["checks"] \
                if key else group["itself"]
            said.setdefault(check.name, []).append(item["text"])
    for group in groups.values():
        group["rows"] = sorted(group.pop("episodes").values(), key=lambda e: e["id"])
    return {"groups": dict(sorted(groups.items())), "release": release,
            "episodes": sum(len(g["rows"]) for g in groups.values())}


def _series_fingerprints(version: str, table: pl.DataFrame, inputs: SiteInputs, out: Path) -> dict[str, str]:
    """Per series, a hash of everything its pages are made from: its rows (their version), what is
    said of them elsewhere (published, withheld, label history), the rubric, the templates and
    the site's place."""
    if not table.height:
        return {}
    versions = series_versions(table)
    ids = dict(table.group_by("series", maintain_order=True).agg("id").iter_rows())
    return {series: _fingerprint(version, str(out), inputs.rubric.sha256, inputs.scrub, versions[series],
                                 inputs.withheld.get(series),
                                 [(i in inputs.published, inputs.withheld.get(i), inputs.history.get(i))
                                  for i in ids[series]])
            for series in versions}


def leaderboard_tables(board: Leaderboard) -> dict:
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in board.ratings:
        groups.setdefault((row["source"], row["axis"]), []).append(row)
    return {"chart": board.chart is not None,
            "tables": [{"source": s, "axis": a, "rows": [r | {"shown_rank": rank}
                                                          for r, rank in zip(rows, shown_ranks(rows), strict=True)]}
                       for (s, a), rows in groups.items()],
            "agreement": board.agreement}


def legend(rubric: Rubric) -> dict:
    """What the rule codes and gate names mean, from the rubric in force."""
    return {"rules": [_rule_text(rubric, rule.id) for rule in rubric.rules],
            "gates": [{"gate": g.id, "meaning": GATE_MEANING.get(g.id, ""),
                       "thresholds": ", ".join(f"{k} {v:g}" for k, v in g.thresholds)} for g in rubric.gates]}


def episode_links(episodes: Iterable[tuple[str, str, bool]]) -> dict[str, str]:
    """`series/id` -> the page of that episode (its invalid page when it is invalid), from the
    site's root, for each (series, id, valid)."""
    return {f"{series}/{episode_id}": f"episodes/{series}/"
            + (page_name(episode_id) if valid else invalid_page(episode_id)) for series, episode_id, valid in episodes}


def search_index(rows: list[dict], inputs: SiteInputs) -> list[dict]:
    """One entry per episode of every series, valid or not: what the search page finds it by."""
    links = episode_links((r["series"], r["id"], r["valid"]) for r in rows)
    entries = []
    for row in rows:
        brief = json.loads(row["brief"]) if row.get("brief") else {}
        findings = [f"{f['file']}:{f['line']} {f['kind']}" for f in row.get("findings") or [] if not f["allowed"]]
        entries.append(inputs.masked({
            "id": row["id"], "series": row["series"], "title": str(brief.get("title") or ""),
            "family": str(brief.get("family") or ""),
            "label": _label(row) if row["valid"] else "invalid",
            "rule": decision(row, inputs.rubric)["text"] if row["valid"] and row.get("host_rule") else "",
            "gates": list(row.get("host_gates_failed") or []), "findings": findings,
            "reason": "" if row["valid"] else str(row.get("error_reason") or ""),
        }) | {"href": links[f"{row['series']}/{row['id']}"], "turns": row.get("turns"),
              "tool_calls": row.get("tool_calls"), "duration_s": row.get("video_duration_s")})
    return entries


def _log_order(member: str) -> tuple[int, str]:
    return ({MESSAGES: 0, SESSION: 1, TOOL_EVENTS: 3}.get(member, 2), member)


def archive_review(row: dict, inputs: SiteInputs, home: Path) -> dict | None:
    """What the staged archive will publish of an episode: every log member's transcript, the
    judge's answer, each finding in its line; None for an episode with no archive."""
    if not row.get("staged_archive") or not (home / row["staged_archive"]).is_file():
        return None
    findings = json.loads(row["bundle_parts"])["scrub"]["findings"] if row.get("bundle_parts") else []
    try:
        view = read_archive(home / row["staged_archive"], {f["file"] for f in findings})
    except UnreadableArchive as exc:
        return {"error": f"the staged archive cannot be read ({exc}): run `vae build` again"}
    logs = {member: transcript(view.logs[member], inputs.masked) for member in sorted(view.logs, key=_log_order)}
    shown = []
    for finding in findings:
        context = finding_context(view.members.get(finding["file"]), finding, inputs.finding_kinds, inputs.masked)
        where = shlex.quote(f"{inputs.masked(finding['file'])}:{finding['line']}")
        shown.append({"file": inputs.masked(finding["file"]), "member": finding["file"], "line": finding["line"],
                      "kind": finding["kind"], "value_count": len(finding["sha256s"]), "allowed": finding["allowed"],
                      "archive_line": context["line"], "before": context["before"], "after": context["after"],
                      "href": None, "command": f'vae allow {row["id"]} {where} {finding["kind"]} --reason "…"'})
    images = set().union(*(log.images for log in logs.values()))
    return {"judge": judge_answer(view.judge, inputs.masked), "findings": shown, "logs": logs,
            "images": {path: view.images[path] for path in sorted(images) if path in view.images}}


# ---------------------------------------------------------------- writing


def _fingerprint(*parts: object) -> str:
    """Pickle is fast; its bytes can differ for equal values (shared objects), which only costs a
    needless re-render, never a missed one."""
    return hashlib.sha256(pickle.dumps(parts, protocol=5)).hexdigest()[:24]


# a state file begins with its fingerprint (`render_site` writes it first)
_STATE_HEAD = re.compile(rb'\{"fingerprint": "([0-9a-f]{24})"')


def _read_fingerprints(out: Path) -> dict[str, str]:
    """Each series' fingerprint as last rendered, from the head of its state file alone: what an
    episode's page said is parsed only for a series rendered again (see `_read_episodes_said`)."""
    fingerprints = {}
    for path in (out / STATE).glob("*.json"):
        with path.open("rb") as handle:
            head = _STATE_HEAD.match(handle.read(64))
        if head is not None:  # else a damaged or older state file: its series is rendered again
            fingerprints[path.stem] = head.group(1).decode()
    return fingerprints


def _read_episodes_said(out: Path, series: str) -> dict[str, dict]:
    """Per episode of a series as last rendered, its transcript key and what its page said of the
    archive (none when the state file is gone or damaged: every transcript is rendered again)."""
    try:
        record = json.loads((out / STATE / f"{series}.json").read_bytes())
    except (OSError, ValueError):
        return {}
    said = record.get("episodes") if isinstance(record, dict) else None
    return said if isinstance(said, dict) else {}


def _search_script(entries: list[dict]) -> bytes:
    """A series' search entries as a script the index loads (a `file://` page cannot fetch JSON)."""
    return f"(window.vaeSearch = window.vaeSearch || []).push(...{json.dumps(entries, indent=0)});\n".encode()


def _copy_static(out: Path) -> int:
    return sum(write_if_changed(out / "static" / path.name, path.read_bytes(), durable=False)
               for path in sorted((TEMPLATES / "static").iterdir()))


def _render(env: jinja2.Environment, template: str, path: Path, **context: object) -> int:
    # not fsynced one by one: render_site syncs once before it records what it wrote
    return write_if_changed(path, env.get_template(template).render(**context).encode(), durable=False)


def _index_parts(env: jinja2.Environment, out: Path, version: str, triaged: dict, entries: list[dict]
                 ) -> tuple[list[markupsafe.Markup], list[markupsafe.Markup]]:
    """Each series' rows under "What blocks the release" and its row of the series table, as HTML:
    a series' part is rendered again only when what it shows changed, the others come from this
    machine's copy of the last render (INDEX_PARTS, beside the templates' compiled cache; lost or
    damaged, every part is rendered)."""
    path = out / BYTECODE / INDEX_PARTS
    try:
        kept = json.loads(path.read_bytes())
    except (OSError, ValueError):
        kept = {}
    kept = kept if isinstance(kept, dict) and kept.get("version") == version else {}
    macros = env.get_template("index_parts.html").module
    made: dict[str, dict[str, list[str]]] = {"version": version, "triage": {}, "rows": {}}

    def part(kind: str, series: str, shown: dict, render) -> markupsafe.Markup:
        key = _fingerprint(shown)
        hit = (kept.get(kind) or {}).get(series)
        html = hit[1] if isinstance(hit, list) and len(hit) == 2 and hit[0] == key else str(render(shown))
        made[kind][series] = [key, html]
        return markupsafe.Markup(html)

    groups = [part("triage", series, group, macros.triage_group) for series, group in triaged["groups"].items()]
    rows = [part("rows", entry["id"], entry, macros.series_row) for entry in entries]
    if made != kept:
        write_if_changed(path, json.dumps(made).encode(), durable=False)
    return groups, rows


def _log_pages(member: str, log) -> list[tuple[str, list[dict], int | None, list[str]]]:
    """A log's pages: (name, rows, subagent thread or None, the names of the pages it is one of)."""
    threads = split_threads(log.rows)
    pages = paged(log.rows)
    names = [log_page(member, n) for n in range(1, len(pages) + 1)]
    out = [(name, rows, None, names) for name, rows in zip(names, pages, strict=True)]
    for thread, rows in enumerate(threads, start=1):
        thread_pages = paged(rows)
        thread_names = [log_page(member, n, thread) for n in range(1, len(thread_pages) + 1)]
        out += [(name, page_rows, thread, thread_names) for name, page_rows in zip(thread_names, thread_pages,
                                                                                   strict=True)]
    return out


def _render_transcript(env: jinja2.Environment, folder: Path, episode: dict, review: dict) -> tuple[int, dict]:
    """Every log member's transcript pages and the images they show, in the folder named after
    the episode; each finding in a log linked to its line there; what the episode's page says of them."""
    own = folder / page_stem(episode["id"])
    laid_out = {member: _log_pages(member, log) for member, log in review["logs"].items()}
    page_of = {member: {line: name for name, rows, _, _ in pages for line in lines_of(rows)}
               for member, pages in laid_out.items()}
    agent_pages = {agent_of(member): log_page(member, 1) for member in laid_out if agent_of(member) is not None}
    started_by = {}
    for member, log in review["logs"].items():
        for call in each_call(log.rows):
            if call["agent"] in agent_pages and call["agent"] not in started_by:
                started_by[call["agent"]] = {"href": f"{page_of[member][call['line']]}#L{call['line']}",
                                             "call": call["id"], "member": member}
    notes: dict[tuple[str, str], list[dict]] = {}
    for finding in review["findings"]:
        page = page_of.get(finding["member"], {}).get(finding["archive_line"])
        if page is not None:
            finding["href"] = f"{page_stem(episode['id'])}/{page}#L{finding['archive_line']}"
            notes.setdefault((finding["member"], page), []).append(finding)
    written, summaries = 0, []
    for member, pages in laid_out.items():
        log, agent = review["logs"][member], agent_of(member)
        for name, rows, thread, names in pages:
            written += _render(env, "transcript.html", own / name, episode=episode, rows=rows,
                               number=names.index(name) + 1, pages=names, thread=thread, member=member,
                               first=log_page(member, 1), slug=log_slug(member), notes=notes.get((member, name), []),
                               agent_pages=agent_pages, started_by=started_by.get(agent), site="../../..")
        main = [(name, rows) for name, rows, thread, _ in pages if thread is None]
        summaries.append({
            "member": member, "lines": log.lines,
            "started_by": {**started_by[agent], "href": f"{page_stem(episode['id'])}/{started_by[agent]['href']}"}
            if agent in started_by else None,
            "tool_calls": log.tool_calls,
            "subagent_tool_calls": log.subagent_tool_calls,
            "threads": len({thread for _, _, thread, _ in pages if thread is not None}),
            "pages": [{"href": f"{page_stem(episode['id'])}/{name}", "first_line": rows[0]["line"] if rows else None,
                       "rows": len(rows)} for name, rows in main]})
    for path, data in review["images"].items():
        written += write_if_changed(own / path, data, durable=False)
    keep = {own / name for pages in laid_out.values() for name, *_ in pages} | {own / p for p in review["images"]}
    for stale in [p for p in own.rglob("*") if p.is_file() and p not in keep]:
        stale.unlink()
    return written, {"logs": summaries}


def _transcript_key(version: str, row: dict, inputs: SiteInputs, home: Path, out: Path) -> str:
    """A hash of everything an episode's transcript pages are made from: its archive as staged,
    its findings, the names masked, the templates and the site's place; not its label or the
    rubric, so a rehost renders them again only where the archive changed."""
    staged = row.get("staged_archive")
    return _fingerprint(version, str(out), row["id"], row["series"], staged, row.get("archive_sha256"),
                        row.get("bundle_parts"), inputs.scrub, bool(staged) and (home / staged).is_file())


def _render_series(env: jinja2.Environment, summary: dict, rows: list[dict], inputs: SiteInputs, home: Path,
                   out: Path, version: str, rendered_before: bool) -> tuple[int, dict[str, dict]]:
    """The series' pages, and what its episode pages said of each archive (kept with the series'
    state, read back when it was `rendered_before`: an episode whose transcript key is the same is
    not read or rendered again)."""
    page = series_page(summary, rows, inputs, home, out)
    cached = _read_episodes_said(out, summary["id"]) if rendered_before else {}
    written = _render(env, "series.html", out / "series" / f"{page['id']}.html", series=page, site="..")
    folder = out / "episodes" / page["id"]
    by_id = {r["id"]: r for r in rows}
    said: dict[str, dict] = {}
    for episode in page["episodes"]:
        key = _transcript_key(version, by_id[episode["id"]], inputs, home, out)
        hit = cached.get(episode["id"])
        if hit is not None and hit.get("key") == key and (folder / page_stem(episode["id"])).is_dir():
            episode.update(archive=hit["archive"], transcript=hit["transcript"], archive_error=hit["archive_error"])
        else:
            review = archive_review(by_id[episode["id"]], inputs, home)
            episode["archive"], episode["transcript"], episode["archive_error"] = None, None, None
            if review is not None and "error" in review:
                episode["archive_error"] = review["error"]
            elif review is not None:
                pages, episode["transcript"] = _render_transcript(env, folder, episode, review)
                written += pages
                episode["archive"] = {"judge": review["judge"], "findings": review["findings"]}
        said[episode["id"]] = {"key": key, "archive": episode["archive"], "transcript": episode["transcript"],
                               "archive_error": episode["archive_error"]}
        written += _render(env, "episode.html", folder / episode["page"], episode=episode, site="../..")
    for invalid in page["invalid"]:
        written += _render(env, "invalid.html", folder / invalid["page"], episode=invalid, site="../../..")
    keep = {e["page"] for e in page["episodes"]} | {page_stem(e["id"]) for e in page["episodes"]}
    keep |= {"invalid"} if page["invalid"] else set()
    for stale in folder.iterdir() if folder.exists() else []:
        if stale.name not in keep:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    invalid_keep = {i["page"].split("/")[-1] for i in page["invalid"]}
    for stale in (folder / "invalid").glob("*.html") if (folder / "invalid").exists() else []:
        if stale.name not in invalid_keep:
            stale.unlink()
    return written, said


def _remove_series(out: Path, series: str) -> None:
    (out / "series" / f"{series}.html").unlink(missing_ok=True)
    shutil.rmtree(out / "episodes" / series, ignore_errors=True)


def series_of_file(name: str) -> str | None:
    """The series a file of the site (by its name in the site's folder) belongs to: its page, its
    episodes' pages, its search entries, its state; None for the index and what every page uses."""
    top, _, rest = name.partition("/")
    if top == "episodes" and "/" in rest:
        return rest.split("/", 1)[0]
    for folder, suffix in (("series", ".html"), (SEARCH, ".js"), (STATE, ".json")):
        if top == folder and "/" not in rest and rest.endswith(suffix):
            return rest.removesuffix(suffix)
    return None


RENDER_WORKERS_FROM = 1_000  # pages: below, starting the workers costs more than they save


def _render_many(env: jinja2.Environment, jobs: list[tuple[dict, list[dict], bool]], inputs: SiteInputs,
                 home: Path, out: Path, version: str, workers_from: int) -> list[tuple[int, dict, list[str]]]:
    """Each job's series rendered (`_render_series` of its summary, rows and whether it was
    rendered before), in order, with the files a worker placed (this process notes its own:
    `noting_writes`). From `workers_from` pages on, by one
    worker process per core: rendering holds the GIL, and a rehost renders every page again. The
    workers are new interpreters (spawned: a build's process runs threads, which a fork would
    copy mid-lock); a pool that cannot start or breaks leaves the series to this process."""
    cores = min(os.cpu_count() or 1, 8)
    pages = sum(1 + len(rows) for _, rows, _ in jobs)  # a page for the series and one for each episode
    if pages >= workers_from and cores >= 2 and len(jobs) >= 2:
        for name in env.list_templates(filter_func=lambda name: name.endswith(".html")):
            env.get_template(name)  # compiled, and its bytecode cached, before the workers read the cache
        try:
            with render_workers(min(cores, len(jobs)), inputs, home, out, version) as pool:
                return list(pool.map(_render_in_worker, jobs, chunksize=4))
        except (OSError, AssertionError, BrokenProcessPool):  # no child processes here, or one died
            pass
    return [(*_render_series(env, summary, rows, inputs, home, out, version, before), [])
            for summary, rows, before in jobs]


def render_workers(count: int, inputs: SiteInputs, home: Path, out: Path, version: str) -> ProcessPoolExecutor:
    """`count` spawned render workers, each holding what every series shares (a job brings its own
    rows) and ending with this process."""
    shared = dataclasses.replace(inputs, rows=inputs.rows.clear())
    return ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                               initargs=(shared, home, out, version))


_WORKER: dict = {}  # in a render worker: what every series it renders shares


def _start_worker(inputs: SiteInputs, home: Path, out: Path, version: str) -> None:
    _WORKER.update(env=_environment(out / BYTECODE), inputs=inputs, home=home, out=out, version=version)
    threading.Thread(target=_exit_with_parent, daemon=True).start()


def _exit_with_parent() -> None:
    """A worker whose build was killed ends at once (it would wait for its next series forever):
    a page it was writing is left under its temporary name, which the next build sweeps."""
    multiprocessing.parent_process().join()
    os._exit(1)


def _render_in_worker(job: tuple[dict, list[dict], bool]) -> tuple[int, dict, list[str]]:
    summary, rows, rendered_before = job
    with noting_writes() as placed:
        written, said = _render_series(_WORKER["env"], summary, rows, _WORKER["inputs"], _WORKER["home"],
                                       _WORKER["out"], _WORKER["version"], rendered_before)
    return written, said, [str(path) for path in placed]


def render_site(inputs: SiteInputs, home: Path, out: Path, *, workers_from: int | None = None) -> RenderReport:
    """Write the site under `out` (inside `home`, the pipeline's home that holds the staged videos
    and frames). Series whose pages would come out the same are left as they are; from
    `workers_from` pages to render on (default RENDER_WORKERS_FROM), worker processes render the
    series (`_render_many`)."""
    with noting_writes() as placed:
        report, state = _write_site(inputs, home, out, workers_from, placed)
    make_durable(placed)  # the pages are on disk before the state says they were rendered
    with noting_writes() as recorded:
        for series in report.series_rendered:  # key order is shown order
            write_if_changed(out / STATE / f"{series}.json", json.dumps(state[series]).encode(), durable=False)
    make_durable(recorded)
    return report


def _write_site(inputs: SiteInputs, home: Path, out: Path, workers_from: int | None, placed: list[Path]
                ) -> tuple[RenderReport, dict[str, dict]]:
    """`render_site`'s pages (`placed`: the files the render workers placed are added to it) and
    what to record of each series rendered."""
    env = _environment(out / BYTECODE)
    version = templates_version()
    fingerprints = _read_fingerprints(out)
    state: dict[str, dict] = {}  # what is written for each series rendered
    report = RenderReport(index=out / "index.html")
    report.pages_written += _copy_static(out)
    table = inputs.rows.sort("series", "id") if inputs.rows.height else inputs.rows
    summaries = series_summaries(table, inputs)
    links = episode_links(table.select("series", "id", "valid").iter_rows()) if table.height else {}
    seen: dict[str, str] = {}
    checks = [dataclasses.replace(c, items=inputs.masked(c.items, seen)) for c in inputs.checks]
    triaged = triage(checks, links)
    keys = _series_fingerprints(version, table, inputs, out)
    unchanged = {series for series in summaries
                 if fingerprints.get(series) == keys[series] and (out / "series" / f"{series}.html").exists()}
    # the series rendered, and those whose search entries are to be made (rendered, or the file
    # is gone): only their rows are taken as dicts
    searched = [series for series in summaries
                if series not in unchanged or not (out / SEARCH / f"{series}.js").is_file()]
    by_series: dict[str, list[dict]] = {series: [] for series in searched}
    for row in table.filter(pl.col("series").is_in(searched)).to_dicts() if searched else []:
        by_series[row["series"]].append(row)
    entries = []
    jobs: list[tuple[dict, list[dict], bool]] = []  # a series' summary, rows, and whether it was rendered before
    for series, summary in summaries.items():
        if series in unchanged:
            report.series_unchanged.append(series)
        else:
            jobs.append((summary, by_series[series], series in fingerprints))
        entries.append(_index_entry(summary, triaged))
    rendered = _render_many(env, jobs, inputs, home, out, version,
                            RENDER_WORKERS_FROM if workers_from is None else workers_from)
    for (summary, *_), (written, said, in_worker) in zip(jobs, rendered, strict=True):
        series = summary["id"]
        report.pages_written += written
        placed.extend(map(Path, in_worker))
        state[series] = {"fingerprint": keys[series], "episodes": said}
        report.series_rendered.append(series)
    for series in sorted(set(fingerprints) - set(summaries)):
        _remove_series(out, series)
        (out / STATE / f"{series}.json").unlink(missing_ok=True)
        report.series_removed.append(series)
    for name in LEGACY:
        (out / name).unlink(missing_ok=True)
    for series in searched:
        entries_of = search_index(by_series[series], inputs)
        report.pages_written += write_if_changed(out / SEARCH / f"{series}.js", _search_script(entries_of),
                                                 durable=False)
    for stale in (out / SEARCH).glob("*.js"):
        if stale.stem not in summaries:
            stale.unlink()
    board = None
    if inputs.leaderboard is not None:
        board = leaderboard_tables(inputs.leaderboard)
        if inputs.leaderboard.chart is not None:
            report.pages_written += write_if_changed(out / LEADERBOARD_CHART, inputs.leaderboard.chart.read_bytes(),
                                                     durable=False)
    if board is None or not board["chart"]:
        (out / LEADERBOARD_CHART).unlink(missing_ok=True)
    triage_groups, series_rows = _index_parts(env, out, version, triaged, entries)
    report.pages_written += _render(
        env, "index.html", report.index, site=".", triage_groups=triage_groups, series_rows=series_rows,
        leaderboard=board, checks=checks, triage=triaged, items_shown=INDEX_ITEMS_SHOWN,
        searched=[f"{SEARCH}/{series}.js" for series in summaries],
        warnings=[dataclasses.replace(c, items=inputs.masked(c.items, seen), description=inputs.masked(c.description))
                  for c in inputs.warnings if c.passed is False],
        links=links, legend=legend(inputs.rubric),
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), rubric_version=inputs.rubric.version)
    return report, state
