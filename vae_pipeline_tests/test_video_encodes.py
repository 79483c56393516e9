"""Mechanical facts (contract 2) on encodes the sample generator does not make, made here with
Debian's `ffmpeg` from pictures planned frame by frame, and checked against the plan and
against what `ffprobe` reports for the same file.

The contract's frame duration is the next frame's pts minus its own, in presentation order; the
last frame's is its packet's duration. `probed_duration` applies that to ffprobe's frame list,
so the expected length comes from FFmpeg's own reading of the file, not from the code under test.
"""

from __future__ import annotations

import json
import subprocess
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from vae_pipeline.domain.video.video_facts import analyse_video
from vae_pipeline_tests.test_video_facts import assert_ranges

W, H = 320, 180
BAR = 16  # the moving bar's width (px); it moves 8 px a frame, so every frame differs from the last
X264_B = ["-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", "600",
          "-x264-params", "b-adapt=0:scenecut=0:log-level=error", "-pix_fmt", "yuv420p"]
ENCODERS = {  # encoders Debian's ffmpeg has, each with frames reordered or hidden
    "h264": X264_B,
    "hevc": ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "bframes=3:keyint=600:log-level=error",
             "-tag:v", "hvc1", "-pix_fmt", "yuv420p"],
    "vp9": ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-g", "600", "-pix_fmt", "yuv420p"],
    "av1": ["-c:v", "libsvtav1", "-preset", "12", "-g", "600", "-pix_fmt", "yuv420p"],
}


def picture(k: int) -> np.ndarray:
    """Frame k of a moving picture: grey ground, a white bar 8 px further right each frame."""
    frame = np.full((H, W, 3), 100, np.uint8)
    x = (8 * k) % (W - BAR)
    frame[:, x : x + BAR] = 255
    return frame


def planned(n: int, black: tuple[int, int] | None = None, hold: tuple[int, int] | None = None,
            levels: list[int] | None = None) -> bytes:
    """n raw RGB frames: frames black[0]..black[1]-1 black, frames hold[0]..hold[1]-1 all the
    picture of frame hold[0]; or, with `levels`, flat frames of those grey levels."""
    if levels is not None:
        return b"".join(np.full((H, W, 3), level, np.uint8).tobytes() for level in levels)
    frames = []
    for k in range(n):
        if black and black[0] <= k < black[1]:
            frames.append(np.zeros((H, W, 3), np.uint8))
        else:
            frames.append(picture(hold[0] if hold and hold[0] <= k < hold[1] else k))
    return b"".join(f.tobytes() for f in frames)


def ffmpeg(*args: str | Path, stdin: bytes | None = None) -> None:
    quiet = ["-hide_banner", "-loglevel", "error", "-y", *(["-nostdin"] if stdin is None else [])]
    subprocess.run(["ffmpeg", *quiet, *map(str, args)], input=stdin, check=True, capture_output=True)


def raw_input(fps: int | str) -> list[str]:
    return ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{W}x{H}", "-framerate", str(fps), "-i", "-"]


def encode(out: Path, frames: bytes, codec_args: list[str], fps: int = 30, vf: str | None = None,
           extra: tuple[str, ...] = ()) -> Path:
    filters = ["-vf", vf, "-fps_mode", "vfr"] if vf else []
    ffmpeg(*raw_input(fps), *filters, *codec_args, *extra, out, stdin=frames)
    return out


def probe(path: Path, *entries: str, count: bool = False) -> dict:
    cmd = ["ffprobe", "-v", "error", "-select_streams", "v:0", "-of", "json", *(["-count_frames"] if count else []),
           "-show_entries", ":".join(entries), str(path)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def probed_times(path: Path) -> tuple[list[float], float]:
    """ffprobe's frame pts in presentation order, and the last one's duration by the contract:
    its packet's (the packet with its pts), else the stream's average frame duration."""
    times = sorted(float(f["pts_time"]) for f in probe(path, "frame=pts_time")["frames"])
    found = probe(path, "packet=pts_time,duration_time:stream=avg_frame_rate")
    last = next((float(p["duration_time"]) for p in found["packets"]
                 if "duration_time" in p and abs(float(p["pts_time"]) - times[-1]) < 1e-6), None)
    return times, last if last is not None else 1 / float(Fraction(found["streams"][0]["avg_frame_rate"]))


def probed_duration(path: Path) -> float:
    """The contract's video_duration_s computed on ffprobe's frame list."""
    times, last = probed_times(path)
    return times[-1] + last - times[0]


@pytest.mark.parametrize("codec", sorted(ENCODERS))
@pytest.mark.parametrize("held", [44, 46])
def test_a_frame_held_two_seconds_is_one_freeze_where_it_is_shown(tmp_path: Path, codec: str, held: int) -> None:
    """Frames held..held+59 repeat frame `held`; mpdecimate keeps one frame lasting 2 s (what a
    deduplicated export is). Its B-frame packet order must not move the freeze onto the moving
    frames after it."""
    clip = encode(tmp_path / f"{codec}.mp4", planned(180, black=(15, 30), hold=(held, held + 60)),
                  ENCODERS[codec], vf="mpdecimate")
    times, _ = probed_times(clip)
    start, end = held / 30, (held + 60) / 30
    after = times.index(next(t for t in times if t > start + 1e-3))
    assert abs(times[after - 1] - start) < 1e-3 and abs(times[after] - end) < 1e-3  # one frame held 2 s
    facts = analyse_video(clip).facts
    assert facts["video_ok"] is True and facts["error"] is None
    assert abs(facts["video_duration_s"] - probed_duration(clip)) <= 0.001
    assert abs(facts["video_duration_s"] - 6.0) <= 2 / 30
    assert facts["fps"] == 30.0
    assert_ranges(facts["black_ranges"], [(0.5, 1.0)])
    assert_ranges(facts["freeze_ranges"], [(0.5, 1.0), (start, end)])


def test_a_cut_with_an_edit_list_counts_only_the_frames_it_shows(tmp_path: Path) -> None:
    """A stream copy cut at 2.5 s starts at the keyframe at 2.0 s: the edit list hides the 15
    frames before 2.5 s, which FFmpeg decodes and drops. They are not frames of the video."""
    source = encode(tmp_path / "source.mp4", planned(180, black=(90, 105)), X264_B, extra=("-g", "60"))
    cut = tmp_path / "cut.mp4"
    ffmpeg("-ss", "2.5", "-i", source, "-c", "copy", cut)
    stream = probe(cut, "stream=nb_frames,nb_read_frames", count=True)["streams"][0]
    assert (int(stream["nb_frames"]), int(stream["nb_read_frames"])) == (120, 105)  # 15 hidden
    facts = analyse_video(cut).facts
    assert facts["video_ok"] is True and facts["error"] is None
    assert abs(facts["video_duration_s"] - probed_duration(cut)) <= 0.001
    assert abs(facts["video_duration_s"] - 3.5) <= 2 / 30
    # source black 3.0-3.5 s is 0.5-1.0 s of the cut: the hidden frames take no time
    assert_ranges(facts["black_ranges"], [(0.5, 1.0)])


def test_variable_frame_rate_from_a_concat_of_30_24_and_15_fps(tmp_path: Path) -> None:
    """One second each at 30, 24 and 15 fps; held frames in the 24 fps part, black in the 15."""
    parts = [(30, planned(30)), (24, planned(24, hold=(6, 21))), (15, planned(15, black=(3, 12)))]
    inputs = []
    for i, (fps, frames) in enumerate(parts):
        (tmp_path / f"{i}.rgb").write_bytes(frames)
        inputs += ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{W}x{H}", "-framerate", str(fps),
                   "-i", tmp_path / f"{i}.rgb"]
    clip = tmp_path / "vfr.mp4"
    ffmpeg(*inputs, "-filter_complex", "[0][1][2]concat=n=3:v=1", "-fps_mode", "vfr", *X264_B, clip)
    plan = [k / 30 for k in range(30)] + [1 + k / 24 for k in range(24)] + [2 + k / 15 for k in range(15)]
    times, _ = probed_times(clip)
    assert np.allclose(times, plan, atol=1e-3)
    facts = analyse_video(clip).facts
    assert facts["error"] is None
    # the last frame (2.933 s) lasts its packet's 1/15 s; Debian's ffprobe reads no packet
    # durations in this file (the stream's average would give 2.975 s): the plan is the yardstick
    assert abs(facts["video_duration_s"] - 3.0) <= 2 / 15
    assert abs(facts["fps"] - 24) < 0.01  # the median step: 30 of 1/30 s, 24 of 1/24 s, 14 of 1/15 s
    assert_ranges(facts["black_ranges"], [(2.2, 2.8)], fps=15)
    assert_ranges(facts["freeze_ranges"], [(1.25, 1.875), (2.2, 2.8)], fps=24)


def test_a_90_degree_display_matrix_swaps_width_and_height(tmp_path: Path) -> None:
    coded = encode(tmp_path / "coded.mp4", planned(30), X264_B)
    clip = tmp_path / "r.mp4"
    ffmpeg("-i", coded, "-c", "copy", "-metadata:s:v:0", "rotate=90", clip)  # the mp4's display matrix
    side = probe(clip, "stream_side_data=rotation")["streams"][0]["side_data_list"][0]
    assert abs(int(side["rotation"])) == 90
    result = analyse_video(clip, lambda d, f: [{"t_s": 0.0, "reason": "first"}])
    assert (result.facts["width"], result.facts["height"], result.facts["aspect"]) == (H, W, "9:16")
    # ffmpeg turns the picture as the matrix says: ours must be the same upright picture
    shown = subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip), "-frames:v", "1", "-f", "rawvideo",
                            "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    upright = np.frombuffer(shown, np.uint8).reshape(W, H, 3).astype(float)
    assert np.abs(np.asarray(result.frames[0][2]).astype(float) - upright).mean() < 2.0


# 0 and 30 are black (luma <= 32 full range); 255 and 40 are not, in whatever range they are stored
LEVELS = [0] * 6 + [255] * 6 + [30] * 6 + [40] * 6


@pytest.mark.parametrize(("args", "stored"), [
    (["-pix_fmt", "yuv420p10le"], {"pix_fmt": "yuv420p10le"}),  # 10-bit, limited range
    # 8-bit full range: limited-range reading would make 40 a 28, black
    (["-vf", "scale=out_range=full", "-pix_fmt", "yuvj420p", "-color_range", "pc"],
     {"pix_fmt": "yuvj420p", "color_range": "pc"}),
])
def test_ten_bit_and_full_range_luma(tmp_path: Path, args: list[str], stored: dict) -> None:
    clip = tmp_path / "levels.mp4"
    ffmpeg(*raw_input(30), *args, "-c:v", "libx264", "-qp", "0", "-preset", "veryfast",
           "-x264-params", "log-level=error", clip, stdin=planned(0, levels=LEVELS))
    assert probe(clip, "stream=pix_fmt,color_range")["streams"][0] == stored
    facts = analyse_video(clip).facts
    assert facts["error"] is None
    assert_ranges(facts["black_ranges"], [(0.0, 0.2), (0.4, 0.6)])
    assert abs(facts["loop_seam"] - 40) <= 1.0


def test_fragmented_mp4_with_b_frames_and_a_held_frame(tmp_path: Path) -> None:
    """No sample table to count: frame times come from the fragments' pts."""
    clip = encode(tmp_path / "frag.mp4", planned(120, black=(15, 30), hold=(60, 90)), X264_B, vf="mpdecimate",
                  extra=("-g", "30", "-movflags", "frag_keyframe+empty_moov+default_base_moof"))
    with av.open(str(clip)) as container:
        assert container.streams.video[0].frames == 0  # nothing in the moov says how many
    facts = analyse_video(clip).facts
    assert facts["error"] is None
    assert abs(facts["video_duration_s"] - probed_duration(clip)) <= 0.001
    assert abs(facts["video_duration_s"] - 4.0) <= 2 / 30
    assert_ranges(facts["black_ranges"], [(0.5, 1.0)])
    assert_ranges(facts["freeze_ranges"], [(0.5, 1.0), (2.0, 3.0)])


def test_audio_longer_than_the_video_does_not_lengthen_it(tmp_path: Path) -> None:
    clip = tmp_path / "av.mp4"
    ffmpeg(*raw_input(30), "-f", "lavfi", "-i", "sine=frequency=440:duration=4", *X264_B, "-c:a", "aac",
           clip, stdin=planned(60, hold=(45, 60)))
    container_s = float(json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(clip)],
        capture_output=True, text=True, check=True).stdout)["format"]["duration"])
    assert container_s > 3.9  # the file lasts as long as its audio
    facts = analyse_video(clip).facts
    assert facts["error"] is None
    assert abs(facts["video_duration_s"] - probed_duration(clip)) <= 0.001
    assert abs(facts["video_duration_s"] - 2.0) <= 2 / 30
    assert_ranges(facts["freeze_ranges"], [(1.5, 2.0)])  # the held end stops with the last frame


def test_truncated_b_frame_file_gives_the_frames_before_the_break(tmp_path: Path) -> None:
    clip = encode(tmp_path / "t.mp4", planned(120, black=(15, 30)), X264_B, extra=("-movflags", "+faststart"))
    clip.write_bytes(clip.read_bytes()[: clip.stat().st_size * 6 // 10])
    times, _ = probed_times(clip)
    assert 1.2 < times[-1] < 3.5  # ffprobe too decodes only part of the planned 4 s
    alone, beside_others = analyse_video(clip).facts, analyse_video(clip, decoder_threads=1).facts
    assert alone == beside_others  # FFmpeg's frame threads lose frames at a break: not the facts
    assert alone["video_ok"] is True and "decoding stopped" in alone["error"]
    assert abs(alone["video_duration_s"] - probed_duration(clip)) <= 0.001
    assert_ranges(alone["black_ranges"], [(0.5, 1.0)])


def intra_mkv(path: Path, order: list[int]) -> Path:
    """A 10 fps Matroska file of MJPEG frames muxed in the pts `order` given (an intra-only
    codec: the decoder hands frames out in packet order); black at pts 4..9."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuvj420p"
        stream.time_base = Fraction(1, 10)
        for i, pts in enumerate(order):
            rgb = np.zeros((H, W, 3), np.uint8) if 4 <= pts < 10 else picture(pts)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                packet.pts, packet.dts, packet.duration, packet.time_base = pts, i - 8, 1, Fraction(1, 10)
                container.mux(packet)
    shown = [float(f["pts_time"]) for f in probe(path, "frame=pts_time")["frames"]]
    assert shown == [k / 10 for k in order]  # ffmpeg too decodes them in this order
    return path


def test_frames_decoded_out_of_pts_order_are_measured_in_presentation_order(tmp_path: Path) -> None:
    facts = analyse_video(intra_mkv(tmp_path / "swapped.mkv", [k ^ 1 for k in range(20)])).facts  # 1, 0, 3, 2...
    assert facts["error"] is None
    assert abs(facts["video_duration_s"] - 2.0) <= 0.001 and facts["fps"] == 10.0
    assert_ranges(facts["black_ranges"], [(0.4, 1.0)], fps=10)
    assert_ranges(facts["freeze_ranges"], [(0.4, 1.0)], fps=10)


def test_a_frame_later_than_the_reorder_window_is_left_out_and_said(tmp_path: Path) -> None:
    order = [0, 1, 2, 4, 5, 6, 7, 8, 9, 3, *range(10, 20)]  # pts 3 comes 6 frames late
    facts = analyse_video(intra_mkv(tmp_path / "late.mkv", order)).facts
    assert facts["error"] == "frames decoded too late for presentation order, left out: 1"
    assert abs(facts["video_duration_s"] - 2.0) <= 0.001 and facts["fps"] == 10.0
    assert_ranges(facts["black_ranges"], [(0.4, 1.0)], fps=10)
