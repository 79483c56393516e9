"""What ran, and from which code: an episode's `system`/`init` line and request shape, its
series' harness commit and benchmark version (contract 3, Publishing).

A benchmark that publishes agent runs refuses runs nobody can reproduce or compare: harness code
that was not committed, no benchmark version, or a series whose episodes did not all run the same
model, CLI, tools and system prompt. This module reads those facts and says which series or
episodes break them. Only short identifiers (scrubbed) and a hash leave it, never the prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable

from vae_pipeline.domain.scrub.lines import NO_NAMES, scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig
from vae_pipeline.domain.check_items import said_of

REQUEST_SHAPE = "transcript/api-request-shape.json"
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)\Z", re.ASCII)
# The system prompt names the episode's own working folder; it differs by design, not by actor.
CWD_PLACEHOLDER = "<cwd>"

# the columns `actor_facts` fills (per episode) and `series_facts` (per series, on every episode row)
ACTOR_COLUMNS = ("actor_model_id", "claude_code_version", "actor_tools", "request_shape_sha256")
SERIES_COLUMNS = ("benchmark_version", "harness_commit", "harness_dirty", "actor_cli", "actor_model")
# what the episodes of one series must agree on, and how a reason calls it
AGREED = {"actor_model_id": "model", "claude_code_version": "claude_code_version", "actor_tools": "tool names",
          "request_shape_sha256": "system prompt and tool definitions (sha256)"}


def _text(value: object) -> str | None:
    return scrub_line(value) if isinstance(value, str) and value.strip() else None


def _scrubbed(values: list[str], config: ScrubConfig) -> list[str]:
    """Each value scrubbed, in one pass of the scrub (values are one-line identifiers; a value the
    scrub would merge across lines falls back to one pass each)."""
    lines = [" ".join(value.splitlines()) for value in values]
    out = scrub_line("\n".join(lines), config).split("\n") if lines else []
    return out if len(out) == len(lines) else [scrub_line(line, config) for line in lines]


def shape_sha256(shape: object, cwd: str | None) -> str:
    """sha256 of the request shape's `system` and `tools`, canonical JSON, the working folder replaced."""
    value = {"system": shape.get("system"), "tools": shape.get("tools")} if isinstance(shape, dict) else None

    def without_cwd(item: object) -> object:
        if isinstance(item, str):
            return item.replace(cwd, CWD_PLACEHOLDER) if cwd else item
        if isinstance(item, list):
            return [without_cwd(x) for x in item]
        if isinstance(item, dict):
            return {k: without_cwd(v) for k, v in item.items()}
        return item

    canonical = json.dumps(without_cwd(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", errors="surrogatepass")).hexdigest()


def actor_facts(init: dict | None, shape: object | None, config: ScrubConfig = NO_NAMES) -> dict:
    """ACTOR_COLUMNS of one episode: its init line's `model`, `claude_code_version` and tool
    names (sorted, scrubbed with `config`), and the request shape's hash (None without the file)."""
    init = init or {}
    tools = init.get("tools")
    names = [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
    fields = [init.get(key) if isinstance(init.get(key), str) and init.get(key).strip() else None
              for key in ("model", "claude_code_version")]
    model, version, *scrubbed_tools = _scrubbed([value or "" for value in fields] + names, config)
    cwd = init.get("cwd") if isinstance(init.get("cwd"), str) and init.get("cwd") else None
    return {
        "actor_model_id": model if fields[0] else None,
        "claude_code_version": version if fields[1] else None,
        "actor_tools": sorted(set(scrubbed_tools)) if isinstance(tools, list) else None,
        "request_shape_sha256": shape_sha256(shape, cwd) if shape is not None else None,
    }


def series_facts(info: dict) -> dict:
    """SERIES_COLUMNS from series.json: `benchmark_version`, `harness.commit`, whether
    `harness.dirty` is true, `actor.cli`, `actor.model`."""
    harness = info.get("harness") if isinstance(info.get("harness"), dict) else {}
    actor = info.get("actor") if isinstance(info.get("actor"), dict) else {}
    return {
        "benchmark_version": _text(info.get("benchmark_version")),
        "harness_commit": _text(harness.get("commit")),
        "harness_dirty": harness.get("dirty") is True,
        "actor_cli": _text(actor.get("cli")),
        "actor_model": _text(actor.get("model")),
    }


def minor_version(version: str | None) -> tuple[int, int] | None:
    """(MAJOR, MINOR) of a `MAJOR.MINOR.PATCH` version; None for anything else."""
    match = VERSION.match(version or "")
    return (int(match[1]), int(match[2])) if match else None


# ---------------------------------------------------------------- what blocks publishing
# Each takes the published rows (valid episodes of completed series, less what is withheld) and
# says what is wrong: one line per series and fault, or per odd episode.


def _by_series(rows: Iterable[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["series"], r["id"])):
        groups.setdefault(row["series"], []).append(row)
    return groups


def uncommitted_series(rows: Iterable[dict]) -> list[str]:
    """Series whose harness code was not committed: `harness.dirty` true, or no `harness.commit`."""
    problems = []
    for series, group in _by_series(rows).items():
        first = group[0]
        if first["harness_commit"] is None:
            problems.append(f"{series}: series.json names no harness.commit")
        elif first["harness_dirty"]:
            problems.append(f"{series}: harness.dirty is true (commit {first['harness_commit']} had local changes)")
    return problems


def unversioned_series(rows: Iterable[dict]) -> list[str]:
    """Series without a `benchmark_version` of the form MAJOR.MINOR.PATCH."""
    problems = []
    for series, group in _by_series(rows).items():
        version = group[0]["benchmark_version"]
        if minor_version(version) is None:
            problems.append(f"{series}: " + ("series.json has no benchmark_version" if version is None else
                                             f"benchmark_version {version!r} is not MAJOR.MINOR.PATCH"))
    return problems


def _shown(value: object, column: str = "") -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value) + "]"
    return str(value)[:12] if column == "request_shape_sha256" else str(value)  # a hash: its head is enough


def same_model(recorded: str, named: str) -> bool:
    """Whether the model an init line records is the one series.json names: the same id, or the
    alias a dated id is made from (`claude-opus-5.5` names `claude-opus-5-5-20261014`)."""
    alias = named.replace(".", "-")
    return recorded == named or re.fullmatch(re.escape(alias) + r"(-\d{8})?", recorded.replace(".", "-")) is not None


def actor_disagreements(rows: Iterable[dict]) -> list[dict]:
    """The odd episodes of each series, by episode (`said_of`), among those whose logs record what
    ran (an episode that records nothing is not compared: see `unrecorded_actors`): a model other
    than the series' `actor.model` (series.json; without one, outside the largest group), outside
    the largest group on the other things that ran (AGREED; every group when two tie), or a
    `claude_code_version` that is not the series' `actor.cli`."""
    problems = []
    for group in _by_series(rows).values():
        named = group[0].get("actor_model")
        for column, name in AGREED.items():
            recorded = [row for row in group if row[column] is not None]
            if column == "actor_model_id" and named is not None:
                agree = sum(1 for row in recorded if same_model(row[column], named))
                problems += [said_of(row, f"disagrees on the model: {row[column]} (series.json actor.model "
                                          f"{named}; {agree} of the series' episodes run it)")
                             for row in recorded if not same_model(row[column], named)]
                continue
            values = Counter(_key(row[column]) for row in recorded)
            if len(values) < 2:
                continue
            ranked = values.most_common()
            tie = ranked[0][1] == ranked[1][1]
            odd = {value for value, _ in (ranked if tie else ranked[1:])}
            others = "a tie: " + ", ".join(f"{_shown(value, column)} in {n}" for value, n in ranked) if tie else \
                f"the other {ranked[0][1]}: {_shown(ranked[0][0], column)}"
            problems += [said_of(row, f"disagrees on the {name}: {_shown(row[column], column)} ({others})")
                         for row in recorded if _key(row[column]) in odd]
        cli = group[0]["actor_cli"]
        problems += [said_of(row, f"claude_code_version {_shown(row['claude_code_version'])} is not the series' "
                                  f"actor.cli {_shown(cli)}")
                     for row in group if row["claude_code_version"] is not None and row["claude_code_version"] != cli]
    return problems


def unrecorded_actors(rows: Iterable[dict]) -> list[str]:
    """What `actor_disagreements` could not compare, one line per series: the episodes whose
    log records no model (no `system`/`init` line), or that none does."""
    notes = []
    for series, group in _by_series(rows).items():
        missing = [row["id"] for row in group if row["actor_model_id"] is None]
        if not missing:
            continue
        named = group[0].get("actor_model")
        if len(missing) == len(group):
            notes.append(f"{series}: no episode's log records a model (no system/init line), so none can be "
                         f"compared with the series' actor.model {_shown(named)}")
        else:
            notes.append(f"{series}: not recorded (no system/init line), so not compared: {', '.join(missing)}")
    return notes


def _key(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value
