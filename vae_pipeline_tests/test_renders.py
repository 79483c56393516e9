"""The `renders` step on the sample runs: facts, frame times and frame pictures pinned to what the
generator planted (its plan's variant, brief and clip sizes), not to what the code measured before."""

import io
import json
import math
import tarfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import zstandard
from PIL import Image

from vae_pipeline.domain.video import contact_sheet as cs
from vae_pipeline.domain.video.renders import RenderJob, iter_renders
from vae_pipeline.domain.verdicts.rubric import load_rubric, rubric_in_force
from vae_pipeline.domain.video.sampler import sample_times
from vae_pipeline.sample.generator import FPS, SIZES, EpisodePlan
from vae_pipeline.sample.video import planted_picture
from vae_pipeline_tests.conftest import META

NOT_DELIVERED = ("no_video", "harness_403")
FRAME = 1 / FPS


def planted(plan: EpisodePlan) -> dict:
    """What the generator put in the episode's out.mp4 (see generator._video)."""
    brief, variant = plan.brief, plan.variant
    aspect = brief["aspect"]
    if variant == "wrong_aspect":
        aspect = "9:16" if aspect != "9:16" else "16:9"
    duration = float(brief["duration_s"]) + (3.0 if variant == "long" else 0.0)
    black = [(1.0, 2.2)] if variant == "black" else []
    freeze = {"freeze": [(1.0, 3.6)]}.get(variant, [])
    if variant == "held_freeze" and brief.get("hold"):
        freeze = [(brief["hold"]["start_s"], duration)]
    return {"aspect": aspect, "size": SIZES[aspect], "duration": duration, "black": black, "freeze": freeze,
            "loop": bool(brief.get("loop"))}


def assert_ranges(measured: list[list[float]], expected: list[tuple[float, float]]) -> None:
    assert len(measured) == len(expected), (measured, expected)
    for (start, end), (want_start, want_end) in zip(measured, expected):
        assert abs(start - want_start) <= 2 * FRAME + 1e-9 and abs(end - want_end) <= 2 * FRAME + 1e-9, measured


def out_mp4(runs: Path, plan: EpisodePlan, into: Path) -> Path:
    """The episode's delivered video: from its run folder, or unpacked from its archive."""
    series = runs / plan.series
    if not plan.archive:
        return series / plan.episode_id / "out.mp4"
    raw = zstandard.ZstdDecompressor().decompressobj().decompress((series / f"{plan.episode_id}.tar.zst").read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        data = tar.extractfile("out.mp4").read()
    path = into / f"{plan.episode_id}.mp4"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def rendered(sample_runs, tmp_path_factory):
    """The renders step over every delivered sample video, as the asset runs it (2 workers)."""
    root = tmp_path_factory.mktemp("renders")
    sampler = load_rubric(rubric_in_force(META)).sampler
    plans = [p for p in sample_runs.episodes if p.bad is None and p.variant not in NOT_DELIVERED]
    jobs = [RenderJob(out_mp4(sample_runs.root, p, root), partial(sample_times, brief=p.brief, frames=sampler.frames,
                                                                 min_gap_s=sampler.min_gap_s),
                      root / "frames" / p.episode_id, sampler.jpeg_quality) for p in plans]
    return plans, jobs, list(iter_renders(jobs, workers=2))


def test_facts_are_the_planted_ones(rendered):
    plans, _, results = rendered
    assert {p.variant for p in plans} >= {"clean", "black", "freeze", "held_freeze", "wrong_aspect", "long",
                                         "undecodable"}
    for plan, result in zip(plans, results, strict=True):
        facts = result.facts
        if plan.variant == "undecodable":
            assert facts["video_ok"] is False and facts["error"], plan.episode_id
            assert result.frames == [] and result.contact_sheet is None
            continue
        want = planted(plan)
        assert facts["video_ok"] is True and facts["error"] is None, plan.episode_id
        assert (facts["width"], facts["height"], facts["aspect"]) == (*want["size"], want["aspect"])
        assert facts["fps"] == FPS and facts["video_duration_s"] == want["duration"]
        # every planted segment, within the contract's 2 frames (a black run is frozen too)
        assert_ranges(facts["black_ranges"], want["black"])
        assert_ranges(facts["freeze_ranges"], sorted(want["black"] + want["freeze"]))
        frozen = sum(e - s for s, e in want["black"] + want["freeze"])
        assert facts["still"] is (frozen >= 0.9 * want["duration"])
        # a looping clip's last frame lands next to its first; a straight one ends far from it
        assert (facts["loop_seam"] < 12.0) is want["loop"], (plan.episode_id, facts["loop_seam"])


def shown_at(t_s: float) -> float:
    """Time of the frame a published (3-decimal) sample time shows: the last frame at or before it."""
    return math.floor((t_s + 0.0005) * FPS + 1e-9) / FPS


def test_frames_are_the_pictures_shown_at_the_sampled_times(rendered):
    plans, jobs, results = rendered
    for plan, job, result in zip(plans, jobs, results, strict=True):
        if plan.variant == "undecodable":
            continue
        want = planted(plan)
        labels = json.loads((job.frames_dir / "labels.json").read_text())
        times = sample_times(want["duration"], FPS, plan.brief)
        assert labels == result.frames == [{"file": f"f{i:02d}.jpg", **t} for i, t in enumerate(times)]
        assert len(labels) == 14
        for label in labels:
            image = Image.open(job.frames_dir / label["file"])
            assert image.format == "JPEG" and image.size == want["size"]
            got = np.asarray(image.convert("RGB")).astype(float)
            t = shown_at(label["t_s"])
            drawn = {dt: planted_picture(t + dt, want["duration"], *want["size"], black=want["black"],
                                         freeze=want["freeze"], loop=want["loop"]).astype(float)
                     for dt in (-2 * FRAME, 0.0, 2 * FRAME)}
            error = np.abs(got - drawn[0.0]).mean()
            assert error < 4.0, (plan.episode_id, label, error)  # H.264 and JPEG loss: about 1-3
            # ... and closer to it than to the pictures two frames either side (where those differ)
            assert all(error <= np.abs(got - d).mean() for d in drawn.values()), (plan.episode_id, label)


def test_contact_sheet_tiles_the_frames_in_order(rendered):
    plans, jobs, results = rendered
    for plan, job, result in zip(plans, jobs, results, strict=True):
        if plan.variant == "undecodable":
            continue
        width, height = planted(plan)["size"]
        sheet = Image.open(result.contact_sheet)
        tile_h = round(cs.TILE_WIDTH * height / width)
        cols = rows = 4  # 14 frames on a near-square grid
        assert sheet.format == "JPEG"
        assert sheet.size == (cols * (cs.TILE_WIDTH + cs.PAD) + cs.PAD, rows * (tile_h + cs.CAPTION_H + cs.PAD) + cs.PAD)
        for i, label in enumerate(result.frames):
            x, y = cs.PAD + (i % cols) * (cs.TILE_WIDTH + cs.PAD), cs.PAD + (i // cols) * (tile_h + cs.CAPTION_H + cs.PAD)
            tile = np.asarray(sheet.crop((x, y, x + cs.TILE_WIDTH, y + tile_h))).astype(float)
            frame = np.asarray(Image.open(job.frames_dir / label["file"]).convert("RGB").resize(
                (cs.TILE_WIDTH, tile_h), Image.Resampling.BOX)).astype(float)
            assert np.abs(tile - frame).mean() < 6.0, (plan.episode_id, i)


def test_one_worker_or_two_give_the_same_files(rendered, tmp_path):
    plans, jobs, results = rendered
    alone = [RenderJob(j.video, j.sample, tmp_path / j.frames_dir.name, j.jpeg_quality) for j in jobs]
    again = list(iter_renders(alone, workers=1))
    assert [r.facts for r in again] == [r.facts for r in results]
    for job, other in zip(jobs, alone):
        names = sorted(p.name for p in job.frames_dir.glob("*")) if job.frames_dir.exists() else []
        assert names == (sorted(p.name for p in other.frames_dir.glob("*")) if other.frames_dir.exists() else [])
        assert all((job.frames_dir / n).read_bytes() == (other.frames_dir / n).read_bytes() for n in names)
