"""Scrub recall, false positives and throughput vs detect-secrets (the whole `bundles` step is
`bench_bundles.py`).

    python benchmarks/bench_scrub.py [--mb 100] [--ds-mb 3]

Generates an episode of transcript-like files (JSONL messages with stream events, tool results,
a few screenshots, request blobs, project sources) with every planted value in it — as plain
text, spelt with JSON escapes (`\\u00XX`, `\\/`) and in a UTF-16 file — and two users' home
paths, prompts, `ls -l` listings and project folders; and beside them the rule table's planted
texts: every row's true examples and every string that must stay (every row's false examples),
each as a line of a `.env`-like text file and as a tool result's JSON string. Then:
1. learns the users from every file and scrubs every text file with them (as `bundles` does)
   and reports MB/s (and MB per CPU second: on a shared machine the fairer figure) and which
   planted kinds and users were caught;
2. runs detect-secrets (Python API, default plugins) over the first --ds-mb MB of the same files
   and the same planted texts (it runs at well under 1 MB/s, so all 100 MB would take many
   minutes) and reports the same;
3. prints, per kind of the rule table, the recall of both on its planted values (a value is
   caught by the scrub when it is gone from the output, by detect-secrets when its line is
   flagged) and their false positives on the strings that must stay (changed or flagged);
4. prints the recall of both, per context, on values written apart from the rule table: one per
   kind the widely used scanners know, in each of the generator's six agent-log contexts.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vae_pipeline.domain.scrub.texts import (  # noqa: E402
    ScrubConfig,
    is_text_member,
    kind_specs,
    learn_user_names,
    scrub_text,
)
from vae_pipeline.sample.credential_kinds import KINDS  # noqa: E402
from vae_pipeline.sample.credential_plants import CONTEXTS, DOT_ENV, planted_episode_files  # noqa: E402
from vae_pipeline.sample.planted import PLANTED_KIND, planted_text, planted_values  # noqa: E402

WORDS = (
    "the a render frame title card motion ease timeline composition layout should we now let me "
    "check file index html css gsap tween scene opacity scale transform duration seconds hold "
    "beat hook logo reveal typography kerning baseline grid column gutter palette contrast"
).split()
# Two users of one episode: each named by a home path in one file, met in others.
USERS = ("ana", "builder")
CSS = ".card{{color:#{:06x};transform:translate({}px,{}.5px) scale(1.0{})}} .title::before{{content:''}}"


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _screenshot(rng: random.Random) -> str:
    image = Image.new("RGB", (320, 180), (rng.randrange(256), 40, 90))
    image.putdata([(x % 256, (x * 7) % 256, rng.randrange(256)) for x in range(320 * 40)] + [(0, 0, 0)] * (320 * 140))
    out = io.BytesIO()
    image.save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def _escaped_planted(values: dict[str, str]) -> bytes:
    """A tool-result line holding the planted text, each value's first character written as a
    \\u00XX escape and every "/" as "\\/": what a reader decodes, not what the bytes say."""
    text = json.dumps(planted_text(values))
    for value in sorted(values.values(), key=len, reverse=True):
        plain = json.dumps(value)[1:-1]
        text = text.replace(plain, f"\\u{ord(value[0]):04x}" + plain[1:])
    line = '{"type": "user", "message": {"content": [{"type": "tool_result", "content": ' + text + "}]}}"
    return line.replace("/", "\\/").encode()


def _user_lines() -> list[bytes]:
    """Tool results of a shell session of each user: home, prompt, `ls -l`, project folder."""
    lines = []
    for user, home, group in ((USERS[0], f"/Users/{USERS[0]}", "staff"), (USERS[1], f"/home/{USERS[1]}", USERS[1])):
        folder = home.replace("/", "-") + "-work-site"
        text = (f"$ pwd\n{home}/work/site\n{user}@build:~/work/site$ ls -l\ntotal 16\n"
                f"-rw-r--r--  1 {user}  {group}  5120 Oct 21 08:03 index.html\n"
                f"drwxr-xr-x  4 {user}  {group}   128 Oct 21 08:01 assets\n"
                f"session log: ~/.claude/projects/{folder}/4f1c.jsonl")
        lines.append(json.dumps({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_z", "content": text}]}}).encode())
    return lines


def _line_pool(rng: random.Random, screenshots: list[str]) -> list[bytes]:
    """Distinct message lines in the proportions of a real run."""
    pool = []
    for i in range(3000):
        r = rng.random()
        ts = f"2026-10-21T08:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}Z"
        if r < 0.35:
            obj = {"type": "stream_event", "event": {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": _prose(rng, 4)}}}
        elif r < 0.6:
            command = f"cd work && npx hyperframes render --out out.mp4 --fps 30 # {_prose(rng, 6)}"
            obj = {"type": "assistant", "timestamp": ts, "uuid": f"{rng.getrandbits(128):032x}",
                   "message": {"content": [{"type": "thinking", "thinking": _prose(rng, 120),
                                            "signature": base64.b64encode(rng.randbytes(180)).decode()},
                                           {"type": "text", "text": _prose(rng, 60)},
                                           {"type": "tool_use", "id": f"toolu_{rng.getrandbits(96):024x}",
                                            "name": "Bash", "input": {"command": command}}],
                               "usage": {"input_tokens": rng.randrange(9999), "output_tokens": 456,
                                         "cache_read_input_tokens": rng.randrange(10**6)}}}
        elif r < 0.97:
            css = CSS.format(rng.getrandbits(24), rng.randrange(99), rng.randrange(9), rng.randrange(9))
            body = f"<div class=\"card\">{_prose(rng, 50)}</div>\n<style>{css}</style>\nv1.13.{i} ok"
            obj = {"type": "user", "timestamp": ts, "message": {"content": [{"type": "tool_result",
                   "tool_use_id": "toolu_x", "content": [{"type": "text", "text": body}]}]}}
        else:
            obj = {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_y",
                   "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                            "data": rng.choice(screenshots)}}]}]}}
        pool.append(json.dumps(obj).encode())
    return pool


@dataclass(frozen=True)
class Planted:
    """One planted line of the table's texts: a kind's value (secret) or a string that must stay."""

    kind: str
    text: str  # the line as written (a JSON line, or a text line with its newlines escaped away)
    secret: str | None  # None: a string that must stay


def table_texts() -> list[Planted]:
    """Every row's true examples (with the value each holds) and false examples, each as a text
    line (its own newlines kept only in the JSON form) and as a tool result's JSON string."""
    planted = []
    for spec in kind_specs():
        if spec.get("config") or spec["action"] != "redact":
            continue
        for example, secret in zip(spec["true_examples"], spec["secrets"]):
            planted.append(Planted(spec["name"], example.replace("\n", " "), secret))
            planted.append(Planted(spec["name"], json.dumps({"type": "tool_result", "content": example}), secret))
    for spec in kind_specs():
        for example in spec["false_examples"] if not spec.get("config") and spec["name"] != "user" else []:
            planted.append(Planted(spec["name"], example.replace("\n", " "), None))
            planted.append(Planted(spec["name"], json.dumps({"type": "tool_result", "content": example}), None))
    return planted


def write_table_texts(folder: Path, planted: list[Planted]) -> Path:
    """The planted lines as one file, a line each."""
    path = folder / "planted-table.jsonl"
    path.write_text("".join(p.text + "\n" for p in planted))
    return path


def generate_episode(folder: Path, megabytes: float, seed: int = 1) -> dict[str, str]:
    """Write an episode of about `megabytes` MB; return the planted values."""
    rng = random.Random(seed)
    values = planted_values(rng)
    planted = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result",
                          "content": [{"type": "text", "text": planted_text(values)}]}]}}).encode()
    escaped = _escaped_planted(values)
    users = _user_lines()
    screenshots = [_screenshot(rng) for _ in range(6)]
    pool = _line_pool(rng, screenshots)
    target = int(megabytes * 1e6)
    files = {
        "messages.jsonl": 0.62, "transcript/session.jsonl": 0.25,
        "transcript/api-request-blob/1.json": 0.05, "transcript/api-request-blob/2.json": 0.05,
    }
    for name, share in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines, size, n = [], 0, 0
        while size < target * share:
            special = {1000: planted, 1500: escaped, 1700: users[0] if "session" in name else users[1]}
            line = special.get(n % 2000) or rng.choice(pool)
            lines.append(line)
            size += len(line) + 1
            n += 1
        if name.endswith(".json"):  # a request blob: one JSON document on one line
            doc = {"model": "m", "messages": [json.loads(x) for x in lines if b"stream_event" not in x]}
            path.write_bytes(json.dumps(doc).encode())
        else:
            path.write_bytes(b"\n".join(lines) + b"\n")
    work = folder / "work"
    (work / "assets/vendor").mkdir(parents=True, exist_ok=True)
    text = planted_text(values)
    (work / "index.html").write_text(f"<html><!-- {text} --><body>{_prose(rng, 4000)}</body></html>")
    (work / "main.js").write_text(f"/* {text} */\n" + "gsap.to('.card', {x: 100});\n" * 20000)
    (work / "style.css").write_text(f"/* {text} */\n" + CSS.format(0x1A2B3C, 1, 2, 3) * 2000)
    (work / "notes.txt").write_bytes(f"{_prose(rng, 3000)}\n{text}\n".encode("utf-16"))
    (work / "assets/vendor/gsap.min.js").write_bytes(rng.randbytes(200_000).hex().encode())
    (work / ".env").write_text(f"ANTHROPIC_API_KEY={values['anthropic']}\n")
    (folder / "out.mp4").write_bytes(rng.randbytes(2_000_000))
    return values


def _caught_kinds(outputs: dict[str, bytes], findings: set[str], values: dict[str, str]) -> dict[str, bool]:
    """Per planted value: gone from every output (redact/placeholder), or reported (finding)."""
    caught = {}
    for key, value in values.items():
        kind, action = PLANTED_KIND[key]
        if action == "finding":
            caught[key] = kind in findings
        else:
            plain = json.dumps(value)[1:-1]
            forms = {value.encode(), plain.encode(), value.encode("utf-16-le"),
                     (f"\\u{ord(value[0]):04x}" + plain[1:]).replace("/", "\\/").encode()}
            caught[key] = not any(f in data for f in forms for data in outputs.values())
    return caught


def _users_left(outputs: dict[str, bytes]) -> list[str]:
    """The planted users still named anywhere (every place they were planted is replaced)."""
    return [user for user in USERS if any(re.search(rb"\b%s\b" % user.encode(), data) for data in outputs.values())]


def bench_scrub(folder: Path, values: dict[str, str], table: Path) -> tuple[float, list[bool]]:
    """The scrub's MB/s, and per planted table line whether it did right (a value gone, a
    string that must stay unchanged)."""
    texts = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    texts = {k: v for k, v in texts.items() if is_text_member(k, v) and "/vendor/" not in k and not k.endswith(".env")}
    texts[table.name] = table.read_bytes()
    size = sum(map(len, texts.values()))
    told = ScrubConfig(hostname="render-box.internal", usernames=("vidbot",))
    start, cpu = time.perf_counter(), time.process_time()
    config = told.with_usernames(name for data in texts.values() for name in learn_user_names(data))
    results = {path: scrub_text(data, path, config) for path, data in texts.items()}
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    rate = size / 1e6 / elapsed
    findings = {f.kind for r in results.values() for f in r.findings}
    caught = _caught_kinds({p: r.data for p, r in results.items()}, findings, values)
    print(f"scrub:          {size / 1e6:8.1f} MB in {elapsed:6.2f} s = {rate:7.1f} MB/s "
          f"({size / 1e6 / cpu:.1f} MB per CPU second; {sum(r.redacted for r in results.values())} redacted, "
          f"{sum(len(r.findings) for r in results.values())} findings)")
    missed = [k for k, ok in caught.items() if not ok]
    print(f"  planted kinds caught: {sum(caught.values())}/{len(caught)}" + (f"  MISSED: {missed}" if missed else ""))
    left = _users_left({p: r.data for p, r in results.items() if p != table.name})  # the table plants its own names
    print(f"  users learnt and replaced: {len(USERS) - len(left)}/{len(USERS)}" + (f"  LEFT: {left}" if left else ""))
    before, after = texts[table.name].split(b"\n"), results[table.name].data.split(b"\n")
    right = []
    for p, line, out in zip(table_texts(), before, after):
        if p.secret is None:
            right.append(out == line)
        else:
            forms = {p.secret.encode(), json.dumps(p.secret)[1:-1].encode()}
            right.append(not any(f in out for f in forms))
    return rate, right


def bench_detect_secrets(folder: Path, values: dict[str, str], megabytes: float, table: Path) -> tuple[float, list[bool]]:
    """detect-secrets' MB/s, and per planted table line whether it flagged the line."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    sample = Path(tempfile.mkdtemp(prefix="ds-", dir=folder.parent))
    budget = int(megabytes * 1e6)
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and is_text_member(p.name)
                   and "/vendor/" not in p.as_posix() and p.suffix != ".env")
    share = budget // len(paths)
    lines_of: dict[Path, list[bytes]] = {}
    for p in paths:  # the same files, cut at a line boundary after `share` bytes
        data = p.read_bytes()
        cut = data.find(b"\n", share)
        part = data[:share] if cut < 0 else data[: cut + 1]  # a one-line JSON file is cut mid-line
        target = sample / p.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(part)
        lines_of[target] = part.split(b"\n")
    planted_file = sample / "planted.txt"
    planted_file.write_text(planted_text(values))
    lines_of[planted_file] = planted_file.read_bytes().split(b"\n")
    table_file = sample / table.name
    shutil.copy(table, table_file)
    lines_of[table_file] = table_file.read_bytes().split(b"\n")
    size = sum(t.stat().st_size for t in lines_of)
    start, cpu = time.perf_counter(), time.process_time()
    with default_settings():
        collection = SecretsCollection()
        for target in lines_of:
            collection.scan_file(str(target))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    rate = size / 1e6 / elapsed
    hit_lines = {(Path(f).resolve(), s.line_number) for f, s in collection}
    # what it catches is judged on planted.txt, where each value has a line of its own
    planted_lines = lines_of[planted_file]
    caught = {}
    for key, value in values.items():
        first = value.splitlines()[0].encode()
        caught[key] = any((planted_file.resolve(), i) in hit_lines
                          for i, line in enumerate(planted_lines, 1) if first in line)
    print(f"detect-secrets: {size / 1e6:8.1f} MB in {elapsed:6.2f} s = {rate:7.2f} MB/s "
          f"({size / 1e6 / cpu:.2f} MB per CPU second; {len(hit_lines)} lines flagged)")
    print(f"  planted kinds caught: {sum(caught.values())}/{len(caught)}; missed: "
          f"{[k for k, ok in caught.items() if not ok]}")
    flagged = [(table_file.resolve(), i) in hit_lines for i in range(1, len(table_texts()) + 1)]
    shutil.rmtree(sample)
    return rate, flagged


def report_by_kind(planted: list[Planted], ours: list[bool], flagged: list[bool]) -> None:
    """Per kind: recall of both on its planted values, and their false positives on the strings
    that must stay (the scrub's: changed; detect-secrets': flagged)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # values, caught by the scrub, by detect-secrets
    stay: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # must stay, changed by the scrub, flagged by d-s
    for p, right, hit in zip(planted, ours, flagged):
        if p.secret is not None:
            row = counts[p.kind]
            row[0] += 1
            row[1] += right
            row[2] += hit
        else:
            row = stay[p.kind]
            row[0] += 1
            row[1] += not right
            row[2] += hit
    print(f"\n{'kind':24s} {'planted':>7s} {'scrub':>7s} {'d-s':>7s}   {'must stay':>9s} {'scrub FP':>8s} {'d-s FP':>7s}")
    for kind in sorted(set(counts) | set(stay)):
        n, ok, ds = counts[kind][:3] if kind in counts else (0, 0, 0)
        m, fp, dfp = stay[kind] if kind in stay else (0, 0, 0)
        recall = f"{ok / n:7.0%} {ds / n:7.0%}" if n else f"{'-':>7s} {'-':>7s}"
        print(f"{kind:24s} {n:7d} {recall}   {m:9d} {fp:8d} {dfp:7d}")
    values = sum(c[0] for c in counts.values())
    musts = sum(c[0] for c in stay.values())
    print(f"{'all':24s} {values:7d} {sum(c[1] for c in counts.values()) / values:7.1%} "
          f"{sum(c[2] for c in counts.values()) / values:7.1%}   {musts:9d} {sum(c[1] for c in stay.values()):8d} "
          f"{sum(c[2] for c in stay.values()):7d}")


def bench_scanners_kinds(root: Path) -> None:
    """Recall of both on values written independently of the rule table: one per kind the widely
    used scanners know (`sample/credential_kinds.py`) in each of six agent-log contexts, as the
    generator plants them. A value is caught by the scrub when it is gone from every scrubbed file,
    by detect-secrets when one of the secrets it reports holds it (or lies inside it)."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    files, plants = planted_episode_files(list(KINDS), random.Random(7), {"brief_id": "bench"}, "/home/ana",
                                          "2026-10-21T08:00:00Z")
    files = {name: data for name, data in files.items() if name != DOT_ENV}  # left out of every archive
    scrubbed = b"\n".join(scrub_text(data, name, ScrubConfig()).data for name, data in files.items())
    folder = root / "scanners-kinds"
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    with default_settings():
        collection = SecretsCollection()
        for name in files:
            collection.scan_file(str(folder / name))
    reported = [s.secret_value for _, s in collection if s.secret_value]
    ours: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for plant in plants:
        row = ours[plant.context]
        row[0] += 1
        row[1] += plant.value.encode() not in scrubbed
        row[2] += any(plant.value in r or (len(r) >= 8 and r in plant.value) for r in reported)
    missed = sorted({p.kind for p in plants if p.value.encode() in scrubbed})
    print(f"\nthe scanners' kinds, written apart from the rule table: {len({p.kind for p in plants})} kinds "
          f"x {len(CONTEXTS)} contexts")
    print(f"{'context':24s} {'planted':>7s} {'scrub':>7s} {'d-s':>7s}")
    for context in CONTEXTS:
        n, ok, ds = ours[context]
        print(f"{context:24s} {n:7d} {ok / n:7.1%} {ds / n:7.1%}")
    n, ok, ds = (sum(row[i] for row in ours.values()) for i in range(3))
    print(f"{'all':24s} {n:7d} {ok / n:7.1%} {ds / n:7.1%}" + (f"  scrub MISSED: {missed}" if missed else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100.0, help="size of the generated episode")
    parser.add_argument("--ds-mb", type=float, default=3.0, help="MB of the same files given to detect-secrets")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-scrub-"))
    try:
        folder = root / "episode"
        values = generate_episode(folder, args.mb)
        planted = table_texts()
        table = write_table_texts(root, planted)
        ours, right = bench_scrub(folder, values, table)
        theirs, flagged = bench_detect_secrets(folder, values, args.ds_mb, table)
        report_by_kind(planted, right, flagged)
        bench_scanners_kinds(root)
        print(f"scrub / detect-secrets throughput: {ours / theirs:6.0f}x (goal >= 100x and >= 50 MB/s)")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
