"""Nothing leaks: the README's "Security" paragraph and contract 3's "The scrub", "Slimming",
"Manifest" and "Publishing", end to end through `vae build`.

A runs root is generated (2 series x 3 episodes, no bad input) and one more episode is written by
hand into the completed series. That episode plants every credential kind, home paths
(`/home/…`, `/Users/…`, `/root`), the harness host name (with dots) and user name, an e-mail and a
public IP in every kind of text member the contract names (.json .jsonl .md .txt .html .js .css
.ts .py .sh .yaml .yml): inside messages.jsonl tool results and tool inputs, in request blobs next
to images, in the brief, the judge's answer, result.json, and in work files — each member with
its OWN set of random values, so a leaked value names the member it came from. Credentials are
also planted at the start of a line (after a `\\n` escape inside JSON strings), as `cat`-style
tool output would hold them. Excluded members (`.env`, `*.env`, vendor, node_modules) and a
dropped `stream_event` line carry further values that must not survive either.

Then `vae build` runs twice through the CLI (`--debug`, then plain), and every byte the pipeline
keeps is searched: the dataset folder (every `.tar.zst` decompressed member by member, Parquet
decoded), everything under VAE_HOME (the Dagster instance under DAGSTER_HOME — SQLite run and
event storage read row by row with zlib-compressed snapshots inflated —, stored Parquet tables,
the DuckDB warehouse read table by table, staged archives and videos, frames, captured compute
logs), and the CLI's output (stdout, stderr, log records, `--summary` files). Each value is
searched raw, JSON-escaped, as base64 at every alignment, and by fragments (a middle chunk, PEM
body lines, a JWT's signature); host and user names case-insensitively.

Credentials, home paths and the host name must be nowhere. E-mails, IPs and a user name standing as
a plain word are findings, not replacements: they may stay only inside the archive member they
were planted in, and must be reported there by file, line and kind.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import gzip
import hashlib
import io
import json
import logging
import random
import re
import shutil
import sqlite3
import string
import tarfile
import textwrap
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import duckdb
import polars as pl
import pytest
import zstandard
from PIL import Image

from vae_pipeline.cli import main
from vae_pipeline.sample.generator import (
    HARNESS_HOST,
    HARNESS_USER,
    SampleRun,
    generate,
)
from vae_pipeline.sample.planted import PLANTED_KIND, planted_text, planted_values
from vae_pipeline_tests.conftest import META

SEED = 29
HOST = HARNESS_HOST  # "gpu-07.render.internal": holds dots, so every occurrence must be replaced
USER = HARNESS_USER  # "vae-runner"
ROOT_PATH = "/root/.ssh/id_ed25519"
PLAIN_USER_LINE = f"reviewed by {USER} today"  # a plain word: reported, not replaced

# contract 3, "The scrub" / "The archive"
TEXT_EXTENSIONS = {".json", ".jsonl", ".md", ".txt", ".html", ".js", ".css", ".ts", ".py", ".sh", ".yaml", ".yml"}
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

CREDENTIALS = [key for key, (_, action) in PLANTED_KIND.items() if action == "redact"]
FINDINGS = {"email": "email", "public_ip": "ip_address"}
# credentials that stand on their own, one a line, as `cat ~/.config/tokens` would print them; the AWS
# key id last, then a long plain sentence, so no 40-character run follows it (which the contract
# would read as its secret key)
BARE = ["anthropic", "openai", "openai_project", "huggingface", "github_ghp", "github_gho", "github_ghu",
        "github_ghs", "github_ghr", "github_pat", "slack", "jwt", "aws_access_key_id"]
TRAILER = ("That was the whole token list: the rest of this note only describes the animation timing, "
           "the easing curves and the colour palette in use.")
PER_BLOCK = 16 + len(BARE)  # planted_text's 16 credentials (AWS id + secret are two) + the bare ones


# ---------------------------------------------------------------- the hand-written episode


def hand_values(tag: str) -> dict[str, str]:
    """A fresh set of planted values for one member, plus a macOS home."""
    rng = random.Random(f"test_nothing_leaks/{tag}")
    values = planted_values(rng)
    values["home_mac"] = "/Users/" + "".join(rng.choice(string.ascii_lowercase) for _ in range(7))
    return values


def block(values: dict[str, str]) -> str:
    """Every value of `values`, the host and user names (where they hold / . @ :) and home paths."""
    return "\n".join([
        planted_text(values),
        f"ssh {USER}@{HOST} 'ls {values['home_mac']}/Movies'",
        f"cache in /var/lib/{USER}/cache, status on http://{HOST.upper()}:8080/status",
        f"key file {ROOT_PATH}",
        "$ cat ~/.config/tokens",
        *(values[key] for key in BARE),
        TRAILER,
    ])


WORK_MEMBERS = {  # one of each non-JSON text kind
    "work/notes.md": lambda b: f"# Deploy notes\n\n{b}\n",
    "work/notes.txt": lambda b: f"{b}\n{PLAIN_USER_LINE}\n",
    "work/index.html": lambda b: f"<!doctype html>\n<title>Deploy</title>\n<pre>\n{b}\n</pre>\n",
    "work/script.js": lambda b: f"/*\n{b}\n*/\nexport const t = 0;\n",
    "work/style.css": lambda b: f"/*\n{b}\n*/\n#stage {{ color: #ffcc00; }}\n",
    "work/src/main.ts": lambda b: f"const notes: string = `\n{b}\n`;\nexport default notes;\n",
    "work/tools/deploy.py": lambda b: f'NOTES = """\n{b}\n"""\n',
    "work/run.sh": lambda b: f"#!/bin/sh\n{b}\n",
    "work/config.yaml": lambda b: "notes: |\n" + textwrap.indent(b, "  ") + "\n",
    "work/ci.yml": lambda b: "steps:\n  - run: |\n" + textwrap.indent(b, "      ") + "\n",
}
EXCLUDED_MEMBERS = {  # left out of the archive by the contract; their values must vanish too
    "work/.env": lambda b: b + "\n",
    "work/deploy/prod.env": lambda b: b + "\n",
    "work/node_modules/left-pad/index.js": lambda b: f"/*\n{b}\n*/\n",
    "work/assets/vendor/gsap.min.js": lambda b: f"/*\n{b}\n*/\n",
}
BLOBS = "transcript/api-request-blob/*.json"  # both request blobs carry the same values
# 24 blocks in archived members (brief, result, 3 in messages, 3 in session, tool-events, shape,
# 2 blobs, api-request, judge, 10 work files) and an Authorization header + x-api-key in each of the
# 2 blobs and the api-request: counted by hand, checked against the generic count below
HAND_REDACTIONS = 24 * PER_BLOCK + 3 * 2


def _png(seed: int) -> bytes:
    """A noisy PNG (WebP at quality 70 is smaller, so slimming converts it)."""
    rng = random.Random(seed)
    out = io.BytesIO()
    Image.frombytes("RGB", (48, 48), rng.randbytes(48 * 48 * 3)).save(out, "PNG")
    return out.getvalue()


def _image_block(png: bytes) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                        "data": base64.b64encode(png).decode()}}


def _messages(values: dict, stream_values: dict, episode_id: str, png: bytes) -> bytes:
    text = block(values)
    work = f"{values['home']}/runs/{episode_id}/work"
    usage = {"input_tokens": 900, "output_tokens": 300}
    lines = [
        {"type": "system", "subtype": "init", "cwd": work, "model": "claude-opus-5.5"},
        {"type": "stream_event", "event": {"type": "content_block_delta",
                                           "delta": {"type": "text_delta", "text": block(stream_values)}}},
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": text}}], "usage": usage}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [
            {"type": "text", "text": text}, _image_block(png)]}]}},
        {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "toolu_02", "name": "Read", "input": {"file_path": f"{work}/snap/final.png"}}],
            "usage": usage}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_02",
                                                  "content": [_image_block(png)]}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Delivered out.mp4."}], "usage": usage}},
        {"type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "result": "Done.",
         "usage": {"input_tokens": 2700, "output_tokens": 900, "cache_read_input_tokens": 1000,
                   "cache_creation_input_tokens": 100}},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@dataclass
class HandEpisode:
    episode_id: str
    series: str
    files: dict[str, bytes]  # every file of the run folder
    values: dict[str, dict[str, str]]  # value tag -> planted values
    where: dict[str, frozenset[str]]  # value tag -> the archive members it may stay in (findings)


def plant_hand_episode(sample: SampleRun) -> HandEpisode:
    """A run folder in the completed series: the video, frames and judge.json of a generated episode
    of the running series (so it is judged and has facts), everything else written here."""
    completed = next(s for s, status in sample.series.items() if status == "completed")
    taken = {p.brief["brief_id"] for p in sample.episodes if p.series == completed}
    sample_name = completed.rsplit("-", 1)[1]
    source = next((p for p in sample.episodes
                   if p.series != completed and not p.archive and p.brief["brief_id"] not in taken
                   and (sample.root / p.series / p.episode_id / "judge.json").exists()), None)
    if source is None:
        pytest.fail("no judged run folder outside the completed series to borrow a video from: change SEED")
    episode_id = f"{source.brief['brief_id']}-{sample_name}"
    source_dir = sample.root / source.series / source.episode_id

    values: dict[str, dict[str, str]] = {}
    where: dict[str, frozenset[str]] = {}

    def tagged(tag: str, members: set[str] | None = None) -> dict[str, str]:
        values[tag] = hand_values(tag)
        where[tag] = frozenset({tag} if members is None else members)
        return values[tag]

    files: dict[str, bytes] = {}
    for path in sorted(source_dir.rglob("*")):
        name = path.relative_to(source_dir).as_posix()
        if path.is_file() and (name == "out.mp4" or name.startswith("frames/")):
            files[name] = path.read_bytes()

    brief = dict(source.brief)
    brief["prompt"] = f"{brief['prompt']}\n\n{block(tagged('brief.json'))}"
    files["brief.json"] = (json.dumps(brief, indent=2) + "\n").encode()

    source_result = json.loads((source_dir / "result.json").read_text())
    v = tagged("result.json")
    result = {"status": "completed", "error": None, "started_at": source_result["started_at"],
              "ended_at": source_result["ended_at"], "duration_s": 1671.0, "turns": 3, "tool_calls": 2,
              "usage": {"input_tokens": 2700, "output_tokens": 900}, "cwd": f"{v['home']}/runs/{episode_id}",
              "note": block(v)}
    files["result.json"] = (json.dumps(result, indent=2) + "\n").encode()

    png = _png(SEED)
    files["observations/frame-0.png"] = png
    values_of_stream = tagged("messages.jsonl#stream_event", set())
    files["messages.jsonl"] = _messages(tagged("messages.jsonl"), values_of_stream, episode_id, png)
    session_stream = tagged("transcript/session.jsonl#stream_event", set())
    files["transcript/session.jsonl"] = _messages(tagged("transcript/session.jsonl"), session_stream, episode_id, png)

    v = tagged("tool-events.jsonl")
    events = [{"hook": "PreToolUse", "tool": "Bash", "tool_use_id": "toolu_01", "input": {"command": block(v)}},
              {"hook": "PostToolUse", "tool": "Bash", "tool_use_id": "toolu_01"}]
    files["tool-events.jsonl"] = "".join(json.dumps(e) + "\n" for e in events).encode()

    v = tagged("transcript/api-request-shape.json")
    files["transcript/api-request-shape.json"] = (json.dumps(
        {"model": "claude-opus-5.5", "cwd": f"{v['home']}/runs/{episode_id}", "host": HOST,
         "user": f"{USER}@{HOST}", "note": block(v)}, indent=2) + "\n").encode()

    v = tagged(BLOBS, {"transcript/api-request-blob/0.json", "transcript/api-request-blob/1.json"})
    blob = {"headers": {"Authorization": f"Bearer {v['bearer']}", "x-api-key": v["anthropic"]},
            "messages": [{"role": "user", "content": [_image_block(png), {"type": "text", "text": block(v)}]}]}
    files["transcript/api-request-blob/0.json"] = (json.dumps(blob, indent=2) + "\n").encode()  # image spans lines
    files["transcript/api-request-blob/1.json"] = json.dumps(blob).encode()

    v = tagged("transcript/api-request/0.json")
    files["transcript/api-request/0.json"] = json.dumps(
        {"url": "https://api.anthropic.com/v1/messages", "attempt": 0,
         "log": f"{v['home']}/.cache/claude/request-0.log on {HOST}",
         "headers": {"authorization": f"Bearer {v['bearer']}", "x-api-key": v["anthropic"]},
         "note": block(v)}).encode()

    judge = json.loads((source_dir / "judge.json").read_text())
    judge["answer"]["summary"] = f"{judge['answer'].get('summary', '')}\n{block(tagged('judge.json'))}"
    files["judge.json"] = (json.dumps(judge, indent=2) + "\n").encode()

    for name, wrap in WORK_MEMBERS.items():
        files[name] = wrap(block(tagged(name))).encode()
    for name, wrap in EXCLUDED_MEMBERS.items():
        files[name] = wrap(block(tagged(name, set()))).encode()

    folder = sample.root / completed / episode_id
    assert not folder.exists()
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return HandEpisode(episode_id, completed, files, values, where)


# ---------------------------------------------------------------- reading episodes as the contract sees them


def is_excluded(path: str) -> bool:
    name = PurePosixPath(path).name
    return (path.startswith("work/assets/vendor/") or path.startswith("work/node_modules/")
            or name == ".env" or name.endswith(".env"))


def is_text(path: str) -> bool:
    return PurePosixPath(path).suffix.lower() in TEXT_EXTENSIONS


def read_input_episode(runs: Path, series: str, episode_id: str) -> dict[str, bytes]:
    folder = runs / series / episode_id
    if folder.is_dir():
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    return dict(tar_members(unzstd((runs / series / f"{episode_id}.tar.zst").read_bytes())))


def counted_lines(path: str, data: bytes) -> list[tuple[int, str]]:
    """(input line number, text) of the lines the scrub sees: stream_event lines are dropped first."""
    lines = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), start=1):
        if path.endswith(".jsonl") and line.strip():
            try:
                if json.loads(line).get("type") == "stream_event":
                    continue
            except ValueError:
                pass
        lines.append((number, line))
    return lines


def scrubbed_members(files: dict[str, bytes]) -> dict[str, list[tuple[int, str]]]:
    return {p: counted_lines(p, d) for p, d in files.items() if is_text(p) and not is_excluded(p)}


def forms(value: str) -> set[str]:
    """The value as it stands in raw text, inside a JSON string, and indented in the YAML members."""
    return {value, json.dumps(value)[1:-1], *(value.replace("\n", "\n" + " " * n) for n in (2, 6))}


def count_in(members: dict[str, list[tuple[int, str]]], needles: list[str]) -> int:
    text = "\n".join(line for lines in members.values() for _, line in lines)
    return sum(text.count(f) for needle in needles for f in forms(needle))


def ip_in(line: str, ip: str) -> bool:
    return re.search(rf"(?<![0-9.]){re.escape(ip)}(?![0-9]|\.[0-9])", line) is not None


def expected_findings(members: dict[str, list[tuple[int, str]]], value_sets: dict[str, list[dict]]) -> set:
    """(file, input line, kind) of every planted e-mail and IP: one finding per file, line and kind."""
    found = set()
    for path, lines in members.items():
        for values in value_sets.get(path, []):
            for number, line in lines:
                if values["email"] in line:
                    found.add((path, number, "email"))
                if ip_in(line, values["public_ip"]):
                    found.add((path, number, "ip_address"))
    return found


# ---------------------------------------------------------------- every byte the pipeline keeps, decoded


@dataclass
class View:
    where: str
    data: bytes
    episode: str | None = None  # set for a member of an episode archive
    member: str | None = None


def unzstd(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()


def tar_members(raw: bytes) -> list[tuple[str, bytes]]:
    out = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for member in tar:
            if member.isfile():
                out.append((member.name, tar.extractfile(member).read()))
    return out


def _cell(value) -> list[bytes]:
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out = [raw]
        with contextlib.suppress(zlib.error):
            out.append(zlib.decompress(raw))  # Dagster stores snapshots zlib-compressed
        return out
    if isinstance(value, str):
        out = [value.encode("utf-8", errors="replace")]
        with contextlib.suppress(ValueError, zlib.error):
            if len(value) >= 16 and re.fullmatch(r"[A-Za-z0-9+/=\s]+", value):
                out.append(zlib.decompress(base64.b64decode(value)))
        return out
    return [json.dumps(value, default=str, ensure_ascii=False).encode()]


def sqlite_views(path: Path, where: str, scratch: Path) -> list[View]:
    """Every row of every table, read from a copy (with its -wal/-shm) so the instance is untouched."""
    target = scratch / f"{len(list(scratch.iterdir()))}-{path.name}"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            shutil.copyfile(f"{path}{suffix}", f"{target}{suffix}")
    views = []
    con = sqlite3.connect(target)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cells = [c for row in con.execute(f'SELECT * FROM "{table}"') for value in row for c in _cell(value)]
            views.append(View(f"{where} [sqlite table {table}]", b"\n".join(cells)))
    finally:
        con.close()
    return views


def duckdb_views(path: Path, where: str, scratch: Path) -> list[View]:
    target = scratch / f"{len(list(scratch.iterdir()))}-{path.name}"
    shutil.copyfile(path, target)
    if Path(f"{path}.wal").exists():
        shutil.copyfile(f"{path}.wal", f"{target}.wal")
    views = []
    con = duckdb.connect(str(target))
    try:
        # the views name files relative to VAE_HOME (the database's folder), as Warehouse.connect does
        con.execute(f"SET file_search_path = '{path.parent.as_posix()}'")
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        for schema, table in tables:
            rows = con.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()
            cells = [c for row in rows for value in row for c in _cell(value)]
            views.append(View(f"{where} [duckdb table {schema}.{table}]", b"\n".join(cells)))
    finally:
        con.close()
    return views


def file_views(path: Path, where: str, scratch: Path) -> list[View]:
    data = path.read_bytes()
    views = [View(where, data)]
    if data.startswith(ZSTD_MAGIC):
        # an episode archive is searched member by member (its compressed bytes add nothing, and a
        # finding's value may stay in the member it was planted in)
        raw = unzstd(data)
        episode = path.name.removesuffix(".tar.zst")
        try:
            views = [View(f"{where} :: {name}", content, episode, name) for name, content in tar_members(raw)]
        except tarfile.TarError:
            views.append(View(f"{where} [zstd]", raw))
    elif data[:2] == b"\x1f\x8b":
        views.append(View(f"{where} [gzip]", gzip.decompress(data)))
    elif data[:4] == b"PAR1":
        views.append(View(f"{where} [parquet rows]", pl.read_parquet(io.BytesIO(data)).write_ndjson().encode()))
    elif data.startswith(b"SQLite format 3\x00"):
        views += sqlite_views(path, where, scratch)
    elif data[8:12] == b"DUCK":
        views += duckdb_views(path, where, scratch)
    return views


def tree_views(root: Path, label: str, scratch: Path) -> list[View]:
    return [v for p in sorted(root.rglob("*")) if p.is_file()
            for v in file_views(p, f"{label}/{p.relative_to(root).as_posix()}", scratch)]


# ---------------------------------------------------------------- needles and the search


@dataclass(frozen=True)
class Needle:
    text: bytes
    kind: str  # what was planted: a planted_values key, "host", "user", "root home"
    form: str  # raw, escaped (JSON / YAML-indented), base64, middle chunk, pem body line, jwt signature
    planted_in: str  # "<episode>:<member>" or "<episode>" or "harness"
    rule: str  # "never": nowhere; "finding": only in the archive members it was planted in; "user"
    episode: str | None = None
    members: frozenset[str] | None = None  # None: any member of the episode's archive
    nocase: bool = False
    ip: bool = False


def _base64_forms(value: bytes) -> set[bytes]:
    out = set()
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + value)
        core = encoded[4 if shift else 0: -4]
        if len(core) >= 8:
            out |= {core, core.replace(b"+", b"-").replace(b"/", b"_")}
    return out


def value_needles(kind: str, value: str, planted_in: str, rule: str, episode: str | None,
                  members: frozenset[str] | None) -> list[Needle]:
    def needle(text: str | bytes, form: str, **extra) -> Needle:
        data = text.encode() if isinstance(text, str) else text
        return Needle(data, kind, form, planted_in, rule, episode, members, **extra)

    if rule != "never":  # e-mails and IPs: the value itself, as text
        return [needle(value, "raw", ip=kind == "public_ip")]
    out = [needle(f, "raw" if f == value else "escaped") for f in forms(value)]
    out += [needle(b, "base64") for b in _base64_forms(value.encode())]
    if kind == "pem_private_key":
        body = [line for line in value.splitlines() if not line.startswith("-----")]
        out += [needle(line, "pem body line") for line in (body[0], body[len(body) // 2], body[-2])]
    elif kind == "jwt":
        out.append(needle(value.rsplit(".", 1)[1], "jwt signature"))
    elif len(value) >= 40:
        middle = len(value) // 2
        out.append(needle(value[middle - 12: middle + 12], "middle chunk"))
    return out


def needles_of(sample: SampleRun, hand: HandEpisode) -> list[Needle]:
    needles = []
    for plan in sample.episodes:
        for kind, value in plan.secrets.items():
            rule = "finding" if kind in FINDINGS else "never"
            needles += value_needles(kind, value, plan.episode_id, rule, plan.episode_id, None)
    for tag, values in hand.values.items():
        for kind, value in values.items():
            rule = "finding" if kind in FINDINGS and hand.where[tag] else "never"
            needles += value_needles(kind, value, f"{hand.episode_id}:{tag}", rule, hand.episode_id, hand.where[tag])
    for f in forms(HOST):
        needles.append(Needle(f.lower().encode(), "host", "raw, any case", "harness", "never", nocase=True))
    needles += [Needle(b, "host", "base64", "harness", "never") for b in _base64_forms(HOST.encode())]
    needles.append(Needle(USER.lower().encode(), "user", "raw, any case", "harness", "user", nocase=True))
    needles.append(Needle(ROOT_PATH.encode(), "root home", "raw", hand.episode_id, "never"))
    return needles


_DELIMS = set(b" \t\r\n\"'`<>()[]{},;\\|")


def _plain_word_only(data: bytes, word: bytes) -> bool:
    """Every occurrence of `word` (any case) stands in a value holding none of / . @ : (contract)."""
    low = data.lower()
    pos = low.find(word)
    while pos != -1:
        lo, hi = pos, pos + len(word)
        while lo > 0 and data[lo - 1] not in _DELIMS:
            lo -= 1
        while hi < len(data) and data[hi] not in _DELIMS:
            hi += 1
        if any(ch in b"/.@:" for ch in data[lo:hi]):
            return False
        pos = low.find(word, pos + 1)
    return True


def _ip_at(big: bytes, pos: int, length: int) -> bool:
    before = big[pos - 1: pos]
    after = big[pos + length: pos + length + 2]
    return not (before.isdigit() or before == b".") and not (after[:1].isdigit() or
                                                          (after[:1] == b"." and after[1:2].isdigit()))


def search(views: list[View], needles: list[Needle]) -> list[tuple[Needle, View]]:
    """Each (needle, view) where the needle occurs, found in one pass per needle over all views."""
    starts, pieces, offset = [], [], 0
    for view in views:
        starts.append(offset)
        pieces.append(view.data)
        offset += len(view.data) + 2
    big = b"\x00\x00".join(pieces)
    low = big.lower()
    hits = []
    for needle in needles:
        hay = low if needle.nocase else big
        pos = hay.find(needle.text)
        while pos != -1:
            index = bisect.bisect_right(starts, pos) - 1
            if needle.ip and not _ip_at(hay, pos, len(needle.text)):
                pos = hay.find(needle.text, pos + 1)
                continue
            hits.append((needle, views[index]))
            if index + 1 >= len(starts):
                break
            pos = hay.find(needle.text, starts[index + 1])
    return hits


def _carries_brief(where: str) -> bool:
    """The places that hold contract 3's `brief` of a row: the rows, the manifests, the tables (and
    the roll-ups' copies of the rows they read from them)."""
    return (where.startswith(("dataset/episodes.jsonl", "dataset/data/episodes.parquet"))
            or (where.startswith("dataset/episodes/") and where.endswith(".json"))
            or where.startswith(("VAE_HOME/tables/", "VAE_HOME/rollups/", "VAE_HOME/vae_warehouse.duckdb")))


def leaks(hits: list[tuple[Needle, View]]) -> list[str]:
    """Every hit the contract does not allow, one line per origin (planted in) and location (found in)."""
    found: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for needle, view in hits:
        in_archive = view.episode is not None
        if needle.rule == "finding" and in_archive and view.episode == needle.episode and (
                needle.members is None or view.member in needle.members):
            continue
        if needle.rule == "user" and in_archive and _plain_word_only(view.data, needle.text):
            continue
        # contract 3's `brief` column (and the manifest's `brief`) is the full brief: an e-mail or IP
        # in it is a finding of the archived brief.json, which blocks publishing until reviewed
        if needle.rule == "finding" and needle.planted_in.endswith(":brief.json") and _carries_brief(view.where):
            continue
        found[(needle.planted_in, view.where)][needle.kind].add(needle.form)
    return [f"planted in {origin} -> found in {where}: "
            + "; ".join(f"{kind} ({', '.join(sorted(f))})" for kind, f in sorted(what.items()))
            for (origin, where), what in sorted(found.items())]


def _report(lines: list[str], limit: int = 80) -> str:
    shown = "\n  ".join(lines[:limit])
    more = f"\n  … and {len(lines) - limit} more" if len(lines) > limit else ""
    return f"{len(lines)} leak(s):\n  {shown}{more}"


# ---------------------------------------------------------------- one build, shared by the tests


@dataclass
class World:
    sample: SampleRun
    hand: HandEpisode
    runs: Path
    dataset: Path
    home: Path
    cli: list[tuple[str, str]]  # (what, text)
    codes: list[int]
    summaries: list[dict]
    needles: list[Needle]
    views: dict[str, list[View]] = field(default_factory=dict)
    hits: dict[str, list[tuple[Needle, View]]] = field(default_factory=dict)

    def manifests(self) -> dict[str, dict]:
        return {p.stem: json.loads(p.read_text()) for p in (self.dataset / "episodes").rglob("*.json")}

    def plan_values(self, episode_id: str) -> tuple[dict[str, bytes], dict[str, list[dict]]]:
        """The episode's input files and, per member, the value sets planted in it."""
        if episode_id == self.hand.episode_id:
            sets: dict[str, list[dict]] = defaultdict(list)
            for tag, members in self.hand.where.items():
                for member in members:
                    sets[member].append(self.hand.values[tag])
            return self.hand.files, sets
        plan = next(p for p in self.sample.episodes if p.episode_id == episode_id)
        files = read_input_episode(self.runs, plan.series, episode_id)
        return files, {path: [plan.secrets] for path in files}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.lines.append(f"{record.name} {record.levelname} {record.getMessage()}")
            if record.exc_text:
                self.lines.append(record.exc_text)


def _run_cli(argv: list[str]) -> tuple[int, str, str, list[str]]:
    out, err, records = io.StringIO(), io.StringIO(), _Records()
    root = logging.getLogger()
    root.addHandler(records)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        root.removeHandler(records)
    return code, out.getvalue(), err.getvalue(), records.lines


def isolate_under(base: Path, mp: pytest.MonkeyPatch) -> None:
    """Every setting pointing under `base` (meta/ a copy of the project's), with the harness's names."""
    shutil.copytree(META, base / "meta")
    home = base / "home"
    for name, value in {
        "VAE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "VAE_META_DIR": str(base / "meta"),
        "VAE_DATASET_DIR": str(base / "dataset"), "VAE_RUNS_ROOT": str(base / "runs"),
        "VAE_RUBRIC_VERSION": "latest", "VAE_HARNESS_HOSTNAME": HOST, "VAE_HARNESS_USER": USER,
        "VAE_MAX_UNPACKED_BYTES": str(4 * 1024**3),
    }.items():
        mp.setenv(name, value)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    base = tmp_path_factory.mktemp("nothing_leaks")
    meta, runs, dataset, home = base / "meta", base / "runs", base / "dataset", base / "home"
    with pytest.MonkeyPatch.context() as mp:
        isolate_under(base, mp)
        sample = generate(runs, meta, series=2, episodes=3, seed=SEED, bad=False)
        hand = plant_hand_episode(sample)
        summaries = [base / "summary-debug.json", base / "summary.json"]
        cli, codes = [], []
        for argv, summary in ((["--debug", "build"], summaries[0]), (["build"], summaries[1])):
            code, out, err, records = _run_cli([*argv, "--runs", str(runs), "--out", str(dataset),
                                                "--summary", str(summary)])
            codes.append(code)
            label = " ".join(argv)
            cli += [(f"vae {label}: stdout", out), (f"vae {label}: stderr", err),
                    (f"vae {label}: log records", "\n".join(records))]
    world = World(sample, hand, runs, dataset, home, cli, codes,
                  [json.loads(p.read_text()) for p in summaries], needles_of(sample, hand))
    scratch = base / "scratch"
    scratch.mkdir()
    world.views = {
        "dataset": tree_views(dataset, "dataset", scratch),
        "vae_home": tree_views(home, "VAE_HOME", scratch),
        "cli": [View(what, text.encode()) for what, text in cli]
        + [View(f"vae {a} --summary {p.name}", p.read_bytes()) for a, p in zip(("--debug build", "build"), summaries)],
        "runs": tree_views(runs, "runs", scratch),
    }
    world.hits = {area: search(views, world.needles) for area, views in world.views.items()}
    return world


# ---------------------------------------------------------------- the tests


def test_the_build_ran_and_published_the_planted_episode(world: World) -> None:
    """Preconditions, so that the searches below are not vacuous."""
    assert world.codes == [0, 0], [text[-2000:] for _, text in world.cli]
    debug_stderr = next(text for what, text in world.cli if what == "vae --debug build: stderr")
    assert "dagster" in debug_stderr, "--debug should show Dagster's own log: nothing was captured"
    for summary in world.summaries:
        assert summary["failed_runs"] == [] and summary["invalid_episodes"] == []
    assert world.summaries[0]["materialized"] and not world.summaries[1]["materialized"]
    ids = [json.loads(line)["id"] for line in (world.dataset / "episodes.jsonl").read_text().splitlines()]
    completed = [p.episode_id for p in world.sample.episodes if world.sample.series[p.series] == "completed"]
    assert sorted(ids) == sorted([*completed, world.hand.episode_id])
    assert set(world.manifests()) == set(ids)
    members = {v.member for v in world.views["dataset"] if v.episode == world.hand.episode_id}
    archived = {p for p in world.hand.files if not is_excluded(p)}
    assert archived <= members, archived - members
    assert not any(is_excluded(m) for m in members)
    wheres = [v.where for v in world.views["vae_home"]]
    for part in ("[sqlite table event_logs]", "[sqlite table snapshots]", "[duckdb table main.episode_table]",
                 "[parquet rows]", "compute_logs/", "VAE_HOME/bundles/", "VAE_HOME/frames/", "VAE_HOME/videos/"):
        assert any(part in w for w in wheres), f"nothing searched matches {part!r}"
    assert any(" :: " in w for w in wheres), "no staged archive was decompressed"
    decoded = world.views["vae_home"]
    assert any("[sqlite table event_logs]" in v.where and b"finding(s)" in v.data for v in decoded), \
        "the check results in the event log were not read"
    assert any("[sqlite table snapshots]" in v.where and b"scrub_settings" in v.data for v in decoded), \
        "the zlib-compressed job snapshots were not inflated"


def test_the_search_finds_every_planted_value_in_the_runs_root(world: World) -> None:
    """The same needles and decoders find every raw value where it was planted: a miss below is real."""
    text_forms = ("raw", "escaped", "raw, any case")
    found = {(n.kind, n.planted_in) for n, _ in world.hits["runs"] if n.form in text_forms}
    planted = {(n.kind, n.planted_in) for n in world.needles if n.form in text_forms}
    assert planted - found == set()


def test_no_planted_value_survives_in_the_dataset_folder(world: World) -> None:
    """README, rows (jsonl and parquet), manifests, videos, meta/ and every member of every archive."""
    found = leaks(world.hits["dataset"])
    assert not found, _report(found)


def test_nothing_the_pipeline_keeps_under_vae_home_holds_a_planted_value(world: World) -> None:
    """Dagster instance (run and event storage, snapshots, schedules, compute logs), stored Parquet
    tables, DuckDB warehouse, staged archives, videos and frames."""
    found = leaks(world.hits["vae_home"])
    assert not found, _report(found)


def test_the_cli_output_holds_no_planted_value(world: World) -> None:
    found = leaks(world.hits["cli"])
    assert not found, _report(found)
    stdout = "\n".join(text for what, text in world.cli if what.endswith("stdout"))
    assert "check failed: dataset_episodes.no_scrub_findings" in stdout


def test_redacted_keys_count_every_planted_credential_occurrence(world: World) -> None:
    problems = []
    assert world.hand.episode_id in world.manifests()
    for episode_id, manifest in sorted(world.manifests().items()):
        files, sets = world.plan_values(episode_id)
        members = scrubbed_members(files)
        expected = 0
        for path, lines in members.items():
            for values in sets.get(path, []):
                expected += count_in({path: lines}, [values[k] for k in CREDENTIALS])
        if episode_id == world.hand.episode_id:
            assert expected == HAND_REDACTIONS, "the hand count and the generic count disagree"
        if manifest["redacted_keys"] != expected:
            problems.append(f"{episode_id}: redacted_keys {manifest['redacted_keys']}, planted {expected}")
        archived = "".join(v.data.decode("utf-8", "replace") for v in world.views["dataset"]
                           if v.episode == episode_id)
        if archived.count("<redacted:") != expected:
            problems.append(f"{episode_id}: {archived.count('<redacted:')} <redacted:…> in the archive, "
                            f"planted {expected}")
    assert not problems, problems


def test_placeholders_replace_every_home_host_and_user_occurrence(world: World) -> None:
    hand = world.hand
    members = scrubbed_members(hand.files)
    homes = [v[k] for tag, v in hand.values.items() if hand.where[tag] for k in ("home", "home_mac")]
    text = "\n".join(line for lines in members.values() for _, line in lines)
    expected = {
        "<home>": count_in(members, homes) + text.count(ROOT_PATH),
        "<hostname>": text.lower().count(HOST.lower()),
        "<user>": text.lower().count(USER.lower()) - text.count(PLAIN_USER_LINE),
    }
    archived = "".join(v.data.decode("utf-8", "replace") for v in world.views["dataset"]
                       if v.episode == hand.episode_id)
    assert {p: archived.count(p) for p in expected} == expected
    manifest = world.manifests()[hand.episode_id]
    assert sum(manifest["scrub"]["placeholders"].values()) == sum(expected.values())


def test_findings_name_every_planted_email_ip_and_plain_user_by_file_line_and_kind(world: World) -> None:
    problems = []
    total = 0
    for episode_id, manifest in sorted(world.manifests().items()):
        files, sets = world.plan_values(episode_id)
        expected = expected_findings(scrubbed_members(files), sets)
        findings = manifest["scrub"]["findings"]
        total += sum(1 for f in findings if not f["allowed"])
        got = [(f["file"], f["line"], f["kind"]) for f in findings]
        if len(got) != len(set(got)):
            problems.append(f"{episode_id}: more than one finding for a file, line and kind")
        if episode_id == world.hand.episode_id:
            notes = counted_lines("work/notes.txt", files["work/notes.txt"])
            user_line = next(n for n, line in notes if line == PLAIN_USER_LINE)
            expected.add(("work/notes.txt", user_line, "user"))
            if expected - set(got):
                problems.append(f"{episode_id}: planted but not reported: {sorted(expected - set(got))}")
            if set(got) - expected:
                problems.append(f"{episode_id}: reported but not planted as a finding (a credential left "
                                f"over after the pass?): {sorted(set(got) - expected)}")
        else:
            mine = {g for g in got if g[2] in ("email", "ip_address")}
            if mine != expected:
                problems.append(f"{episode_id}: unexpected {sorted(mine - expected)}; "
                                f"missing {sorted(expected - mine)}")
            other = {g[2] for g in got} - {"email", "ip_address", "user"}
            if other:
                problems.append(f"{episode_id}: findings of kinds {sorted(other)} (a credential left over?)")
        if any(f["allowed"] for f in findings):
            problems.append(f"{episode_id}: a finding is allowed with an empty meta/scrub-allow.jsonl")
    for summary in world.summaries:
        check = next(c for c in summary["checks"] if c["check"] == "no_scrub_findings")
        if check["passed"] is not False:
            problems.append(f"no_scrub_findings did not fail: {check}")
        elif not (check["description"] or "").startswith(f"{total} finding(s)"):
            problems.append(f"no_scrub_findings should count {total} findings: {check['description'][:200]}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- failing runs: bad input that names a key


@dataclass
class FailingWorld:
    values: dict[str, dict[str, str]]  # tag -> planted values
    bad_ids: list[str]  # the invalid episodes, as the summary must name them (scrubbed)
    cli: list[tuple[str, str]]
    codes: list[int]
    summaries: list[dict]
    run_statuses: list[str]
    views: dict[str, list[View]]


def _tar_zst(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return zstandard.ZstdCompressor().compress(raw.getvalue())


# names the harness's user name makes invalid (a whole word: `.` is no part of a user name)
USER_EPISODE = f"{USER}.s9"
USER_SERIES = f"{USER}.batch"


def plant_bad_episodes(sample: SampleRun) -> tuple[dict[str, dict[str, str]], str]:
    """Bad input whose broken part holds a planted key and a home path, in the completed series:
    a messages.jsonl line cut short inside a string, an archive whose link member is named after a
    key under a home path, a run folder named after a key, a series folder named after a key, a
    file of a run folder named after a key, and a run folder and a series folder named after the
    harness's user. Input strings that are no bad input, in a good run folder and in series.json:
    files named after the host and the user, brief.json's title and concept, judge.json's model,
    and series.json values holding keys, a home path, the host and the user (the model, the harness
    commit, the CLI version and the benchmark version reach the rows, the entrants, the check
    descriptions and the event log)."""
    completed = next(s for s, status in sample.series.items() if status == "completed")
    good = next(p for p in sample.episodes if p.series == completed and not p.archive)
    source = {name: (sample.root / completed / good.episode_id / name).read_bytes()
              for name in ("brief.json", "result.json", "messages.jsonl")}
    values = {tag: hand_values(f"failing/{tag}") for tag in ("broken line", "member name", "folder", "series",
                                                               "file name", "series.json", "brief.json", "judge.json")}

    broken = values["broken line"]
    folder = sample.root / completed / "broken-line-s9"
    folder.mkdir()
    (folder / "brief.json").write_bytes(source["brief.json"])
    (folder / "result.json").write_bytes(source["result.json"])
    first = source["messages.jsonl"].splitlines()[0]
    cut = (f'{{"type": "user", "message": {{"content": "export ANTHROPIC_API_KEY={broken["anthropic"]} '
           f'# from {broken["home"]}/.config/{HOST}/token').encode()
    (folder / "messages.jsonl").write_bytes(first + b"\n" + cut + b"\n")

    named = values["member name"]
    link = tarfile.TarInfo(f"work/copy of {named['home']}/{named['openai']}/id_rsa")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    members = []
    for name, data in source.items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        members.append((info, data))
    (sample.root / completed / "member-name-s9.tar.zst").write_bytes(_tar_zst([*members, (link, None)]))

    by_key = sample.root / completed / values["folder"]["anthropic"]  # not a valid episode id
    by_key.mkdir()
    (by_key / "brief.json").write_bytes(source["brief.json"])

    (sample.root / values["series"]["github_pat"]).mkdir()  # longer than a series id may be

    by_file = sample.root / completed / "file-name-s9"  # a valid id; one of its files is named after a key
    by_file.mkdir()
    for name, data in source.items():
        (by_file / name).write_bytes(data)
    (by_file / "work").mkdir()
    (by_file / "work" / f"{values['file name']['github_ghp']}.txt").write_text("notes\n")

    by_user = sample.root / completed / USER_EPISODE
    by_user.mkdir()
    for name, data in source.items():
        (by_user / name).write_bytes(data)
    (sample.root / USER_SERIES).mkdir()
    (sample.root / USER_SERIES / "series.json").write_bytes((sample.root / completed / "series.json").read_bytes())

    # a good run folder keeps its files named after the host and the user, under their placeholders
    work = sample.root / completed / good.episode_id / "work"
    (work / f"{HOST}.log").write_text("render log\n")
    (work / USER).mkdir()
    (work / USER / "notes.md").write_text("# notes\n")

    info_path = sample.root / completed / "series.json"
    info = json.loads(info_path.read_text())
    v = values["series.json"]
    info["actor"]["model"] = f"{info['actor']['model']} {USER}@{HOST} {v['anthropic']}"
    info["actor"]["cli"] = f"{info['actor']['cli']} {HOST}"
    info["harness"]["commit"] = f"{info['harness']['commit']} {v['home']}/harness {v['github_ghp']}"
    info["benchmark_version"] = f"{info['benchmark_version']} {v['openai']}"
    info["notes"] = {v["huggingface"]: f"built by {USER}@{HOST} in {v['home']} with {v['slack']}"}
    info_path.write_text(json.dumps(info, indent=2))

    # the good run folder's brief columns and judge model (rows, card, verdicts table, metadata)
    v = values["brief.json"]
    brief = json.loads(source["brief.json"])
    brief["title"] = f"{brief['title']} for {USER}@{HOST} {v['github_pat']}"
    brief["concept"] = f"{brief['concept']}, see {v['home']}/notes and {v['jwt']}"
    (work.parent / "brief.json").write_text(json.dumps(brief, indent=2))
    judge_path = work.parent / "judge.json"
    assert judge_path.exists(), "the good run folder should be judged: change SEED"
    judge = json.loads(judge_path.read_text())
    judge["judge_model"] = f"{judge['judge_model']} {USER}@{HOST} {values['judge.json']['github_gho']}"
    judge_path.write_text(json.dumps(judge, indent=2))
    return values, completed


@pytest.fixture(scope="module")
def failing_world(tmp_path_factory) -> FailingWorld:
    import dagster as dg

    base = tmp_path_factory.mktemp("nothing_leaks_failing")
    meta, runs, dataset, home = base / "meta", base / "runs", base / "dataset", base / "home"
    with pytest.MonkeyPatch.context() as mp:
        isolate_under(base, mp)
        sample = generate(runs, meta, series=1, episodes=2, seed=SEED, bad=False)
        values, series = plant_bad_episodes(sample)
        summaries = [base / "summary-debug.json", base / "summary.json"]
        cli, codes = [], []
        commands = [(["--debug", "build"], summaries[0]), (["build"], summaries[1]), (["publish"], None)]
        for argv, summary in commands:
            where = ["--dataset", str(dataset), "--repo", "vae-lab/never-sent"] if argv == ["publish"] else \
                ["--runs", str(runs), "--out", str(dataset), "--summary", str(summary)]
            code, out, err, records = _run_cli([*argv, *where])
            codes.append(code)
            label = " ".join(argv)
            cli += [(f"vae {label}: stdout", out), (f"vae {label}: stderr", err),
                    (f"vae {label}: log records", "\n".join(records))]
        with dg.DagsterInstance.get() as instance:
            statuses = [run.status.value for run in instance.get_runs()]
    scratch = base / "scratch"
    scratch.mkdir()
    views = {
        "dataset": tree_views(dataset, "dataset", scratch),
        "vae_home": tree_views(home, "VAE_HOME", scratch),
        "cli": [View(what, text.encode()) for what, text in cli]
        + [View(f"vae build --summary {p.name}", p.read_bytes()) for p in summaries],
    }
    # a folder named after a key is called by the sha256 of its name (domain/episodes/series.py)
    by_key = "redacted-" + hashlib.sha256(values["folder"]["anthropic"].encode()).hexdigest()[:12]
    by_user = "redacted-" + hashlib.sha256(USER_EPISODE.encode()).hexdigest()[:12]
    bad_ids = sorted(["broken-line-s9", "member-name-s9", by_key, "file-name-s9", by_user])
    return FailingWorld(values, bad_ids, cli, codes, [json.loads(p.read_text()) for p in summaries], statuses,
                        views)


def failing_needles(world: FailingWorld) -> list[Needle]:
    needles = [needle for tag, values in world.values.items() for kind, value in values.items()
               if kind in (*CREDENTIALS, "home")
               for needle in value_needles(kind, value, f"failing:{tag}", "never", None, None)]
    needles += [Needle(f.lower().encode(), "host", "raw, any case", "harness", "never", nocase=True) for f in forms(HOST)]
    needles.append(Needle(USER.lower().encode(), "user", "raw, any case", "harness", "user", nocase=True))
    return needles


def test_the_failing_runs_failed_and_named_every_bad_episode(failing_world: FailingWorld) -> None:
    """Preconditions: runs failed (on the blocking checks), every bad episode and folder is reported."""
    assert failing_world.codes == [0, 0, 1], [text[-2000:] for _, text in failing_world.cli]
    assert "FAILURE" in failing_world.run_statuses
    summary = failing_world.summaries[0]
    invalid = {i["episode"]: i for i in summary["invalid_episodes"]}
    assert sorted(invalid) == failing_world.bad_ids
    assert invalid["broken-line-s9"]["file"] == "messages.jsonl" and invalid["broken-line-s9"]["line"] == 2
    assert invalid["member-name-s9"]["reason"] == "archive member is a link"
    assert invalid["member-name-s9"]["file"] == "work/copy of <home>/<redacted:openai>/id_rsa"
    assert invalid["file-name-s9"]["file"] == "work/<redacted:github>.txt"
    by_user = "redacted-" + hashlib.sha256(USER_EPISODE.encode()).hexdigest()[:12]
    assert invalid[by_user]["file"] == "<user>"  # the whole name: the scrub reports, not replaces, a word
    assert sorted(s["name"] for s in summary["skipped_folders"]) == sorted(["<redacted:github>", "<user>"])
    publish_out = next(text for what, text in failing_world.cli if what == "vae publish: stdout")
    assert "publishing refused" in publish_out and "<redacted:anthropic>" in publish_out


def test_no_planted_key_or_home_path_of_a_failing_run_is_kept_or_printed(failing_world: FailingWorld) -> None:
    """CLI output (stdout, stderr, log records with --debug), summaries, the Dagster instance's event
    log and runs, the warehouse and tables, the dataset folder."""
    needles = failing_needles(failing_world)
    runs_planted = {n.kind for n in needles}
    assert {"anthropic", "openai", "github_pat", "home"} <= runs_planted
    found = [line for area, views in failing_world.views.items() for line in leaks(search(views, needles))]
    assert not found, _report(found)


def test_files_named_after_the_host_and_user_are_archived_under_placeholders(failing_world: FailingWorld) -> None:
    """A good run folder's files named after the harness's host and user: archived, listed in the
    manifest and counted, under `<hostname>` and `<user>` (contract 3: every name is scrubbed)."""
    members = {v.member for v in failing_world.views["dataset"] if v.member is not None}
    assert {"work/<hostname>.log", "work/<user>/notes.md"} <= members
    manifests = [json.loads(v.data) for v in failing_world.views["dataset"]
                 if v.where.startswith("dataset/episodes/") and v.where.endswith(".json") and v.member is None]
    listed = {f["path"] for manifest in manifests for f in manifest["files"]}
    assert {"work/<hostname>.log", "work/<user>/notes.md"} <= listed


def test_the_cli_scrubs_the_root_exception_of_a_failed_run() -> None:
    """The line `vae build` prints (and writes to --summary) for a failed step quotes its root exception."""
    import dagster as dg

    from vae_pipeline.cli.common import run_error as _run_error

    values = hand_values("failing/exception")

    @dg.op
    def reads_an_input() -> None:
        raise ValueError(f"unexpected token {values['anthropic']} in {values['home']}/runs/x.json")

    result = dg.GraphDefinition(name="fails", node_defs=[reads_an_input]).to_job(
        executor_def=dg.in_process_executor).execute_in_process(raise_on_error=False)
    line = _run_error(result)
    assert line == "reads_an_input: ValueError: unexpected token <redacted:anthropic> in <home>/runs/x.json"
    assert values["anthropic"] not in line and values["home"] not in line
