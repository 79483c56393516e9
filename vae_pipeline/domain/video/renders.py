"""The `renders` stage's work on each video: its facts, the judge's frames as JPEG, a contact sheet.

Videos are decoded on worker threads, one per core, so both cores stay busy for the whole step
(FFmpeg, libjpeg and libswscale release the GIL). Each judge frame is encoded to JPEG and
shrunk to its sheet tile on the worker as soon as it is decoded, so no full-size frame is
kept; the calling thread only writes the files, and its waits on the disk overlap the
workers' decoding. Each video is decoded on one thread when several run side by side, like
`ffmpeg -threads 1` with one clip per core: no time lost handing frames between threads.
Pillow's JPEG encoder holds the GIL (and stalls the other workers), so frames are encoded with
simplejpeg, which does not.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import av
from PIL import Image

from vae_pipeline.domain.video.contact_sheet import TILE_WIDTH, contact_sheet
from vae_pipeline.domain.errors import unforeseen
from vae_pipeline.domain.files import write_atomic
from vae_pipeline.domain.video.sampler import encode_frame, write_frames
from vae_pipeline.domain.video.video_facts import Sampler, VideoAnalysis, analyse_video, failed, map_in_order, rgbx_array

CONTACT_SHEET = "contact.jpg"
VIDEO = "out.mp4"


@dataclass(frozen=True)
class RenderJob:
    video: Path
    sample: Sampler
    frames_dir: Path  # gets f00.jpg..., labels.json and contact.jpg
    jpeg_quality: int


@dataclass(frozen=True)
class Rendered:
    facts: dict
    frames: list[dict]  # the judge's frames written, as labels: {"file", "t_s", "reason"}
    contact_sheet: Path | None  # None when no frame could be taken
    error: str | None = None  # an error no check foresaw: the episode is made invalid


def crashed(exc: Exception) -> Rendered:
    """What a job that raised gives: no facts, and the error in one line; the others go on."""
    reason = unforeseen(exc, VIDEO).reason
    return Rendered(failed(reason).facts, [], None, reason)


def _jpeg_and_tile(quality: int, frame: av.VideoFrame, turns: int) -> tuple[bytes, Image.Image]:
    """What a judge frame is kept as, the moment it is decoded: its JPEG and its sheet tile."""
    tile = rgbx_array(frame, turns, TILE_WIDTH)
    return (encode_frame(rgbx_array(frame, turns), quality),
            Image.frombuffer("RGBX", tile.shape[1::-1], tile, "raw", "RGBX", 0, 1).convert("RGB"))


def take_frames(job: RenderJob, decoder_threads: int = 0) -> VideoAnalysis:
    """Decode `job.video` once: its facts, and each judge frame as (JPEG bytes, tile)."""
    return analyse_video(job.video, job.sample, decoder_threads=decoder_threads,
                         take=partial(_jpeg_and_tile, job.jpeg_quality))


def write_outputs(job: RenderJob, analysis: VideoAnalysis) -> Rendered:
    """Write the frames, their labels and the contact sheet of a `take_frames` analysis."""
    if not analysis.frames:
        return Rendered(analysis.facts, [], None)
    labels = write_frames([(t_s, reason, jpeg) for t_s, reason, (jpeg, _) in analysis.frames], job.frames_dir)
    sheet = job.frames_dir / CONTACT_SHEET
    write_atomic(sheet, contact_sheet([(t_s, reason, small) for t_s, reason, (_, small) in analysis.frames]))
    return Rendered(analysis.facts, labels, sheet)


def iter_renders(jobs: Sequence[RenderJob], workers: int) -> Iterator[Rendered]:
    """Every job rendered and written, in order, `workers` videos decoding at once: one decoder
    thread each while others run beside it; the last video (or a lone one) gets FFmpeg's own
    threads, so no core idles at the end of the step."""
    last = len(jobs) - 1

    def take(indexed: tuple[int, RenderJob]) -> VideoAnalysis | Exception:
        index, job = indexed
        try:
            return take_frames(job, decoder_threads=1 if workers > 1 and index < last else 0)
        except Exception as exc:  # noqa: BLE001 — one video's error never stops the others
            return exc

    for job, analysis in zip(jobs, map_in_order(take, enumerate(jobs), workers), strict=True):
        try:
            rendered = crashed(analysis) if isinstance(analysis, Exception) else write_outputs(job, analysis)
        except Exception as exc:  # noqa: BLE001 — nor does an error writing its frames
            rendered = crashed(exc)
        yield rendered
