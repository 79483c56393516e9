"""The mechanical facts of a video (contract 2), and the judge's frames, in one decode pass.

Every threshold is applied to the "analysis picture": full-range luma (black 0, white 255)
area-averaged down to 160 px wide, in display orientation. libswscale does the range
conversion and the area averaging in one call, so a 1080p frame never exists as RGB or as a
full-size numpy array; only the frames the sampler asks for are converted to RGB pictures.

Frame times come from pts, in presentation order: a frame lasts until the next frame's pts
(never its packet's duration, which with B-frames belongs to another frame); the last one lasts
its packet's duration, else the stream's average frame duration. Frames an edit list hides are
decoded by FFmpeg (they are needed for the first shown one) but are not frames of the video.

Several videos are decoded side by side with one decoder thread each (`decoder_threads=1`):
on a busy machine that wastes nothing on frame-thread hand-offs, the way `ffmpeg -threads 1`
runs one clip per core. A video decoded alone lets FFmpeg pick its threads.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import av
import numpy as np
from av.video.reformatter import Interpolation, VideoReformatter
from PIL import Image

ANALYSIS_WIDTH = 160
BLACK_LUMA = 32  # a pixel is black at luma <= 32 (full range)
BLACK_SHARE = 0.98  # ... and a frame is black when this share of its pixels are
MIN_BLACK_S = 0.1
CELL = 8  # freeze compares 8x8-pixel cells ...
CELL_DIFF = 2.0  # ... and a cell whose mean absolute difference exceeds this is motion
MIN_FREEZE_S = 0.5
BATCH = 32  # analysis pictures judged together
STILL_SHARE = 0.9
ASPECTS = {"16:9": 16 / 9, "9:16": 9 / 16, "1:1": 1.0}
ASPECT_TOLERANCE = 0.02
# Sample times are published rounded to 3 decimals (and frame times carry float noise): the
# frame at 1.3333 s is the one a time published as 1.333 names, so "time <= t" allows half a
# millisecond.
TIME_SLACK_S = 0.0005
# Durations compared against a threshold are rounded to 3 decimals first; this absorbs the
# float error left after that (15 frames at 1/30 s last 0.5 s, not 0.49999...).
EPS = 1e-6
# Frames larger than 8K UHD are not decoded: one 16000x16000 frame alone is ~1 GB of YUV and RGB
# planes, and no delivery of the harness is near that size.
MAX_PIXELS = 7680 * 4320
# Decoders hand frames out in presentation order; a stream whose pts disagree (a decoder that
# learnt its reorder depth late) is put back in order within this many frames.
REORDER_WINDOW = 4

Sampler = Callable[[float, float], list[dict]]
Frame = tuple[float, str, Image.Image]  # (t_s, reason, picture) by default, see `analyse_video`
Take = Callable[[av.VideoFrame, int], object]
Job = TypeVar("Job")
Result = TypeVar("Result")

FACT_KEYS = (
    "video_ok", "video_duration_s", "fps", "width", "height", "aspect",
    "black_ranges", "freeze_ranges", "still", "loop_seam", "error",
)


@dataclass
class VideoAnalysis:
    """The facts of one video and the judge's frames taken in the same pass."""

    facts: dict
    frames: list[Frame] = field(default_factory=list)


def failed(reason: str) -> VideoAnalysis:
    """Nothing decoded: every fact unknown, and the reason why."""
    facts = dict.fromkeys(FACT_KEYS)
    facts.update(video_ok=False, error=reason)
    return VideoAnalysis(facts=facts)


def _reason(exc: BaseException) -> str:
    """One line, without the file path FFmpeg likes to append."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def aspect_label(width: int, height: int) -> str:
    """`16:9`, `9:16` or `1:1` within 2 %, else the reduced `W:H`."""
    ratio = width / height
    for label, target in ASPECTS.items():
        if abs(ratio / target - 1) <= ASPECT_TOLERANCE:
            return label
    g = math.gcd(width, height)
    return f"{width // g}:{height // g}"


def _quarter_turns(frame: av.VideoFrame) -> int:
    """Counter-clockwise quarter turns the display matrix asks for (0 when there is none)."""
    return round(frame.rotation / 90) % 4


def rgbx_array(frame: av.VideoFrame, turns: int, width: int | None = None) -> np.ndarray:
    """The picture as a player shows it (rotation applied), as (height, width, 4) RGBX bytes;
    full size, or area-averaged to `width` px wide.

    libswscale converts straight to RGB0 — the same RGB as `frame.to_image()` — and the array
    is a view of that frame, copied only when its rows are padded or it had to be turned.
    """
    if width:
        shown_w, shown_h = (frame.height, frame.width) if turns % 2 else (frame.width, frame.height)
        height = max(1, round(width * shown_h / shown_w))
        coded = (height, width) if turns % 2 else (width, height)
        rgb0 = frame.reformat(width=coded[0], height=coded[1], format="rgb0", interpolation=Interpolation.AREA,
                              threads=1)
    else:
        rgb0 = frame.reformat(format="rgb0", threads=1)
    plane = rgb0.planes[0]
    rows = np.frombuffer(plane, np.uint8).reshape(rgb0.height, plane.line_size // 4, 4)[:, : rgb0.width]
    return np.ascontiguousarray(np.rot90(rows, turns) if turns else rows)


def display_picture(frame: av.VideoFrame, turns: int) -> Image.Image:
    """The full-size RGB picture as a player shows it (rotation applied)."""
    rgbx = rgbx_array(frame, turns)
    return Image.frombuffer("RGBX", rgbx.shape[1::-1], rgbx, "raw", "RGBX", 0, 1).convert("RGB")


class _CellDiff:
    """Per-cell mean absolute difference of analysis pictures, edge cells included.

    An analysis picture is rarely a multiple of 8 high (160x90), so the last row of cells is
    partial; it is averaged over the pixels it has rather than dropped, so motion in the
    bottom rows still counts.
    """

    def __init__(self, shape: tuple[int, int]):
        h, w = shape
        self.rows = np.arange(0, h, CELL)
        self.cols = np.arange(0, w, CELL)
        heights = np.diff(np.append(self.rows, h))
        widths = np.diff(np.append(self.cols, w))
        self.limit = CELL_DIFF * np.outer(heights, widths)  # a cell sum above this is motion

    def differs(self, pictures: np.ndarray, other: np.ndarray) -> list[bool]:
        """For each of `pictures` (n, h, w): whether it differs from `other` (n or 1, h, w)."""
        diff = np.abs(pictures.astype(np.int16) - other)  # a cell sums to at most 64 * 255: fits int16
        sums = np.add.reduceat(np.add.reduceat(diff, self.rows, axis=1), self.cols, axis=2)
        return (sums > self.limit).any(axis=(1, 2)).tolist()


def _runs(flags: Iterable[bool]) -> list[tuple[int, int]]:
    """Maximal runs of True as (first index, last index)."""
    runs, start = [], None
    for i, flag in enumerate(flags):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, i))
    return runs


@dataclass
class _Pass:
    """What one decode pass accumulates: small per-frame numbers, never the frames.

    Analysis pictures are judged BATCH at a time (one numpy call for the batch, not a dozen per
    frame); the freeze anchors still follow the definition frame by frame, see `judge`.
    """

    pts: list[int] = field(default_factory=list)  # in presentation order
    last_duration: int = 0  # the last frame's packet duration (0: unknown), in pts units
    black: list[bool] = field(default_factory=list)
    freeze_starts: list[int] = field(default_factory=list)  # index of each freeze-run anchor
    first: np.ndarray | None = None
    last: np.ndarray | None = None
    anchor: np.ndarray | None = None
    cells: _CellDiff | None = None
    pending: list[np.ndarray] = field(default_factory=list)  # pictures not judged yet

    def add(self, pts: int, duration: int | None, picture: np.ndarray) -> None:
        self.pts.append(pts)
        self.last_duration = duration or 0
        self.pending.append(picture)
        if len(self.pending) == BATCH:
            self.judge()

    def judge(self) -> None:
        """Black flags and freeze anchors for the pending pictures."""
        if not self.pending:
            return
        batch = np.stack(self.pending)
        self.pending = []
        base = len(self.pts) - len(batch)  # frame index of batch[0]
        if self.first is None:
            self.first, self.cells = batch[0].copy(), _CellDiff(batch[0].shape)
        dark = np.count_nonzero(batch.reshape(len(batch), -1) <= BLACK_LUMA, axis=1)
        self.black += (dark >= BLACK_SHARE * batch[0].size).tolist()
        # each picture against the one before it: that is the comparison the definition makes
        # whenever the one before is its run's anchor (always, while the video moves)
        before = np.concatenate((batch[:1] if self.last is None else self.last[None], batch[:-1]))
        steps = self.cells.differs(batch, before)
        k = 0
        while k < len(batch):
            if self.anchor is None or (self.freeze_starts[-1] == base + k - 1 and steps[k]):
                self._anchor_at(batch, base, k)
                k += 1
                continue
            # a run goes on: the rest of the batch against its anchor at once
            moved = self.cells.differs(batch[k:], self.anchor[None])
            if True not in moved:
                break
            k += moved.index(True)
            self._anchor_at(batch, base, k)
            k += 1
        self.last = batch[-1].copy()

    def _anchor_at(self, batch: np.ndarray, base: int, k: int) -> None:
        self.anchor = batch[k].copy()
        self.freeze_starts.append(base + k)


def _ranges(runs: list[tuple[int, int]], times: np.ndarray, ends: np.ndarray,
            min_s: float) -> list[list[float]]:
    """[first frame's time, last frame's end] of each run lasting at least `min_s`."""
    out = []
    for i, j in runs:
        start, end = round(float(times[i]), 3), round(float(ends[j]), 3)
        if end - start >= min_s - EPS:
            out.append([start, end])
    return out


def _seconds(pts: np.ndarray | int, origin: int, time_base: Fraction) -> np.ndarray | float:
    """Seconds from the first frame: pts counted in integers, scaled once."""
    return (pts - origin) * time_base.numerator / time_base.denominator


def _average_duration(stream: av.video.stream.VideoStream) -> float:
    """The stream's average frame duration in seconds (nan when it states no rate)."""
    rate = stream.average_rate or stream.guessed_rate
    return 1 / float(rate) if rate else math.nan


def _facts(p: _Pass, time_base: Fraction, average_s: float, width: int, height: int,
           error: str | None) -> dict:
    """Turn a pass's per-frame numbers into the contract's facts.

    A frame lasts until the next one's pts; the last lasts its packet's duration, else the
    stream's average frame duration, else (the contract is silent) the median step.
    """
    times = _seconds(np.array(p.pts, dtype=np.int64), p.pts[0], time_base)
    steps = np.diff(times)
    step = float(np.median(steps)) if steps.size else math.nan
    if p.last_duration > 0:
        last = _seconds(p.last_duration, 0, time_base)
    else:
        last = average_s if average_s > 0 else step
    ends = np.append(times[1:], times[-1] + last)
    if math.isnan(step):
        step = last
    duration_s = round(float(ends[-1]), 3) if not math.isnan(last) else None

    freeze_runs = [
        (start, (p.freeze_starts[k + 1] - 1) if k + 1 < len(p.freeze_starts) else len(p.pts) - 1)
        for k, start in enumerate(p.freeze_starts)
    ]
    black_ranges = _ranges(_runs(p.black), times, ends, MIN_BLACK_S)
    freeze_ranges = _ranges(freeze_runs, times, ends, MIN_FREEZE_S)
    frozen = sum(end - start for start, end in freeze_ranges)
    return {
        "video_ok": True,
        "video_duration_s": duration_s,
        "fps": round(1 / step, 3) if step and not math.isnan(step) else None,
        "width": width,
        "height": height,
        "aspect": aspect_label(width, height),
        "black_ranges": black_ranges,
        "freeze_ranges": freeze_ranges,
        "still": bool(duration_s) and frozen >= STILL_SHARE * duration_s - EPS,
        "loop_seam": round(float(np.abs(p.last.astype(np.int16) - p.first).mean()), 3),
        "error": error,
    }


class _Decoded:
    """The frames of a stream in presentation order, as FFmpeg decodes them.

    Frames an edit list hides are decoded (a cut's first shown frame needs the keyframe before
    it) and dropped by FFmpeg, which flags their packets: `hidden` counts them. A frame whose
    pts comes after frames it should precede by more than `REORDER_WINDOW` cannot be put in
    order: it is left out, and `late` counts it.
    """

    def __init__(self, container: av.container.InputContainer, stream: av.video.stream.VideoStream):
        self.container, self.stream = container, stream
        self.hidden = 0
        self.late = 0
        self._count = 0  # frames decoded: the order among equal pts
        self._shown: int | None = None  # pts of the last frame handed out

    def __iter__(self) -> Iterator[av.VideoFrame]:
        waiting: list[tuple[int, int, av.VideoFrame]] = []  # a heap by (pts, decode order)
        failure = None
        try:
            for packet in self.container.demux(self.stream):
                self.hidden += packet.is_discard
                for frame in packet.decode():
                    if frame.pts is None:  # the caller stops there: the frames before it first
                        yield from self._release(waiting, 0)
                        yield frame
                        return
                    heapq.heappush(waiting, (frame.pts, self._count, frame))
                    self._count += 1
                    yield from self._release(waiting, REORDER_WINDOW)
        except (av.FFmpegError, OSError, ValueError) as exc:
            failure = exc  # the frames decoded before the break are frames of the video ...
            try:  # ... those the decoder still holds for reordering too, as ffmpeg shows them
                for frame in self.stream.codec_context.decode(None):
                    heapq.heappush(waiting, (frame.pts, self._count, frame))
                    self._count += 1
            except (av.FFmpegError, OSError, ValueError):
                pass
        yield from self._release(waiting, 0)
        if failure is not None:
            raise failure

    def _release(self, waiting: list, keep: int) -> Iterator[av.VideoFrame]:
        """The earliest waiting frames until `keep` are left; one earlier than a frame already
        handed out is too late for its place."""
        while len(waiting) > keep:
            pts, _, frame = heapq.heappop(waiting)
            if self._shown is not None and pts < self._shown:
                self.late += 1
                continue
            self._shown = pts
            yield frame


def _metadata_guess(stream: av.video.stream.VideoStream) -> tuple[float, float] | None:
    """Duration and fps the container claims, to place the sample times before decoding."""
    average_s = _average_duration(stream)
    if stream.duration is None or stream.time_base is None or math.isnan(average_s):
        return None
    duration = float(stream.duration * stream.time_base)
    return (duration, 1 / average_s) if duration > 0 else None


class _Grabber:
    """Takes the frame displayed at each wanted time, holding one decoded frame back.

    The frame displayed at t is the last one with time <= t, which is only known once the
    next frame (or the end) arrives; so the previous frame is held, never all of them.
    """

    def __init__(self, wanted: Iterable[float], take: Take, turns: int = 0):
        self.pending = sorted(set(wanted))
        self.take = take
        self.turns = turns
        self.got: dict[float, object] = {}
        self.held: av.VideoFrame | None = None

    def feed(self, frame: av.VideoFrame, t: float) -> None:
        picture = None
        while self.pending and self.pending[0] + TIME_SLACK_S < t and self.held is not None:
            if picture is None:
                picture = self.take(self.held, self.turns)
            self.got[self.pending.pop(0)] = picture
        self.held = frame

    def finish(self) -> None:
        if self.held is not None and self.pending:
            picture = self.take(self.held, self.turns)
            self.got.update(dict.fromkeys(self.pending, picture))
            self.pending = []


def _open_video(path: Path, decoder_threads: int) -> tuple[av.container.InputContainer,
                                                           av.video.stream.VideoStream]:
    """Open for decoding: `decoder_threads` 0 lets FFmpeg use frame and slice threads."""
    container = av.open(str(path))
    if not container.streams.video:
        container.close()
        raise _NoVideo
    stream = container.streams.video[0]
    if decoder_threads:
        stream.thread_count = decoder_threads
    else:
        stream.thread_type = "AUTO"
    return container, stream


class _NoVideo(Exception):
    """The file opened but holds no video stream."""


def _seek_grab(path: Path, wanted: list[float], origin: int, take: Take, turns: int,
               decoder_threads: int) -> dict[float, object]:
    """Second pass for sample times the metadata guess missed: one seek per time (`origin`
    is the first frame's pts)."""
    got: dict[float, object] = {}
    container, stream = _open_video(path, decoder_threads)
    time_base = stream.time_base
    with container:
        for t in sorted(wanted):
            for start in (origin + int(t / time_base), origin):  # from the start only if the seek overshot
                container.seek(start, stream=stream, backward=True)
                grab = _Grabber([t], take, turns)
                for frame in _Decoded(container, stream):
                    if frame.pts is None:
                        break
                    ft = _seconds(frame.pts, origin, time_base)
                    if grab.held is None and ft > t + TIME_SLACK_S:
                        break
                    grab.feed(frame, ft)
                    if not grab.pending:
                        break
                else:
                    grab.finish()
                if t in grab.got:
                    break
            got.update(grab.got)
    return got


@dataclass
class _Scan:
    """The outcome of the first pass."""

    acc: _Pass
    grab: _Grabber
    width: int | None = None  # display size
    height: int | None = None
    turns: int = 0
    origin: int = 0  # pts of the first frame: every time is measured from it
    time_base: Fraction = Fraction(1)
    error: str | None = None
    broken: bool = False  # the stream broke off: decoding failed, or frames are missing


def _too_large(width: int, height: int, max_pixels: int) -> str | None:
    if width * height <= max_pixels:
        return None
    return f"frame size {width}x{height} is over the limit of {max_pixels:,} pixels (8K UHD): not decoded"


def _scan(container: av.container.InputContainer, stream: av.video.stream.VideoStream,
          wanted: list[float], take: Take, max_pixels: int) -> _Scan:
    """The one decode pass: per-frame analysis numbers, plus the wanted frames taken."""
    reformatter = VideoReformatter()
    scan = _Scan(acc=_Pass(), grab=_Grabber(wanted, take), time_base=stream.time_base or Fraction(1))
    decoded = _Decoded(container, stream)
    coded = None
    try:
        for frame in decoded:
            if frame.pts is None:
                scan.error = "frame without a timestamp"
                break
            too_large = _too_large(frame.width, frame.height, max_pixels)
            if too_large is not None:  # the stream grew past what its header said
                scan.error = too_large
                break
            if coded is None:
                scan.turns = _quarter_turns(frame)
                scan.grab.turns = scan.turns
                w, h = frame.width, frame.height
                scan.width, scan.height = (h, w) if scan.turns % 2 else (w, h)
                small_h = max(1, round(ANALYSIS_WIDTH * scan.height / scan.width))
                coded = (small_h, ANALYSIS_WIDTH) if scan.turns % 2 else (ANALYSIS_WIDTH, small_h)
                scan.origin = frame.pts
            small = reformatter.reformat(frame, width=coded[0], height=coded[1], format="gray",
                                         interpolation=Interpolation.AREA, threads=1).to_ndarray()
            if scan.turns:
                small = np.ascontiguousarray(np.rot90(small, scan.turns))
            scan.acc.add(frame.pts, frame.duration, small)
            scan.grab.feed(frame, _seconds(frame.pts, scan.origin, scan.time_base))
    except (av.FFmpegError, OSError, ValueError) as exc:
        scan.error = f"decoding stopped after {len(scan.acc.pts)} frames: {_reason(exc)}"
        scan.broken = True
    scan.acc.judge()
    expected = stream.frames - decoded.hidden  # the frames the edit list shows
    if scan.error is None and decoded.late:
        scan.error = f"frames decoded too late for presentation order, left out: {decoded.late}"
    if scan.error is None and stream.frames and 0 < len(scan.acc.pts) < expected:
        scan.error = f"decoded {len(scan.acc.pts)} of {expected} frames"
        scan.broken = True
    scan.grab.finish()
    return scan


def analyse_video(path: Path, sample: Sampler | None = None, *, decoder_threads: int = 0,
                  take: Take = display_picture, max_pixels: int = MAX_PIXELS) -> VideoAnalysis:
    """Measure the facts of `path` and take the frames `sample(duration_s, fps)` asks for.

    Never raises on bad input: a file where nothing decodes gives `video_ok` false and an
    `error`; a file that breaks part-way gives the facts up to the break and an `error` note.
    A stream whose frames are over `max_pixels` (its coded size, read before any decoding) is not
    decoded. `decoder_threads` 0 lets FFmpeg choose; 1 suits a video decoded beside others. Each frame
    is kept as `take(frame, quarter_turns)` makes it (by default its RGB picture), as soon as
    it is decoded: a caller that only writes JPEGs never holds the full-size frames.
    """
    path = Path(path)
    if not path.is_file():
        return failed("no such file")
    if path.stat().st_size == 0:
        return failed("empty file")
    try:
        container, stream = _open_video(path, decoder_threads)
    except _NoVideo:
        return failed("no video stream")
    except (av.FFmpegError, OSError) as exc:
        return failed(f"cannot open: {_reason(exc)}")
    with container:
        too_large = _too_large(stream.codec_context.width, stream.codec_context.height, max_pixels)
        if too_large is not None:
            return failed(too_large)
        guess = _metadata_guess(stream)
        planned = [item["t_s"] for item in sample(*guess)] if sample and guess else []
        scan = _scan(container, stream, planned, take, max_pixels)
        average_s = _average_duration(stream)
    if scan.broken and not decoder_threads:
        # FFmpeg's frame threads drop the frames in flight where a stream breaks off, which one
        # thread decodes: the facts of a broken file must not depend on the threads
        return analyse_video(path, sample, decoder_threads=1, take=take, max_pixels=max_pixels)
    if not scan.acc.pts:
        return failed(scan.error or "no frame decoded")
    facts = _facts(scan.acc, scan.time_base, average_s, scan.width, scan.height, scan.error)
    if sample is None or facts["video_duration_s"] is None or facts["fps"] is None:
        return VideoAnalysis(facts=facts)
    final = sample(facts["video_duration_s"], facts["fps"])
    pictures = dict(scan.grab.got)
    missing = [item["t_s"] for item in final if item["t_s"] not in pictures]
    if missing:
        try:
            pictures.update(_seek_grab(path, missing, scan.origin, take, scan.turns, decoder_threads))
        except (av.FFmpegError, OSError, ValueError) as exc:
            facts["error"] = facts["error"] or f"frame extraction failed: {_reason(exc)}"
    frames = [(item["t_s"], item["reason"], pictures[item["t_s"]])
              for item in final if item["t_s"] in pictures]
    return VideoAnalysis(facts=facts, frames=frames)


def map_in_order(work: Callable[[Job], Result], jobs: Iterable[Job], workers: int) -> Iterator[Result]:
    """`work(job)` for every job, results in input order, up to `workers` at once.

    At most 2 x `workers` jobs are running or waiting to be taken, so a caller that writes
    each result and drops it holds a bounded number of full-size frames, however many videos
    there are.

    Threads, not processes: decoding, scaling, JPEG encoding and resampling run in FFmpeg,
    libjpeg and Pillow with the GIL released, and threads need not pickle the samplers or
    ship full-size frames back between processes (measured on 2 cores in
    benchmarks/bench_facts.py).
    """
    jobs = iter(jobs)
    if workers <= 1:
        yield from map(work, jobs)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[Result]] = deque()
        for job in jobs:
            pending.append(pool.submit(work, job))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def iter_analyses(paths_and_samplers: Iterable[tuple[Path, Sampler | None]],
                  workers: int) -> Iterator[VideoAnalysis]:
    """`analyse_video` over many files in input order, up to `workers` at once."""
    return map_in_order(lambda job: analyse_video(*job), paths_and_samplers, workers)


def analyse_many(paths_and_samplers: Iterable[tuple[Path, Sampler | None]],
                 workers: int) -> list[VideoAnalysis]:
    """All of `iter_analyses` as a list (every result's frames held at once)."""
    return list(iter_analyses(paths_and_samplers, workers))
