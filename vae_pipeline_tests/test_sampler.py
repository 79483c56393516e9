"""The judge's frames (contract 2): sample times worked by hand from the rules, JPEG + labels,
and the contact sheet."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vae_pipeline.domain.video import contact_sheet as cs
from vae_pipeline.domain.video import sampler
from vae_pipeline.domain.video.sampler import encode_frame, sample_times, write_frames


def save_frames(frames, out_dir: Path) -> list[dict]:
    """Pictures encoded as the `renders` stage encodes them, then written with `write_frames`."""
    return write_frames([(t_s, reason, encode_frame(np.asarray(image.convert("RGB"))))
                         for t_s, reason, image in frames], out_dir)

def pairs(result: list[dict]) -> list[tuple[float, str]]:
    return [(x["t_s"], x["reason"]) for x in result]


def test_priority_order_and_fill_with_earliest_gap_on_a_tie() -> None:
    # duration 8.04 at 25 fps: the last frame is at 8.04 - 0.04 = 8.0
    brief = {
        "success_criteria": [{"t_s": 4.5, "text": "a"}],
        "events": [{"t_s": 3.0, "name": "b"}],
        "beats": [{"name": "x", "start_s": 0, "end_s": 2}, {"name": "y", "start_s": 2, "end_s": 6},
                  {"name": "z", "start_s": 6, "end_s": 8}],
    }
    # steps 1-4: 0, 8, 4.5, 3, then beat midpoints 1, 4, 7   (7 times)
    # fill: gaps 1,2,1,.5,2.5,1 -> 5.75; widest 2 (1..3) -> 2; tie 1.25 (4.5..5.75, 5.75..7) takes
    # the earlier -> 5.125, then 6.375; all gaps now <= 1, earliest first -> 0.5, 1.5, 2.5
    expected = [(0.0, "first"), (0.5, "fill"), (1.0, "beat"), (1.5, "fill"), (2.0, "fill"), (2.5, "fill"),
                (3.0, "event"), (4.0, "beat"), (4.5, "criterion"), (5.125, "fill"), (5.75, "fill"),
                (6.375, "fill"), (7.0, "beat"), (8.0, "last")]
    assert pairs(sample_times(8.04, 25, brief)) == expected


def test_clamping_and_dropping_within_a_tenth_of_a_second() -> None:
    # duration 5 at 10 fps: times clamp to [0, 4.9]
    brief = {
        "success_criteria": [{"t_s": 6.0, "text": "past the end -> 4.9, on top of last: dropped"},
                             {"t_s": 0.2, "text": "kept"}],
        "events": [{"t_s": -1.0, "name": "before the start -> 0: dropped"},
                   {"t_s": 0.3, "name": "0.1 from 0.2 is not closer than 0.1: kept"},
                   {"t_s": 0.35, "name": "0.05 from 0.3: dropped"},
                   {"t_s": 4.85, "name": "0.05 from last: dropped"}],
        "beats": [],
    }
    result = sample_times(5.0, 10, brief, frames=5)
    # 0, 4.9, 0.2, 0.3 from steps 1-4; one fill in the widest gap 0.3..4.9 -> 2.6
    assert pairs(result) == [(0.0, "first"), (0.2, "criterion"), (0.3, "event"), (2.6, "fill"), (4.9, "last")]


def test_more_than_fourteen_keeps_the_first_fourteen_in_priority_order() -> None:
    brief = {
        "success_criteria": [{"t_s": 11.0, "text": "c"}],
        "events": [{"t_s": 0.5 * k, "name": f"e{k}"} for k in range(1, 21)],  # 0.5 .. 10.0
        "beats": [{"name": "late", "start_s": 11.5, "end_s": 11.9}],
    }
    result = sample_times(12.04, 25, brief)
    # first, last, criterion, then events until 14: 0.5 .. 5.5 (11 of them); no beat, no fill
    expected = ([(0.0, "first")] + [(0.5 * k, "event") for k in range(1, 12)]
                + [(11.0, "criterion"), (12.0, "last")])
    assert pairs(result) == expected


def test_even_fill_with_an_empty_brief() -> None:
    brief = {"success_criteria": None, "events": [], "beats": None}
    # 0 and 14, then bisection: 7; 3.5, 10.5; 1.75, 5.25, 8.75, 12.25; the five earliest eighths
    result = sample_times(14.04, 25, brief)
    eighths = [0.875, 2.625, 4.375, 6.125, 7.875]
    fills = sorted([7.0, 3.5, 10.5, 1.75, 5.25, 8.75, 12.25] + eighths)
    assert pairs(result) == [(0.0, "first")] + [(t, "fill") for t in fills] + [(14.0, "last")]


def test_short_video_stops_filling_when_every_midpoint_is_too_close() -> None:
    # 0.5 s at 10 fps: 0 and 0.4, then 0.2, 0.1, 0.3; the next midpoints are 0.05 from a chosen one
    result = sample_times(0.5, 10, {})
    assert pairs(result) == [(0.0, "first"), (0.1, "fill"), (0.2, "fill"), (0.3, "fill"), (0.4, "last")]


def test_times_are_rounded_to_three_decimals_and_sorted() -> None:
    result = sample_times(1.0, 30, {"events": [{"t_s": 0.123456, "name": "e"}]})
    times = [x["t_s"] for x in result]
    assert times == sorted(times)
    assert times[-1] == round(1.0 - 1 / 30, 3) == 0.967
    assert ("event" in [x["reason"] for x in result]) and 0.123 in times
    assert all(t == round(t, 3) for t in times)


def _solid(colour: tuple[int, int, int], size: tuple[int, int] = (64, 36)) -> Image.Image:
    return Image.new("RGB", size, colour)


def near(colour: tuple[int, int, int]):
    """Matches a pixel within JPEG error of `colour`."""

    class Near:
        def __eq__(self, other: object) -> bool:
            return all(abs(a - b) <= 8 for a, b in zip(other, colour))

    return Near()


def test_save_frames_writes_jpegs_and_labels(tmp_path: Path) -> None:
    colours = [(250, 10, 10), (10, 250, 10), (10, 10, 250)]
    frames = [(0.0, "first", _solid(colours[0])), (1.5, "event", _solid(colours[1])),
              (2.967, "last", _solid(colours[2]))]
    out = tmp_path / "frames"
    labels = save_frames(frames, out)
    assert labels == [{"file": "f00.jpg", "t_s": 0.0, "reason": "first"},
                      {"file": "f01.jpg", "t_s": 1.5, "reason": "event"},
                      {"file": "f02.jpg", "t_s": 2.967, "reason": "last"}]
    assert json.loads((out / "labels.json").read_text()) == labels
    for label, colour, (_, _, image) in zip(labels, colours, frames):
        data = (out / label["file"]).read_bytes()
        reference = io.BytesIO()
        image.save(reference, format="JPEG", quality=90)
        assert data == reference.getvalue()  # JPEG at the contract's quality 90
        assert Image.open(out / label["file"]).getpixel((32, 18)) == near(colour)
    assert sorted(p.name for p in out.iterdir()) == ["f00.jpg", "f01.jpg", "f02.jpg", "labels.json"]
    # a later, shorter save leaves the folder matching its labels
    save_frames(frames[:2], out)
    assert sorted(p.name for p in out.iterdir()) == ["f00.jpg", "f01.jpg", "labels.json"]


def test_contact_sheet_shows_every_frame_in_order_with_a_caption() -> None:
    colours = [(230, 30, 30), (30, 230, 30), (30, 30, 230), (230, 230, 30), (30, 230, 230)]
    frames = [(0.5 * i, "fill", _solid(c, (160, 90))) for i, c in enumerate(colours)]
    sheet = Image.open(io.BytesIO(cs.contact_sheet(frames, tile_width=160)))
    assert sheet.format == "JPEG"
    cols = math.ceil(math.sqrt(len(frames)))
    cell_w, cell_h = 160 + cs.PAD, 90 + cs.CAPTION_H + cs.PAD
    for i, colour in enumerate(colours):
        x, y = cs.PAD + (i % cols) * cell_w, cs.PAD + (i // cols) * cell_h
        assert sheet.getpixel((x + 80, y + 45)) == near(colour)
        caption = sheet.crop((x, y + 90, x + 160, y + 90 + cs.CAPTION_H)).convert("L")
        assert caption.getextrema()[1] > 150  # text drawn on the dark band
    blank = sheet.crop((cs.PAD + 2 * cell_w, cs.PAD + cell_h, cs.PAD + 3 * cell_w - cs.PAD, 2 * cell_h))
    assert blank.convert("L").getextrema()[1] < 60  # the sixth cell of the grid is empty


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("crash", ["in the second frame", "before labels.json", "while swapping the folder"])
def test_a_crash_while_saving_leaves_the_previous_frames_whole(tmp_path: Path, monkeypatch, crash: str) -> None:
    out = tmp_path / "frames"
    save_frames([(0.0, "first", _solid((250, 10, 10))), (1.5, "event", _solid((10, 250, 10))),
                 (2.967, "last", _solid((10, 10, 250)))], out)
    before = _contents(out)
    newer = [(0.5 * i, "fill", _solid((40 * i, 200, 40))) for i in range(4)]
    written: list[str] = []
    real_write, real_rename = sampler.write_atomic, os.rename

    def crashing_write(path: Path, data: bytes) -> None:
        written.append(path.name)
        if crash == "in the second frame" and len(written) == 2:
            path.write_bytes(data[: len(data) // 2])  # half a file, then the process dies
            raise OSError("simulated crash")
        if crash == "before labels.json" and path.name == "labels.json":
            raise OSError("simulated crash")
        real_write(path, data)

    def crashing_rename(source, target) -> None:
        if crash == "while swapping the folder" and Path(target) == out and Path(source).name.endswith(".part"):
            raise OSError("simulated crash")
        real_rename(source, target)

    monkeypatch.setattr(sampler, "write_atomic", crashing_write)
    monkeypatch.setattr(os, "rename", crashing_rename)
    with pytest.raises(OSError, match="simulated crash"):
        save_frames(newer, out)
    assert written, "the crash must come after a write began"
    # the previous frames and labels, byte for byte, and nothing half-written or temporary anywhere
    assert _contents(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["frames"]
    monkeypatch.undo()
    assert [label["file"] for label in save_frames(newer, out)] == ["f00.jpg", "f01.jpg", "f02.jpg", "f03.jpg"]
    assert sorted(_contents(out)) == ["f00.jpg", "f01.jpg", "f02.jpg", "f03.jpg", "labels.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["frames"]
