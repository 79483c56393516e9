"""Input made to hurt, next to a good series: each hostile episode is reported invalid (or its
video not decoded) and every other row is still published, in one `vae build` whose peak memory
is measured.

The hostile episodes are copies of a good judged run folder of a completed series with one file
replaced; the build runs `vae_pipeline.cli.build.build` in a child process, so its peak resident
memory (`RUSAGE_CHILDREN` of a wrapper whose only child it is) is the build's own.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import duckdb
import pytest
from PIL import Image

from vae_pipeline.domain.video.renders import RenderJob, iter_renders
from vae_pipeline.domain.video.video_facts import analyse_video
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META

GIB = 1024**3
FOLDER = "<the episode's folder>"  # an error no one file is to blame for names the run folder
MESSAGES_LINE_BYTES = 200 * 1024**2  # one line, over the 64 MiB default line limit
JUDGE_BYTES = 70 * 1024**2  # one JSON text, over the line limit too
HUGE_SIDE = 16000  # 256 Mpx, over the 8K UHD limit (7680x4320 = 33.2 Mpx)


@dataclass(frozen=True)
class Case:
    """A hostile episode: which file is replaced, and what the build must report about it."""

    file: str
    error_file: str | None  # None: the episode stays valid (its video is not decoded); FOLDER: its folder
    words: str
    line: int | None = None


CASES = {
    "judge-deep": Case("judge.json", "judge.json", "nested deeper than 64 levels", 1),
    "brief-inf": Case("brief.json", "brief.json", "too large to be finite", 2),
    "brief-dupkey": Case("brief.json", "brief.json", 'duplicate key "title"', 3),
    "brief-surrogate": Case("brief.json", "brief.json", "lone surrogate", 2),
    "result-nan": Case("result.json", "result.json", "NaN is not a JSON number", 2),
    "result-infinity": Case("result.json", "result.json", "Infinity is not a JSON number", 2),
    "result-1e309": Case("result.json", "result.json", "too large to be finite", 2),
    "result-int128": Case("result.json", "result.json", "does not fit in 64 bits", 2),
    "messages-long-line": Case("messages.jsonl", "messages.jsonl", "longer than the line limit", 1),
    "judge-70mib": Case("judge.json", "judge.json", "larger than the line limit (67,108,864 bytes"),
    "messages-deep-line": Case("messages.jsonl", "messages.jsonl", "nested deeper than 64 levels", 2),
    "video-16000px": Case("out.mp4", None, f"frame size {HUGE_SIDE}x{HUGE_SIDE} is over the limit"),
    # no check foresees this one: the slim parses the image block's text and recurses 100,000
    # deep; the bundles stage still goes on for every other episode
    "blob-deep": Case("transcript/api-request-blob/0.json", FOLDER, "could not be processed (RecursionError"),
}


def _brief_text(brief: dict, field: str, literal: str) -> bytes:
    """The brief as JSON text, `field` first (on line 2, its key and `literal` as written)."""
    rest = json.dumps({k: v for k, v in brief.items() if k != field}, indent=2)
    return ("{\n  " + json.dumps(field) + ": " + literal + ",\n" + rest[2:]).encode()


def huge_mp4(path: Path, side: int = HUGE_SIDE) -> None:
    """A valid MJPEG MP4 of one `side`x`side` grey frame, ~3 MB, without a full-size picture in
    memory: one row of 8x8 blocks is encoded with a restart marker after it, and the file
    repeats that row (restarts reset the DC prediction, so every row's bytes are the same)."""
    buffer = io.BytesIO()
    Image.new("L", (side, 16), 128).save(buffer, "JPEG", quality=50, restart_marker_rows=1)
    jpeg = buffer.getvalue()
    sos = jpeg.index(b"\xff\xda")
    data_start = sos + 2 + struct.unpack(">H", jpeg[sos + 2:sos + 4])[0]
    row = jpeg[data_start:jpeg.index(b"\xff\xd0", data_start)]
    header = bytearray(jpeg[:data_start])
    struct.pack_into(">H", header, header.index(b"\xff\xc0") + 5, side)  # the frame's height
    rows = side // 8
    frame = bytes(header) + b"".join(row + bytes([0xFF, 0xD0 + k % 8]) for k in range(rows - 1)) + row + b"\xff\xd9"
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("mjpeg", rate=1)
        stream.width = stream.height = side
        stream.pix_fmt = "yuvj420p"
        packet = av.Packet(frame)
        packet.stream, packet.pts, packet.dts, packet.duration = stream, 0, 0, 1
        packet.time_base = Fraction(1, 1)
        out.mux(packet)


def plant(case: str, folder: Path) -> None:
    """Replace one file of the copied run folder `folder` with its hostile form."""
    brief = json.loads((folder / "brief.json").read_text())
    result = json.loads((folder / "result.json").read_text())
    writes = {
        "judge-deep": lambda: b"[" * 100_000 + b"]" * 100_000,
        "brief-inf": lambda: _brief_text(brief, "duration_s", "1e309"),
        "brief-dupkey": lambda: _brief_text(brief, "title", '"first",\n  "title": "second"'),
        "brief-surrogate": lambda: _brief_text(brief, "title", '"\\ud800 prism"'),
        "result-nan": lambda: _brief_text(result, "duration_s", "NaN"),
        "result-infinity": lambda: _brief_text(result, "duration_s", "Infinity"),
        "result-1e309": lambda: _brief_text(result, "duration_s", "1e309"),
        "result-int128": lambda: _brief_text(result, "duration_s", str(2**127)),
        "blob-deep": lambda: b'{"type": "image", "data": "x", "mimeType": "image/png", "deep": '
        + b'{"a": ' * 100_000 + b"1" + b"}" * 100_000 + b"}",
        "messages-deep-line": lambda: (folder / "messages.jsonl").read_bytes().split(b"\n", 1)[0] + b"\n"
        + b'{"type": "user", "message": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}\n",
    }
    target = folder / CASES[case].file
    if case in ("messages-long-line", "judge-70mib"):
        head, size, tail = ((b'{"type": "assistant", "message": {"content": "', MESSAGES_LINE_BYTES, b'"}}\n')
                            if case == "messages-long-line" else (b'{"judge_model": "', JUDGE_BYTES, b'"}'))
        with target.open("wb") as out:  # written in chunks: the test holds no such line either
            out.write(head)
            chunk = b"a" * (4 * 1024**2)
            for _ in range(size // len(chunk)):
                out.write(chunk)
            out.write(tail)
    elif case == "video-16000px":
        huge_mp4(target)
    else:
        target.write_bytes(writes[case]())


BUILD = """
import json, sys
from pathlib import Path
from vae_pipeline.cli.build import build
Path(sys.argv[3]).write_text(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]))))
"""
# the wrapper's only child is the build: its RUSAGE_CHILDREN peak is the build's
MEASURE = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); " \
          "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    run = generate(root / "runs", META, series=3, episodes=3, seed=5, bad=False, drifted=0)
    completed = [s for s, status in run.series.items() if status == "completed"]
    good_series, hostile_series = completed[0], completed[1]
    series_dir = root / "runs" / hostile_series
    template = next(p for p in run.episodes if p.series == hostile_series and not p.archive
                    and (series_dir / p.episode_id / "judge.json").is_file()
                    and (series_dir / p.episode_id / "out.mp4").is_file())
    planted = {}
    for case in CASES:
        episode_id = f"{template.brief['brief_id']}-h{case.replace('-', '')}"
        shutil.copytree(series_dir / template.episode_id, series_dir / episode_id)
        plant(case, series_dir / episode_id)
        planted[case] = episode_id
    meta = root / "meta"
    shutil.copytree(META, meta)
    env = {**os.environ, "VAE_HOME": str(root / "home"), "DAGSTER_HOME": str(root / "home" / "dagster"),
           "VAE_META_DIR": str(meta), "VAE_DATASET_DIR": str(root / "dataset"), "VAE_RUBRIC_VERSION": "latest"}
    summary_path = root / "summary.json"
    measured = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-c", BUILD, str(root / "runs"),
                               str(root / "dataset"), str(summary_path)],
                              env=env, capture_output=True, text=True, timeout=900, check=False)
    assert measured.returncode == 0, measured.stderr[-3000:]
    columns = ("id", "valid", "error_file", "error_line", "error_reason", "video_ok", "video_error", "width")
    database, published = root / "home" / "vae_warehouse.duckdb", root / "dataset" / "episodes.jsonl"
    table = {}  # a build whose stages all failed writes no table, nor rows: the tests below say so
    if database.exists():
        with duckdb.connect(str(database), read_only=True) as con:
            found = con.execute(f"SELECT {', '.join(columns)} FROM episode_table").fetchall()
        table = {row[0]: dict(zip(columns, row, strict=True)) for row in found}
    rows = [json.loads(line) for line in published.read_text().splitlines()] if published.exists() else []
    return {"root": root, "run": run, "good_series": good_series, "hostile_series": hostile_series, "planted": planted,
            "summary": json.loads(summary_path.read_text()), "table": table, "rows": rows,
            "peak_rss_bytes": int(measured.stdout.split()[-1]) * 1024}


def test_no_stage_fails_for_all_series(hostile):
    assert hostile["summary"]["failed_runs"] == []


def test_each_hostile_episode_is_isolated_with_its_file_line_and_reason(hostile, record_property):
    reported = {(i["series"], i["episode"]): i for i in hostile["summary"]["invalid_episodes"]}
    isolated = 0
    for case, expected in CASES.items():
        episode_id = hostile["planted"][case]
        row = hostile["table"].get(episode_id)
        assert row is not None, f"{case}: {episode_id} is not in the episode table"
        if expected.error_file is None:
            assert row["valid"] and row["video_ok"] is False and row["width"] is None, (case, row)
            assert expected.words in row["video_error"] and "not decoded" in row["video_error"], (case, row)
            assert (hostile["hostile_series"], episode_id) not in reported
        else:
            entry = reported[(hostile["hostile_series"], episode_id)]
            error_file = episode_id if expected.error_file == FOLDER else expected.error_file
            assert (entry["file"], entry["line"]) == (error_file, expected.line), (case, entry)
            assert expected.words in entry["reason"] and "\n" not in entry["reason"], (case, entry)
        isolated += 1
    assert len(reported) == len([c for c in CASES.values() if c.error_file])  # nothing else is invalid
    record_property("summary", f"hostile cases isolated: {isolated} of {len(CASES)}")


def test_every_other_row_is_published(hostile):
    """Every episode of the completed series — the good series and the hostile one's own good
    episodes — and the episode whose video was not decoded (valid, `video_ok` false)."""
    run = hostile["run"]
    expected = sorted([p.episode_id for p in run.episodes if run.series[p.series] == "completed"]
                      + [hostile["planted"]["video-16000px"]])
    assert sorted(r["id"] for r in hostile["rows"]) == expected
    assert {r["series"] for r in hostile["rows"]} == {hostile["good_series"], hostile["hostile_series"]}
    huge = next(r for r in hostile["rows"] if r["id"] == hostile["planted"]["video-16000px"])
    assert huge["video_ok"] is False and huge["label"] == "FAIL"


def test_peak_memory_of_the_build_stays_under_1_gib(hostile):
    peak = hostile["peak_rss_bytes"]
    print(f"peak RSS of the hostile build: {peak / 1024**2:.0f} MiB")
    assert 0 < peak < GIB


def test_a_frame_over_the_pixel_limit_is_not_decoded(tmp_path, hostile):
    huge = tmp_path / "huge.mp4"
    huge_mp4(huge)
    assert huge.stat().st_size < 8 * 1024**2  # cheap to make, 256 Mpx to decode
    facts = analyse_video(huge).facts
    assert (facts["video_ok"], facts["width"], facts["height"]) == (False, None, None)
    assert facts["error"] == (f"frame size {HUGE_SIDE}x{HUGE_SIDE} is over the limit of 33,177,600 pixels "
                              "(8K UHD): not decoded")
    good = min((hostile["root"] / "runs" / hostile["good_series"]).rglob("out.mp4"))
    assert analyse_video(good).facts["video_ok"]
    assert "over the limit of 100 pixels" in analyse_video(good, max_pixels=100).facts["error"]


def test_a_video_whose_frames_cannot_be_written_fails_alone(tmp_path, hostile):
    """One job's error (its frames folder is a file) is that job's result; the next job renders."""
    videos = sorted((hostile["root"] / "runs" / hostile["good_series"]).rglob("out.mp4"))[:2]
    assert len(videos) == 2
    blocked = tmp_path / "blocked"
    blocked.write_bytes(b"a file where the frames folder should be")
    first_frame = lambda duration_s, fps: [{"t_s": 0.0, "reason": "first"}]
    jobs = [RenderJob(videos[0], first_frame, blocked, 80), RenderJob(videos[1], first_frame, tmp_path / "ok", 80)]
    failed, rendered = iter_renders(jobs, workers=2)
    assert failed.error.startswith("could not be processed (") and failed.facts["video_ok"] is False
    assert rendered.error is None and rendered.facts["video_ok"] and (tmp_path / "ok" / "contact.jpg").is_file()
