"""Real H.264 clips for the sample runs and the tests, with planted black and frozen segments.

Every frame carries motion (a square sweeping across a slowly changing background), so the
only still or black stretches in a clip are the ones asked for — the facts pass can be checked
against them to the frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

Segment = tuple[float, float]


def _inside(t: float, segments: Sequence[Segment]) -> Segment | None:
    for start, end in segments:
        if start <= t < end:
            return (start, end)
    return None


def _picture(t: float, duration_s: float, width: int, height: int, loop: bool) -> np.ndarray:
    """The picture at time t: a sweeping square over a background whose shade tells the time."""
    phase = (t / duration_s) % 1.0
    if loop:
        # periodic in t: the last frame lands next to the first
        shade = 90 + 60 * np.sin(2 * np.pi * phase)
    else:
        shade = 40 + 170 * phase
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:, :, 0] = np.uint8(shade)
    frame[:, :, 1] = np.uint8(255 - shade)
    frame[:, :, 2] = 120
    side = max(8, min(width, height) // 4)
    x = int((width - side) * (0.5 + 0.5 * np.sin(2 * np.pi * phase * 2)))
    y = int((height - side) * (0.5 + 0.5 * np.cos(2 * np.pi * phase)))
    frame[y : y + side, x : x + side] = (250, 250, 250)
    return frame


def write_video(
    path: Path,
    *,
    width: int = 320,
    height: int = 180,
    fps: int = 30,
    duration_s: float = 2.0,
    black: Sequence[Segment] = (),
    freeze: Sequence[Segment] = (),
    loop: bool = False,
) -> Path:
    """Encode an H.264 MP4 of `duration_s` seconds (frame i at i/fps) with planted segments.

    A `black` segment is pure black frames; a `freeze` segment repeats the frame shown at its
    start. The file is written to a temp name and renamed.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    n_frames = max(1, round(duration_s * fps))
    with av.open(str(tmp), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {"preset": "ultrafast", "crf": "18"}
        for i in range(n_frames):
            t = i / fps
            if _inside(t, black):
                picture = np.zeros((height, width, 3), dtype=np.uint8)
            else:
                held = _inside(t, freeze)
                picture = _picture(held[0] if held else t, duration_s, width, height, loop)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return path
