"""The Claude Code CLI's own logs of one sample episode, in the shapes the real CLI writes.

`messages.jsonl` is the CLI's `--output-format stream-json` stream: hook and other system lines
around the `init` line, each API response streamed as several `assistant` lines that share
`message.id` (one content block a line, each with a partial `usage`), thinking blocks with an
empty text and a long base64 signature, tool results whose `content` is a string or a list of
text, image and unknown blocks, `tool_use_result` with a Read image's second copy, a subagent
(`Task`) whose lines are interleaved with the main agent's, `stream_event` and
`rate_limit_event` lines, and one `result` line per prompt. `transcript/session.jsonl` and
`transcript/subagents/agent-<id>.jsonl` are the same conversation in the session-log form.

The logs also hold what real tools print about the people who ran them: two users' homes
(`/Users/<mac>` and `/home/<linux>`), the CLI's project-folder names of those homes, `ls -l`
listings with owner and group columns, and a shell prompt; and, where the subagent Reads a
`.jsonl` file, JSON text inside a JSON string, whose own escapes are escaped once more (`\\\\/`,
`\\\\n`). Everything planted and every count the contract's rules give is tallied here as the
script is written (`ScriptCounts`), from what the generator chose, never by reading the lines back.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# What each kind of tool call counts as under contract 1's rules.
RENDER, SNAPSHOT, IMAGE_READ, OTHER = "render", "snapshot", "image_read", "other"


@dataclass(frozen=True)
class ActorInit:
    """What the `system`/`init` line says ran: one place, so a series can plant another model."""

    model: str
    claude_code_version: str
    tools: tuple[str, ...]


ACTOR_INIT = ActorInit(
    model="claude-opus-5-5-20261014",
    claude_code_version="2.1.310",
    tools=("Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "NotebookEdit", "WebFetch", "TodoWrite",
           "WebSearch", "BashOutput", "KillShell", "Skill", "SlashCommand", "ToolSearch",
           "mcp__hyperframes__preview"),
)


def project_folder(path: str) -> str:
    """The CLI's name for a project folder: its absolute path with every `/` and `.` as `-`."""
    return path.replace("/", "-").replace(".", "-")


@dataclass(frozen=True)
class PlantedPeople:
    """The two users one episode's logs name, and every form in which they are planted."""

    mac_user: str  # /Users/<mac_user>: the operator's laptop, seen through the subagent's listing
    linux_user: str  # /home/<linux_user>: the harness machine's home, where the agent worked
    episode_id: str

    @property
    def users(self) -> tuple[str, str]:
        return self.mac_user, self.linux_user

    @property
    def mac_home(self) -> str:
        return f"/Users/{self.mac_user}"

    @property
    def linux_home(self) -> str:
        return f"/home/{self.linux_user}"

    @property
    def homes(self) -> tuple[str, str]:
        return self.mac_home, self.linux_home

    @property
    def work(self) -> str:
        return f"{self.linux_home}/runs/{self.episode_id}/work"

    @property
    def mac_site(self) -> str:
        return f"{self.mac_home}/work/site"

    @property
    def project_folders(self) -> tuple[str, str]:
        """`-Users-<mac>-work-site` and the agent's own `-home-<linux>-runs-<episode>-work`."""
        return project_folder(self.mac_site), project_folder(self.work)

    @property
    def mac_session_log(self) -> str:
        return f"{self.mac_home}/.claude/projects/{self.project_folders[0]}/x.jsonl"

    @property
    def prompt(self) -> str:
        return f"{self.mac_user}@build:~$"

    @property
    def ls_lines(self) -> tuple[str, ...]:
        """The `ls -l` rows planted in tool results (owner and group columns name a user)."""
        return (f"-rw-r--r--  1 {self.linux_user}  {self.linux_user}  5120 Oct 21 08:03 index.html",
                f"-rw-r--r--  1 {self.linux_user}  {self.linux_user}   812 Oct 21 08:04 style.css",
                f"drwxr-xr-x  4 {self.mac_user}  staff   128 Oct 20 17:12 {self.project_folders[0]}",
                f"drwxr-xr-x  9 {self.mac_user}  staff   288 Oct 21 08:02 {self.project_folders[1]}")

    @property
    def build_log(self) -> str:
        """A `.jsonl` log in the operator's site folder, which the subagent Reads."""
        return f"{self.mac_site}/logs/build.jsonl"

    @property
    def build_log_ls(self) -> tuple[str, ...]:
        """The `ls -l` rows that log holds: the operator's files (owner and group the mac user)."""
        return (f"-rw-r--r--  1 {self.mac_user}  {self.mac_user}  2048 Oct 20 17:10 ref.png",
                f"drwxr-xr-x  3 {self.mac_user}  staff    96 Oct 20 17:09 assets")

    @property
    def build_log_lines(self) -> tuple[dict, ...]:
        """That log's lines: where the build ran (a home path) and a listing of the site folder."""
        return ({"event": "start", "cwd": self.mac_site},
                {"event": "ls", "stdout": "total 8\n" + "\n".join(self.build_log_ls)})

    @property
    def build_log_text(self) -> str:
        """That log's text, from a JSON writer that escapes "/" (as PHP's json_encode does): in the
        CLI's logs, a JSON string holding it, its home path reads `\\\\/Users\\\\/<mac>` and its rows
        are split by `\\\\n`."""
        return "".join(dumps(line).replace("/", "\\/") + "\n" for line in self.build_log_lines)


def planted_people(rng: random.Random, linux_home: str, episode_id: str) -> PlantedPeople:
    linux_user = linux_home.removeprefix("/home/")
    mac_user = linux_user
    while mac_user == linux_user:
        mac_user = "".join(rng.choice(string.ascii_lowercase) for _ in range(5))
    return PlantedPeople(mac_user, linux_user, episode_id)


@dataclass
class ScriptCounts:
    """Contract 1's counting columns for what the script wrote, tallied while writing it."""

    turns: int = 0
    tool_calls: int = 0
    subagent_tool_calls: int = 0
    images_read: int = 0
    renders: int = 0
    snapshots: int = 0
    looked_at_final_render: bool = False
    usage: dict[str, int] = field(default_factory=dict)  # summed over the result lines
    result_lines: int = 0
    _step: int = 0
    _last_render: int = -1
    _last_image: int = -1

    def call(self, kind: str) -> None:
        self._step += 1
        self.tool_calls += 1
        if kind == IMAGE_READ:
            self.images_read += 1
            self._last_image = self._step
        elif kind in (RENDER, SNAPSHOT):
            self.renders += kind == RENDER
            self.snapshots += kind == SNAPSHOT
            self._last_render = self._step
        self.looked_at_final_render = self._last_render >= 0 and self._last_image > self._last_render

    def columns(self) -> dict:
        return {"turns": self.turns, "tool_calls": self.tool_calls, "subagent_tool_calls": self.subagent_tool_calls,
                "images_read": self.images_read, "renders": self.renders, "snapshots": self.snapshots,
                "looked_at_final_render": self.looked_at_final_render,
                "input_tokens": self.usage["input_tokens"], "output_tokens": self.usage["output_tokens"],
                "cache_read_tokens": self.usage["cache_read_input_tokens"],
                "cache_creation_tokens": self.usage["cache_creation_input_tokens"]}


@dataclass(frozen=True)
class Call:
    """One tool call of the script and the result the tool gives."""

    name: str
    input: dict
    kind: str = OTHER
    content: str | list = "ok"  # the tool_result's content: a string or a list of blocks
    tool_use_result: object = None  # the tool's structured result


def dumps(value: object) -> str:
    """JSON as the CLI writes it (JSON.stringify): compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class CliLog:
    """The stream-json lines of one run and the same conversation in the session-log form."""

    def __init__(self, rng: random.Random, init: ActorInit, cwd: str, started: str) -> None:
        self.rng, self.init, self.cwd = rng, init, cwd
        self.session_id = self.uuid()
        self.lines: list[dict] = []
        self.session: list[dict] = []
        self.agents: dict[str, list[dict]] = {}
        self.counts = ScriptCounts()
        self._parents: dict[str | None, str | None] = {}  # the last session uuid per agent
        self._agent_ids: dict[str, str] = {}  # Task call id -> the subagent's id
        self._clock = datetime.fromisoformat(started)

    # ---- identifiers and time

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _id(self, prefix: str, n: int = 24) -> str:
        return prefix + "".join(self.rng.choices(string.ascii_letters + string.digits, k=n))

    def timestamp(self) -> str:
        self._clock += timedelta(milliseconds=self.rng.randrange(300, 9000))
        return self._clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self._clock.microsecond // 1000:03d}Z"

    def signature(self) -> str:
        """A thinking signature: long base64 of bytes that decode to no image."""
        return base64.b64encode(b"\x12\x08" + self.rng.randbytes(self.rng.randrange(540, 900))).decode()

    def agent_id(self, task_id: str) -> str:
        """The id of the subagent a Task call started (its log is `subagents/agent-<id>.jsonl`)."""
        return self._agent_ids.setdefault(task_id, f"{self.rng.getrandbits(32):08x}")

    # ---- lines

    def _line(self, line: dict, parent: str | None, session_entry: dict | None = None) -> None:
        self.lines.append(line)
        if session_entry is None:
            return
        agent_id = self.agent_id(parent) if parent is not None else None
        log = self.agents.setdefault(agent_id, []) if agent_id is not None else self.session
        entry = {"parentUuid": self._parents.get(parent), "isSidechain": parent is not None,
                 "userType": "external", "cwd": self.cwd, "sessionId": self.session_id,
                 "version": self.init.claude_code_version, "gitBranch": "main",
                 **({"agentId": agent_id} if agent_id is not None else {}),
                 **session_entry, "uuid": line.get("uuid") or self.uuid(), "timestamp": self.timestamp()}
        self._parents[parent] = entry["uuid"]
        log.append(entry)

    def system(self, subtype: str, **fields) -> None:
        self._line({"type": "system", "subtype": subtype, **fields, "uuid": self.uuid(),
                    "session_id": self.session_id}, None)

    def init_line(self) -> None:
        self.system("init", cwd=self.cwd, session_id=self.session_id, tools=list(self.init.tools),
                    mcp_servers=[{"name": "hyperframes", "status": "connected"}], model=self.init.model,
                    permissionMode="bypassPermissions", slash_commands=["compact", "context", "cost", "review"],
                    apiKeySource="none", claude_code_version=self.init.claude_code_version, output_style="default",
                    agents=["general-purpose", "statusline-setup", "Explore", "Plan"], skills=[], plugins=[])

    def hook(self, event: str, name: str, stdout: str = "") -> None:
        hook_id = self.uuid()
        self.system("hook_started", hook_id=hook_id, hook_name=name, hook_event=event)
        self.system("hook_response", hook_id=hook_id, hook_name=name, hook_event=event, output=stdout,
                    stdout=stdout, stderr="", exit_code=0, outcome="success")

    def rate_limit(self) -> None:
        self._line({"type": "rate_limit_event", "rate_limit_info": {
            "status": "allowed", "resetsAt": 1_792_000_000, "rateLimitType": "five_hour",
            "overageStatus": "rejected", "isUsingOverage": False}, "uuid": self.uuid(),
            "session_id": self.session_id}, None)

    def stream_events(self, message_id: str, parent: str | None) -> None:
        for event in ({"type": "message_start", "message": {"id": message_id, "type": "message", "role": "assistant",
                                                              "model": self.init.model, "content": []}},
                      {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let"}}):
            self._line({"type": "stream_event", "event": event, "session_id": self.session_id,
                        "parent_tool_use_id": parent, "uuid": self.uuid()}, parent)

    def response(self, *blocks: dict | Call, parent: str | None = None, streamed: bool = True) -> list[str]:
        """One API response, streamed one block a line under one message id; returns the tool_use ids.

        A main-agent response is one turn; its tool calls count by their kind. A subagent's
        (`parent` set: the Task call's id) count only as subagent tool calls."""
        message_id = self._id("msg_01")
        if streamed:
            self.stream_events(message_id, parent)
        if parent is None:
            self.counts.turns += 1
        ids = []
        for n, item in enumerate(blocks):
            if isinstance(item, Call):
                ids.append(self._id("toolu_01"))
                block = {"type": "tool_use", "id": ids[-1], "name": item.name, "input": item.input,
                         "caller": {"type": "direct"}}
                if parent is None:
                    self.counts.call(item.kind)
                else:
                    self.counts.subagent_tool_calls += 1
            else:
                block = item
            last = n == len(blocks) - 1
            usage = {"input_tokens": 3 + n, "cache_creation_input_tokens": 412 if n == 0 else 0,
                     "cache_read_input_tokens": 18_000 + 97 * n, "output_tokens": 180 + 11 * n if last else 1,
                     "service_tier": "standard"}
            message = {"model": self.init.model, "id": message_id, "type": "message", "role": "assistant",
                       "content": [block], "stop_reason": ("tool_use" if ids else "end_turn") if last else None,
                       "stop_sequence": None, "usage": usage, "context_management": None}
            line = {"type": "assistant", "message": message, "parent_tool_use_id": parent,
                    "session_id": self.session_id, "uuid": self.uuid()}
            self._line(line, parent, {"message": message, "requestId": self._id("req_011"), "type": "assistant"})
        return ids

    def results(self, ids: list[str], calls: list[Call], parent: str | None = None) -> None:
        for tool_use_id, call in zip(ids, calls, strict=True):
            self.tool_result(tool_use_id, call, parent)

    def tool_result(self, tool_use_id: str, call: Call, parent: str | None = None) -> None:
        message = {"role": "user", "content": [{"tool_use_id": tool_use_id, "type": "tool_result",
                                                "content": call.content, "is_error": False}]}
        line = {"type": "user", "message": message, "parent_tool_use_id": parent, "session_id": self.session_id,
                "uuid": self.uuid()}
        if call.tool_use_result is not None:
            line["tool_use_result"] = call.tool_use_result
        entry = {"type": "user", "message": message}
        if call.tool_use_result is not None:
            entry["toolUseResult"] = call.tool_use_result
        self._line(line, parent, entry)

    def prompt(self, text: str, parent: str | None = None) -> None:
        """A prompt: the harness's next one (main agent), or a subagent's task."""
        message = {"role": "user", "content": text}
        self._line({"type": "user", "message": message, "parent_tool_use_id": parent,
                    "session_id": self.session_id, "uuid": self.uuid()}, parent, {"type": "user", "message": message})

    def result(self, usage: dict[str, int], text: str, turns: int, is_error: bool = False) -> None:
        for key, value in usage.items():
            self.counts.usage[key] = self.counts.usage.get(key, 0) + value
        self.counts.result_lines += 1
        self._line({"type": "result", "subtype": "success", "is_error": is_error, "duration_ms": 812_000,
                    "duration_api_ms": 640_000, "num_turns": turns, "result": text, "session_id": self.session_id,
                    "total_cost_usd": round(usage["output_tokens"] * 0.000075, 6), "usage": {
                        **usage, "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
                    "modelUsage": {self.init.model: {"inputTokens": usage["input_tokens"],
                                                     "outputTokens": usage["output_tokens"]}},
                    "permission_denials": [], "uuid": self.uuid()}, None)

    # ---- the session-log extras

    def session_extras(self, title: str, people: PlantedPeople) -> None:
        """The session log's own line types: summary, queue operation, attachment, file snapshot."""
        first = self.session[0]["uuid"] if self.session else None
        self.session[:0] = [
            {"type": "summary", "summary": f"{title}: build and render", "leafUuid": first},
            {"type": "queue-operation", "operation": "enqueue", "timestamp": self.timestamp(),
             "sessionId": self.session_id, "content": "Make the video described in brief.json."},
            {"type": "file-history-snapshot", "messageId": first, "isSnapshotUpdate": False,
             "snapshot": {"messageId": first, "trackedFileBackups": {}, "timestamp": self.timestamp()}},
        ]
        self.session.append({"parentUuid": self._parents.get(None), "isSidechain": False, "type": "attachment",
                             "cwd": self.cwd, "sessionId": self.session_id,
                             "version": self.init.claude_code_version, "gitBranch": "main",
                             "attachment": {"type": "file", "filename": people.mac_session_log,
                                            "content": {"type": "text", "file": {"filePath": people.mac_session_log}}},
                             "uuid": self.uuid(), "timestamp": self.timestamp()})

    def files(self) -> dict[str, bytes]:
        """messages.jsonl and the transcript's session and subagent logs."""
        def jsonl(lines: list[dict]) -> bytes:
            return "".join(dumps(line) + "\n" for line in lines).encode()

        out = {"messages.jsonl": jsonl(self.lines), "transcript/session.jsonl": jsonl(self.session)}
        for agent_id, lines in self.agents.items():
            out[f"transcript/subagents/agent-{agent_id}.jsonl"] = jsonl(lines)
        return out


def image_result(image: bytes, width: int, height: int) -> tuple[list, dict]:
    """A Read of an image: the tool_result's image block, and `tool_use_result` with the second copy."""
    data = base64.b64encode(image).decode()
    content = [{"type": "image", "source": {"type": "base64", "data": data, "media_type": "image/png"}}]
    copy = {"type": "image", "file": {"base64": data, "type": "image/png", "originalSize": len(image),
                                      "dimensions": {"originalWidth": width, "originalHeight": height,
                                                     "displayWidth": width, "displayHeight": height}}}
    return content, copy


def text_read_result(path: str, text: str) -> tuple[str, dict]:
    """A Read of a text file: its lines numbered (`cat -n` style), and `tool_use_result`'s copy."""
    lines = text.splitlines()
    numbered = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1))
    return numbered, {"type": "text", "file": {"filePath": path, "content": text, "numLines": len(lines),
                                               "startLine": 1, "totalLines": len(lines)}}


def bash_result(stdout: str) -> tuple[str, dict]:
    return stdout, {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}


@dataclass(frozen=True)
class Picture:
    data: bytes
    width: int
    height: int


def episode_logs(rng: random.Random, *, init: ActorInit, people: PlantedPeople, secrets: dict[str, str],
                 pictures: list[Picture], title: str, started: str, final_look: bool,
                 harness_403: bool) -> tuple[dict[str, bytes], ScriptCounts]:
    """The CLI's logs of one sample run and the counts they give; about half the runs get a
    second prompt (two `result` lines)."""
    work = people.work
    log = CliLog(rng, init, work, started)
    own_log = f"~/.claude/projects/{people.project_folders[1]}/{log.session_id}.jsonl"
    log.hook("SessionStart", "SessionStart:startup", stdout=f"session log: {own_log}")
    log.init_line()
    log.system("thinking_tokens", max_thinking_tokens=31_999)

    def thinking() -> dict:
        return {"type": "thinking", "thinking": "", "signature": log.signature()}

    def text(value: str) -> dict:
        return {"type": "text", "text": value}

    def step(*blocks: dict | Call, parent: str | None = None, streamed: bool = True) -> list[str]:
        calls = [b for b in blocks if isinstance(b, Call)]
        ids = log.response(*blocks, parent=parent, streamed=streamed)
        log.results(ids, calls, parent)
        return ids

    def read(path: str, picture: Picture) -> Call:
        content, copy = image_result(picture.data, picture.width, picture.height)
        return Call("Read", {"file_path": path}, IMAGE_READ, content, copy)

    def bash(command: str, stdout: str = "", kind: str = OTHER) -> Call:
        content, structured = bash_result(stdout)
        return Call("Bash", {"command": command, "description": "Run"}, kind, content, structured)

    listing = "total 16\n" + "\n".join(people.ls_lines[:2])
    step(thinking(), text("I'll look at the work folder first."), bash(f"ls -l {work}", listing))
    log.rate_limit()
    index = "<div id='stage'></div>"
    step(text("Writing the composition."), Call(
        "Write", {"file_path": f"{work}/index.html", "content": index}, OTHER,
        f"File created successfully at: {work}/index.html",
        {"type": "create", "filePath": f"{work}/index.html", "content": index, "structuredPatch": []}))
    step(bash(f"cd {work} && npx hyperframes render --out ../out.mp4", "Rendered ../out.mp4", RENDER))
    step(thinking(), read(f"{work}/snap/frame-0.png", pictures[0]))
    step(bash("npx hyperframes snapshot --at 2.0", "wrote snap/frame-1.PNG", SNAPSHOT))
    env = (f"env: AWS_ACCESS_KEY_ID={secrets['aws_access_key_id']} "
           f"AWS_SECRET_ACCESS_KEY={secrets['aws_secret_access_key']} "
           f"contact {secrets['email']} via {secrets['public_ip']}")
    export = f"export ANTHROPIC_API_KEY={secrets['anthropic']} HF_TOKEN={secrets['huggingface']}"
    step(Call("Bash", {"command": export, "description": "Set keys"}, OTHER, [text(env)]), streamed=False)
    log.system("status", status="compacting")
    log.system("compact_boundary", compact_metadata={"trigger": "auto", "pre_tokens": 155_312})
    log.system("status", status=None)

    # a subagent (Task) and a preview run side by side: their lines interleave
    task_prompt = "Check the vendored runtimes and the brand mark in the operator's site folder."
    task = Call("Task", {"description": "Check runtimes", "prompt": task_prompt, "subagent_type": "general-purpose"})
    preview_text, preview_copy = image_result(pictures[1].data, pictures[1].width, pictures[1].height)
    preview = Call("mcp__hyperframes__preview", {"at_s": 1.5}, OTHER, [text("preview at 1.5 s"), *preview_text])
    task_id, preview_id = log.response(text("Checking two things at once."), task, preview)
    log.prompt(task_prompt, parent=task_id)
    projects = bash("ls -l ~/.claude/projects",
                    f"{people.prompt} ls -l ~/.claude/projects\ntotal 0\n" + "\n".join(people.ls_lines[2:]))
    [projects_id] = log.response(projects, parent=task_id, streamed=False)
    log.tool_result(preview_id, preview)
    log.tool_result(projects_id, projects, parent=task_id)
    build_log, build_log_copy = text_read_result(people.build_log, people.build_log_text)
    step(Call("Read", {"file_path": people.build_log}, OTHER, build_log, build_log_copy), parent=task_id,
         streamed=False)
    step(thinking(), read(f"{people.mac_site}/ref.png", pictures[2]), parent=task_id, streamed=False)
    step(bash("npx hyperframes render --quality draft", "Rendered draft.mp4", RENDER), parent=task_id, streamed=False)
    summary = "The vendored runtimes match; ref.png is the brand mark."
    step(text(summary), parent=task_id, streamed=False)
    log.tool_result(task_id, Call("Task", {}, OTHER, [text(summary)], {
        "status": "completed", "prompt": task_prompt, "agentId": log.agent_id(task_id),
        "content": [text(summary)], "totalDurationMs": 41_234, "totalTokens": 5_120, "totalToolUseCount": 4,
        "usage": {"input_tokens": 12, "output_tokens": 610, "cache_read_input_tokens": 40_112,
                  "cache_creation_input_tokens": 2_048}}))

    step(Call("ToolSearch", {"query": "hyperframes preview"}, OTHER,
              [{"type": "tool_reference", "tool_name": "mcp__hyperframes__preview"}]))
    step(read(f"{work}/snap/frame-1.PNG", pictures[0]))
    step(bash("npx hyperframes render --out ../out.mp4", "Rendered ../out.mp4", RENDER))
    if final_look:
        step(thinking(), read(f"{work}/snap/final.jpg", pictures[1]))
    step(text("Delivered out.mp4."))
    follow_up = rng.random() < 0.5
    first = {"input_tokens": 61_000 + rng.randrange(1000), "output_tokens": 30_000 + rng.randrange(9000),
             "cache_read_input_tokens": 1_400_000 + rng.randrange(9000),
             "cache_creation_input_tokens": 90_000 + rng.randrange(900)}
    failed = "API Error: 403 Forbidden"
    first_fails = harness_403 and not follow_up
    log.result(first, failed if first_fails else "Done.", turns=log.counts.turns, is_error=first_fails)
    if follow_up:
        turns_before = log.counts.turns
        log.prompt("Check that the title is legible on a phone, then stop.")
        step(text("Linting the composition."),
             bash("npx hyperframes lint", f"{people.prompt} npx hyperframes lint\n0 problems"))
        step(text("The title is legible."))
        second = {"input_tokens": 900 + rng.randrange(100), "output_tokens": 700 + rng.randrange(100),
                  "cache_read_input_tokens": 80_000 + rng.randrange(900), "cache_creation_input_tokens": 1_200}
        log.result(second, failed if harness_403 else "Checked.", turns=log.counts.turns - turns_before,
                   is_error=harness_403)
    log.session_extras(title, people)
    return log.files(), log.counts


# The SDK's Python class of each stream-json line type and content block type.
SDK_CLASSES = {"assistant": "AssistantMessage", "user": "UserMessage", "system": "SystemMessage",
               "result": "ResultMessage", "stream_event": "StreamEvent"}
SDK_BLOCKS = {"text": "TextBlock", "thinking": "ThinkingBlock", "tool_use": "ToolUseBlock",
              "tool_result": "ToolResultBlock"}


def sdk_object_log(messages: bytes) -> bytes:
    """The same run as a harness that logs the SDK's own objects with class-name tags writes it:
    no line has a `type`, so none is in the contract's form (bad input, refused)."""
    out = []
    for raw in messages.splitlines():
        line = json.loads(raw)
        kind = line.pop("type")
        if kind not in SDK_CLASSES:
            continue
        body = line.pop("message", None)
        if isinstance(body, dict):
            content = body.get("content")
            if isinstance(content, list):
                content = [{"_type": SDK_BLOCKS.get(b.get("type"), "Block"),
                            **{k: v for k, v in b.items() if k != "type"}} for b in content]
            line = {"content": content, "model": body.get("model"), **line}
        out.append(dumps({"_type": SDK_CLASSES[kind], **line}))
    return ("\n".join(out) + "\n").encode()
