"""A long `messages.jsonl` written by hand in the Claude Code CLI's stream-json shapes (contract 1),
and its plan: what a transcript page must show of it.

Shapes: one API response streamed as several `assistant` lines sharing `message.id` (one block a
line: an empty thinking block with a long base64 signature, a text, a tool call), tool results whose
`content` is a string or a list of blocks, a `Read` of an image whose `tool_use_result` holds the
same picture again, a `Task` call whose subagent's lines (`parent_tool_use_id` set) are interleaved
with the main agent's, `system` lines, `stream_event` lines, an ignored `rate_limit_event`, and
two `result` lines (two query turns). A home path is planted in the tool inputs and results (the
scrub turns it into `<home>`), and `secrets` in one tool result.
"""

from __future__ import annotations

import base64
import io
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

SUBAGENT_CALL = "toolu_task_0001"
LONG_RESULT_CHARS = 60_000  # one tool result past the page's text limit


@dataclass
class LongPlan:
    lines: int = 0
    messages: int = 0  # distinct message ids of the main agent
    main_calls: list[str] = field(default_factory=list)  # tool_use ids, in order
    subagent_calls: list[str] = field(default_factory=list)
    images: int = 0  # distinct pictures the tool results show
    stream_events: int = 0  # lines the slimming drops


def _png(rng: random.Random, n: int) -> bytes:
    picture = Image.new("RGB", (160, 90), (rng.randint(0, 255), rng.randint(0, 255), 120))
    ImageDraw.Draw(picture).rectangle((5 + n % 100, 10, 40 + n % 100, 60), fill=(250, 250, 250))
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


def long_messages(turns: int, home: str, secrets: str, seed: int = 0) -> tuple[bytes, LongPlan]:
    """`turns` main-agent responses (plus a subagent of 3 calls at the tenth): the file and its plan."""
    rng = random.Random(seed)
    plan = LongPlan()
    lines: list[dict] = [{"type": "system", "subtype": "init", "cwd": f"{home}/work", "model": "claude-opus-5.5"},
                         {"type": "system", "subtype": "hook_started", "hook_name": "SessionStart"}]
    pictures = [_png(rng, n) for n in range(4)]

    def assistant(message_id: str, block: dict, parent: str | None) -> dict:
        return {"type": "assistant", "parent_tool_use_id": parent, "session_id": "sess-1", "uuid": f"u-{len(lines)}",
                "message": {"id": message_id, "model": "claude-opus-5.5", "type": "message", "role": "assistant",
                            "content": [block], "usage": {"input_tokens": 3, "output_tokens": 1}}}

    def result(call: str, content: object, parent: str | None, extra: dict | None = None) -> dict:
        line = {"type": "user", "parent_tool_use_id": parent, "session_id": "sess-1", "uuid": f"u-{len(lines)}",
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                         "content": content, "is_error": False}]}}
        return line | (extra or {})

    def call(n: int, parent: str | None) -> tuple[str, str, dict]:
        kind = n % 4
        if kind == 0:
            return f"toolu_{parent or 'main'}_{n:04d}", "Read", {"file_path": f"{home}/work/snap/frame-{n}.png"}
        if kind == 1:
            return f"toolu_{parent or 'main'}_{n:04d}", "Bash", {"command": f"ls {home}/work && npx hyperframes snapshot"}
        if kind == 2:
            return f"toolu_{parent or 'main'}_{n:04d}", "Write", {"file_path": f"{home}/work/index.html",
                                                                  "content": "<div id='stage'></div>\n" * 5}
        return f"toolu_{parent or 'main'}_{n:04d}", "Grep", {"pattern": "stage", "path": f"{home}/work"}

    def exchange(n: int, parent: str | None, calls: list[str]) -> None:
        message_id = f"msg_{parent or 'main'}_{n:04d}"
        signature = base64.b64encode(rng.randbytes(600)).decode()
        lines.append({"type": "stream_event", "event": {"type": "content_block_delta"}, "parent_tool_use_id": parent})
        plan.stream_events += 1
        lines.append(assistant(message_id, {"type": "thinking", "thinking": "", "signature": signature}, parent))
        lines.append(assistant(message_id, {"type": "text", "text": f"Step {n}: looking at the stage."}, parent))
        tool_id, name, tool_input = call(n, parent)
        lines.append(assistant(message_id, {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input,
                                            "caller": {"type": "direct"}}, parent))
        calls.append(tool_id)
        if name == "Read":
            picture = pictures[n // 4 % len(pictures)]
            data = base64.b64encode(picture).decode()
            lines.append(result(tool_id, [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": data}}], parent,
                                {"tool_use_result": {"type": "image", "file": {
                                    "base64": data, "type": "image/png", "originalSize": len(picture),
                                    "dimensions": {"originalWidth": 160, "originalHeight": 90}}}}))
        elif name == "Bash":
            lines.append(result(tool_id, f"index.html\nsnap\n{home}/work/out.png written", parent,
                                {"tool_use_result": {"stdout": "ok", "stderr": "", "interrupted": False}}))
        else:
            lines.append(result(tool_id, [{"type": "text", "text": f"done ({name})"}], parent))
        if parent is None:
            plan.messages += 1

    for n in range(turns):
        exchange(n, None, plan.main_calls)
        if n == 10:
            lines.append(assistant("msg_task", {"type": "tool_use", "id": SUBAGENT_CALL, "name": "Task",
                                                "input": {"description": "check frames",
                                                          "prompt": "Look at every frame.",
                                                          "subagent_type": "general-purpose"}}, None))
            plan.main_calls.append(SUBAGENT_CALL)
            plan.messages += 1
            for k in range(3):  # the subagent's lines, interleaved with the main agent's below
                exchange(k, SUBAGENT_CALL, plan.subagent_calls)
            lines.append(result(SUBAGENT_CALL, [{"type": "text", "text": "Every frame looks right."}], None))
        if n == 20:
            lines.append({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}})
            lines.append(result("toolu_without_call", f"{secrets}\n" + "x" * LONG_RESULT_CHARS, None))
        if n == turns // 2:
            lines.append({"type": "result", "subtype": "success", "is_error": False, "num_turns": n,
                          "usage": {"input_tokens": 10, "output_tokens": 10}, "result": "First part done."})
            lines.append({"type": "user", "message": {"role": "user", "content": "Now polish the ending."},
                          "parent_tool_use_id": None, "session_id": "sess-1"})
    lines.append(assistant("msg_last", {"type": "text", "text": f"Delivered {home}/work/out.mp4."}, None))
    plan.messages += 1
    lines.append({"type": "result", "subtype": "success", "is_error": False, "num_turns": turns,
                  "usage": {"input_tokens": 20, "output_tokens": 20}, "result": "Done."})
    plan.images = len({n // 4 % len(pictures) for n in range(turns) if n % 4 == 0}
                      | {k // 4 % len(pictures) for k in range(3) if k % 4 == 0})
    plan.lines = len(lines)
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines), plan


def plant_long_episode(run_folder: Path, turns: int, home: str, secrets: str) -> LongPlan:
    """Replace a run folder's messages.jsonl with a long one (its counts then differ from
    result.json's: a warning, not an invalid episode)."""
    data, plan = long_messages(turns, home, secrets)
    (run_folder / "messages.jsonl").write_bytes(data)
    return plan


# ---------------------------------------------------------------- a real-shaped session log

SESSION_AGENT = "a3f9c2e"  # the subagent id: its log is transcript/subagents/agent-<id>.jsonl
SESSION_TASK = "toolu_01TaskSession"
SESSION_UNKNOWN = ("attachment", "last-prompt", "permission-mode", "file-history-snapshot", "rate_limit_event",
                   "queue-operation", "summary")
SESSION_REFERENCE = "mcp__hyperframes__preview"


@dataclass
class SessionPlan:
    lines: dict[str, int] = field(default_factory=dict)  # member -> lines written
    emails: list[str] = field(default_factory=list)  # the values of the one line holding several
    email_line: int = 0  # that line of transcript/session.jsonl
    unknown: dict[str, int] = field(default_factory=dict)  # line type -> its line of session.jsonl
    system: list[int] = field(default_factory=list)  # the system lines of session.jsonl
    subagent_calls: list[str] = field(default_factory=list)


def real_session_log(home: str, project: str) -> tuple[dict[str, bytes], SessionPlan]:
    """`transcript/session.jsonl` and one `transcript/subagents/agent-<id>.jsonl`, written by hand in
    the shapes contract 1 gives for the CLI's session log (`type`, `uuid`, `parentUuid`, `sessionId`,
    `cwd`, `gitBranch`, `version`, `isSidechain`, `message`, `toolUseResult`), with the line types a
    real log holds besides the conversation, `system` lines, a `tool_reference` block, a `Task` call
    whose result names the subagent, and one tool result holding three e-mail addresses (a `git log`)."""
    plan = SessionPlan(emails=["dana.kim@corp-mail.net", "li.wei@studio-mail.org", "ops-team@render-farm.io"])
    cwd = f"{home}/work/{project}"
    common = {"sessionId": "6b1f0c52-3f0e-4c55-9a57-2d8f4f1e0c11", "cwd": cwd, "gitBranch": "main",
              "version": "2.1.310", "userType": "external"}
    session: list[dict] = []
    agent: list[dict] = []

    def entry(log: list[dict], kind: str, sidechain: bool = False, **fields) -> dict:
        line = {"parentUuid": log[-1].get("uuid") if log else None, "isSidechain": sidechain, **common,
                "type": kind, **fields, "uuid": f"u-{len(session) + len(agent):04d}",
                "timestamp": f"2026-10-21T08:{len(session) % 60:02d}:00.000Z"}
        log.append(line)
        return line

    def assistant(log: list[dict], message_id: str, block: dict, sidechain: bool = False) -> None:
        entry(log, "assistant", sidechain, requestId=f"req_{message_id}",
              message={"id": message_id, "type": "message", "role": "assistant", "model": "claude-opus-5-5-20261014",
                       "content": [block], "usage": {"input_tokens": 4, "output_tokens": 2}},
              **({"agentId": SESSION_AGENT} if sidechain else {}))

    def result(log: list[dict], call: str, content: object, structured: object, sidechain: bool = False) -> None:
        entry(log, "user", sidechain, message={"role": "user", "content": [
            {"tool_use_id": call, "type": "tool_result", "content": content, "is_error": False}]},
              toolUseResult=structured, **({"agentId": SESSION_AGENT} if sidechain else {}))

    session.append({"type": "summary", "summary": "Logo reveal: build and render", "leafUuid": "u-0009"})
    session.append({"type": "file-history-snapshot", "messageId": "u-0001", "isSnapshotUpdate": False,
                    "snapshot": {"messageId": "u-0001", "trackedFileBackups": {}, "timestamp": "2026-10-21T08:00:00Z"}})
    session.append({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-10-21T08:00:00Z",
                    "sessionId": common["sessionId"], "content": "Make the video described in brief.json."})
    entry(session, "permission-mode", permissionMode="bypassPermissions")
    entry(session, "user", message={"role": "user", "content": "Make the video described in brief.json."})
    entry(session, "system", subtype="informational", content="Claude Code 2.1.310 started", level="info")
    assistant(session, "msg_01A", {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkA" + "Qk" * 300})
    assistant(session, "msg_01A", {"type": "text", "text": "I will look for the preview tool first."})
    assistant(session, "msg_01A", {"type": "tool_use", "id": "toolu_01Search", "name": "ToolSearch",
                                   "input": {"query": "preview"}, "caller": {"type": "direct"}})
    result(session, "toolu_01Search", [{"type": "tool_reference", "tool_name": SESSION_REFERENCE}],
           {"matches": [SESSION_REFERENCE]})
    assistant(session, "msg_01B", {"type": "tool_use", "id": "toolu_01Git", "name": "Bash",
                                   "input": {"command": "git log -3 --format='%an <%ae>'"}})
    result(session, "toolu_01Git", "\n".join(f"someone <{e}>" for e in plan.emails),
           {"stdout": "\n".join(f"someone <{e}>" for e in plan.emails), "stderr": "", "interrupted": False})
    plan.email_line = len(session)
    entry(session, "attachment", attachment={"type": "file", "filename": f"{cwd}/brief.json",
                                             "content": {"type": "text", "file": {"filePath": f"{cwd}/brief.json"}}})
    entry(session, "system", subtype="compact_boundary", content="Conversation compacted", level="info",
          compactMetadata={"trigger": "auto", "preTokens": 160_000})
    session.append({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1761040800}})
    assistant(session, "msg_01C", {"type": "tool_use", "id": SESSION_TASK, "name": "Task", "input": {
        "description": "Check frames", "prompt": "Look at every frame.", "subagent_type": "general-purpose"}})
    # the subagent's own log
    entry(agent, "user", True, message={"role": "user", "content": "Look at every frame."}, agentId=SESSION_AGENT)
    for n in range(3):
        call = f"toolu_01Sub{n}"
        assistant(agent, f"msg_02S{n}", {"type": "tool_use", "id": call, "name": "Read",
                                         "input": {"file_path": f"{cwd}/snap/f{n}.txt"}}, True)
        result(agent, call, f"frame {n} looks right", {"type": "text", "file": {"filePath": f"{cwd}/snap/f{n}.txt",
                                                                                "content": "ok", "numLines": 1}}, True)
        plan.subagent_calls.append(call)
    assistant(agent, "msg_02S9", {"type": "text", "text": "Every frame looks right."}, True)
    result(session, SESSION_TASK, [{"type": "text", "text": "Every frame looks right."}],
           {"status": "completed", "prompt": "Look at every frame.", "agentId": SESSION_AGENT,
            "content": [{"type": "text", "text": "Every frame looks right."}], "totalToolUseCount": 3})
    assistant(session, "msg_01D", {"type": "text", "text": f"Delivered {cwd}/out.mp4."})
    entry(session, "last-prompt", lastPrompt="Make the video described in brief.json.")
    plan.unknown = {line["type"]: number for number, line in enumerate(session, start=1)
                    if line["type"] in SESSION_UNKNOWN}
    plan.system = [number for number, line in enumerate(session, start=1) if line["type"] == "system"]
    files = {"transcript/session.jsonl": session, f"transcript/subagents/agent-{SESSION_AGENT}.jsonl": agent}
    plan.lines = {name: len(lines) for name, lines in files.items()}
    return {name: b"".join(json.dumps(line).encode() + b"\n" for line in lines) for name, lines in files.items()}, plan


def plant_session_log(run_folder: Path, home: str) -> SessionPlan:
    """Replace a run folder's session and subagent logs with `real_session_log`'s."""
    for old in (run_folder / "transcript" / "subagents").glob("agent-*.jsonl"):
        old.unlink()
    files, plan = real_session_log(home, run_folder.name)
    for name, data in files.items():
        (run_folder / name).parent.mkdir(parents=True, exist_ok=True)
        (run_folder / name).write_bytes(data)
    return plan


def session_form(messages: bytes, home: str) -> dict[str, bytes]:
    """A stream-json `messages.jsonl` in the session-log form (contract 1): its user and assistant
    lines as session entries, a subagent's (`parent_tool_use_id` set) in its own
    `transcript/subagents/agent-<id>.jsonl`, the other lines as the session log keeps them."""
    logs: dict[str, list[bytes]] = {"transcript/session.jsonl": []}
    for number, raw in enumerate(messages.splitlines(), start=1):
        line = json.loads(raw)
        parent = line.pop("parent_tool_use_id", None)
        name = f"transcript/subagents/agent-{parent[-8:]}.jsonl" if parent else "transcript/session.jsonl"
        if line["type"] in ("user", "assistant"):
            structured = line.pop("tool_use_result", None)
            line = {"parentUuid": f"u-{number - 1}", "isSidechain": parent is not None, "userType": "external",
                    "cwd": f"{home}/work", "sessionId": "sess-1", "version": "2.1.310", "gitBranch": "main",
                    "type": line["type"], "message": line["message"], "uuid": f"u-{number}",
                    **({"toolUseResult": structured} if structured is not None else {}),
                    **({"agentId": parent[-8:]} if parent else {})}
        logs.setdefault(name, []).append(json.dumps(line).encode())
    return {name: b"\n".join(lines) + b"\n" for name, lines in logs.items()}
