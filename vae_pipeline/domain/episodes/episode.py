"""One episode, parsed: the brief and counting columns of its dataset row, or why it is invalid.

`parse_episode` never raises for bad input: an invalid episode comes back as a row with
`valid = False` and the file, line and one-line reason, so the rest of its series goes on.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import BinaryIO

from vae_pipeline.domain.episodes.episode_files import DEFAULT_SIZE_LIMIT, EpisodeFiles, read_episode_files
from vae_pipeline.domain.errors import BadInput, reading
from vae_pipeline.domain.episodes.json_schema import SchemaValidator, contract_validator
from vae_pipeline.domain.episodes.messages import MessageCounts, count_messages, refuse_unknown_form, token_columns
from vae_pipeline.domain.episodes.provenance import ACTOR_COLUMNS, REQUEST_SHAPE, actor_facts
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig, scrub_text
from vae_pipeline.domain.episodes.series import EpisodeEntry, episode_id_reason, is_episode_id, masked_name, shown_episode_id
from vae_pipeline.domain.episodes.strict_json import DEFAULT_MAX_LINE_BYTES, loads

MESSAGES = "messages.jsonl"  # streamed, never held whole
REQUIRED_FILES = ("brief.json", "result.json", MESSAGES)
BRIEF_COLUMNS = (
    "brief_id", "title", "family", "genre_id", "concept", "aspect", "duration_s",
    "difficulty", "task_type", "bank",
)  # fmt: skip

# The columns `parse_episode` fills; the others of the dataset row come from later stages.
EPISODE_COLUMNS = (
    "id", "series", "source", "is_archive", "valid", "error_file", "error_line", "error_reason",
    "warnings", "sample", *BRIEF_COLUMNS, "loop", "brief", "result_status", "started_at", "date",
    "turns", "tool_calls", "subagent_tool_calls", "images_read", "renders", "snapshots", "input_tokens",
    "output_tokens", "cache_read_tokens", "cache_creation_tokens", "harness_error",
    "looked_at_final_render", "delivered", "judged", *ACTOR_COLUMNS,
)  # fmt: skip


def _check_result(data: bytes) -> dict:
    text = data.decode("utf-8", errors="replace")
    result = loads(data, "result.json")
    contract_validator("result").validate(result, text, "result.json")
    return result


def utc_date(started_at: str) -> str:
    try:
        moment = datetime.fromisoformat(started_at)
    except ValueError:
        raise BadInput("result.json", "field 'started_at' is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).date().isoformat()


def parse_episode(
    series_id: str,
    entry: EpisodeEntry,
    briefs: SchemaValidator,
    *,
    scrub: ScrubConfig | None = None,
    size_limit: int = DEFAULT_SIZE_LIMIT,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> dict:
    """The episode's row (EPISODE_COLUMNS); invalid episodes keep their id, file, line and reason.

    The brief's columns come from the scrubbed brief: the row is published, and the pipeline's
    own tables must not keep what the scrub removes from the archive.
    """
    scrub = scrub or ScrubConfig()
    row: dict = dict.fromkeys(EPISODE_COLUMNS)
    row.update(id=entry.episode_id, series=series_id, source=entry.name,
               is_archive=entry.is_archive, valid=False, warnings=[])
    try:
        if not is_episode_id(entry.episode_id, scrub):
            # the name is all there is to call it by: never shown as it is (a folder named after a key)
            row.update(id=shown_episode_id(entry.episode_id, scrub), source=masked_name(entry.name, scrub))
            raise BadInput(row["source"], episode_id_reason(entry.episode_id, scrub))
        with reading(row["source"]):
            # a JSON file is one JSON text: held whole, so no larger than a line may be
            files = read_episode_files(entry, lambda name: name in REQUIRED_FILES or name == REQUEST_SHAPE,
                                       size_limit=size_limit,
                                       streamed={MESSAGES: functools.partial(_count, max_line_bytes=max_line_bytes)},
                                       max_file_bytes=max_line_bytes)
            row.update(_parse_files(entry.episode_id, files, briefs, row["warnings"], scrub))
        row["valid"] = True
    except BadInput as exc:
        # a member's name or a quoted value may hold the harness's names, which BadInput cannot know
        row.update(error_file=masked_name(exc.file, scrub), error_line=exc.line,
                   error_reason=scrub_line(exc.reason, scrub))
    row["warnings"] = [scrub_line(warning, scrub) for warning in row["warnings"]]
    return row


def _count(handle: BinaryIO, max_line_bytes: int) -> MessageCounts:
    with reading(MESSAGES):
        return count_messages(handle, MESSAGES, max_line_bytes)


def _parse_files(episode_id: str, files: EpisodeFiles, briefs: SchemaValidator, warnings: list[str],
                 scrub: ScrubConfig) -> dict:
    data, sizes = files.data, files.sizes
    for name in REQUIRED_FILES:
        if name not in data and name not in files.streamed:
            raise BadInput(name, "required file is missing")
    with reading("brief.json"):
        brief_text = data["brief.json"].decode("utf-8", errors="replace")
        briefs.validate(loads(data["brief.json"], "brief.json"), brief_text, "brief.json")
        brief = loads(scrub_text(data["brief.json"], "brief.json", scrub).data, "brief.json")
    with reading("result.json"):
        result = _check_result(data["result.json"])
        date = utc_date(result["started_at"])
    counts = files.read(MESSAGES)
    refuse_unknown_form(counts, result.get("turns"))
    with reading(REQUEST_SHAPE):
        shape = loads(data[REQUEST_SHAPE], REQUEST_SHAPE) if REQUEST_SHAPE in data else None

    brief_id, _, sample = episode_id.rpartition("-")
    if brief["brief_id"] != brief_id:
        warnings.append("brief.json brief_id differs from the episode id's brief part")
    for column in ("turns", "tool_calls"):
        reported, derived = result.get(column), getattr(counts, column)
        if reported is not None and reported != derived:
            warnings.append(f"result.json {column} = {reported}, messages.jsonl gives {derived}")
    harness_error = (result["status"] == "error" and "403" in str(result.get("error") or "")) \
        or counts.result_text_has_403
    return {
        **{column: brief.get(column) for column in BRIEF_COLUMNS},
        "sample": sample,
        "loop": bool(brief.get("loop", False)),
        "brief": json.dumps(brief, ensure_ascii=False),
        "result_status": result["status"],
        "started_at": scrub_line(result["started_at"], scrub),
        "date": date,
        "turns": counts.turns,
        "tool_calls": counts.tool_calls,
        "subagent_tool_calls": counts.subagent_tool_calls,
        "images_read": counts.images_read,
        "renders": counts.renders,
        "snapshots": counts.snapshots,
        **token_columns(counts, result.get("usage")),
        "harness_error": bool(harness_error),
        "looked_at_final_render": counts.looked_at_final_render,
        "delivered": "out.mp4" in sizes,
        "judged": "judge.json" in sizes,
        **actor_facts(counts.init, shape, scrub),
    }
