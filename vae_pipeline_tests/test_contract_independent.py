"""The contracts, checked on a runs root written by hand (not by the project's sample generator).

Everything here comes from the words of ../shared/spec/episodes.md (contract 1), verdicts.md
(contract 2) and dataset.md (contract 3). The runs root is written file by file below; the only
project code used to make it is `vae_pipeline.sample.video.write_video`, a plain H.264 clip
writer (every frame of its clips moves, except the black and frozen stretches asked for). Every
expected value is worked out by hand in the comments next to the input it comes from, and
written as a literal: nothing expected is computed with the pipeline's own helpers.

The runs root:

    2026-10-21-s1/   completed sample sweep
        ui-card-001-s1/            R5 PASS_WITH_NITS; counting columns; tokens from the result message
        ui-card-002-s1.tar.zst     R8 PASS, positive-eligible; tokens from result.json (no result message)
        promo-black-003-s1/        R8 by the rules, FAIL by the black gate (1.2 s black)
        promo-hold-004-s1/         R6 PASS_WITH_NITS; 2.5 s freeze inside the brief's hold (no gate);
                                   403 in the last result message -> harness_error
        scene-mean-005-s1/         R4 FAIL under 1.2 (s_mean 4.833), R6 PASS_WITH_NITS under 1.0
        scene-loop-006-s1/         loop brief, seam ~28: FAIL (loop_seam gate) under 1.2, PASS under 1.0;
                                   judged under rubric 1.0 as PASS
        ui-unjudged-007-s1/        no judge.json: label null; still fails the duration gate
        ui-undelivered-008-s1/     no out.mp4: FAIL, host_rule null; 403 in result.json -> harness_error
        ui-cli-012-s1/             the CLI's real shapes typed line by line (CLI_MESSAGES): several lines
                                   per message id, a subagent, two result lines, an image Read's two
                                   copies, session and subagent logs, two users' homes; no out.mp4: FAIL
        promo-gzip-010-s1.tar.zst  INVALID: a gzip tar named .tar.zst
        scene-dotdot-011-s1.tar.zst INVALID: a member whose path contains '..'
    2026-10-22-r2/   completed rerun batch
        ui-card-001-r2/            no out.mp4, no judge.json: FAIL, host_rule null
    2026-10-23-s2/   running: nothing of it is published
        ui-card-002-s2/            valid
        ui-badline-009-s2/         INVALID: messages.jsonl line 4 does not parse

One module-scoped fixture builds twice (rubric in force 1.2, then `rubric_version="1.0"`) and
keeps what each build published; the tests only read.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shutil
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

import av
import dagster as dg
import numpy as np
import polars as pl
import pytest
import zstandard
from PIL import Image

from vae_pipeline.cli.build import build
from vae_pipeline.sample.video import write_video

PROJECT = Path(__file__).resolve().parent.parent
PROJECT_META = PROJECT / "meta"

S1, R2, S2 = "2026-10-21-s1", "2026-10-22-r2", "2026-10-23-s2"
FPS = 30
FRAME = 1 / FPS
RANGE_TOLERANCE = 2 * FRAME + 1e-6  # contract 2: "an expected range matches within ±2 frames"
DURATION_TOLERANCE = 0.05 + 1e-9

AXES = ("brief_fidelity", "composition", "typography", "motion", "craft", "engagement")

# contract 3, "episodes.jsonl columns", copied word for word
CONTRACT_COLUMNS = [c.strip() for c in """
id, brief_id, sample, series, title, family, genre_id, concept, aspect, duration_s, difficulty,
task_type, bank, label, host_rule, host_gates_failed, positive_eligible, score_brief_fidelity,
score_composition, score_typography, score_motion, score_craft, score_engagement,
defects_critical, defects_major, defects_minor, turns, tool_calls, subagent_tool_calls,
images_read, renders, snapshots, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, harness_error,
video_ok, video_duration_s, video_aspect, fps, width, height, black_ranges, freeze_ranges, still,
loop_seam, judge_frames, looked_at_final_render, judge_model, rubric_version,
host_rubric_version, rubric_sha256, rehosted_at, previous_final_label, video, archive,
archive_sha256, brief, benchmark_version, actor_model_id, harness_commit""".replace("\n", " ").split(",")]


# ------------------------------------------------------------------ writing the input by hand


def jsonl(messages: list) -> bytes:
    """One JSON object a line; a `str` item is written as is (for a line that must not parse)."""
    return "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages).encode()


class Log:
    """An Agent SDK message log, written message by message."""

    def __init__(self) -> None:
        self.messages: list = [{"type": "system", "subtype": "init", "session_id": "sess-1",
                                "tools": ["Task", "Bash", "Read", "Write", "Grep", "Glob"], "model": "claude-opus-5.5",
                                "claude_code_version": "2.1.310"}]
        self._ids = 0

    def assistant(self, *blocks: dict) -> Log:
        """One assistant message; a tool_use block is answered by one user tool_result message."""
        self.messages.append({"type": "assistant", "message": {
            "role": "assistant", "content": list(blocks),
            # per-message usage: never what the token columns are read from
            "usage": {"input_tokens": 11, "output_tokens": 99, "cache_read_input_tokens": 7777,
                      "cache_creation_input_tokens": 5}}})
        for block in blocks:
            if block["type"] == "tool_use":
                self.messages.append({"type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": block["id"],
                     "content": [{"type": "text", "text": "ok"}]}]}})
        return self

    def tool(self, name: str, **tool_input) -> dict:
        self._ids += 1
        return {"type": "tool_use", "id": f"toolu_{self._ids:04d}", "name": name, "input": tool_input}

    def bash(self, command: str) -> dict:
        return self.tool("Bash", command=command, description="run")

    def read(self, file_path: str) -> dict:
        return self.tool("Read", file_path=file_path)

    def text(self, text: str) -> dict:
        return {"type": "text", "text": text}

    def stream_event(self) -> Log:
        # a partial delta that looks like an image Read: carries nothing the final messages lack
        self.messages.append({"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
                              "content_block": {"type": "tool_use", "id": "toolu_x", "name": "Read",
                                                "input": {"file_path": "ghost.png"}}}})
        return self

    def image_result(self) -> Log:
        # an image in a tool result (what the agent saw): not a Read call
        self.messages.append({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_img", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "iVBORw0KGgo="}}]}]}})
        return self

    def result(self, usage: dict | None, text: str, subtype: str = "success") -> Log:
        self.messages.append({"type": "result", "subtype": subtype, "is_error": subtype != "success",
                              "num_turns": 1, "usage": usage, "result": text})
        return self

    def bytes(self) -> bytes:
        return jsonl(self.messages)


def usage(input_tokens: int, output_tokens: int, cache_read: int, cache_creation: int) -> dict:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_creation}


FAMILIES = {"ui": ("ui-product", "ui-walkthrough"), "promo": ("brand-promo", "logo-sting"),
            "scene": ("scene-3d", "orbit")}


def make_brief(brief_id: str, *, aspect: str, duration_s: float, criteria=(), events=(), beats=(),
               hold=None, loop=False) -> dict:
    family, genre = FAMILIES[brief_id.split("-")[0]]
    return {
        "brief_id": brief_id, "bank": "v1", "task_type": "brief", "title": f"Title of {brief_id}",
        "family": family, "genre_id": genre, "concept": f"concept of {brief_id}", "aspect": aspect,
        "duration_s": duration_s, "difficulty": "medium",
        "prompt": f"Make a {duration_s:g}-second {aspect} motion-graphics video.",
        "beats": [{"name": f"beat{i}", "start_s": s, "end_s": e} for i, (s, e) in enumerate(beats)],
        "events": [{"name": f"event{i}", "t_s": t} for i, t in enumerate(events)],
        "success_criteria": [{"t_s": t, "text": f"criterion {i}"} for i, t in enumerate(criteria)],
        "hold": None if hold is None else {"start_s": hold[0], "end_s": hold[1]},
        "loop": loop, "banned_defaults": ["centered title on a gradient"], "time_limit_s": 1800,
        "one_shot": None,
    }


def make_result(status: str = "completed", error: str | None = None, *, started_at: str = "2026-10-21T08:03:11Z",
                turns: int = 1, tool_calls: int = 1, usage_: dict | None = None) -> dict:
    return {"status": status, "error": error, "started_at": started_at, "ended_at": "2026-10-21T08:31:02Z",
            "duration_s": 1671.0, "turns": turns, "tool_calls": tool_calls,
            "usage": usage_ or usage(1, 1, 1, 1)}


def make_judge(scores: tuple[int, ...], defects: tuple[str, ...], *, verdict: str, host_label: str,
               host_rule: str | None, gates: list[str], rubric: str = "1.2") -> dict:
    return {
        "judge_model": "claude-fable-5.1", "rubric_version": rubric, "rubric_sha256": "ab" * 32,
        "judged_at": "2026-10-21T08:40:00Z",
        "frames": [{"t_s": 0.0, "reason": "first"}],
        "answer": {"scores": dict(zip(AXES, scores, strict=True)),
                   "defects": [{"severity": s, "t_s": 1.0 + i, "text": f"{s} defect {i}"}
                               for i, s in enumerate(defects)],
                   "verdict": verdict, "summary": "judged by hand"},
        "host": {"label": host_label, "rule": host_rule, "gates_failed": gates, "rubric_version": rubric},
    }


def episode_files(brief: dict, result: dict, log: Log | bytes, *, judge: dict | None = None,
                  video: bytes | None = None) -> dict[str, bytes]:
    files = {"brief.json": json.dumps(brief, indent=2).encode(),
             "result.json": json.dumps(result, indent=2).encode(),
             "messages.jsonl": log if isinstance(log, bytes) else log.bytes(),
             "tool-events.jsonl": b'{"hook": "PreToolUse", "tool": "Bash"}\n',
             "work/index.html": b"<!doctype html><title>hyperframes</title>\n"}
    if judge is not None:
        files["judge.json"] = json.dumps(judge, indent=2).encode()
    if video is not None:
        files["out.mp4"] = video
    return files


def write_folder(path: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)


def tar_bytes(files: dict[str, bytes], *, mode: str = "w", extra: list[tuple[str, bytes]] = ()) -> bytes:
    """A tar of `files` at the top level; `extra` members are inserted after the first one."""
    members = list(files.items())
    members[1:1] = list(extra)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_790_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_zst_archive(path: Path, files: dict[str, bytes], extra: list[tuple[str, bytes]] = ()) -> None:
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(tar_bytes(files, extra=extra)))


def clip(scratch: Path, name: str, **kwargs) -> bytes:
    path = write_video(scratch / f"{name}.mp4", fps=FPS, **kwargs)
    return path.read_bytes()


def write_series(root: Path, series_id: str, sample: str, status: str) -> Path:
    folder = root / series_id
    folder.mkdir(parents=True)
    (folder / "series.json").write_text(json.dumps({
        "series_id": series_id, "sample": sample, "status": status, "created_at": "2026-10-21T08:00:00Z",
        "actor": {"model": "claude-opus-5.5", "effort": "high", "sdk": "0.2.174", "cli": "2.1.310"},
        "harness": {"version": "1.4.2", "commit": "3f9c2e1", "dirty": False},
        "benchmark_version": "1.2.0"}, indent=2))
    return folder


# ---- ui-cli-012-s1: a run logged exactly as the Claude Code CLI writes it (contract 1), typed
# line by line. {SIG} is a thinking signature (long base64 that is no image), {PNG} the one
# picture the agent Read (its base64, twice: the tool_result block and tool_use_result's copy),
# {PNG_SIZE} its length in bytes. Two users: `builder` (/home/builder, where the agent worked)
# and `ana` (/Users/ana, the operator's laptop, seen through paths, listings and a prompt).
# Counted in the comments (contract 1's rules); <home> / <user>: what the scrub must put there.
CLI_SIGNATURE = "EqQBCkgIBxABGAIq" + "Wm9vbXMgb2YgdGhvdWdodCBzaWduZWQgYnkgdGhlIG1vZGVsLg" * 14 + "ZRgB"
CLI_MESSAGES = [
    # system lines; init: <home> 1 (cwd)
    r'{"type":"system","subtype":"hook_started","hook_id":"h-1","hook_name":"SessionStart:startup","hook_event":"SessionStart","uuid":"u-01","session_id":"sess-12"}',
    r'{"type":"system","subtype":"hook_response","hook_id":"h-1","hook_name":"SessionStart:startup","hook_event":"SessionStart","output":"","stdout":"","stderr":"","exit_code":0,"outcome":"success","uuid":"u-02","session_id":"sess-12"}',
    r'{"type":"system","subtype":"init","cwd":"/home/builder/site","session_id":"sess-12","tools":["Task","Bash","Read","Write","Grep","Glob"],"mcp_servers":[],"model":"claude-opus-5.5","permissionMode":"bypassPermissions","apiKeySource":"none","claude_code_version":"2.1.310","uuid":"u-03"}',
    r'{"type":"system","subtype":"thinking_tokens","max_thinking_tokens":31999,"uuid":"u-04","session_id":"sess-12"}',
    # msg_A, three lines, one block each: turn 1; the Bash call is call 1; <home> 2 (the command)
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_A","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"","signature":"{SIG}"}],"stop_reason":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":500,"cache_read_input_tokens":9000,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-05"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_A","type":"message","role":"assistant","content":[{"type":"text","text":"Looking at the folder first."}],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-06"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_A","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -l /home/builder/site","description":"List"},"caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":88}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-07"}',
    # an ls -l listing inside JSON strings (rows split by \n escapes): <user> 3 in content, 3 in the copy
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"total 16\n-rw-r--r--  1 builder  builder  5120 Oct 21 08:03 index.html\n-rw-r--r--  1 ana  staff  812 Oct 21 08:04 notes.md","is_error":false}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-08","tool_use_result":{"stdout":"total 16\n-rw-r--r--  1 builder  builder  5120 Oct 21 08:03 index.html\n-rw-r--r--  1 ana  staff  812 Oct 21 08:04 notes.md","stderr":"","interrupted":false,"isImage":false}}',
    r'{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1792000000,"rateLimitType":"five_hour"},"uuid":"u-09","session_id":"sess-12"}',
    r'{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_B","type":"message","role":"assistant","content":[]}},"session_id":"sess-12","parent_tool_use_id":null,"uuid":"u-10"}',
    # msg_B, two lines: turn 2; render (call 2, render 1) and Task (call 3), which starts a subagent
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_B","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_02","name":"Bash","input":{"command":"npx hyperframes render --out ../out.mp4"},"caller":{"type":"direct"}}],"stop_reason":null,"usage":{"input_tokens":2,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-11"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_B","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_03","name":"Task","input":{"description":"Check the brand mark","prompt":"Look at ref.png in the operator site folder.","subagent_type":"general-purpose"},"caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":2,"output_tokens":140}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-12"}',
    # the subagent's lines (parent toolu_03), interleaved with the main agent's render result.
    # A snapshot and an image Read in a subagent: subagent calls 1 and 2, not snapshots or images
    r'{"type":"user","message":{"role":"user","content":"Look at ref.png in the operator site folder."},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-13"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_S1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_s1","name":"Bash","input":{"command":"npx hyperframes snapshot --at 1.0"},"caller":{"type":"direct"}}],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-14"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_S1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_s2","name":"Read","input":{"file_path":"/Users/ana/work/site/ref.png"},"caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":61}},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-15"}',
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_02","type":"tool_result","content":"Rendered ../out.mp4 in 41 s","is_error":false}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-16","tool_use_result":{"stdout":"Rendered ../out.mp4 in 41 s","stderr":"","interrupted":false,"isImage":false}}',
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_s1","type":"tool_result","content":"wrote snap.png","is_error":false}]},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-17"}',
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_s2","type":"tool_result","content":[{"type":"text","text":"ref.png, a round logo"},{"type":"tool_reference","tool_name":"Read"}],"is_error":false}]},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-18"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_S2","type":"message","role":"assistant","content":[{"type":"text","text":"The brand mark is the round logo."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":12}},"parent_tool_use_id":"toolu_03","session_id":"sess-12","uuid":"u-19"}',
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_03","type":"tool_result","content":[{"type":"text","text":"The brand mark is the round logo."}],"is_error":false}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-20","tool_use_result":{"status":"completed","agentId":"a1b2c3d4","content":[{"type":"text","text":"The brand mark is the round logo."}],"totalToolUseCount":2}}',
    # msg_C: turn 3; Read of an image (call 4, image 1), after the last render: looked at it
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_C","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_04","name":"Read","input":{"file_path":"/home/builder/site/snap/final.PNG"},"caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":2,"output_tokens":40}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-21"}',
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_04","type":"tool_result","content":[{"type":"image","source":{"type":"base64","data":"{PNG}","media_type":"image/png"}}],"is_error":false}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-22","tool_use_result":{"type":"image","file":{"base64":"{PNG}","type":"image/png","originalSize":{PNG_SIZE},"dimensions":{"originalWidth":48,"originalHeight":48,"displayWidth":48,"displayHeight":48}}}}',
    # an assistant line without an id: a turn of its own (turn 4)
    r'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"It reads well."}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-23"}',
    # msg_D: turn 5; the first prompt's result line
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_D","type":"message","role":"assistant","content":[{"type":"text","text":"Delivered out.mp4."}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":9}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-24"}',
    r'{"type":"result","subtype":"success","is_error":false,"duration_ms":812000,"num_turns":5,"result":"Delivered out.mp4.","session_id":"sess-12","total_cost_usd":0.21,"usage":{"input_tokens":1000,"output_tokens":2000,"cache_read_input_tokens":300000,"cache_creation_input_tokens":4000},"modelUsage":{},"permission_denials":[],"uuid":"u-25"}',
    # the harness's second prompt
    r'{"type":"user","message":{"role":"user","content":"Count the lines of the old session log, then stop."},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-26"}',
    # msg_E, two lines: turn 6; call 5; <home> 2 (/Users/ana and its project folder)
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_E","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"","signature":"{SIG}"}],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-27"}',
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_E","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_05","name":"Bash","input":{"command":"wc -l /Users/ana/.claude/projects/-Users-ana-work-site/x.jsonl"},"caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":52}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-28"}',
    # a shell prompt (<user> 1) and a project folder (<home> 1)
    r'{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_05","type":"tool_result","content":"ana@build:~$ wc -l ~/.claude/projects/-Users-ana-work-site/x.jsonl\n12","is_error":false}]},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-29"}',
    # msg_F: turn 7; the second prompt's result line
    r'{"type":"assistant","message":{"model":"claude-opus-4-5-20251101","id":"msg_F","type":"message","role":"assistant","content":[{"type":"text","text":"12 lines."}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":5}},"parent_tool_use_id":null,"session_id":"sess-12","uuid":"u-30"}',
    r'{"type":"result","subtype":"success","is_error":false,"duration_ms":20000,"num_turns":2,"result":"12 lines.","session_id":"sess-12","total_cost_usd":0.02,"usage":{"input_tokens":100,"output_tokens":200,"cache_read_input_tokens":30000,"cache_creation_input_tokens":400},"modelUsage":{},"permission_denials":[],"uuid":"u-31"}',
]
# messages.jsonl: <home> 1 + 1 + 1 (/Users/ana/work) + 1 (/home/builder/site/snap) + 2 + 1 = 7; <user> 6 + 1 = 7.
# turns 7 (msg_A, msg_B, msg_C, the line without an id, msg_D, msg_E, msg_F); tool_calls 5;
# subagent_tool_calls 2; images_read 1; renders 1; snapshots 0; looked_at_final_render true;
# tokens: both result lines, 1000 + 100, 2000 + 200, 300,000 + 30,000, 4000 + 400.

# The session log: its own line types and, for the Read, the image's copy in toolUseResult.
# <home>: 1 (cwd) on each of the five entries, + 1 (the Read's path) + 2 (the attachment) = 8.
CLI_SESSION = [
    r'{"type":"summary","summary":"Card video: build and render","leafUuid":"s-05"}',
    r'{"type":"queue-operation","operation":"enqueue","timestamp":"2026-10-21T08:03:11.000Z","sessionId":"sess-12","content":"Make the video."}',
    r'{"type":"file-history-snapshot","messageId":"s-01","snapshot":{"messageId":"s-01","trackedFileBackups":{},"timestamp":"2026-10-21T08:03:12.000Z"},"isSnapshotUpdate":false}',
    r'{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","type":"user","message":{"role":"user","content":"Make the video."},"uuid":"s-01","timestamp":"2026-10-21T08:03:13.000Z"}',
    r'{"parentUuid":"s-01","isSidechain":false,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","type":"assistant","message":{"id":"msg_C","role":"assistant","content":[{"type":"tool_use","id":"toolu_04","name":"Read","input":{"file_path":"/home/builder/site/snap/final.PNG"}}]},"requestId":"req_1","uuid":"s-02","timestamp":"2026-10-21T08:20:00.000Z"}',
    r'{"parentUuid":"s-02","isSidechain":false,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_04","type":"tool_result","content":[{"type":"image","source":{"type":"base64","data":"{PNG}","media_type":"image/png"}}]}]},"toolUseResult":{"type":"image","file":{"base64":"{PNG}","type":"image/png","originalSize":{PNG_SIZE},"dimensions":{"originalWidth":48,"originalHeight":48,"displayWidth":48,"displayHeight":48}}},"uuid":"s-03","timestamp":"2026-10-21T08:20:01.000Z"}',
    r'{"parentUuid":"s-03","isSidechain":false,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","type":"attachment","attachment":{"type":"file","filename":"/Users/ana/.claude/projects/-Users-ana-work-site/x.jsonl"},"uuid":"s-04","timestamp":"2026-10-21T08:21:00.000Z"}',
    r'{"parentUuid":"s-04","isSidechain":false,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"s-05","timestamp":"2026-10-21T08:22:00.000Z"}',
]
# The subagent's own log (isSidechain true). <home>: 1 (cwd) on each of three, + 1 (the Read) = 4;
# <user>: 1 (the listing's owner, group staff kept) in the content and 1 in toolUseResult = 2.
CLI_SUBAGENT = [
    r'{"parentUuid":null,"isSidechain":true,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","agentId":"a1b2c3d4","type":"user","message":{"role":"user","content":"Look at ref.png in the operator site folder."},"uuid":"b-01","timestamp":"2026-10-21T08:10:00.000Z"}',
    r'{"parentUuid":"b-01","isSidechain":true,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","agentId":"a1b2c3d4","type":"assistant","message":{"id":"msg_S1","role":"assistant","content":[{"type":"tool_use","id":"toolu_s2","name":"Read","input":{"file_path":"/Users/ana/work/site/ref.png"}}]},"uuid":"b-02","timestamp":"2026-10-21T08:10:05.000Z"}',
    r'{"parentUuid":"b-02","isSidechain":true,"userType":"external","cwd":"/home/builder/site","sessionId":"sess-12","version":"2.1.310","gitBranch":"main","agentId":"a1b2c3d4","type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_s1","type":"tool_result","content":"-rw-r--r--  1 ana  staff  4400 Oct 20 17:12 ref.png"}]},"toolUseResult":{"stdout":"-rw-r--r--  1 ana  staff  4400 Oct 20 17:12 ref.png","stderr":"","interrupted":false,"isImage":false},"uuid":"b-03","timestamp":"2026-10-21T08:10:09.000Z"}',
]
CLI_PLACEHOLDERS = {"home": 7 + 8 + 4, "user": 7 + 2}
CLI_USERS = ("ana", "builder")


def cli_picture() -> bytes:
    """The picture the agent Read: a noisy 48x48 PNG (its base64 is far past 512 characters)."""
    import random

    out = io.BytesIO()
    Image.frombytes("RGB", (48, 48), random.Random(12).randbytes(48 * 48 * 3)).save(out, "PNG")
    return out.getvalue()


def cli_lines(lines: list[str], picture: bytes) -> bytes:
    data = base64.b64encode(picture).decode()
    text = "\n".join(lines).replace("{SIG}", CLI_SIGNATURE).replace("{PNG_SIZE}", str(len(picture)))
    return (text.replace("{PNG}", data) + "\n").encode()


def write_runs_root(root: Path, scratch: Path) -> dict[str, bytes]:
    """Write the runs root described in the module docstring; return each delivered video's bytes."""
    videos: dict[str, bytes] = {}
    s1 = write_series(root, S1, "s1", "completed")

    # ---- ui-card-001-s1 (folder): R5 PASS_WITH_NITS, the counting columns
    log = Log()
    log.assistant({"type": "thinking", "thinking": "plan", "signature": "sig"}, log.text("I will build it"))  # turn 1
    log.assistant(log.bash("mkdir -p work && cd work && npx hyperframes init"))  # turn 2, call 1 (init: no render)
    log.stream_event()                                                           # not a message that counts
    log.assistant(log.text("writing"), log.tool("Write", file_path="work/index.html", content="<html>"))  # t3, c2
    log.assistant(log.bash("cd work && npx hyperframes snapshot --at 1.5 -o snap.png"))  # t4, c3, snapshot 1
    log.assistant(log.read("/tmp/run/work/snap.PNG"))                            # t5, c4, image 1 (.PNG)
    log.image_result()                                                           # an image result is no Read
    log.assistant(log.bash("cd work && npx hyperframes render -o ../out.mp4"),   # t6, c5, render 1 (the last)
                  log.read("work/notes.md"))                                     #        c6, not an image
    log.assistant(log.read("frames/check.JPeG"))                                 # t7, c7, image 2 (.JPeG), after
    log.assistant(log.read("work/logo.svg"),                                     # t8, c8, .svg is not an image
                  log.tool("Glob", pattern="**/*.png"),                          #        c9, not a Read
                  log.bash("cat frames/contact.png | wc -c"))                    #        c10, not a Read
    log.assistant(log.text("Delivered."))                                        # t9
    log.result(usage(1200, 3400, 1_056_000, 7800), "Delivered out.mp4 (4.0 s)")
    # turns 9, tool_calls 10, images_read 2, renders 1, snapshots 1; the Read of check.JPeG (call 7)
    # comes after the last render (call 5): looked_at_final_render true. Tokens: the result message's.
    # result.json says turns 10 / tool_calls 9 and other usage: a warning, not invalid.
    brief = make_brief("ui-card-001", aspect="16:9", duration_s=4.0, criteria=(2.0, 2.05), events=(1.0, 9.0),
                       beats=((0.0, 2.0), (2.0, 4.0)))
    videos["ui-card-001-s1"] = clip(scratch, "e1", width=320, height=180, duration_s=4.0)
    write_folder(s1 / "ui-card-001-s1", episode_files(
        brief, make_result(turns=10, tool_calls=9, usage_=usage(1100, 3300, 1_000_000, 7000)), log,
        judge=make_judge((7, 7, 7, 7, 7, 7), ("major",), verdict="PASS_WITH_NITS",
                         host_label="PASS_WITH_NITS", host_rule="R5", gates=[]),
        video=videos["ui-card-001-s1"]))
    (s1 / "ui-card-001-s1" / "frames").mkdir()
    (s1 / "ui-card-001-s1" / "frames" / "labels.json").write_text('[{"file": "f00.jpg", "t_s": 0.0, "reason": "first"}]')

    # ---- ui-card-002-s1 (.tar.zst): R8 PASS, positive-eligible, tokens from result.json
    log = Log()
    log.assistant(log.bash("npx hyperframes render --quality draft"))                  # t1, c1, render 1
    log.assistant(log.read("shots/A.WEBP"))                                            # t2, c2, image 1 (.WEBP)
    log.assistant(log.bash("npx hyperframes snapshot --at 2 && npx hyperframes render"))  # t3, c3, snap 1, render 2
    log.assistant(log.bash("ls *.png"), log.read("notes.png.txt"))                     # t4, c4, c5: no image
    log.stream_event()
    # no result message (the run timed out): tokens from result.json's usage. The last image Read
    # (call 2) is before the last render (call 3): looked_at_final_render false. The error text holds
    # "403" but the status is `timeout`, not `error`: no harness_error.
    brief = make_brief("ui-card-002", aspect="9:16", duration_s=3.0, events=(1.5,), beats=((0.0, 3.0),))
    videos["ui-card-002-s1"] = clip(scratch, "e2", width=180, height=320, duration_s=3.0)
    write_zst_archive(s1 / "ui-card-002-s1.tar.zst", episode_files(
        brief, make_result("timeout", "time limit of 1800 s reached while retrying HTTP 403",
                           started_at="2026-10-21T23:30:00-02:00", turns=4, tool_calls=5,
                           usage_=usage(800, 2100, 30_000, 4000)), log,
        judge=make_judge((8, 8, 8, 8, 8, 8), ("minor", "minor"), verdict="PASS", host_label="PASS",
                         host_rule="R8", gates=[]),
        video=videos["ui-card-002-s1"]))

    # ---- promo-black-003-s1: 1.2 s of black from 1.0 s: rules say R8 PASS, the black gate says FAIL
    log = Log()
    log.assistant(log.text("rendering"), log.bash("npx hyperframes render"))  # t1, c1, render 1
    log.assistant(log.read("out/frame_012.jpg"))                              # t2, c2, image 1, after the render
    log.result(usage(500, 1500, 20_000, 2500), "done")
    brief = make_brief("promo-black-003", aspect="16:9", duration_s=4.0, beats=((0.0, 4.0),))
    videos["promo-black-003-s1"] = clip(scratch, "e3", width=320, height=180, duration_s=4.0, black=[(1.0, 2.2)])
    write_folder(s1 / "promo-black-003-s1", episode_files(
        brief, make_result(turns=2, tool_calls=2, usage_=usage(500, 1500, 20_000, 2500)), log,
        judge=make_judge((9, 8, 8, 8, 8, 8), (), verdict="PASS", host_label="FAIL", host_rule="R8",
                         gates=["black"]),
        video=videos["promo-black-003-s1"]))

    # ---- promo-hold-004-s1: freeze 2.5-5.0 s (2.5 s) inside hold 2.6-5.0 widened by 0.25 -> no gate;
    # s_min 5 -> R6 PASS_WITH_NITS (1.2); 403 in the last result message -> harness_error
    log = Log()
    log.assistant(log.read("ref/moodboard.Jpg"))         # t1, c1, image 1 (.Jpg), before any render
    log.assistant(log.bash("npx hyperframes render"))    # t2, c2, render 1: no image Read after it
    log.assistant(log.text("finishing up"))              # t3
    log.result(usage(700, 1900, 25_000, 3000), 'API Error: 403 {"type":"forbidden"}', subtype="error_during_execution")
    brief = make_brief("promo-hold-004", aspect="1:1", duration_s=5.0, hold=(2.6, 5.0), beats=((0.0, 2.5), (2.5, 5.0)))
    videos["promo-hold-004-s1"] = clip(scratch, "e4", width=240, height=240, duration_s=5.0, freeze=[(2.5, 5.0)])
    write_folder(s1 / "promo-hold-004-s1", episode_files(
        brief, make_result(turns=3, tool_calls=2, usage_=usage(700, 1900, 25_000, 3000)), log,
        judge=make_judge((8, 7, 7, 5, 7, 8), (), verdict="PASS", host_label="PASS_WITH_NITS",
                         host_rule="R6", gates=[]),
        video=videos["promo-hold-004-s1"]))

    # ---- scene-mean-005-s1: scores 5,5,5,4,5,5: s_mean 29/6 = 4.833 -> R4 FAIL (1.2: < 5.0);
    # under 1.0 (< 4.5) R4 does not hold, M = 0, s_min 4 < 5 -> R6 PASS_WITH_NITS
    log = Log()
    log.assistant(log.bash("npx hyperframes snapshot --at 0.5"))  # t1, c1, snapshot 1
    log.assistant(log.read("snap.png"))                           # t2, c2, image 1
    log.assistant(log.bash("npx hyperframes render"))             # t3, c3, render 1: the Read came before it
    log.result(usage(300, 900, 10_000, 1000), "done")
    brief = make_brief("scene-mean-005", aspect="16:9", duration_s=3.0)
    videos["scene-mean-005-s1"] = clip(scratch, "e5", width=320, height=180, duration_s=3.0)
    write_folder(s1 / "scene-mean-005-s1", episode_files(
        brief, make_result(turns=3, tool_calls=3, usage_=usage(300, 900, 10_000, 1000)), log,
        judge=make_judge((5, 5, 5, 4, 5, 5), ("minor",), verdict="PASS_WITH_NITS", host_label="FAIL",
                         host_rule="R4", gates=[]),
        video=videos["scene-mean-005-s1"]))

    # ---- scene-loop-006-s1: a loop brief whose clip ends on a frame held from 2.3 s: seam ~28
    # (12 < seam <= 40): loop_seam gate fails under 1.2, not under 1.0. Judged under 1.0 as PASS.
    log = Log()
    log.assistant(log.bash("npx hyperframes render"))              # t1, c1, render 1
    log.assistant(log.read("a.png"), log.read("b.PNG"))            # t2, c2, c3, images 2, after
    log.result(usage(400, 1000, 12_000, 1500), "done")
    brief = make_brief("scene-loop-006", aspect="1:1", duration_s=3.0, loop=True)
    videos["scene-loop-006-s1"] = clip(scratch, "e6", width=240, height=240, duration_s=3.0, loop=True,
                                       freeze=[(2.3, 3.0)])
    write_folder(s1 / "scene-loop-006-s1", episode_files(
        brief, make_result(turns=2, tool_calls=3, usage_=usage(400, 1000, 12_000, 1500)), log,
        judge=make_judge((8, 8, 8, 8, 8, 8), ("minor",), verdict="PASS", host_label="PASS", host_rule="R8",
                         gates=[], rubric="1.0"),
        video=videos["scene-loop-006-s1"]))

    # ---- ui-unjudged-007-s1: a 3.0 s clip for a 5.0 s brief, never judged
    log = Log()
    log.assistant(log.text("thinking aloud"))                      # t1
    log.assistant(log.tool("Write", file_path="index.html", content="<html>"))  # t2, c1
    log.assistant(log.text("checking"))                            # t3
    log.assistant(log.text("done"))                                # t4
    log.result(usage(100, 200, 3000, 400), "done")
    brief = make_brief("ui-unjudged-007", aspect="16:9", duration_s=5.0)
    videos["ui-unjudged-007-s1"] = clip(scratch, "e7", width=320, height=180, duration_s=3.0)
    write_folder(s1 / "ui-unjudged-007-s1", episode_files(
        brief, make_result(turns=4, tool_calls=1, usage_=usage(100, 200, 3000, 400)), log,
        video=videos["ui-unjudged-007-s1"]))

    # ---- ui-undelivered-008-s1: no out.mp4, no judge.json; died of a 403 (result.json)
    log = Log()
    log.assistant(log.bash("npx hyperframes render"))  # t1, c1, render 1
    brief = make_brief("ui-undelivered-008", aspect="16:9", duration_s=6.0)
    write_folder(s1 / "ui-undelivered-008-s1", episode_files(
        brief, make_result("error", "API Error: 403 Forbidden (organization disabled)", turns=1, tool_calls=1,
                           usage_=usage(50, 60, 700, 80)), log))

    # ---- ui-cli-012-s1: the CLI's own shapes, typed by hand (CLI_MESSAGES); nothing delivered
    picture = cli_picture()
    files = episode_files(make_brief("ui-cli-012", aspect="16:9", duration_s=4.0),
                          make_result(turns=7, tool_calls=5, usage_=usage(9, 9, 9, 9)),
                          cli_lines(CLI_MESSAGES, picture))
    files["transcript/session.jsonl"] = cli_lines(CLI_SESSION, picture)
    files["transcript/subagents/agent-a1b2c3d4.jsonl"] = cli_lines(CLI_SUBAGENT, picture)
    write_folder(s1 / "ui-cli-012-s1", files)

    # ---- promo-gzip-010-s1.tar.zst: a gzip tar under a zstd name -> invalid
    good = episode_files(make_brief("promo-gzip-010", aspect="16:9", duration_s=3.0), make_result(), Log())
    (s1 / "promo-gzip-010-s1.tar.zst").write_bytes(tar_bytes(good, mode="w:gz"))

    # ---- scene-dotdot-011-s1.tar.zst: a zstd tar with a member '../escape.txt' -> invalid
    good = episode_files(make_brief("scene-dotdot-011", aspect="16:9", duration_s=3.0), make_result(), Log())
    write_zst_archive(s1 / "scene-dotdot-011-s1.tar.zst", good, extra=[("../escape.txt", b"escaped\n")])

    # ---- 2026-10-22-r2 (completed rerun): ui-card-001-r2, nothing delivered, not judged
    r2 = write_series(root, R2, "r2", "completed")
    log = Log()
    log.assistant(log.bash("npx hyperframes render"))  # t1, c1, render 1
    log.result(usage(10, 20, 300, 40), "render crashed, exit code 1", subtype="error_during_execution")
    write_folder(r2 / "ui-card-001-r2", episode_files(
        make_brief("ui-card-001", aspect="16:9", duration_s=4.0),
        make_result("error", "render crashed (exit code 1)", started_at="2026-10-22T09:00:00Z"), log))

    # ---- 2026-10-23-s2 (running): one valid episode, one with a broken line 4 in messages.jsonl
    s2 = write_series(root, S2, "s2", "running")
    log = Log()
    log.assistant(log.bash("npx hyperframes render"))
    log.result(usage(10, 20, 300, 40), "done")
    write_folder(s2 / "ui-card-002-s2", episode_files(make_brief("ui-card-002", aspect="9:16", duration_s=3.0),
                                                      make_result(), log))
    bad = jsonl([{"type": "system", "subtype": "init"},                                  # line 1
                 {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}},  # line 2
                 {"type": "assistant", "message": {"content": []}},                      # line 3
                 '{"type": "assistant", "message": {"content": [',                        # line 4: broken
                 {"type": "result", "subtype": "success", "usage": usage(1, 1, 1, 1), "result": "ok"}])
    write_folder(s2 / "ui-badline-009-s2", episode_files(
        make_brief("ui-badline-009", aspect="16:9", duration_s=3.0), make_result(), bad))
    return videos


# ------------------------------------------------------------------ expected values, by hand

NULL_SCORES = dict.fromkeys([f"score_{a}" for a in AXES])


def scores(*values: int) -> dict:
    return {f"score_{a}": v for a, v in zip(AXES, values, strict=True)}


def counts(turns, tool_calls, images_read, renders, snapshots, looked, tokens, harness_error=False,
           subagent_tool_calls=0) -> dict:
    input_tokens, output_tokens, cache_read, cache_creation = tokens
    return {"turns": turns, "tool_calls": tool_calls, "subagent_tool_calls": subagent_tool_calls,
            "images_read": images_read, "renders": renders,
            "snapshots": snapshots, "looked_at_final_render": looked, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "cache_read_tokens": cache_read,
            "cache_creation_tokens": cache_creation, "harness_error": harness_error}


# The counting columns, from the message logs above (see the comments there).
EXPECTED_COUNTS = {
    "ui-card-001-s1": counts(9, 10, 2, 1, 1, True, (1200, 3400, 1_056_000, 7800)),
    "ui-card-002-s1": counts(4, 5, 1, 2, 1, False, (800, 2100, 30_000, 4000)),
    "promo-black-003-s1": counts(2, 2, 1, 1, 0, True, (500, 1500, 20_000, 2500)),
    "promo-hold-004-s1": counts(3, 2, 1, 1, 0, False, (700, 1900, 25_000, 3000), harness_error=True),
    "scene-mean-005-s1": counts(3, 3, 1, 1, 1, False, (300, 900, 10_000, 1000)),
    "scene-loop-006-s1": counts(2, 3, 2, 1, 0, True, (400, 1000, 12_000, 1500)),
    "ui-unjudged-007-s1": counts(4, 1, 0, 0, 0, False, (100, 200, 3000, 400)),
    "ui-undelivered-008-s1": counts(1, 1, 0, 1, 0, False, (50, 60, 700, 80), harness_error=True),
    "ui-card-001-r2": counts(1, 1, 0, 1, 0, False, (10, 20, 300, 40)),
    "ui-cli-012-s1": counts(7, 5, 1, 1, 0, True, (1100, 2200, 330_000, 4400), subagent_tool_calls=2),
}

# The host verdict under rubric 1.2 (contract 2), with the judge.json host label it starts from.
EXPECTED_LABELS_12 = {
    # M = 1 -> R5 PASS_WITH_NITS; not positive (a major defect)
    "ui-card-001-s1": dict(label="PASS_WITH_NITS", host_rule="R5", host_gates_failed=[], positive_eligible=False,
                           **scores(7, 7, 7, 7, 7, 7), defects=(0, 1, 0), previous_final_label="PASS_WITH_NITS"),
    # s_min 8, m = 2 < 3 -> R8 PASS, positive
    "ui-card-002-s1": dict(label="PASS", host_rule="R8", host_gates_failed=[], positive_eligible=True,
                           **scores(8, 8, 8, 8, 8, 8), defects=(0, 0, 2), previous_final_label="PASS"),
    # R8 by the rules; black range 1.2 s >= 1.0 -> FAIL (the 1.2 s black run is also a 1.2 s freeze: < 2.0)
    "promo-black-003-s1": dict(label="FAIL", host_rule="R8", host_gates_failed=["black"], positive_eligible=False,
                               **scores(9, 8, 8, 8, 8, 8), defects=(0, 0, 0), previous_final_label="FAIL"),
    # s_min 5 < 6 -> R6; freeze [2.5, 5.0] inside [2.6 - 0.25, 5.0 + 0.25] -> no gate; harness_error -> not positive
    "promo-hold-004-s1": dict(label="PASS_WITH_NITS", host_rule="R6", host_gates_failed=[], positive_eligible=False,
                              **scores(8, 7, 7, 5, 7, 8), defects=(0, 0, 0), previous_final_label="PASS_WITH_NITS"),
    # s_mean 4.833 < 5.0 -> R4 FAIL
    "scene-mean-005-s1": dict(label="FAIL", host_rule="R4", host_gates_failed=[], positive_eligible=False,
                              **scores(5, 5, 5, 4, 5, 5), defects=(0, 0, 1), previous_final_label="FAIL"),
    # R8; loop brief, seam > 12.0 -> FAIL. Stored host label PASS (rubric 1.0): a change on first computation
    "scene-loop-006-s1": dict(label="FAIL", host_rule="R8", host_gates_failed=["loop_seam"], positive_eligible=False,
                              **scores(8, 8, 8, 8, 8, 8), defects=(0, 0, 1), previous_final_label="PASS"),
    # unjudged: label, rule, scores, defect counts null; |3.0 - 5.0| = 2.0 > max(1.0, 1.0) -> duration gate listed
    "ui-unjudged-007-s1": dict(label=None, host_rule=None, host_gates_failed=["duration"], positive_eligible=False,
                               **NULL_SCORES, defects=(None, None, None), previous_final_label=None),
    # no out.mp4 -> no_video: FAIL, host_rule null; no judge.json -> no label before
    "ui-undelivered-008-s1": dict(label="FAIL", host_rule=None, host_gates_failed=["no_video"],
                                  positive_eligible=False, **NULL_SCORES, defects=(None, None, None),
                                  previous_final_label=None),
    "ui-card-001-r2": dict(label="FAIL", host_rule=None, host_gates_failed=["no_video"], positive_eligible=False,
                           **NULL_SCORES, defects=(None, None, None), previous_final_label=None),
    "ui-cli-012-s1": dict(label="FAIL", host_rule=None, host_gates_failed=["no_video"], positive_eligible=False,
                          **NULL_SCORES, defects=(None, None, None), previous_final_label=None),
}

# Under rubric 1.0 only these change (R4 s_mean < 4.5, R6 s_min < 5, loop_seam max 40.0):
EXPECTED_CHANGES_10 = {
    # s_min 5 is not < 5 -> R6 no; m = 0 -> R7 no -> R8 PASS (still not positive: harness_error)
    "promo-hold-004-s1": dict(label="PASS", host_rule="R8", host_gates_failed=[], positive_eligible=False,
                              previous_final_label="PASS_WITH_NITS"),
    # s_mean 4.833 is not < 4.5; M = 0; s_min 4 < 5 -> R6 PASS_WITH_NITS; positive (c = M = 0, no gate)
    "scene-mean-005-s1": dict(label="PASS_WITH_NITS", host_rule="R6", host_gates_failed=[], positive_eligible=True,
                              previous_final_label="FAIL"),
    # seam ~28 <= 40.0 -> no gate -> R8 PASS, positive (one minor defect only)
    "scene-loop-006-s1": dict(label="PASS", host_rule="R8", host_gates_failed=[], positive_eligible=True,
                              previous_final_label="FAIL"),
}

JUDGED_UNDER = {"ui-card-001-s1": "1.2", "ui-card-002-s1": "1.2", "promo-black-003-s1": "1.2",
                "promo-hold-004-s1": "1.2", "scene-mean-005-s1": "1.2", "scene-loop-006-s1": "1.0"}

# Mechanical facts of the planted clips (contract 2): duration, size, aspect, black and freeze ranges.
EXPECTED_FACTS = {
    "ui-card-001-s1": dict(duration=4.0, width=320, height=180, aspect="16:9", black=[], freeze=[]),
    "ui-card-002-s1": dict(duration=3.0, width=180, height=320, aspect="9:16", black=[], freeze=[]),
    "promo-black-003-s1": dict(duration=4.0, width=320, height=180, aspect="16:9",
                               black=[[1.0, 2.2]], freeze=[[1.0, 2.2]]),  # a black run is also frozen
    "promo-hold-004-s1": dict(duration=5.0, width=240, height=240, aspect="1:1", black=[], freeze=[[2.5, 5.0]]),
    "scene-mean-005-s1": dict(duration=3.0, width=320, height=180, aspect="16:9", black=[], freeze=[]),
    "scene-loop-006-s1": dict(duration=3.0, width=240, height=240, aspect="1:1", black=[], freeze=[[2.3, 3.0]]),
    "ui-unjudged-007-s1": dict(duration=3.0, width=320, height=180, aspect="16:9", black=[], freeze=[]),
}

# The sampler (contract 2) on ui-card-001-s1: duration 4.0 s at 30 fps, so times are clamped to
# [0, 3.967]. Steps 1-4: first 0; last 3.967; criteria 2.0 (2.05 dropped: < 0.1 s from 2.0);
# events 1.0 (9.0 clamps to 3.967: dropped); beat midpoints 1.0 (dropped) and 3.0 -> 5 times.
# Fill, widest gap first, earliest on a tie: 0.5, 1.5, 2.5, 3.483 (gap 3.0-3.967),
# then the 0.5 s gaps from the left: 0.25, 0.75, 1.25, 1.75, 2.25 -> 14.
EXPECTED_FRAMES_CARD_001 = [
    (0.0, "first"), (0.25, "fill"), (0.5, "fill"), (0.75, "fill"), (1.0, "event"), (1.25, "fill"),
    (1.5, "fill"), (1.75, "fill"), (2.0, "criterion"), (2.25, "fill"), (2.5, "fill"), (3.0, "beat"),
    (3.483, "fill"), (3.967, "last"),
]

PUBLISHED = sorted(EXPECTED_COUNTS)  # the valid episodes of the two completed series
DELIVERED = sorted(EXPECTED_FACTS)

STATS_NAMES = ["Episodes", "Videos delivered", "Labels", "Positive-eligible (pass, no major defect, no failed gate)",
               "Agent turns / tool calls / images viewed", "hyperframes render / snapshot calls",
               "Actor tokens (output; cache read)", "Aspect ratios"]
# 10 rows: 9 briefs (ui-card-001 twice); samples r2: 1, s1: 9.
# Videos: 7 decode; 4 + 3 + 4 + 5 + 3 + 3 + 3 = 25 s = 0.417 min -> "0.4".
# Summed over 001-s1, 002, 003, 004, 005, 006, 007, 008, 001-r2, 012 (subagent calls not included):
#   turns 9+4+2+3+3+2+4+1+1+7 = 36; tool calls 10+5+2+2+3+3+1+1+1+5 = 33; images 2+1+1+1+1+2+0+0+0+1 = 9
#   renders 1+2+1+1+1+1+0+1+1+1 = 10; snapshots 1+1+0+0+1+0+0+0+0+0 = 3
#   output tokens 3400+2100+1500+1900+900+1000+200+60+20+2200 = 13,280
#   cache read 1,056,000+30,000+20,000+25,000+10,000+12,000+3,000+700+300+330,000 = 1,487,000
# Briefs' aspects: 16:9 x7 (001 twice, 003, 005, 007, 008, 012), 1:1 x2 (004, 006), 9:16 x1 (002).
EXPECTED_STATS_12 = [
    ("Episodes", "10 (9 briefs; samples r2: 1, s1: 9)"),
    ("Videos delivered", "7 (0.4 min of footage)"),
    ("Labels", "PASS 1, PASS_WITH_NITS 2, FAIL 6, unjudged 1"),
    ("Positive-eligible (pass, no major defect, no failed gate)", "1"),
    ("Agent turns / tool calls / images viewed", "36 / 33 / 9"),
    ("hyperframes render / snapshot calls", "10 / 3"),
    ("Actor tokens (output; cache read)", "13,280; 1,487,000"),
    ("Aspect ratios", "16:9 7, 1:1 2, 9:16 1"),
]
# Under 1.0: PASS 002, 004, 006; PASS_WITH_NITS 001, 005; FAIL 003, 008, r2, 012; unjudged 007.
# Positive: 002, 005, 006 (004 is a harness error).
EXPECTED_STATS_10 = [(name, {"Labels": "PASS 3, PASS_WITH_NITS 2, FAIL 4, unjudged 1",
                             "Positive-eligible (pass, no major defect, no failed gate)": "3"}.get(name, value))
                     for name, value in EXPECTED_STATS_12]
# Families: ui-product 6 (001-s1, 002, 007, 008, 001-r2, 012); brand-promo 2 and scene-3d 2 (a tie: by name).
EXPECTED_FAMILIES = ["| ui-product | 6 |", "| brand-promo | 2 |", "| scene-3d | 2 |"]

EXPECTED_INVALID = {
    (S1, "promo-gzip-010-s1"): ("promo-gzip-010-s1.tar.zst", None),
    (S1, "scene-dotdot-011-s1"): ("scene-dotdot-011-s1.tar.zst", None),
    (S2, "ui-badline-009-s2"): ("messages.jsonl", 4),
}


# ------------------------------------------------------------------ building twice


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def published(dataset: Path) -> dict:
    rows = [json.loads(line) for line in (dataset / "episodes.jsonl").read_text().splitlines() if line.strip()]
    return {"rows": rows, "by_id": {r["id"]: r for r in rows}, "readme": (dataset / "README.md").read_text()}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The runs root written by hand, built under rubric 1.2 and then under 1.0 (isolated like
    conftest's `pipeline_env`, but once for the module)."""
    tmp = tmp_path_factory.mktemp("independent")
    meta = tmp / "meta"
    shutil.copytree(PROJECT_META, meta)
    runs, scratch, dataset = tmp / "runs", tmp / "scratch", tmp / "dataset"
    runs.mkdir()
    scratch.mkdir()
    videos = write_runs_root(runs, scratch)
    before = tree(runs)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"VAE_HOME": tmp / "home", "DAGSTER_HOME": tmp / "home" / "dagster",
                            "VAE_META_DIR": meta, "VAE_DATASET_DIR": dataset, "VAE_RUBRIC_VERSION": "latest",
                            "VAE_RUNS_ROOT": tmp / "unset", "VAE_HARNESS_HOSTNAME": "",
                            "VAE_HARNESS_USER": "", "VAE_MAX_UNPACKED_BYTES": str(4 * 1024**3)}.items():
            mp.setenv(name, str(value))
        started_12 = datetime.now(UTC).replace(microsecond=0)
        summary_12 = build(runs, dataset)
        ended_12 = datetime.now(UTC)
        first = published(dataset)
        first["videos"] = sorted(p.name for p in (dataset / "videos").iterdir()) if (dataset / "videos").is_dir() else None
        first["video_bytes"] = {p.name: p.read_bytes() for p in (dataset / "videos").glob("*.mp4")}
        time.sleep(1.1)  # rehosted_at has whole seconds: keep the two builds apart
        started_10 = datetime.now(UTC).replace(microsecond=0)
        summary_10 = build(runs, dataset, rubric_version="1.0")
        ended_10 = datetime.now(UTC)
        second = published(dataset)
    return {
        "runs": runs, "meta": meta, "dataset": dataset, "home": tmp / "home", "videos": videos, "before": before,
        "after": tree(runs),
        "summary_12": summary_12, "summary_10": summary_10, "first": first, "second": second,
        "window_12": (started_12, ended_12), "window_10": (started_10, ended_10),
    }


def stats_of(readme: str) -> list[tuple[str, str]]:
    match = re.search(r"^\| \| \|\n\|---\|---\|\n((?:\|.*\|\n?)+)", readme, re.M)
    assert match, "no `| | |` stats table in README.md"
    rows = []
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows.append((cells[0], cells[1]))
    return rows


def utc(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    assert moment.tzinfo is not None and moment.utcoffset().total_seconds() == 0, value
    return moment


def in_window(value: str | None, window) -> bool:
    return value is not None and window[0].timestamp() - 1 <= utc(value).timestamp() <= window[1].timestamp() + 1


def close_ranges(got, want) -> bool:
    return len(got) == len(want) and all(
        abs(g[0] - w[0]) <= RANGE_TOLERANCE and abs(g[1] - w[1]) <= RANGE_TOLERANCE for g, w in zip(got, want))


# ------------------------------------------------------------------ the tests


def test_the_planted_loop_clip_sits_between_the_two_seam_thresholds(built):
    """Precondition of the rehost test, measured here with PyAV by contract 2's definition:
    mean |luma(last) - luma(first)| on full-range gray at 160 px wide, area averaged."""
    path = built["runs"] / S1 / "scene-loop-006-s1" / "out.mp4"
    with av.open(str(path)) as container:
        pictures = [f.reformat(width=160, height=round(160 * f.height / f.width), format="gray",
                               interpolation="AREA").to_ndarray() for f in container.decode(video=0)]
    seam = float(np.abs(pictures[-1].astype(np.int16) - pictures[0]).mean())
    assert 12.0 < seam <= 40.0, seam
    row = built["first"]["by_id"]["scene-loop-006-s1"]
    assert row["loop_seam"] == pytest.approx(seam, abs=0.01)


def test_rows_are_the_valid_episodes_of_completed_series_in_contract_columns(built):
    rows = built["first"]["rows"]
    # sorted by id; nothing of the running series 2026-10-23-s2, no invalid episode
    assert [r["id"] for r in rows] == PUBLISHED
    assert not any(r["series"] == S2 or r["id"].endswith("-s2") for r in rows)
    for row in rows:
        assert list(row) == CONTRACT_COLUMNS, row["id"]
        brief_id, _, sample = row["id"].rpartition("-")
        assert (row["brief_id"], row["sample"]) == (brief_id, sample)
        assert row["series"] == (R2 if sample == "r2" else S1)
        brief = json.loads(row["brief"])
        assert brief["brief_id"] == brief_id
        for column in ("title", "family", "genre_id", "concept", "aspect", "duration_s", "difficulty",
                       "task_type", "bank"):
            assert row[column] == brief[column], (row["id"], column)
        # the series' (write_series) and the init line's (Log)
        assert (row["benchmark_version"], row["harness_commit"], row["actor_model_id"]) == \
            ("1.2.0", "3f9c2e1", "claude-opus-5.5"), row["id"]
    parquet = pl.read_parquet(built["dataset"] / "data" / "episodes.parquet")  # as of the second build
    assert parquet.columns == CONTRACT_COLUMNS and parquet["id"].to_list() == PUBLISHED
    assert built["first"]["by_id"]["ui-card-001-s1"]["family"] == "ui-product"
    assert json.loads(built["first"]["by_id"]["promo-hold-004-s1"]["brief"])["hold"] == {"start_s": 2.6, "end_s": 5.0}


@pytest.mark.parametrize("episode_id", PUBLISHED)
def test_counting_columns_follow_the_messages(built, episode_id):
    row = built["first"]["by_id"][episode_id]
    got = {column: row[column] for column in EXPECTED_COUNTS[episode_id]}
    assert got == EXPECTED_COUNTS[episode_id]


@pytest.mark.parametrize("episode_id", PUBLISHED)
def test_host_labels_under_rubric_1_2(built, episode_id):
    row = built["first"]["by_id"][episode_id]
    want = dict(EXPECTED_LABELS_12[episode_id])
    critical, major, minor = want.pop("defects")
    want.update(defects_critical=critical, defects_major=major, defects_minor=minor)
    got = {column: row[column] for column in want}
    assert got == want
    assert row["host_rubric_version"] == "1.2"
    assert row["rubric_sha256"] == hashlib.sha256((built["meta"] / "rubric-v1.2.json").read_bytes()).hexdigest()
    judged = episode_id in JUDGED_UNDER
    assert row["judge_model"] == ("claude-fable-5.1" if judged else None)
    assert row["rubric_version"] == JUDGED_UNDER.get(episode_id)
    # first computation: the label before is judge.json's host.label; only a changed label is rehosted
    if episode_id == "scene-loop-006-s1":  # stored PASS (1.0), computed FAIL (1.2): a change
        assert in_window(row["rehosted_at"], built["window_12"]), row["rehosted_at"]
    else:
        assert row["rehosted_at"] is None


@pytest.mark.parametrize("episode_id", DELIVERED)
def test_video_facts_within_the_contract_tolerances(built, episode_id):
    row = built["first"]["by_id"][episode_id]
    want = EXPECTED_FACTS[episode_id]
    assert row["video_ok"] is True
    assert abs(row["video_duration_s"] - want["duration"]) <= DURATION_TOLERANCE, row["video_duration_s"]
    assert row["fps"] == pytest.approx(FPS, abs=0.01)
    assert (row["width"], row["height"], row["video_aspect"]) == (want["width"], want["height"], want["aspect"])
    assert close_ranges(row["black_ranges"], want["black"]), row["black_ranges"]
    assert close_ranges(row["freeze_ranges"], want["freeze"]), row["freeze_ranges"]
    assert row["still"] is False
    for name in ("black_ranges", "freeze_ranges"):  # rounded to 3 decimals
        assert all(round(t, 3) == t for span in row[name] for t in span)
    frames = row["judge_frames"]
    assert len(frames) == 14
    times = [f["t_s"] for f in frames]
    assert times == sorted(times) and all(round(t, 3) == t for t in times)
    assert all(b - a >= 0.1 - 1e-9 for a, b in zip(times, times[1:]))
    assert all(f["reason"] in ("first", "last", "criterion", "event", "beat", "fill") for f in frames)
    assert (frames[0]["t_s"], frames[0]["reason"]) == (0.0, "first")
    assert frames[-1]["reason"] == "last"
    assert frames[-1]["t_s"] == pytest.approx(row["video_duration_s"] - 1 / row["fps"], abs=0.0011)


def test_judge_frames_of_card_001_are_the_hand_computed_fourteen(built):
    frames = built["first"]["by_id"]["ui-card-001-s1"]["judge_frames"]
    assert [f["reason"] for f in frames] == [r for _, r in EXPECTED_FRAMES_CARD_001]
    assert [f["t_s"] for f in frames] == pytest.approx([t for t, _ in EXPECTED_FRAMES_CARD_001], abs=0.0011)


@pytest.mark.parametrize("episode_id", ["ui-undelivered-008-s1", "ui-card-001-r2"])
def test_undelivered_episode_has_no_video_facts(built, episode_id):
    row = built["first"]["by_id"][episode_id]
    assert not row["video_ok"]
    for column in ("video_duration_s", "video_aspect", "fps", "width", "height", "judge_frames", "video"):
        assert row[column] is None, column


def test_video_column_and_videos_folder(built):
    first = built["first"]
    for episode_id in PUBLISHED:
        row = first["by_id"][episode_id]
        want = f"videos/{episode_id}.mp4" if episode_id in built["videos"] else None
        assert row["video"] == want, episode_id
    # Contract 3: videos/<id>.mp4 is byte-identical to out.mp4, for every delivered video (the
    # seven of DELIVERED) and nothing else: not the running series' episodes, not undelivered ones.
    assert first["videos"] == sorted(f"{i}.mp4" for i in DELIVERED)
    for episode_id, data in built["videos"].items():
        assert first["video_bytes"][f"{episode_id}.mp4"] == data, episode_id
    # Every published episode has an archive: episodes/<UTC date of started_at>/<id>.tar.zst, and
    # archive_sha256 is its sha256 (ui-card-002-s1 started at 2026-10-21T23:30-02:00, i.e. on
    # 2026-10-22 UTC; ui-card-001-r2 at 2026-10-22T09:00Z; the others on 2026-10-21).
    second = built["second"]
    assert [row["id"] for row in second["rows"]] == PUBLISHED  # the folder as it is now, after the second build
    for row in second["rows"]:
        date = {"ui-card-002-s1": "2026-10-22", "ui-card-001-r2": "2026-10-22"}.get(row["id"], "2026-10-21")
        assert row["archive"] == f"episodes/{date}/{row['id']}.tar.zst", row["id"]
        data = (built["dataset"] / row["archive"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["archive_sha256"], row["id"]


def test_invalid_episodes_are_reported_with_file_line_and_reason(built):
    reported = {(i["series"], i["episode"]): i for i in built["summary_12"]["invalid_episodes"]}
    assert set(reported) == set(EXPECTED_INVALID)
    for key, (file, line) in EXPECTED_INVALID.items():
        entry = reported[key]
        assert (entry["file"], entry["line"]) == (file, line), entry
        assert entry["reason"] and "\n" not in entry["reason"], entry
    assert "'..'" in reported[(S1, "scene-dotdot-011-s1")]["reason"]
    # publishing is blocked by the invalid episodes of the completed series, not by the running one's
    refusals = " ".join(c["description"] or "" for c in built["summary_12"]["checks"] if c["passed"] is False)
    assert "promo-gzip-010-s1" in refusals and "scene-dotdot-011-s1" in refusals, refusals
    assert "ui-badline-009-s2" not in refusals, refusals
    # every series here ran committed code of benchmark 1.2.0 with one actor (write_series, Log)
    passed = {c["check"]: c["passed"] for c in built["summary_12"]["checks"]}
    assert [passed[name] for name in ("harness_committed", "benchmark_versioned", "one_actor_per_series")] == \
        [True, True, True]
    # the '..' member was never written anywhere, and the runs root was never modified
    assert not (built["runs"].parent / "escape.txt").exists() and not (built["runs"] / "escape.txt").exists()
    assert built["after"] == built["before"]


def test_readme_stats_and_families_under_1_2(built):
    readme = built["first"]["readme"]
    assert stats_of(readme) == EXPECTED_STATS_12
    families = [line for line in readme.splitlines() if re.fullmatch(r"\| [a-z0-9-]+ \| [0-9,]+ \|", line)]
    assert "| Family | Episodes |" in readme and families == EXPECTED_FAMILIES
    assert "path: data/episodes.parquet" in readme and "split: train" in readme


def test_rehosting_to_1_0_changes_exactly_the_labels_the_thresholds_dictate(built):
    first, second = built["first"]["by_id"], built["second"]["by_id"]
    assert sorted(second) == PUBLISHED
    sha_10 = hashlib.sha256((built["meta"] / "rubric-archive" / "rubric-v1.0.json").read_bytes()).hexdigest()
    changed = {i for i in PUBLISHED if second[i]["label"] != first[i]["label"]}
    assert changed == set(EXPECTED_CHANGES_10)
    for episode_id in PUBLISHED:
        row, before = second[episode_id], first[episode_id]
        assert (row["host_rubric_version"], row["rubric_sha256"]) == ("1.0", sha_10)
        if episode_id in EXPECTED_CHANGES_10:
            want = EXPECTED_CHANGES_10[episode_id]
            assert {c: row[c] for c in want} == want, episode_id
            assert want["previous_final_label"] == before["label"]
            assert in_window(row["rehosted_at"], built["window_10"]), (episode_id, row["rehosted_at"])
        else:
            # unchanged label: keeps the rehosting values it had
            assert {c: row[c] for c in ("label", "host_rule", "host_gates_failed", "positive_eligible")} == \
                   {c: before[c] for c in ("label", "host_rule", "host_gates_failed", "positive_eligible")}, episode_id
            assert (row["rehosted_at"], row["previous_final_label"]) == \
                   (before["rehosted_at"], before["previous_final_label"]), episode_id
            assert not in_window(row["rehosted_at"], built["window_10"])
        # nothing upstream is recomputed: facts, frames, counts and answers are the same
        for column in ("video_ok", "video_duration_s", "black_ranges", "freeze_ranges", "loop_seam",
                       "judge_frames", "turns", "tool_calls", "output_tokens", "judge_model", "rubric_version",
                       *[f"score_{a}" for a in AXES]):
            assert row[column] == before[column], (episode_id, column)


def downstream_of(name: str) -> set[str]:
    """`name` and every asset below it in the code location's lineage graph."""
    from vae_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    found, todo = set(), [dg.AssetKey(name)]
    while todo:
        key = todo.pop()
        if key.to_user_string() not in found:
            found.add(key.to_user_string())
            todo.extend(graph.get(key).child_keys)
    return found


def test_rehosting_materializes_only_labels_and_downstream(built):
    materialized = set(built["summary_10"]["materialized"])
    # nothing upstream of the labels is recomputed: no parsing, decoding, judge reading or bundling
    assert not {"episodes", "renders", "verdicts", "bundles", "brief_bank"} & materialized, materialized
    assert {"labels", "episode_table", "dataset_rows", "dataset_card"} <= materialized, materialized
    # besides labels and what lies below them, only the rubric in force itself (and what it feeds,
    # e.g. the dataset's meta/) may be refreshed
    assert materialized <= downstream_of("labels") | downstream_of("rubric"), materialized
    assert "renders" not in downstream_of("rubric")  # a rubric switch must not re-decode
    assert sorted(built["summary_10"]["materialized"]["labels"]) == [S1, R2, S2]  # every label recomputed
    assert not built["summary_10"]["failed_runs"]


def test_readme_stats_under_1_0(built):
    assert stats_of(built["second"]["readme"]) == EXPECTED_STATS_10


# ------------------------------------------------------------------ the CLI's shapes, by hand


def archive_members(path: Path) -> dict[str, bytes]:
    with zstandard.ZstdDecompressor().stream_reader(path.open("rb")) as stream, \
            tarfile.open(fileobj=stream, mode="r|") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def test_the_hand_typed_cli_episode_counts_exactly_and_agrees_with_result_json(built):
    """ui-cli-012-s1: one reply over several lines is one turn, the subagent's calls are apart,
    both result lines' tokens are summed; result.json reports the same turns and calls, so no
    warning (an episode counted by the rules no longer warns)."""
    row = built["first"]["by_id"]["ui-cli-012-s1"]
    assert {c: row[c] for c in EXPECTED_COUNTS["ui-cli-012-s1"]} == EXPECTED_COUNTS["ui-cli-012-s1"]
    manifest = json.loads((built["dataset"] / "episodes" / "2026-10-21" / "ui-cli-012-s1.json").read_text())
    assert manifest["usage"] == {
        "turns": 7, "tool_calls": 5, "subagent_tool_calls": 2, "images_read": 1, "renders": 1, "snapshots": 0,
        "input_tokens": 1100, "output_tokens": 2200, "cache_read_tokens": 330_000, "cache_creation_tokens": 4400}
    import duckdb

    with duckdb.connect(str(built["home"] / "vae_warehouse.duckdb"), read_only=True) as con:
        warnings = con.execute("SELECT warnings FROM episode_table WHERE id = 'ui-cli-012-s1'").fetchone()[0]
    assert warnings == []


def test_the_hand_typed_cli_episode_archive_keeps_no_user_and_no_base64_image(built):
    """Contract 3's scrub and slimming on the CLI's shapes: every home of both users (paths and
    project folders) is <home>, the ls -l owner and group columns and the shell prompt are <user>,
    the image Read's two copies are one file under images/ and no base64 image is left; the
    thinking signature (base64, not an image) is kept and stream events are dropped."""
    dataset = built["dataset"]
    members = archive_members(dataset / "episodes" / "2026-10-21" / "ui-cli-012-s1.tar.zst")
    picture = base64.b64encode(cli_picture()).decode()
    texts = {name: data.decode() for name, data in members.items() if not name.startswith("images/")}
    for name, text in texts.items():
        for user in CLI_USERS:
            assert not re.search(rf"\b{user}\b", text), (name, user)
        assert "/Users/" not in text and "/home/" not in text and "-Users-" not in text and "-home-" not in text, name
        assert picture[:64] not in text and "iVBORw0KGgo" not in text, name
    placeholders = {kind: sum(t.count(f"<{kind}>") for t in texts.values()) for kind in ("home", "user")}
    assert placeholders == CLI_PLACEHOLDERS
    manifest = json.loads((dataset / "episodes" / "2026-10-21" / "ui-cli-012-s1.json").read_text())
    assert {k: v for k, v in manifest["scrub"]["placeholders"].items() if v} == CLI_PLACEHOLDERS
    assert manifest["scrub"]["findings"] == []
    # the one picture, twice in messages.jsonl and twice in the session log: one file
    images = [name for name in members if name.startswith("images/")]
    assert len(images) == 1, images
    lines = [json.loads(line) for line in texts["messages.jsonl"].splitlines()]
    assert not any(line["type"] == "stream_event" for line in lines)
    [read] = [line for line in lines if line.get("tool_use_result", {}).get("type") == "image"]
    assert read["tool_use_result"]["file"]["base64"] == images[0]
    block = read["message"]["content"][0]["content"][0]
    assert (block["type"], block["path"]) == ("image", images[0]) and "source" not in block
    [listing] = [line for line in lines if line.get("uuid") == "u-08"]
    assert listing["message"]["content"][0]["content"] == (
        "total 16\n-rw-r--r--  1 <user>  <user>  5120 Oct 21 08:03 index.html\n"
        "-rw-r--r--  1 <user>  staff  812 Oct 21 08:04 notes.md")
    [prompt] = [line for line in lines if line.get("uuid") == "u-29"]
    assert prompt["message"]["content"][0]["content"] == \
        "<user>@build:~$ wc -l ~/.claude/projects/<home>-work-site/x.jsonl\n12"
    assert sum(line.get("message", {}).get("content", [{}])[0].get("signature") == CLI_SIGNATURE
               for line in lines if line["type"] == "assistant") == 2
    session = [json.loads(line) for line in texts["transcript/session.jsonl"].splitlines()]
    [copy] = [entry for entry in session if "toolUseResult" in entry]
    assert copy["toolUseResult"]["file"]["base64"] == images[0]
    assert "<home>/.claude/projects/<home>-work-site/x.jsonl" in texts["transcript/session.jsonl"]
    assert "transcript/subagents/agent-a1b2c3d4.jsonl" in texts
