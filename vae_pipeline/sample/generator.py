"""`vae sample`: a runs root written to contract 1, small, fast and deterministic for a seed.

It is the demo's data and the tests' data. Every episode is built from a plan (`EpisodePlan`)
that says what was planted in it — the bad-input kind, the video's defects, the secrets, the
two users whose homes the logs name, the counting columns its logs give, the judge's answer and
the host label the contract gives for all of that — so a test can compare what the pipeline
found with what was put there. The logs are in the shapes the real Claude Code CLI writes
(`cli_logs`).

The host block of each `judge.json` is worked out here from the plan (the answer the generator
chose, the video defects it planted) by contract 2's v1.2 table, never by the pipeline's own
host code, so the drift check and the label tests compare two independent computations. A few
episodes (`SampleRun.drifted_ids`) store a label that deliberately differs from the contract's.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
import random
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import zstandard
from PIL import Image, ImageDraw

from vae_pipeline.domain.verdicts.rubric import AXES, Rubric, load_rubric, rubric_in_force
from vae_pipeline.domain.video.sampler import sample_times
from vae_pipeline.domain.video.video_facts import VideoAnalysis, analyse_video
from vae_pipeline.sample.cli_logs import (
    ACTOR_INIT,
    ActorInit,
    Picture,
    PlantedPeople,
    episode_logs,
    planted_people,
    sdk_object_log,
)
from vae_pipeline.sample.contest import ContestPlan, plan_contest, sample_day
from vae_pipeline.sample.credential_plants import PlantedEpisode, planted_episodes
from vae_pipeline.sample.planted import planted_values
from vae_pipeline.sample.request_logs import request_logs
from vae_pipeline.sample.video import write_video

# (width, height) of the sample clips for each aspect: small, so a default run takes seconds
SIZES = {"16:9": (192, 108), "9:16": (108, 192), "1:1": (144, 144)}
FPS = 15
# Delivery-size clips and request logs (what the harness really produces), for benchmarks:
# `generate(..., hd=True)`
HD_SIZES = {"16:9": (1920, 1080), "9:16": (1080, 1920), "1:1": (1080, 1080)}
HD_FPS = 30
# The rubric the sample judge answers under: `_contract_rule` and `_planted_gates` are its table.
JUDGE_RUBRIC = "1.2"
HARNESS_USER = "vae-runner"
# The model of the one episode planted with another actor (provenance_faults=True).
ODD_ACTOR_MODEL = "claude-sonnet-5-20261014"
HARNESS_HOST = "gpu-07.render.internal"

# Each kind of bad input in contract 1, planted once in the first series (when bad=True). The
# later kinds are written after every series, so that adding one leaves the random draws of the
# other episodes (and the tests built on what they hold) as they were.
FIRST_BAD_KINDS = (
    "missing_file", "bad_json", "bad_jsonl_line", "wrong_type", "not_zstd", "truncated",
    "absolute_member", "dotdot_member", "link_member", "device_member", "fifo_member",
    "bad_id", "bad_judge",
)  # fmt: skip
LATER_BAD_KINDS = ("sdk_objects",)
BAD_KINDS = FIRST_BAD_KINDS + LATER_BAD_KINDS

# Video variants for good episodes, cycled in this order.
VARIANTS = (
    "clean", "black", "freeze", "clean", "unjudged", "held_freeze", "wrong_aspect",
    "no_video", "clean", "long", "undecodable", "harness_403",
)  # fmt: skip
# Variants that leave nothing to judge: no judge.json is written for them.
UNJUDGED_VARIANTS = ("unjudged", "no_video", "undecodable", "harness_403")
# A drifted episode stores this label in judge.json's host block instead of the contract's.
DRIFTED_LABEL = {"PASS": "FAIL", "PASS_WITH_NITS": "PASS", "FAIL": "PASS"}


@dataclass
class EpisodePlan:
    series: str
    episode_id: str
    brief: dict
    variant: str = "clean"
    bad: str | None = None
    archive: bool = False
    secrets: dict[str, str] = field(default_factory=dict)
    hd: bool = False  # delivery-size clips instead of thumbnails
    # the host's columns contract 2 gives for what was planted (label, host_rule, host_gates_failed)
    host: dict | None = None
    drifted: bool = False  # judge.json's host.label deliberately differs from `host["label"]`
    stored_host_label: str | None = None  # judge.json's host.label; None without judge.json
    scores: dict[str, int] | None = None  # the judge's scores, when planted (contest episodes)
    init: ActorInit = ACTOR_INIT  # what the messages' system/init line says ran
    people: PlantedPeople | None = None  # the two users whose homes, folders and listings the logs hold
    # contract 1's counting columns for the logs written (turns ... harness_error), and how many
    # `result` lines they hold; None for an episode whose logs are not written in the contract's form
    counts: dict | None = None
    result_lines: int = 0


@dataclass
class SampleRun:
    root: Path
    series: dict[str, str]  # series id -> status
    episodes: list[EpisodePlan]
    drifted_ids: list[str] = field(default_factory=list)  # stored host label != the contract's
    contest: ContestPlan | None = None  # several actor models and their comparisons (contest=True)
    # planted with provenance_faults: harness.dirty true; no benchmark_version; another init model
    dirty_series: list[str] = field(default_factory=list)
    unversioned_series: list[str] = field(default_factory=list)
    odd_actor_ids: list[str] = field(default_factory=list)
    # with plants=True: the episodes holding one fake credential of every kind in six contexts
    planted: list[PlantedEpisode] = field(default_factory=list)


def load_briefs(meta_dir: Path) -> list[dict]:
    briefs = []
    for path in sorted(Path(meta_dir).glob("brief-bank-*.jsonl")):
        briefs += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return briefs


def generate(out: Path, meta_dir: Path, *, series: int = 3, episodes: int = 6, seed: int = 0,
             bad: bool = True, hd: bool = False, drifted: int = 2, contest: bool = False,
             provenance_faults: bool | None = None, plants: bool = False) -> SampleRun:
    """Write `series` series of `episodes` good episodes each (the last series `running`); with
    `contest`, also several actor models' series on shared briefs and their comparisons.

    The first `drifted` judged good episodes of the first series store a host label that is not
    the one the contract gives (as a harness with a since-corrected gate would have stored).
    `provenance_faults` (default: `bad`) makes the first series dirty, its second good episode
    run another model, and the second series (when completed) unversioned; the contest series
    stay clean, so the demo's leaderboard and checks still have series that pass. `plants` adds
    two episodes to the first completed series that hold one fake credential of every kind the
    widely used scanners know, in six contexts each (`credential_plants`; `SampleRun.planted`)."""
    rng = random.Random(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    briefs = load_briefs(meta_dir)
    rubric = load_rubric(rubric_in_force(meta_dir, JUDGE_RUBRIC))
    run = SampleRun(out, {}, [])
    samples = [f"s{i + 1}" for i in range(max(series - 1, 1))] + ["r2"]
    for index in range(series):
        sample = samples[index] if series > 1 else "s1"
        series_id = f"{sample_day(index)}-{sample}"
        status = "running" if series > 1 and index == series - 1 else "completed"
        series_dir = out / series_id
        if series_dir.exists():
            shutil.rmtree(series_dir)
        series_dir.mkdir()
        info = _series_json(series_id, sample, status, index)
        faults = (bad if provenance_faults is None else provenance_faults) and status == "completed"
        if faults and index == 0:
            info["harness"]["dirty"] = True
            run.dirty_series.append(series_id)
        if faults and index == 1:
            del info["benchmark_version"]
            run.unversioned_series.append(series_id)
        _write_json(series_dir / "series.json", info)
        run.series[series_id] = status
        chosen = rng.sample(briefs, k=min(episodes, len(briefs)))
        for number, brief in enumerate(chosen):
            plan = EpisodePlan(series_id, f"{brief['brief_id']}-{sample}", brief,
                               variant=VARIANTS[(number + 5 * index) % len(VARIANTS)],
                               archive=number % 3 == 2, hd=hd)
            plan.drifted = (index == 0 and len(run.drifted_ids) < drifted
                            and plan.variant not in UNJUDGED_VARIANTS)
            if plan.drifted:
                run.drifted_ids.append(plan.episode_id)
            if faults and index == 0 and number == 1:
                plan.init = dataclasses.replace(ACTOR_INIT, model=ODD_ACTOR_MODEL)
                run.odd_actor_ids.append(plan.episode_id)
            _write_episode(series_dir, plan, rng, rubric)
            run.episodes.append(plan)
        if bad and index == 0:
            _write_bad(run, series_dir, FIRST_BAD_KINDS, 0, briefs, rng, rubric)
    if bad:
        first = min(run.series)
        _write_bad(run, out / first, LATER_BAD_KINDS, len(FIRST_BAD_KINDS), briefs, rng, rubric)
    if contest:
        _write_contest(run, briefs, rubric, first_sample=len(samples), first_day=series, seed=seed,
                       bad=bad, hd=hd)
    if plants:
        _write_plants(run, briefs, seed)
    return run


def _write_plants(run: SampleRun, briefs: list[dict], seed: int) -> None:
    series = min(s for s, status in run.series.items() if status == "completed")
    taken = {plan.brief["brief_id"] for plan in run.episodes if plan.series == series}
    free = [brief for brief in briefs if brief["brief_id"] not in taken]
    home = f"/home/{HARNESS_USER}"
    for episode, files in planted_episodes(series, free, series.rsplit("-", 1)[1], seed,
                                           f"{series[:10]}T09:00:00Z", home):
        _write_files(run.root / series, episode.episode_id, files, episode.archive, None)
        run.planted.append(episode)


def _write_bad(run: SampleRun, series_dir: Path, kinds: tuple[str, ...], first_number: int, briefs: list[dict],
               rng: random.Random, rubric: Rubric) -> None:
    for number, kind in enumerate(kinds, start=first_number):
        brief = briefs[number % len(briefs)]
        plan = EpisodePlan(series_dir.name, f"{brief['brief_id']}-bad{number}", brief, bad=kind,
                           archive=kind in _ARCHIVE_KINDS)
        _write_episode(series_dir, plan, rng, rubric)
        run.episodes.append(plan)


CONTEST_BRIEFS = 6


def _write_contest(run: SampleRun, briefs: list[dict], rubric: Rubric, *, first_sample: int, first_day: int,
                   seed: int, bad: bool, hd: bool) -> None:
    """The contest series on briefs no other good episode uses, so the planted order is the only one."""
    used = {plan.brief["brief_id"] for plan in run.episodes if plan.bad is None}
    shared = [brief for brief in briefs if brief["brief_id"] not in used][:CONTEST_BRIEFS]
    run.contest = plan_contest(shared, first_sample=first_sample, first_day=first_day, seed=seed, bad=bad)
    run.contest.write(run.root)
    rng = random.Random(f"contest-episodes-{seed}")
    for entry in run.contest.episodes:
        run.series[entry.series] = "completed"
        plan = EpisodePlan(entry.series, entry.episode_id, entry.brief, hd=hd, scores=entry.scores,
                           init=dataclasses.replace(ACTOR_INIT, model=entry.model))
        _write_episode(run.root / entry.series, plan, rng, rubric)
        run.episodes.append(plan)


_ARCHIVE_KINDS = {"not_zstd", "truncated", "absolute_member", "dotdot_member", "link_member",
                  "device_member", "fifo_member"}


def _series_json(series_id: str, sample: str, status: str, index: int) -> dict:
    return {
        "series_id": series_id, "sample": sample, "status": status,
        "created_at": f"{sample_day(index)}T08:00:00Z",
        "actor": {"model": "claude-opus-5.5", "effort": "high", "sdk": "0.2.174",
                  "cli": ACTOR_INIT.claude_code_version},
        "harness": {"version": "1.4.2", "commit": "3f9c2e1", "dirty": False},
        "benchmark_version": "1.2.0",
    }


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")


# ---------------------------------------------------------------- episode files


def _write_episode(series_dir: Path, plan: EpisodePlan, rng: random.Random, rubric: Rubric) -> None:
    files = _episode_files(plan, rng, rubric)
    if plan.bad == "bad_id":
        plan.episode_id = plan.episode_id.upper().replace("-", "_")
    _write_files(series_dir, plan.episode_id, files, plan.archive, plan.bad)


def _write_files(series_dir: Path, episode_id: str, files: dict[str, bytes], archive: bool, bad: str | None) -> None:
    if not archive:
        folder = series_dir / episode_id
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        return
    (series_dir / f"{episode_id}.tar.zst").write_bytes(_archive(files, bad))


def _archive(files: dict[str, bytes], bad: str | None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(files[name]), 1_761_000_000, 0o644
            tar.addfile(info, io.BytesIO(files[name]))
        special = {
            "absolute_member": ("/tmp/vae-escape.txt", tarfile.REGTYPE),
            "dotdot_member": ("../escape.txt", tarfile.REGTYPE),
            "link_member": ("work/link-to-passwd", tarfile.SYMTYPE),
            "device_member": ("work/dev-null", tarfile.CHRTYPE),
            "fifo_member": ("work/pipe", tarfile.FIFOTYPE),
        }.get(bad or "")
        if special:
            info = tarfile.TarInfo(special[0])
            info.type = special[1]
            info.linkname = "/etc/passwd" if special[1] == tarfile.SYMTYPE else ""
            payload = b"escaped\n" if special[1] == tarfile.REGTYPE else b""
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    packed = zstandard.ZstdCompressor(level=3).compress(buffer.getvalue())
    if bad == "not_zstd":
        return gzip.compress(buffer.getvalue(), mtime=0)
    if bad == "truncated":
        return packed[: len(packed) // 2]
    return packed


def _episode_files(plan: EpisodePlan, rng: random.Random, rubric: Rubric) -> dict[str, bytes]:
    brief = plan.brief
    secrets = planted_values(rng)
    plan.secrets = secrets
    images = [_png(rng, i) for i in range(3)]
    started = f"2026-10-{rng.randint(21, 28):02d}T0{rng.randint(1, 9)}:03:11Z"
    home = secrets["home"]
    # the logs draw from their own sequence, so the rest of the sample (briefs, answers) is unchanged
    logs_rng = random.Random(f"cli-logs-{plan.episode_id}-{home}")
    plan.people = planted_people(logs_rng, home, plan.episode_id)
    logs, counts = episode_logs(
        logs_rng, init=plan.init, people=plan.people, secrets=secrets,
        pictures=[Picture(image, *PNG_SIZE) for image in images], title=brief["title"], started=started,
        final_look=plan.variant in ("clean", "long"), harness_403=plan.variant == "harness_403")
    plan.counts = {**counts.columns(), "harness_error": plan.variant == "harness_403"}
    plan.result_lines = counts.result_lines
    files: dict[str, bytes] = {
        "brief.json": (json.dumps(brief, indent=2) + "\n").encode(),
        **logs,
        "tool-events.jsonl": "".join(json.dumps(e) + "\n" for e in _tool_events(logs["messages.jsonl"])).encode(),
    }
    result = {"status": "completed", "error": None, "started_at": started,
              "ended_at": started.replace(":03:11", ":31:02"), "duration_s": 1671.0,
              "turns": counts.turns, "tool_calls": counts.tool_calls, "usage": counts.usage}
    if plan.variant == "harness_403":
        result.update(status="error", error="API Error: 403 Forbidden (request blocked)")
    files["result.json"] = (json.dumps(result, indent=2) + "\n").encode()
    for n, image in enumerate(images):
        files[f"observations/frame-{n}.png"] = image
    files["transcript/api-request-shape.json"] = json.dumps(
        {"model": plan.init.model, "cwd": f"{home}/runs/{plan.episode_id}",
         "host": HARNESS_HOST, "user": HARNESS_USER,
         "system": [{"type": "text", "text": f"You are Claude Code. Working directory: {home}/runs/{plan.episode_id}/work"}],
         "tools": [{"name": name, "input_schema": {"type": "object"}} for name in plan.init.tools]},
        indent=2).encode()
    for n in range(2):
        blob = {"headers": {"Authorization": f"Bearer {secrets['bearer']}",
                            "x-api-key": secrets["anthropic"]},
                "messages": [{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": base64.b64encode(img).decode()}}
                    for img in images]}]}
        files[f"transcript/api-request-blob/{n}.json"] = json.dumps(blob).encode()
        files[f"transcript/api-request/{n}.json"] = json.dumps(
            {"url": "https://api.anthropic.com/v1/messages", "attempt": n,
             "log": f"{home}/.cache/claude/request-{n}.log on {HARNESS_HOST}"}).encode()
    files.update(_work_files(brief, secrets))
    if plan.hd:
        files.update(request_logs(plan.episode_id, secrets))
    video, analysis = _video(plan, rng, rubric)
    if video is not None:
        files["out.mp4"] = video
    if plan.variant in UNJUDGED_VARIANTS:
        gates = _planted_gates(plan)
        plan.host = {"label": "FAIL" if "no_video" in gates else None, "host_rule": None,
                     "host_gates_failed": gates}
    else:
        files.update(_judge_files(brief, plan, rng, analysis, rubric))
    if plan.bad == "sdk_objects":
        plan.counts = None
    return _make_bad(files, plan.bad)


def _make_bad(files: dict[str, bytes], bad: str | None) -> dict[str, bytes]:
    if bad == "missing_file":
        del files["result.json"]
    elif bad == "bad_json":
        files["brief.json"] = files["brief.json"].replace(b'"title":', b'"title" ', 1)
    elif bad == "bad_jsonl_line":
        lines = files["messages.jsonl"].splitlines(keepends=True)
        lines[2] = lines[2][: len(lines[2]) // 2] + b"\n"
        files["messages.jsonl"] = b"".join(lines)
    elif bad == "wrong_type":
        brief = json.loads(files["brief.json"])
        brief["duration_s"] = str(brief["duration_s"])
        files["brief.json"] = (json.dumps(brief, indent=2) + "\n").encode()
    elif bad == "sdk_objects":
        files["messages.jsonl"] = sdk_object_log(files["messages.jsonl"])
    elif bad == "bad_judge" and "judge.json" in files:
        judge = json.loads(files["judge.json"])
        judge["answer"]["scores"]["craft"] = 11
        files["judge.json"] = (json.dumps(judge, indent=2) + "\n").encode()
    return files


PNG_SIZE = (96, 54)


def _png(rng: random.Random, n: int) -> bytes:
    picture = Image.new("RGB", PNG_SIZE, (rng.randint(0, 255), rng.randint(0, 255), 90))
    ImageDraw.Draw(picture).rectangle((10 + 8 * n, 10, 40 + 8 * n, 40), fill=(250, 250, 250))
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()


def _tool_events(messages: bytes) -> list[dict]:
    """The PreToolUse / PostToolUse hook records of every tool call, the subagents' included."""
    events = []
    for raw in messages.splitlines():
        message = json.loads(raw)
        if message["type"] != "assistant":
            continue
        for block in message["message"]["content"]:
            if block["type"] == "tool_use":
                events.append({"hook": "PreToolUse", "tool": block["name"], "tool_use_id": block["id"]})
                events.append({"hook": "PostToolUse", "tool": block["name"], "tool_use_id": block["id"]})
    return events


def _work_files(brief: dict, secrets: dict[str, str]) -> dict[str, bytes]:
    title = brief["title"]
    return {
        "work/index.html": f"<!doctype html><title>{title}</title><div id='stage'>{title}</div>\n".encode(),
        "work/style.css": b"#stage { color: #ffcc00; background: #1a1a2e; font: 700 48px/1 system-ui; }\n",
        "work/script.js": (f"// built on {HARNESS_HOST} by {HARNESS_USER}\n"
                           f"const token = '{secrets['github_ghp']}';\nexport const t = 0;\n").encode(),
        "work/assets/vendor/gsap.min.js": b"/* GSAP 3.12 (vendored) */ var gsap={};\n",
        "work/node_modules/hyperframes/index.js": b"module.exports = {};\n",
        "work/.env": f"OPENAI_API_KEY={secrets['openai']}\n".encode(),
        "work/notes.md": (f"Deploy key:\n{secrets['pem_private_key']}\nslack {secrets['slack']}\n"
                          f"jwt {secrets['jwt']}\nproject key {secrets['openai_project']}\n"
                          f"ci tokens {secrets['github_gho']} {secrets['github_ghu']} {secrets['github_ghs']} "
                          f"{secrets['github_ghr']}\npat {secrets['github_pat']}\n").encode(),
    }


@dataclass(frozen=True)
class PlantedVideo:
    """The decodable out.mp4 a plan asks for: aspect, length, and the black and frozen segments."""

    aspect: str
    duration_s: float
    black: list[tuple[float, float]]
    freeze: list[tuple[float, float]]


def _planted_video(plan: EpisodePlan) -> PlantedVideo | None:
    """None when the plan delivers nothing decodable."""
    brief, variant = plan.brief, plan.variant
    if variant in ("no_video", "harness_403", "undecodable"):
        return None
    aspect = "9:16" if variant == "wrong_aspect" and brief["aspect"] != "9:16" else (
        "16:9" if variant == "wrong_aspect" else brief["aspect"])
    duration = float(brief["duration_s"]) + (3.0 if variant == "long" else 0.0)
    black, freeze = [], []
    if variant == "black":
        black = [(1.0, 2.2)]
    elif variant == "freeze":
        freeze = [(1.0, 3.6)]
    elif variant == "held_freeze" and brief.get("hold"):
        freeze = [(brief["hold"]["start_s"], duration)]
    return PlantedVideo(aspect, duration, black, freeze)


def _planted_gates(plan: EpisodePlan) -> list[str]:
    """The gates contract 2 (v1.2 thresholds) fails for the video the plan planted, worked out from
    the planted segments rather than measured. A loop brief's clip is periodic (its last frame sits
    next to its first) and no variant breaks that (no brief of the banks both loops and holds),
    so `loop_seam` never fails here."""
    video = _planted_video(plan)
    if video is None:
        return ["no_video"]
    brief = plan.brief
    wanted, hold = float(brief["duration_s"]), brief.get("hold")
    frozen = video.freeze + video.black  # a black run is also frozen

    def asked_for(start: float, end: float) -> bool:
        return hold is not None and start >= hold["start_s"] - 0.25 and end <= hold["end_s"] + 0.25

    fails = {
        "duration": abs(video.duration_s - wanted) > max(1.0, 0.2 * wanted),
        "aspect": video.aspect != brief["aspect"],
        "black": any(end - start >= 1.0 for start, end in video.black),
        "freeze": any(end - start >= 2.0 and not asked_for(start, end) for start, end in frozen),
        "still": sum(end - start for start, end in frozen) >= 0.9 * video.duration_s,
        "loop_seam": False,
    }
    return [gate for gate, failed in fails.items() if failed]


def _contract_rule(answer: dict) -> tuple[str, str]:
    """(rule, label) of contract 2's rule table, v1.2 column, for the answer the generator chose."""
    severities = [d["severity"] for d in answer["defects"]]
    critical, major, minor = (severities.count(kind) for kind in ("critical", "major", "minor"))
    scores = list(answer["scores"].values())
    table = (("R1", critical >= 1, "FAIL"), ("R2", major >= 3, "FAIL"), ("R3", min(scores) <= 2, "FAIL"),
             ("R4", sum(scores) < 5 * len(scores), "FAIL"),  # s_mean < 5.0, in integers
             ("R5", major >= 1, "PASS_WITH_NITS"), ("R6", min(scores) < 6, "PASS_WITH_NITS"),
             ("R7", minor >= 3, "PASS_WITH_NITS"), ("R8", True, "PASS"))
    return next((rule, label) for rule, holds, label in table if holds)


def _video(plan: EpisodePlan, rng: random.Random, rubric: Rubric) -> tuple[bytes | None, VideoAnalysis | None]:
    """The delivered out.mp4 (None when nothing was delivered) and what the harness measured on it."""
    brief, variant = plan.brief, plan.variant
    if variant in ("no_video", "harness_403"):
        return None, None
    if variant == "undecodable":
        return rng.randbytes(4096), None
    planted = _planted_video(plan)
    width, height = (HD_SIZES if plan.hd else SIZES)[planted.aspect]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_video(Path(tmp) / "out.mp4", width=width, height=height, fps=HD_FPS if plan.hd else FPS,
                           duration_s=planted.duration_s, black=planted.black, freeze=planted.freeze,
                           loop=bool(brief.get("loop")))
        sampler = rubric.sampler
        analysis = analyse_video(path, lambda d, f: sample_times(d, f, brief, frames=sampler.frames,
                                                                 min_gap_s=sampler.min_gap_s))
        return path.read_bytes(), analysis


def _judge_files(brief: dict, plan: EpisodePlan, rng: random.Random, analysis: VideoAnalysis,
                 rubric: Rubric) -> dict[str, bytes]:
    """judge.json with a plausible answer, the host block the harness stored (the contract's label
    for the planted answer and video, or a drifted one), and the frames."""
    scores = dict(plan.scores) if plan.scores else {axis: rng.randint(4, 9) for axis in AXES}
    defects = []
    roll = rng.random()
    if roll < 0.2:
        defects.append({"severity": "critical", "t_s": 1.0, "text": "the title is cut off"})
    elif roll < 0.5:
        defects.append({"severity": "major", "t_s": 2.1, "text": "title clips the right edge"})
    defects += [{"severity": "minor", "t_s": 0.5 * i, "text": "slight jitter"} for i in range(rng.randint(0, 3))]
    answer = {"scores": scores, "defects": defects, "summary": "Clear motion; see defects."}
    rule, rule_label = _contract_rule(answer)
    gates = _planted_gates(plan)
    plan.host = {"label": "FAIL" if gates else rule_label, "host_rule": rule, "host_gates_failed": gates}
    plan.stored_host_label = DRIFTED_LABEL[plan.host["label"]] if plan.drifted else plan.host["label"]
    answer["verdict"] = "FAIL" if roll < 0.2 else ("PASS_WITH_NITS" if roll < 0.5 else "PASS")
    frames = [{"t_s": t, "reason": reason} for t, reason, _ in analysis.frames]
    judge = {
        "judge_model": "claude-fable-5.1", "rubric_version": rubric.version, "rubric_sha256": rubric.sha256,
        "judged_at": "2026-10-21T08:40:00Z", "frames": frames, "answer": answer,
        "host": {"label": plan.stored_host_label, "rule": rule, "gates_failed": gates,
                 "rubric_version": rubric.version},
    }
    files = {"judge.json": (json.dumps(judge, indent=2) + "\n").encode()}
    for i, (_, _, picture) in enumerate(analysis.frames):
        out = io.BytesIO()
        picture.save(out, format="JPEG", quality=rubric.sampler.jpeg_quality)
        files[f"frames/f{i:02d}.jpg"] = out.getvalue()
    files["frames/labels.json"] = json.dumps(
        [{"file": f"f{i:02d}.jpg", **frame} for i, frame in enumerate(frames)]).encode()
    return files
