"""Episodes that plant one fake credential of every kind (`credential_kinds`) in each of six
ordinary agent-log contexts, and the plan of what went where.

The contexts: an `env` dump, `cat .env`, a Write of a config file together with the file itself
in the project, a CLI command (the value in the command, or in what it printed), an assistant
message, and a Read of a JSON file or a notebook. Each (kind, context) gets its own random value,
so a value found again names the kind and the context it was planted in; the plan records how
many times each was written into the episode's archived text members (the Write's value twice:
in the tool call and in the file), which is what `redacted_keys` must count.

A key block with no END line runs to the end of its string or file, so blocks come last in every
text that holds several values. The kinds are split over two episodes of one series, a run folder
and a `.tar.zst`, so both forms carry them.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field

from vae_pipeline.sample.cli_logs import ACTOR_INIT
from vae_pipeline.sample.credential_kinds import BLOCK, CURL, HEADER, KEY, KINDS, SIGV4, URL, CredentialKind, planted_value

ENV, CAT_ENV, WRITE, CLI, ASSISTANT, READ = "env dump", "cat .env", "write config", "cli command", "assistant", "read"
CONTEXTS = (ENV, CAT_ENV, WRITE, CLI, ASSISTANT, READ)
CONFIG_FILE = "work/config/settings.yaml"
BLOCK_FILE = "work/config/deploy-key.yaml"  # a block kind's Write: alone in its file, which it ends
DOT_ENV = "work/.env"  # left out of the archive (contract 3): its values must vanish with it
MESSAGES = "messages.jsonl"


@dataclass(frozen=True)
class Plant:
    kind: str
    context: str
    value: str
    count: int  # occurrences in the episode's archived text members


@dataclass
class PlantedEpisode:
    series: str
    episode_id: str
    archive: bool
    plants: list[Plant] = field(default_factory=list)

    @property
    def redactions(self) -> int:
        """What the manifest's `redacted_keys` must count: every planted occurrence."""
        return sum(plant.count for plant in self.plants)


def _ordered(kinds: list[CredentialKind]) -> list[CredentialKind]:
    """Blocks last, the one with no END line at the very end."""
    return sorted(kinds, key=lambda k: (k.form == BLOCK, k.form == BLOCK and k.format != "end"))


def _header_name(name: str) -> str:
    return "-".join(part.capitalize() for part in name.replace("-", "_").split("_") if part)


# ------------------------------------------------------------- one value in each syntax


def _url(v: str) -> str:
    return f"postgres://app:{v}@db.internal:5432/app"


def _curl_u(v: str) -> str:
    return f"curl -u deploy:{v} https://deploy.example.com/api/releases"


def _auth(kind: CredentialKind, v: str) -> str:
    return f"Authorization: {kind.name} {v}"


def _sigv4(v: str) -> str:
    return (f"Authorization: AWS4-HMAC-SHA256 Credential={v}/20261021/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date")


def _text_of(kind: CredentialKind, v: str) -> tuple[str, str]:
    """(key, text) of a non-KEY kind: the name it is kept under (one per kind) and the text that
    holds the value."""
    key, text = {
        URL: ("DATABASE_URL", lambda: _url(v)),
        CURL: ("DEPLOY_COMMAND", lambda: _curl_u(v)),
        HEADER: ("AUTH_HEADER", lambda: _auth(kind, v)),
        SIGV4: ("SIGNED_HEADER", lambda: _sigv4(v)),
        BLOCK: ("DEPLOY_KEY", lambda: v),
    }[kind.form]
    return f"{key}_{kind.name.upper()}", text()


def env_line(kind: CredentialKind, v: str, quoted: bool = False) -> str:
    key, text = (kind.name, v) if kind.form == KEY else _text_of(kind, v)
    if kind.form == BLOCK or not quoted:
        return f"{key}={text}"
    return f'{key}="{text}"'


def yaml_line(kind: CredentialKind, v: str) -> str:
    key, text = (kind.name, v) if kind.form == KEY else _text_of(kind, v)
    if kind.form == BLOCK:
        return f"{key.lower()}: |\n" + "\n".join(f"  {line}" for line in text.splitlines())
    return f'{key.lower()}: "{text}"'


def json_member(kind: CredentialKind, v: str) -> tuple[str, str]:
    key, text = (kind.name, v) if kind.form == KEY else _text_of(kind, v)
    return key.lower(), text


def cli_call(kind: CredentialKind, v: str) -> tuple[str, str]:
    """(command, what it printed)."""
    if kind.form == KEY:
        return f"{kind.name}={v} npx hyperframes deploy --site demo", "deployed: https://demo.example.com"
    if kind.form == URL:
        return f"psql \"{_url(v)}\" -c 'select 1'", " ?column? \n----------\n        1\n(1 row)"
    if kind.form == CURL:
        return _curl_u(v), '{"ok": true}'
    if kind.form == HEADER:
        return f"curl -s -H '{_auth(kind, v)}' https://api.example.com/v1/status", '{"status": "green"}'
    if kind.form == SIGV4:
        return ("curl -v --aws-sigv4 'aws:amz:us-east-1:s3' https://bucket.s3.amazonaws.com/out.mp4",
                f"> GET /out.mp4 HTTP/1.1\n> Host: bucket.s3.amazonaws.com\n> {_sigv4(v)}\n< HTTP/1.1 200 OK")
    return "cat ~/.ssh/deploy_key", v


def sentence(kind: CredentialKind, v: str) -> str:
    if kind.form == KEY:
        return f"I found {kind.name}: `{v}` in the old config and moved it to .env."
    if kind.form == BLOCK:
        return f"Here is the deploy key:\n{v}"
    return f"The setup uses `{_text_of(kind, v)[1]}` for now."


# ------------------------------------------------------------- the episode's files


class _Log:
    """messages.jsonl in the stream-json form: one assistant line per call, its result after it."""

    def __init__(self, rng: random.Random, cwd: str) -> None:
        self.rng, self.cwd = rng, cwd
        self.session = str(uuid.UUID(int=rng.getrandbits(128)))
        self.lines: list[dict] = [{"type": "system", "subtype": "init", "cwd": cwd, "session_id": self.session,
                                   "model": ACTOR_INIT.model, "claude_code_version": ACTOR_INIT.claude_code_version,
                                   "tools": list(ACTOR_INIT.tools)}]
        self.turns = self.tool_calls = 0

    def _id(self, prefix: str) -> str:
        return prefix + "".join(self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz123456789")
                                for _ in range(24))

    def _assistant(self, block: dict) -> None:
        self.turns += 1
        self.lines.append({"type": "assistant", "message": {
            "id": self._id("msg_"), "model": ACTOR_INIT.model, "content": [block],
            "usage": {"input_tokens": 12, "output_tokens": 40}},
            "parent_tool_use_id": None, "session_id": self.session, "uuid": str(uuid.UUID(int=self.rng.getrandbits(128)))})

    def call(self, name: str, tool_input: dict, result: str) -> None:
        self.tool_calls += 1
        tool_id = self._id("toolu_")
        self._assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        self.lines.append({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": result, "is_error": False}]},
            "parent_tool_use_id": None, "session_id": self.session})

    def say(self, text: str) -> None:
        self._assistant({"type": "text", "text": text})

    def finish(self) -> bytes:
        usage = {"input_tokens": 12 * self.turns, "output_tokens": 40 * self.turns,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        self.lines.append({"type": "result", "subtype": "success", "is_error": False, "num_turns": self.turns,
                           "usage": usage, "result": "Configured and deployed."})
        return "".join(json.dumps(line) + "\n" for line in self.lines).encode()


def _numbered(text: str) -> str:
    """A Read's result: the file as `cat -n` prints it."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(text.split("\n"), start=1))


def planted_episode_files(kinds: list[CredentialKind], rng: random.Random, brief: dict, home: str,
                          started: str) -> tuple[dict[str, bytes], list[Plant]]:
    """Every file of one planted episode and what was planted in it."""
    kinds = _ordered(kinds)
    cwd = f"{home}/runs/{brief['brief_id']}/work"
    values = {(k.kind, context): planted_value(k, rng) for k in kinds for context in CONTEXTS}
    plants: list[Plant] = []
    log = _Log(rng, cwd)
    files: dict[str, bytes] = {}

    def plant(kind: CredentialKind, context: str, count: int = 1) -> str:
        value = values[(kind.kind, context)]
        plants.append(Plant(kind.kind, context, value, count))
        return value

    log.say("Checking the environment before deploying.")
    log.call("Bash", {"command": "env", "description": "Show the environment"},
             "\n".join([f"HOME={home}", "SHELL=/bin/bash", *(env_line(k, plant(k, ENV)) for k in kinds)]))

    dot_env = "\n".join(env_line(k, plant(k, CAT_ENV), quoted=True) for k in kinds) + "\n"
    files[DOT_ENV] = dot_env.encode()
    log.call("Bash", {"command": "cat .env", "description": "Read the env file"}, dot_env)

    written = [k for k in kinds if k.form != BLOCK]
    config = "deploy:\n" + "".join(f"  {yaml_line(k, plant(k, WRITE, 2))}\n" for k in written)
    files[CONFIG_FILE] = config.encode()
    log.call("Write", {"file_path": f"{cwd}/config/settings.yaml", "content": config},
             f"File created successfully at: {cwd}/config/settings.yaml")
    blocks = [k for k in kinds if k.form == BLOCK]
    if blocks:
        text = "".join(yaml_line(k, plant(k, WRITE, 2)) + "\n" for k in blocks)
        files[BLOCK_FILE] = text.encode()
        log.call("Write", {"file_path": f"{cwd}/config/deploy-key.yaml", "content": text},
                 f"File created successfully at: {cwd}/config/deploy-key.yaml")

    for k in kinds:
        command, printed = cli_call(k, plant(k, CLI))
        log.call("Bash", {"command": command, "description": "Run"}, printed)

    log.say("\n\n".join(sentence(k, plant(k, ASSISTANT)) for k in kinds))

    in_notebook = [k for k in kinds if k.form == KEY][::2]
    in_json = [k for k in kinds if k not in in_notebook]
    members = dict(json_member(k, plant(k, READ)) for k in in_json)
    log.call("Read", {"file_path": f"{home}/.config/deploy/credentials.json"},
             _numbered(json.dumps(members, indent=2)))
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": n,
              "source": ["import os\n", f'os.environ["{k.name}"] = "{plant(k, READ)}"\n']}
             for n, k in enumerate(in_notebook, start=1)]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    log.call("Read", {"file_path": f"{cwd}/analysis.ipynb"}, _numbered(json.dumps(notebook, indent=1)))
    log.say("Configured and deployed.")

    files[MESSAGES] = log.finish()
    files["brief.json"] = (json.dumps(brief, indent=2) + "\n").encode()
    files["result.json"] = (json.dumps({
        "status": "completed", "error": None, "started_at": started, "ended_at": started, "duration_s": 60.0,
        "turns": log.turns, "tool_calls": log.tool_calls,
        "usage": {"input_tokens": 12 * log.turns, "output_tokens": 40 * log.turns}}, indent=2) + "\n").encode()
    return files, plants


def planted_episodes(series: str, briefs: list[dict], sample: str, seed: int, started: str,
                     home: str) -> list[tuple[PlantedEpisode, dict[str, bytes]]]:
    """Two episodes of `series` (a run folder, then an archive) on the first two of `briefs`, which
    hold every kind between them: the plan and the files of each."""
    rng = random.Random(f"credential-plants-{seed}")
    out = []
    for number, brief in enumerate(briefs[:2]):
        episode = PlantedEpisode(series, f"{brief['brief_id']}-{sample}", archive=number == 1)
        files, episode.plants = planted_episode_files(list(KINDS[number::2]), rng, brief, home, started)
        out.append((episode, files))
    return out
