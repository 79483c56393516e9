"""The dataset's counting columns, derived from `messages.jsonl` by the contract's rules.

The log is the Claude Code CLI's stream-json: one API response arrives as several `assistant`
lines sharing `message.id`, subagent lines (`parent_tool_use_id` set) are interleaved with the
main agent's, and a run of several prompts ends each with its own `result` line.

Only counts, flags and the init line (scrubbed by its reader) leave this module: message text is
never kept, so nothing the agent
saw or wrote (secrets, home paths) reaches the pipeline's own storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.strict_json import DEFAULT_MAX_LINE_BYTES, jsonl

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
TOKEN_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_input_tokens",
    "cache_creation_tokens": "cache_creation_input_tokens",
}
# what a refused log was expected to hold, named in the refusal
ASSISTANT_FORM = '{"type": "assistant", "message": {"id", "content": [...]}, "parent_tool_use_id"}'


@dataclass
class MessageCounts:
    turns: int = 0
    tool_calls: int = 0
    subagent_tool_calls: int = 0
    images_read: int = 0
    renders: int = 0
    snapshots: int = 0
    looked_at_final_render: bool = False
    result_usages: list[dict] = field(default_factory=list)  # usage of every `result` line that has one
    result_text_has_403: bool = False  # of the last `result` line
    assistant_lines: int = 0  # in the contract's form, main agent's and subagents'
    init: dict | None = None  # the main agent's first system/init line: what ran (read by domain.provenance)


def count_messages(data: bytes | BinaryIO, file: str = "messages.jsonl",
                   max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> MessageCounts:
    """Walk the stream-json lines in order, reading the file as a stream (bytes or an open file);
    raises BadInput naming the line of any malformed one."""
    counts = MessageCounts()
    turn_ids: set[str] = set()
    last_render_step = -1
    last_image_read_step = -1
    step = 0
    for lineno, message in jsonl(data, file, max_line_bytes):
        if not isinstance(message, dict):
            raise BadInput(file, "line must be a JSON object", line=lineno)
        kind = message.get("type")  # a line of another form has none, or another: ignored
        if kind == "assistant":
            blocks = _content_blocks(message, file, lineno)
            counts.assistant_lines += 1
            if message.get("parent_tool_use_id") is not None:
                counts.subagent_tool_calls += sum(block.get("type") == "tool_use" for block in blocks)
                continue
            message_id = message["message"].get("id")
            if not isinstance(message_id, str):
                counts.turns += 1
            elif message_id not in turn_ids:
                turn_ids.add(message_id)
                counts.turns += 1
            for block in blocks:
                if block.get("type") != "tool_use":
                    continue
                step += 1
                counts.tool_calls += 1
                name, tool_input = block.get("name"), block.get("input")
                if not isinstance(name, str) or not isinstance(tool_input, dict):
                    raise BadInput(file, "tool_use block needs a string 'name' and an object 'input'", line=lineno)
                if name == "Read" and _is_image_path(tool_input.get("file_path")):
                    counts.images_read += 1
                    last_image_read_step = step
                elif name == "Bash" and isinstance(tool_input.get("command"), str):
                    command = tool_input["command"]
                    if "hyperframes render" in command:
                        counts.renders += 1
                        last_render_step = step
                    if "hyperframes snapshot" in command:
                        counts.snapshots += 1
                        last_render_step = step
        elif (kind == "system" and message.get("subtype") == "init" and message.get("parent_tool_use_id") is None
              and counts.init is None):
            counts.init = message
        elif kind == "result":
            usage = message.get("usage")
            if usage is not None and not isinstance(usage, dict):
                raise BadInput(file, "result message 'usage' must be an object", line=lineno)
            if usage is not None:
                counts.result_usages.append(usage)
            text = message.get("result")
            counts.result_text_has_403 = isinstance(text, str) and "403" in text
    counts.looked_at_final_render = last_render_step >= 0 and last_image_read_step > last_render_step
    return counts


def refuse_unknown_form(counts: MessageCounts, reported_turns: object, file: str = "messages.jsonl") -> None:
    """A log with no assistant line in the contract's form while result.json reports turns was
    written in another form (the SDK's own objects, say): refused, never counted as an empty run."""
    if counts.assistant_lines or not isinstance(reported_turns, int) or reported_turns <= 0:
        return
    raise BadInput(file, f"holds no assistant line of the stream-json form {ASSISTANT_FORM} although "
                         f"result.json reports {reported_turns} turns: a log in another form (such as the "
                         "SDK's objects tagged with class names) is refused")


def _content_blocks(message: dict, file: str, lineno: int) -> list[dict]:
    body = message.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise BadInput(file, "assistant message needs 'message.content' as a list of blocks", line=lineno)
    return content


def _is_image_path(value: object) -> bool:
    return isinstance(value, str) and value.lower().endswith(IMAGE_SUFFIXES)


def _token_count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def token_columns(counts: MessageCounts, result_json_usage: dict | None) -> dict[str, int | None]:
    """Tokens summed over every `result` line's usage, else from result.json's."""
    usages = counts.result_usages or [result_json_usage or {}]
    columns: dict[str, int | None] = {}
    for column, key in TOKEN_FIELDS.items():
        values = [v for v in (_token_count(usage.get(key)) for usage in usages) if v is not None]
        columns[column] = sum(values) if values else None
    return columns
