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


def planted_picture(t: float, duration_s: float, width: int, height: int, *, black: Sequence[Segment] = (),
                    freeze: Sequence[Segment] = (), loop: bool = False) -> np.ndarray:
    """The RGB picture `write_video` encodes for the frame at time t (before any `mover` or `noise`):
    black inside a black segment, the segment's first picture inside a freeze."""
    if _inside(t, black):
        return np.zeros((height, width, 3), dtype=np.uint8)
    held = _inside(t, freeze)
    return _picture(held[0] if held else t, duration_s, width, height, loop)


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
    times: Sequence[float] | None = None,
    rotation: int = 0,
    pix_fmt: str = "yuv420p",
    preset: str = "ultrafast",
    faststart: bool = False,
    mover: int = 0,
    noise: int = 0,
    keyint: int | None = None,
) -> Path:
    """Encode an H.264 MP4 of `duration_s` seconds (frame i at i/fps) with planted segments.

    A `black` segment is pure black frames; a `freeze` segment repeats the frame shown at its
    start. The file is written to a temp name and renamed.

    Options for odd inputs: `times` gives each frame's own time in seconds (variable frame
    rate, millisecond time base; the last frame lasts as long as the step before it);
    `rotation` writes a display-matrix rotation in degrees counter-clockwise; `pix_fmt`
    "yuv444p" allows odd dimensions; `faststart` puts the index first, so a truncated file
    still decodes up to the cut; `preset` is x264's speed/quality trade-off. For the freeze
    rule: `mover` (px) is a small white square that keeps sliding along the top edge of every
    non-black frame, frozen ones included; `noise` adds uniform +-noise grain to every frame.
    `keyint` caps the distance between keyframes (so seeking lands mid-file).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    if times is None:
        time_base = Fraction(1, fps)
        n_frames = max(1, round(duration_s * fps))
        pts = list(range(n_frames))
    else:
        time_base = Fraction(1, 1000)
        pts = [round(t * 1000) for t in times]
    options = {"movflags": "faststart"} if faststart else {}
    with av.open(str(tmp), "w", format="mp4", container_options=options) as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.time_base = time_base
        stream.options = {"preset": preset, "crf": "18"} | ({"g": str(keyint)} if keyint else {})
        if rotation:
            stream.set_display_rotation(rotation)
        for i, pt in enumerate(pts):
            t = float(pt * time_base)
            picture = planted_picture(t, duration_s, width, height, black=black, freeze=freeze, loop=loop)
            if mover and not _inside(t, black):
                x = (4 * i) % max(1, width - mover)
                picture[:mover, x : x + mover] = 255
            if noise:
                grain = np.random.default_rng(i).integers(-noise, noise + 1, picture.shape)
                picture = np.clip(picture + grain, 0, 255).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(picture, format="rgb24")
            frame.pts = pt
            frame.time_base = time_base
            if times is not None:
                frame.duration = (pts[i + 1] if i + 1 < len(pts) else 2 * pt - pts[i - 1]) - pt
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return path
