"""The judge's frames (contract 2): which times to show, and writing them as JPEG + labels.

The times are a pure function of the measured duration, fps and the brief, so the host can
recompute them and check a stored `frames/labels.json`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import simplejpeg

from vae_pipeline.domain.files import replacing_folder, write_atomic

# Float slack for "closer than 0.1 s" and for gap ties: 0.3 - 0.2 is 0.0999999..., which the
# contract means as exactly 0.1 (kept), and two equal gaps must tie.
EPS = 1e-9


def _candidates(duration_s: float, fps: float, brief: dict) -> list[tuple[float, str]]:
    """Steps 1-4 of the contract, in priority order (before clamping)."""
    out = [(0.0, "first"), (duration_s - 1 / fps, "last")]
    out += [(float(c["t_s"]), "criterion") for c in brief.get("success_criteria") or []]
    out += [(float(e["t_s"]), "event") for e in brief.get("events") or []]
    out += [((float(b["start_s"]) + float(b["end_s"])) / 2, "beat") for b in brief.get("beats") or []]
    return out


def sample_times(duration_s: float, fps: float, brief: dict, *, frames: int = 14,
                 min_gap_s: float = 0.1) -> list[dict]:
    """The contract's `frames` sample times as sorted `{"t_s", "reason"}`.

    Fewer than `frames` come back only when the video is too short to hold that many times
    `min_gap_s` apart: the widest gap's midpoint is then itself too close, and so is every
    other fill candidate.
    """
    last = max(0.0, duration_s - 1 / fps)
    chosen: list[tuple[float, str]] = []

    def offer(t: float, reason: str) -> bool:
        t = min(max(t, 0.0), last)
        if any(abs(t - c) < min_gap_s - EPS for c, _ in chosen):
            return False
        chosen.append((t, reason))
        return True

    for t, reason in _candidates(duration_s, fps, brief):
        if len(chosen) == frames:
            break
        offer(t, reason)
    while len(chosen) < frames:
        times = sorted(c for c, _ in chosen)
        gaps = [b - a for a, b in zip(times, times[1:])]
        if not gaps:
            break
        widest = max(gaps)
        k = next(i for i, g in enumerate(gaps) if g >= widest - EPS)  # earliest on a tie
        if not offer((times[k] + times[k + 1]) / 2, "fill"):
            break
    return [{"t_s": round(t, 3), "reason": r} for t, r in sorted(chosen, key=lambda c: c[0])]


def encode_frame(pixels: np.ndarray, quality: int = 90) -> bytes:
    """One judge frame, (height, width, 3) RGB or (height, width, 4) RGBX bytes, as a 4:2:0 JPEG
    at the rubric's quality.

    libjpeg-turbo through simplejpeg, which lets go of the GIL while it encodes (Pillow's
    encoder holds it, and so stalls every other thread of the `renders` step); the same
    quantization tables and pictures as Pillow's `save(format="JPEG", quality=...)`.
    """
    colorspace = {3: "RGB", 4: "RGBX"}[pixels.shape[2]]
    return simplejpeg.encode_jpeg(np.ascontiguousarray(pixels), quality=quality, colorspace=colorspace,
                                  colorsubsampling="420")


def write_frames(frames: Sequence[tuple[float, str, bytes]], out_dir: Path) -> list[dict]:
    """Write `f00.jpg`, `f01.jpg`... and `labels.json` as one folder; return the labels.

    The folder is filled beside `out_dir` and then takes its place, so a crash never leaves
    frames that disagree with their labels, and no frame of an earlier, longer save remains.
    """
    labels = []
    with replacing_folder(Path(out_dir)) as staging:
        for i, (t_s, reason, jpeg) in enumerate(frames):
            name = f"f{i:02d}.jpg"
            write_atomic(staging / name, jpeg)
            labels.append({"file": name, "t_s": t_s, "reason": reason})
        write_atomic(staging / "labels.json", (json.dumps(labels, indent=2) + "\n").encode("utf-8"))
    return labels
