"""Mechanical facts (contract 2) on clips made in the test with known planted segments."""

from __future__ import annotations

import time
from fractions import Fraction
from functools import partial
from pathlib import Path

import av
import numpy as np
import pytest

from vae_pipeline.domain.video import video_facts
from vae_pipeline.domain.video.sampler import sample_times
from vae_pipeline.domain.video.video_facts import (
    analyse_many,
    analyse_video,
    aspect_label,
    iter_analyses,
)
from vae_pipeline.sample.video import write_video

FPS = 30
FRAME = 1 / FPS
BRIEF = {
    "success_criteria": [{"t_s": 1.05, "text": "x"}],
    "events": [{"t_s": 0.62, "name": "y"}],
    "beats": [{"name": "hook", "start_s": 0.0, "end_s": 1.0}],
}
KEYS = {"video_ok", "video_duration_s", "fps", "width", "height", "aspect", "black_ranges",
        "freeze_ranges", "still", "loop_seam", "error"}


def assert_ranges(measured: list[list[float]], expected: list[tuple[float, float]], fps: float = FPS) -> None:
    """Same number of ranges, each end within +-2 frames (the contract's tolerance)."""
    assert len(measured) == len(expected), (measured, expected)
    for (s, e), (xs, xe) in zip(measured, expected):
        assert abs(s - xs) <= 2 / fps + 1e-9 and abs(e - xe) <= 2 / fps + 1e-9, (measured, expected)


def assert_failed(facts: dict, word: str) -> None:
    """Nothing decoded: video_ok false, every measured fact None, a one-line reason."""
    assert set(facts) == KEYS
    assert facts["video_ok"] is False
    assert all(facts[k] is None for k in KEYS - {"video_ok", "error"})
    assert word in facts["error"].lower() and "\n" not in facts["error"]


def direct_seam(path: Path) -> float:
    """Loop seam computed independently: full-size gray frames, 2x2 block means in numpy."""
    with av.open(str(path)) as c:
        grays = [f.to_ndarray(format="gray").astype(float) for f in c.decode(video=0)]
    h, w = grays[0].shape
    small = [g.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3)) for g in (grays[0], grays[-1])]
    return float(np.abs(small[1] - small[0]).mean())


def shade_at(t: float, fps: float, duration_s: float) -> float:
    """write_video's background red for the frame displayed at t (the last one at or before t)."""
    k = int(t * fps + 1e-6)
    return float(np.uint8(40 + 170 * (k / fps) / duration_s))


def assert_shows(image, t: float, fps: float, duration_s: float) -> None:
    """The frame's background red (the median ignores the square) is the one of the frame at t,
    closer to it than half the step between neighbouring frames."""
    step = 170 / (fps * duration_s)
    assert abs(float(np.median(np.asarray(image)[:, :, 0])) - shade_at(t, fps, duration_s)) < step / 2, t


def test_planted_black_and_freeze_are_measured_to_the_frame(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "a.mp4", duration_s=6.0, black=[(1.0, 1.5), (2.49, 2.59), (4.59, 4.65)],
                       freeze=[(3.0, 4.0), (5.0, 5.3)])
    facts = analyse_video(clip).facts
    assert set(facts) == KEYS
    assert facts["video_ok"] is True and facts["error"] is None
    assert abs(facts["video_duration_s"] - 6.0) <= 0.05
    assert abs(facts["fps"] - FPS) < 0.01
    assert (facts["width"], facts["height"], facts["aspect"]) == (320, 180, "16:9")
    # frames 2.5, 2.533, 2.567 last exactly 0.1 s: kept; 4.6 and 4.633 last 0.067 s: too short
    assert_ranges(facts["black_ranges"], [(1.0, 1.5), (2.5, 2.6)])
    # a black run is also frozen; 0.1 s of black and the 0.3 s hold are shorter than 0.5 s
    assert_ranges(facts["freeze_ranges"], [(1.0, 1.5), (3.0, 4.0)])
    assert facts["still"] is False
    assert abs(facts["loop_seam"] - direct_seam(clip)) <= 1.0
    assert all(v == round(v, 3) for r in facts["freeze_ranges"] + facts["black_ranges"] for v in r)


def test_still_needs_ninety_percent_frozen(tmp_path: Path) -> None:
    mostly = analyse_video(write_video(tmp_path / "s.mp4", duration_s=2.0, freeze=[(0.0, 1.9)])).facts
    assert_ranges(mostly["freeze_ranges"], [(0.0, 1.9)])
    assert mostly["still"] is True
    less = analyse_video(write_video(tmp_path / "m.mp4", duration_s=2.0, freeze=[(0.0, 1.7)])).facts
    assert_ranges(less["freeze_ranges"], [(0.0, 1.7)])
    assert less["still"] is False


def test_small_moving_element_is_motion_and_grain_is_not(tmp_path: Path) -> None:
    moving = write_video(tmp_path / "m.mp4", duration_s=3.0, freeze=[(1.0, 2.5)], mover=16)
    assert analyse_video(moving).facts["freeze_ranges"] == []
    grainy = write_video(tmp_path / "g.mp4", duration_s=3.0, freeze=[(1.0, 2.5)], noise=2)
    assert_ranges(analyse_video(grainy).facts["freeze_ranges"], [(1.0, 2.5)])


def test_loop_seam_small_for_a_loop_and_matches_direct_computation(tmp_path: Path) -> None:
    looped = write_video(tmp_path / "l.mp4", duration_s=2.0, loop=True)
    straight = write_video(tmp_path / "s.mp4", duration_s=2.0)
    seams = [analyse_video(p).facts["loop_seam"] for p in (looped, straight)]
    for clip, seam in zip((looped, straight), seams):
        assert abs(seam - direct_seam(clip)) <= 1.0
    assert seams[0] < 12.0 < seams[1]


def test_full_range_luma_thresholds(tmp_path: Path) -> None:
    """Black is luma <= 32 full range; the limited-range Y plane would read black as 16."""
    clip = tmp_path / "k.mp4"
    with av.open(str(clip), "w", format="mp4") as c:
        s = c.add_stream("libx264", rate=FPS)
        s.width, s.height, s.pix_fmt, s.time_base = 160, 90, "yuv420p", Fraction(1, FPS)
        s.options = {"crf": "0", "preset": "ultrafast"}
        for i, level in enumerate([0] * 6 + [255] * 6 + [30] * 6 + [40] * 6):
            f = av.VideoFrame.from_ndarray(np.full((90, 160, 3), level, np.uint8), format="rgb24")
            f.pts, f.time_base = i, Fraction(1, FPS)
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    facts = analyse_video(clip).facts
    # frames 0-5 (0) and 12-17 (grey 30) are black; 255 and 40 are not
    assert_ranges(facts["black_ranges"], [(0.0, 0.2), (0.4, 0.6)])
    assert abs(facts["loop_seam"] - 40) <= 1.0  # last frame 40, first 0, in full range


@pytest.mark.parametrize(("w", "h", "label"), [(1920, 1080, "16:9"), (1080, 1920, "9:16"), (500, 500, "1:1"),
                                              (1280, 731, "16:9"), (640, 480, "4:3"), (1000, 1050, "20:21")])
def test_aspect_labels(w: int, h: int, label: str) -> None:
    assert aspect_label(w, h) == label


def test_frames_taken_in_the_same_pass_are_the_displayed_ones(tmp_path: Path, monkeypatch) -> None:
    fps, duration = 10, 2.0  # a background step of 8.5 per frame tells neighbours apart
    clip = write_video(tmp_path / "f.mp4", fps=fps, duration_s=duration)
    opens = []
    real_open = av.open
    monkeypatch.setattr(video_facts.av, "open", lambda *a, **k: opens.append(a) or real_open(*a, **k))
    result = analyse_video(clip, partial(sample_times, brief=BRIEF))
    assert len(opens) == 1  # metadata guessed the sample times right: no second pass
    expected = sample_times(result.facts["video_duration_s"], result.facts["fps"], BRIEF)
    assert [(t, r) for t, r, _ in result.frames] == [(e["t_s"], e["reason"]) for e in expected]
    for t, _, image in result.frames:
        assert image.mode == "RGB" and image.size == (320, 180)
        assert_shows(image, t, fps, duration)


def test_a_time_rounded_down_still_gets_the_frame_it_names(tmp_path: Path) -> None:
    """A criterion at frame 40 of a 30 fps clip (1.3333 s) is published as 1.333 s; the frame
    shown then is frame 40, not frame 39 that a strict 1.333 would pick."""
    clip = write_video(tmp_path / "c.mp4", fps=FPS, duration_s=2.0)
    result = analyse_video(clip, partial(sample_times, brief={"success_criteria": [{"t_s": 40 / FPS}]}))
    t_s, _, image = next(f for f in result.frames if f[1] == "criterion")
    assert t_s == round(40 / FPS, 3) < 40 / FPS
    with av.open(str(clip)) as c:
        decoded = [f.to_ndarray(format="rgb24").astype(float) for f in c.decode(video=0)]
    distances = [np.abs(np.asarray(image) - d).mean() for d in decoded]
    assert int(np.argmin(distances)) == 40


def test_times_the_guess_missed_come_from_a_seeking_second_pass(tmp_path: Path, monkeypatch) -> None:
    fps, duration = 5, 4.0
    clip = write_video(tmp_path / "f.mp4", fps=fps, duration_s=duration, keyint=4)
    calls = []

    def sampler(d: float, f: float) -> list[dict]:
        """First call (metadata guess) and second call (measured) ask for different times."""
        calls.append((d, f))
        times = [0.5, 1.25] if len(calls) == 1 else [0.5, 2.35, 3.9, 3.95]
        return [{"t_s": t, "reason": "fill"} for t in times]

    opens = []
    real_open = av.open
    monkeypatch.setattr(video_facts.av, "open", lambda *a, **k: opens.append(a) or real_open(*a, **k))
    result = analyse_video(clip, sampler)
    assert len(calls) == 2 and len(opens) == 2
    assert [t for t, _, _ in result.frames] == [0.5, 2.35, 3.9, 3.95]
    for t, _, image in result.frames:
        assert_shows(image, t, fps, duration)


def test_rotation_gives_display_size_and_upright_frames(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "r.mp4", rotation=90, duration_s=1.0)
    result = analyse_video(clip, lambda d, f: [{"t_s": 0.0, "reason": "first"}])
    facts = result.facts
    assert (facts["width"], facts["height"], facts["aspect"]) == (180, 320, "9:16")
    with av.open(str(clip)) as c:
        coded = next(c.decode(video=0)).to_ndarray(format="rgb24").astype(float)
    shown = np.asarray(result.frames[0][2]).astype(float)
    # the display matrix turns the picture 90 degrees counter-clockwise (PyAV's convention)
    assert shown.shape == (320, 180, 3)
    assert np.abs(shown - np.rot90(coded, 1)).mean() < 1.0


def test_variable_frame_rate_uses_pts_and_median_step(tmp_path: Path) -> None:
    times = [round(i / 30, 3) for i in range(30)] + [1.2, 1.4] + [round(1.5 + i / 30, 3) for i in range(20)]
    clip = write_video(tmp_path / "v.mp4", times=times, duration_s=2.2, black=[(1.15, 1.45)])
    facts = analyse_video(clip).facts
    assert abs(facts["fps"] - 30) < 0.5  # median step, not frames / duration (52 / 2.17)
    last_end = times[-1] + (times[-1] - times[-2])
    assert abs(facts["video_duration_s"] - last_end) <= 0.05
    # the two black frames at 1.2 and 1.4 span 1.2 .. 1.5 by pts (two frames by count = 0.067 s)
    assert_ranges(facts["black_ranges"], [(1.2, 1.5)], fps=1000)


def test_odd_dimensions(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "o.mp4", width=161, height=121, pix_fmt="yuv444p", freeze=[(0.5, 1.5)])
    facts = analyse_video(clip).facts
    assert (facts["video_ok"], facts["width"], facts["height"], facts["aspect"]) == (True, 161, 121, "161:121")
    assert_ranges(facts["freeze_ranges"], [(0.5, 1.5)])


def test_absent_and_empty_files(tmp_path: Path) -> None:
    assert_failed(analyse_video(tmp_path / "missing.mp4").facts, "no such file")
    (tmp_path / "empty.mp4").write_bytes(b"")
    result = analyse_video(tmp_path / "empty.mp4", partial(sample_times, brief=BRIEF))
    assert_failed(result.facts, "empty")
    assert result.frames == []


def test_random_bytes(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(np.random.default_rng(7).integers(0, 256, 50_000, dtype=np.uint8).tobytes())
    facts = analyse_video(junk).facts
    assert_failed(facts, "cannot open")
    assert str(tmp_path) not in facts["error"]


def test_truncated_file_with_index_at_the_end_does_not_open(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "t.mp4", duration_s=2.0)
    clip.write_bytes(clip.read_bytes()[: clip.stat().st_size // 2])
    assert_failed(analyse_video(clip).facts, "cannot open")


def test_truncated_file_with_index_first_gives_facts_up_to_the_break(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "t.mp4", duration_s=4.0, faststart=True, black=[(0.5, 1.0)])
    clip.write_bytes(clip.read_bytes()[: clip.stat().st_size * 6 // 10])
    result = analyse_video(clip, partial(sample_times, brief=BRIEF))
    facts = result.facts
    assert facts["video_ok"] is True and facts["error"]
    assert 0.5 < facts["video_duration_s"] < 4.0 - 0.5
    assert_ranges(facts["black_ranges"], [(0.5, 1.0)])
    assert result.frames and all(t <= facts["video_duration_s"] for t, _, _ in result.frames)


def test_audio_only_file_has_no_video_stream(tmp_path: Path) -> None:
    clip = tmp_path / "a.mp4"
    with av.open(str(clip), "w", format="mp4") as c:
        s = c.add_stream("aac", rate=48000, layout="mono")
        for i in range(20):
            f = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            f.sample_rate, f.pts = 48000, i * 1024
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    assert_failed(analyse_video(clip).facts, "no video stream")


def test_analyse_many_matches_one_by_one_in_order(tmp_path: Path) -> None:
    clips = [write_video(tmp_path / f"{i}.mp4", duration_s=1.0 + i / 2, black=[(0.2, 0.5)]) for i in range(3)]
    jobs = [(clips[0], None), (tmp_path / "missing.mp4", None), (clips[1], partial(sample_times, brief=BRIEF)),
            (clips[2], None)]
    many = analyse_many(jobs, workers=2)
    single = [analyse_video(p, s) for p, s in jobs]
    assert [a.facts for a in many] == [a.facts for a in single]
    assert [[(t, r) for t, r, _ in a.frames] for a in many] == [[(t, r) for t, r, _ in a.frames] for a in single]
    assert [a.facts["video_ok"] for a in many] == [True, False, True, True]


def test_iter_analyses_does_not_run_ahead_of_its_reader(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "c.mp4", duration_s=0.5)
    started: set[int] = set()

    def probe(job: int):
        def sample(d: float, f: float) -> list[dict]:
            started.add(job)
            return [{"t_s": 0.0, "reason": "first"}]
        return sample

    results = iter_analyses(((clip, probe(i)) for i in range(10)), workers=2)
    first = next(results)
    time.sleep(0.3)  # ample time for the pool to run whatever it was given (~10 ms each)
    assert first.frames and len(started) <= 4  # a window of 2 x workers, not all 10
    assert len([first, *results]) == 10 and len(started) == 10
