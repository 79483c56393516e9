"""What the archive will publish, laid out for a reviewer: every log member (`messages.jsonl`,
`transcript/session.jsonl`, each `transcript/subagents/agent-*.jsonl`, `tool-events.jsonl`), the
judge's answer of `judge.json` and each scrub finding's line — all read from the staged, scrubbed,
slimmed `.tar.zst`, never from the input.

Pure: bytes in, plain values out (the review site renders them). Every string handed out has
passed through the caller's `mask` (a finding's value never reaches a page); the placeholders the
scrub wrote (`<home>`, `<redacted:…>`) stay for the page to highlight. The conversation follows
the CLI's shapes (contract 1), stream-json and session log alike: lines sharing a `message.id` are
one message, a tool result goes under the call it answers, a subagent's lines (`parent_tool_use_id`
set) under the `Task` call that started them, consecutive system lines fold into one row of their
fields. No line is left out: a type the renderer does not know is one folded row naming its type,
and every row names the lines it shows (`LINE_ANCHOR`), so a page can be checked line by line.
"""

from __future__ import annotations

import json
import re
import tarfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import zstandard

from vae_pipeline.domain.scrub.texts import value_sha256
from vae_pipeline.domain.bundles.slim import IMAGE_DIR

MESSAGES = "messages.jsonl"
SESSION = "transcript/session.jsonl"
SUBAGENTS = "transcript/subagents/"
TOOL_EVENTS = "tool-events.jsonl"
JUDGE = "judge.json"
FIELD_LIMIT = 2_000  # characters of one field of a system, unknown or tool-event line shown
TEXT_LIMIT = 20_000  # characters of one text shown; the rest is named by its size
OPEN_LIMIT = 1_500  # a tool result longer than this starts collapsed
PAGE_ITEMS = 150  # main-agent rows per transcript page
PAGE_CHARS = 1_000_000  # bytes of HTML a page's rows come to, about, before the next page starts
THREAD_INLINE = 300_000  # a subagent thread heavier than this gets pages of its own
ROW_MARKUP = 600  # bytes of markup a row or block adds around its texts
FIELD_MARKUP = 120  # and one field of a line shown by its fields
WINDOW = 80  # characters shown either side of a finding's value
MASK_MARGIN = 512  # masked beyond a cut: no finding value is longer

Mask = Callable[[str], str]


def is_log(name: str) -> bool:
    """Whether an archive member is a log the review site gives transcript pages."""
    return name in (MESSAGES, SESSION, TOOL_EVENTS) or (
        name.startswith(SUBAGENTS) and name.endswith(".jsonl") and "/" not in name[len(SUBAGENTS):])


def agent_of(name: str) -> str | None:
    """The subagent id of `transcript/subagents/agent-<id>.jsonl`; None for any other member."""
    stem = name[len(SUBAGENTS):-len(".jsonl")] if is_log(name) and name.startswith(SUBAGENTS) else ""
    return stem[len("agent-"):] if stem.startswith("agent-") else (stem or None)


@dataclass
class ArchiveView:
    """The members of one archive a review needs: its logs, the judge's answer, the members
    findings name, and the slimmed images."""

    logs: dict[str, bytes] = field(default_factory=dict)
    judge: bytes | None = None
    members: dict[str, bytes] = field(default_factory=dict)
    images: dict[str, bytes] = field(default_factory=dict)


class UnreadableArchive(Exception):
    """The staged archive cannot be read back (a page says so; the other episodes go on)."""


def read_archive(path: Path, finding_files: set[str]) -> ArchiveView:
    """One pass over the tar stream, stopping after the last member wanted (members are sorted)."""
    try:
        return _read_archive(path, finding_files)
    except (OSError, EOFError, tarfile.TarError, zstandard.ZstdError) as exc:
        raise UnreadableArchive(f"{path.name}: {type(exc).__name__}") from None


def _read_archive(path: Path, finding_files: set[str]) -> ArchiveView:
    wanted = {MESSAGES, JUDGE, SESSION, TOOL_EVENTS, *finding_files}
    last = max(wanted | {SUBAGENTS})  # members are sorted: past it, and past the subagents' logs, nothing is wanted
    view = ArchiveView()
    with path.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream, \
            tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            name = member.name
            images = name.startswith(f"{IMAGE_DIR}/")
            if member.isfile() and (name in wanted or images or is_log(name)):
                data = _read(tar.extractfile(member))
                if images:
                    view.images[name] = data
                if is_log(name):
                    view.logs[name] = data
                if name == JUDGE:
                    view.judge = data
                if name in finding_files:
                    view.members[name] = data
            if name >= last and not images and not name.startswith(SUBAGENTS):
                break
    return view


def _read(handle: IO[bytes] | None) -> bytes:
    return handle.read() if handle is not None else b""


# ---------------------------------------------------------------- the conversation


def clipped(text: str, mask: Mask, limit: int = TEXT_LIMIT) -> dict:
    """`text` masked, cut at `limit` characters; `hidden` says how many were left out. Masked
    past the cut, so a value the cut splits is still masked whole."""
    shown = mask(text[:limit + MASK_MARGIN])[:limit]
    return {"text": shown, "hidden": max(len(text) - limit, 0), "size": len(text)}


def _json_text(value: object, indent: int | None = 1) -> str:
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False)
    except RecursionError:
        return "(nested too deep to show)"


def fields(obj: dict, mask: Mask, skip: tuple[str, ...] = ("type",)) -> list[dict]:
    """A line's or block's top-level fields, readable: a string as it is, anything else as compact
    JSON, each clipped (a system line, a line of a type the renderer does not know, a hook record)."""
    return [{"key": mask(str(key)), **clipped(value if isinstance(value, str) else _json_text(value, None), mask,
                                              FIELD_LIMIT)}
            for key, value in obj.items() if key not in skip]


class _Conversation:
    """Rows of every thread (None: the main agent; else the `Task` call's id), built line by line.
    Every row or block carries the line it shows; `anchor` is set on the first one of each line
    (the page's `L<line>` target)."""

    def __init__(self, mask: Mask) -> None:
        self.mask = mask
        self.threads: dict[str | None, list[dict]] = {}
        self.messages: dict[tuple[str | None, str], dict] = {}
        self.calls: dict[str, dict] = {}
        self.images: set[str] = set()
        self.calls_by_thread: Counter[str | None] = Counter()
        self._anchored: set[int] = set()

    def rows(self, thread: str | None) -> list[dict]:
        return self.threads.setdefault(thread, [])

    def anchor(self, number: int) -> bool:
        first = number not in self._anchored
        self._anchored.add(number)
        return first

    def add(self, number: int, line: bytes) -> None:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            self.rows(None).append({"kind": "unparsed", "line": number, "anchor": self.anchor(number),
                                    "body": clipped(line.decode("utf-8", "replace"), self.mask, FIELD_LIMIT)})
            return
        if not isinstance(obj, dict):
            self.rows(None).append({"kind": "other", "type": f"(a JSON {type(obj).__name__}, not an object)",
                                    "line": number, "anchor": self.anchor(number),
                                    "fields": [{"key": "value", **clipped(_json_text(obj, None), self.mask,
                                                                          FIELD_LIMIT)}]})
            return
        thread = obj.get("parent_tool_use_id") or None
        thread = thread if isinstance(thread, str) else None
        kind = obj.get("type")
        if kind == "system":
            self._system(thread, number, obj)
        elif kind == "assistant" and isinstance(obj.get("message"), dict):
            self._assistant(thread, number, obj)
        elif kind == "user" and isinstance(obj.get("message"), dict):
            self._user(thread, number, obj)
        elif kind == "result":
            self.rows(thread).append({
                "kind": "result", "line": number, "anchor": self.anchor(number),
                "subtype": self.mask(str(obj.get("subtype"))), "is_error": bool(obj.get("is_error")),
                "num_turns": obj.get("num_turns"), "cost": obj.get("total_cost_usd"),
                "body": clipped(str(obj.get("result") or ""), self.mask)})
        else:  # attachment, last-prompt, permission-mode, summary, rate_limit_event, a hook record, …
            self.rows(thread).append({"kind": "other", "type": self.mask(str(kind)) if kind is not None else None,
                                      "line": number, "anchor": self.anchor(number),
                                      "fields": fields(obj, self.mask)})

    def _system(self, thread: str | None, number: int, obj: dict) -> None:
        rows = self.rows(thread)
        if not rows or rows[-1]["kind"] != "system":
            rows.append({"kind": "system", "line": number, "lines": []})
        rows[-1]["lines"].append({"line": number, "anchor": self.anchor(number),
                                  "subtype": self.mask(str(obj.get("subtype", ""))),
                                  "fields": fields(obj, self.mask, ("type", "subtype"))})

    def _assistant(self, thread: str | None, number: int, obj: dict) -> None:
        message = obj["message"]
        message_id = message.get("id")
        row = self.messages.get((thread, message_id)) if message_id else None
        if row is None:
            row = {"kind": "assistant", "line": number, "lines": [], "id": self.mask(str(message_id or "")),
                   "model": self.mask(str(message.get("model") or "")), "blocks": []}
            self.rows(thread).append(row)
            if message_id:
                self.messages[(thread, message_id)] = row
        row["lines"].append({"line": number, "anchor": self.anchor(number)})
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]:
            if not isinstance(block, dict):
                row["blocks"].append(self._other(block))
                continue
            kind = block.get("type")
            if kind == "text":
                row["blocks"].append({"type": "text", **clipped(str(block.get("text", "")), self.mask)})
            elif kind == "thinking":
                row["blocks"].append({"type": "thinking", **clipped(str(block.get("thinking", "")), self.mask)})
            elif kind == "tool_use":
                call = {"type": "tool_use", "id": self.mask(str(block.get("id", ""))),
                        "name": self.mask(str(block.get("name", ""))),
                        "input": clipped(_json_text(block.get("input")), self.mask), "result": None,
                        "thread": None, "thread_of": None, "agent": None, "line": number}
                row["blocks"].append(call)
                self.calls[str(block.get("id", ""))] = call
                self.calls_by_thread[thread] += 1
            else:
                row["blocks"].append(self._other(block))

    def _other(self, block: object) -> dict:
        """A block of a type the renderer does not know, by its fields; a `tool_reference` by its tool."""
        if isinstance(block, dict) and block.get("type") == "tool_reference":
            return {"type": "tool_reference", "name": self.mask(str(block.get("tool_name", ""))), "size": 0}
        name = block.get("type") if isinstance(block, dict) else type(block).__name__
        return {"type": "other", "name": self.mask(str(name)),
                "fields": fields(block, self.mask) if isinstance(block, dict) else
                [{"key": "value", **clipped(_json_text(block, None), self.mask, FIELD_LIMIT)}], "size": 0}

    def _user(self, thread: str | None, number: int, obj: dict) -> None:
        content = obj["message"].get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
        structured = obj.get("tool_use_result", obj.get("toolUseResult"))
        prompt = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                result = {"line": number, "anchor": self.anchor(number), "is_error": bool(block.get("is_error")),
                          "parts": self._parts(block.get("content")), "structured": None}
                result["chars"] = sum(p.get("size", 0) for p in result["parts"])
                result["open"] = result["chars"] <= OPEN_LIMIT
                call = self.calls.get(str(block.get("tool_use_id")))
                if structured is not None:
                    result["structured"] = clipped(_json_text(structured), self.mask, FIELD_LIMIT)
                    agent = structured.get("agentId") if isinstance(structured, dict) else None
                    if call is not None and isinstance(agent, str) and agent:
                        call["agent"] = self.mask(agent)
                if call is not None and call["result"] is None:
                    call["result"] = result
                else:
                    self.rows(thread).append({"kind": "orphan_result", "line": number, "result": result,
                                              "tool_use_id": self.mask(str(block.get("tool_use_id")))})
            else:
                prompt.append(block)
        if prompt or not blocks:
            self.rows(thread).append({"kind": "user", "line": number, "anchor": self.anchor(number),
                                      "parts": self._parts(prompt)})

    def _parts(self, content: object) -> list[dict]:
        """A tool result's or prompt's content: a string, or text, image and other blocks."""
        if not isinstance(content, list):
            return [{"type": "text", **clipped(str(content or ""), self.mask)}]
        parts = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append({"type": "text", **clipped(str(block.get("text", "")), self.mask)})
            elif kind == "image" and _image_path(block):
                self.images.add(_image_path(block))
                parts.append({"type": "image", "src": _image_path(block), "size": 0})
            else:
                parts.append(self._other(block))
        return parts

    def nest(self) -> list[dict]:
        """The main agent's rows, each subagent thread placed under the call that started it
        (a thread whose call is not in the log stays at the end, named by its id)."""
        for thread, rows in list(self.threads.items()):
            if thread is None:
                continue
            call = self.calls.get(thread)
            if call is not None and call["thread"] is None:
                call["thread"] = rows
            else:
                self.rows(None).append({"kind": "lost_thread", "line": rows[0]["line"] if rows else 0,
                                        "id": self.mask(thread), "rows": rows})
        return self.rows(None)


_SLIMMED_IMAGE = re.compile(rf"^{IMAGE_DIR}/[0-9a-f]{{64}}\.[a-z0-9]{{2,5}}$")


def _image_path(block: dict) -> str | None:
    """The archive path of a slimmed image block (`{"type": "image", "path": "images/…"}`)."""
    path = block.get("path")
    return path if isinstance(path, str) and _SLIMMED_IMAGE.match(path) else None


@dataclass
class Transcript:
    rows: list[dict]  # the main agent's rows, subagent threads nested under their calls
    images: set[str]  # archive paths of the images the rows show
    lines: int  # lines of the log, blank ones included
    tool_calls: int  # the main agent's tool calls (parent_tool_use_id absent or null)
    subagent_tool_calls: int  # the tool calls of lines with a parent_tool_use_id


def transcript(log: bytes, mask: Mask) -> Transcript:
    """Any log member's rows: stream-json, session log and hook records alike (a line of a shape
    the conversation does not know is a row of its own)."""
    conversation = _Conversation(mask)
    lines = 0
    for number, line in enumerate(log.splitlines(), start=1):
        lines = number
        if line.strip():
            conversation.add(number, line)
    rows = conversation.nest()
    main = conversation.calls_by_thread[None]
    return Transcript(rows, conversation.images, lines, main, sum(conversation.calls_by_thread.values()) - main)


def lines_of(rows: list[dict]) -> Iterator[int]:
    """Every line the rows show, nested threads included (a line may come more than once)."""
    for row in rows:
        yield row["line"]
        for sub in row.get("lines", []):
            yield sub["line"]
        for block in row.get("blocks", []):
            if block["type"] == "tool_use":
                if block["result"] is not None:
                    yield block["result"]["line"]
                yield from lines_of(block["thread"] or [])
        if row.get("result") is not None:
            yield row["result"]["line"]
        yield from lines_of(row.get("rows", []))


def _weight(value: object) -> int:
    """About the bytes of HTML a row comes to (nested threads included): its texts as escaped,
    each `<` possibly a highlighted placeholder, and the markup around each row and block —
    counted on its JSON text, which C code writes and scans far faster than a walk in Python."""
    text = json.dumps(value, ensure_ascii=False)
    marks = text.count('"kind": ') + text.count('"type": ')
    return len(text) + 36 * text.count("<") + 4 * (text.count("&") + text.count(">") + text.count("'")) \
        + ROW_MARKUP * marks + FIELD_MARKUP * text.count('"key": ')


def split_threads(rows: list[dict], inline: int = THREAD_INLINE) -> list[list[dict]]:
    """Every subagent thread heavier than `inline`, taken out of its call (which keeps `thread_of`,
    the thread's number) to be paged on its own; the threads, numbered from 1, deepest first."""
    threads: list[list[dict]] = []
    for call in list(each_call(rows)):
        if call["thread"] and _weight(call["thread"]) > inline:
            threads += split_threads(call["thread"], inline)
            threads.append(call["thread"])
            call["thread_of"], call["thread_rows"], call["thread"] = len(threads), len(call["thread"]), None
    return threads


def paged(rows: list[dict], items: int = PAGE_ITEMS, chars: int = PAGE_CHARS) -> list[list[dict]]:
    """The rows cut into pages of at most `items` rows and about `chars` characters."""
    pages: list[list[dict]] = [[]]
    weight = 0
    for row in rows:
        size = _weight(row)
        if pages[-1] and (len(pages[-1]) >= items or weight + size > chars):
            pages.append([])
            weight = 0
        pages[-1].append(row)
        weight += size
    return pages


def each_call(rows: list[dict]) -> Iterator[dict]:
    """Every tool call of the rows, nested threads included, in order."""
    for row in rows:
        for block in row.get("blocks", []):
            if block["type"] == "tool_use":
                yield block
                yield from each_call(block["thread"] or [])
        yield from each_call(row.get("rows", []))


# ---------------------------------------------------------------- the judge's answer


def judge_answer(data: bytes | None, mask: Mask) -> dict | None:
    """The judge's own answer — defects with severity, time and text, the summary, the scores —
    and the host verdict it was stored with; None when there is none to show."""
    if not data:
        return None
    try:
        judge = json.loads(data)
        answer = judge["answer"]
    except (ValueError, KeyError, TypeError):
        return None
    defects = []
    for defect in answer.get("defects") or []:
        if isinstance(defect, dict):
            t_s = defect.get("t_s")
            defects.append({"severity": mask(str(defect.get("severity"))), "text": mask(str(defect.get("text", ""))),
                            "t_s": float(t_s) if isinstance(t_s, int | float) else None})
    return {"defects": defects, "summary": mask(str(answer.get("summary") or "")),
            "verdict": mask(str(answer.get("verdict") or "")),
            "scores": {mask(str(k)): v for k, v in (answer.get("scores") or {}).items()}}


# ---------------------------------------------------------------- findings in context


def finding_context(member: bytes | None, finding: dict, kinds: Sequence, mask: Mask) -> dict:
    """The archive line that holds the finding's values (found by their sha256s: the first one
    there), a short window around it with the value masked; `line` None when the member does not
    hold it."""
    kind = next((k for k in kinds if k.name == finding["kind"]), None)
    if member is None or kind is None:
        return {"line": None, "before": "", "after": ""}
    for match in kind.regex.finditer(member):
        start, end = match.span(kind.group)
        if value_sha256(member[start:end]) in finding["sha256s"]:
            line_start = member.rfind(b"\n", 0, start) + 1
            line_end = len(member) if (cut := member.find(b"\n", end)) < 0 else cut
            before = member[max(line_start, start - WINDOW - MASK_MARGIN):start].decode("utf-8", "replace")
            after = member[end:min(line_end, end + WINDOW + MASK_MARGIN)].decode("utf-8", "replace")
            return {"line": member.count(b"\n", 0, start) + 1, "before": mask(before)[-WINDOW:],
                    "after": mask(after)[:WINDOW]}
    return {"line": None, "before": "", "after": ""}
