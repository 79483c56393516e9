"""Benchmark: the `renders` step against FFmpeg's own detectors and a bare decode, on delivery-size clips.

Makes 12 clips the size the harness delivers (1920x1080 @30 fps H.264, 10-12 s, with the sample
generator's planted black and frozen stretches; x264 preset as the generator's), then times, in
rounds that run all four back to back in a rotating order (ratios are taken within a round, and
CPU seconds are counted too: on a shared machine they move less than wall time):
  - ours: the `renders` step as the asset runs it (`iter_renders`, one worker per core): facts,
    the judge's 14 frames as JPEG files, a contact sheet per video;
  - ffmpeg filters: `ffmpeg -threads 1 -i CLIP -filter_threads 1 -vf blackdetect=d=0.1:pix_th=0.125,
    freezedetect=n=-60dB:d=0.5 -f null -`, one thread per clip, as many clips at once as cores;
  - ffmpeg decode only: the same without `-vf`;
  - ours with a process pool started for the step instead of threads (why the step uses threads).
Every ratio is printed; then FFmpeg's ranges are checked against ours where the definitions
coincide. FFmpeg is only a yardstick here; the package never calls it.

With --instructions it then counts, under valgrind's callgrind, the instructions the step and
the two ffmpeg commands execute on one clip: a ratio the machine's load does not move, and where
the step's instructions go, library by library; and what the two ways round its largest costs
would give: the analysis picture as an exact box average in numpy, the JPEGs from the decoded
planes.

With --baseline DIR (a checkout of another commit, e.g. made by `git worktree add`) it times
instead the step as this checkout and as DIR have it, each in a fresh interpreter, taking turns
in every round on the same clips (imports left out; with --instructions, counted on one clip
too), and checks that both give the same facts.

Run: python benchmarks/bench_facts.py [--clips 12] [--repeat 3] [--keep DIR] [--instructions] [--baseline DIR]
"""

import argparse
import json
import multiprocessing
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import av
import numpy as np
import simplejpeg
from av.video.reformatter import Interpolation, VideoReformatter

from vae_pipeline.domain.video.renders import RenderJob, iter_renders, take_frames, write_outputs
from vae_pipeline.domain.video.sampler import encode_frame, sample_times
from vae_pipeline.domain.video.video_facts import rgbx_array
from vae_pipeline.sample.generator import HD_FPS, HD_SIZES
from vae_pipeline.sample.video import write_video

WIDTH, HEIGHT = HD_SIZES["16:9"]
# (duration, planted segments) cycled over the clips, like the generator's video variants
PLANS = (
    dict(duration_s=11.0),
    dict(duration_s=11.0, black=[(1.0, 2.2)]),
    dict(duration_s=11.0, freeze=[(1.0, 3.6)]),
    dict(duration_s=10.0, loop=True),
    dict(duration_s=12.0, freeze=[(8.0, 12.0)]),
    dict(duration_s=11.0, black=[(6.0, 6.3)], freeze=[(9.0, 10.0)]),
)
BRIEF = {"success_criteria": [{"t_s": 4.5}], "events": [{"t_s": 3.2}],
         "beats": [{"start_s": 0.0, "end_s": 2.5}, {"start_s": 2.5, "end_s": 8.0}]}
FILTERS = "blackdetect=d=0.1:pix_th=0.125,freezedetect=n=-60dB:d=0.5"
JPEG_QUALITY = 90


def ffmpeg(clip: Path, *vf: str) -> str:
    """One clip on one thread to a null sink; return the log (where the detectors print)."""
    filters = ["-filter_threads", "1", "-vf", *vf] if vf else []
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-threads", "1", "-i", str(clip), *filters, "-f", "null", "-"]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stderr


def peer(clips: list[Path], workers: int, *vf: str) -> list[str]:
    """ffmpeg over every clip, `workers` processes at once (what a user would script)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda clip: ffmpeg(clip, *vf), clips))


def ours(jobs: list[RenderJob], workers: int) -> list:
    """The asset's step: every video's facts, 14 JPEG frames and contact sheet written."""
    for job in jobs:
        shutil.rmtree(job.frames_dir, ignore_errors=True)
    return list(iter_renders(jobs, workers))


def ours_processes(jobs: list[RenderJob], workers: int) -> list:
    """The same step with the decoding and encoding in worker processes instead of threads,
    started for the step (as an asset run would have to; spawned: the step's process has threads)."""
    for job in jobs:
        shutil.rmtree(job.frames_dir, ignore_errors=True)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        analyses = pool.map(partial(take_frames, decoder_threads=1), jobs)
        return [write_outputs(job, analysis) for job, analysis in zip(jobs, analyses)]


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (ffmpeg, pool workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def parse_detectors(log: str) -> tuple[list[list[float]], list[list[float]]]:
    """black and freeze ranges from blackdetect / freezedetect log lines; a freeze still on at
    the end has no freeze_end line, and ends with the clip (its Duration line)."""
    black = [[float(s), float(e)] for s, e in re.findall(r"black_start:([\d.]+) black_end:([\d.]+)", log)]
    starts = [float(x) for x in re.findall(r"freeze_start: ([\d.]+)", log)]
    ends = [float(x) for x in re.findall(r"freeze_end: ([\d.]+)", log)]
    if len(starts) == len(ends) + 1:
        h, m, sec = re.search(r"Duration: (\d+):(\d+):([\d.]+)", log).groups()
        ends.append(round(int(h) * 3600 + int(m) * 60 + float(sec), 3))
    return black, [[s, e] for s, e in zip(starts, ends)]


def compare(ours_ranges: list[list[float]], theirs: list[list[float]]) -> tuple[list, list, list]:
    """(agreeing pairs, ours only, ffmpeg only): ranges pair when both ends are within 2 frames."""
    tol = 2 / HD_FPS + 1e-6
    unmatched, agree, only_ours = list(theirs), [], []
    for r in ours_ranges:
        hit = next((t for t in unmatched if abs(t[0] - r[0]) <= tol and abs(t[1] - r[1]) <= tol), None)
        if hit:
            unmatched.remove(hit)
            agree.append((r, hit))
        else:
            only_ours.append(r)
    return agree, only_ours, unmatched


def make_clips(folder: Path, count: int) -> list[Path]:
    """`count` delivery-size clips in `folder`, reused when a kept folder already has them."""
    folder.mkdir(parents=True, exist_ok=True)
    clips = []
    for i in range(count):
        clip = folder / f"clip{i:02d}.mp4"
        if not clip.exists():
            write_video(clip, width=WIDTH, height=HEIGHT, fps=HD_FPS, **PLANS[i % len(PLANS)])
        clips.append(clip)
    return clips


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


# What the step runs on one clip, in a fresh interpreter: `ours` also imports, which `baseline`
# does alone, so their difference is the step's own work.
_ONE_CLIP = """
import sys
from functools import partial
from pathlib import Path
from vae_pipeline.domain.video.renders import RenderJob, take_frames, write_outputs
from vae_pipeline.domain.video.sampler import sample_times
if sys.argv[1] == "ours":
    job = RenderJob(Path(sys.argv[2]), partial(sample_times, brief={brief!r}), Path(sys.argv[3]), {quality})
    write_outputs(job, take_frames(job, decoder_threads=1))
"""


def callgrind(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, int]:
    """Instructions `cmd` executes under valgrind's callgrind (every thread and child), by object."""
    subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}.%p", *cmd],
                   capture_output=True, check=True, env=env)
    by_object: dict[str, int] = {}
    for part in out.parent.glob(f"{out.name}.*"):
        annotated = subprocess.run(["callgrind_annotate", "--threshold=100", str(part)], capture_output=True,
                                   text=True, check=True).stdout
        for count, obj in re.findall(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S+ \[(\S+)\]$", annotated, re.M):
            name = re.sub(r"(-[0-9a-f]{8})?(\.cpython.*|\.so.*)$", "", Path(obj).name)
            by_object[name] = by_object.get(name, 0) + int(count.replace(",", ""))
        part.unlink()
    return by_object


def instructions(clip: Path, work: Path) -> None:
    """The same comparison counted in instructions on one clip: unlike seconds, the counts do not
    move with the machine's load (the same binaries and inputs give the same totals)."""
    script = _ONE_CLIP.format(brief=BRIEF, quality=JPEG_QUALITY)
    runs = {
        "ours": callgrind([sys.executable, "-c", script, "ours", str(clip), str(work / "frames")], work / "ours"),
        "baseline": callgrind([sys.executable, "-c", script, "baseline"], work / "baseline"),
        "ffmpeg decode": callgrind(["ffmpeg", "-nostdin", "-hide_banner", "-nostats", "-threads", "1", "-i",
                                    str(clip), "-f", "null", "-"], work / "decode"),
        "ffmpeg filters": callgrind(["ffmpeg", "-nostdin", "-hide_banner", "-nostats", "-threads", "1", "-i",
                                     str(clip), "-filter_threads", "1", "-vf", FILTERS, "-f", "null", "-"],
                                    work / "filters"),
    }
    own = {name: n - runs["baseline"].get(name, 0) for name, n in runs["ours"].items()}
    total = {name: sum(counts.values()) for name, counts in runs.items()}
    step = total["ours"] - total["baseline"]
    print(f"instructions on {clip.name} (valgrind callgrind; imports left out of ours): renders step "
          f"{step / 1e9:.2f} G, ffmpeg decode {total['ffmpeg decode'] / 1e9:.2f} G, "
          f"filters {total['ffmpeg filters'] / 1e9:.2f} G")
    print(f"renders step / ffmpeg filters: {step / total['ffmpeg filters']:.2f} instructions; "
          f"/ ffmpeg decode: {step / total['ffmpeg decode']:.2f} instructions")
    print("  the step's instructions by library: " + ", ".join(
        f"{name} {n / 1e9:.2f} G" for name, n in sorted(own.items(), key=lambda kv: -kv[1]) if n > step / 100))


# The 14 judge frames' JPEGs made two ways: as the step makes them (RGB, then libjpeg-turbo's own
# colour conversion), and straight from the decoded planes brought to full range (`yuvj420p`).
_JPEG_PATHS = """
import sys
import av
import numpy as np
import simplejpeg
from vae_pipeline.domain.video.sampler import encode_frame
from vae_pipeline.domain.video.video_facts import rgbx_array
with av.open(sys.argv[2]) as container:
    stream = container.streams.video[0]
    stream.thread_count = 1
    frames = [frame for i, frame in enumerate(container.decode(stream)) if i % 24 == 0][:14]
for frame in frames:
    if sys.argv[1] == "rgb":
        encode_frame(rgbx_array(frame, 0), {quality})
    elif sys.argv[1] == "yuv":
        full = frame.reformat(format="yuvj420p", threads=1)
        planes = [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width] for p in full.planes]
        simplejpeg.encode_jpeg_yuv_planes(*planes, quality={quality})
"""


# The step over every clip in a fresh interpreter (the package from PYTHONPATH): prints the
# step's own wall and CPU seconds, then the facts.
_STEP = """
import json, resource, sys, time
from functools import partial
from pathlib import Path
from vae_pipeline.domain.video.renders import RenderJob, iter_renders
from vae_pipeline.domain.video.sampler import sample_times
out, workers, clips = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
jobs = [RenderJob(Path(c), partial(sample_times, brief={brief!r}), out / Path(c).stem, {quality}) for c in clips]
def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime
start, before = time.perf_counter(), cpu()
rendered = list(iter_renders(jobs, workers))
print(time.perf_counter() - start, cpu() - before)
print(json.dumps([r.facts for r in rendered]))
"""


def checkout_step(checkout: Path, clips: list[Path], out: Path, workers: int) -> tuple[float, float, list]:
    """The renders step as `checkout` has it: (wall, cpu) seconds of the step alone, and the facts."""
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, "-c", _STEP.format(brief=BRIEF, quality=JPEG_QUALITY), str(out),
                           str(workers), *map(str, clips)], env=os.environ | {"PYTHONPATH": str(checkout)},
                          capture_output=True, text=True, check=True)
    times, facts = done.stdout.splitlines()[-2:]
    wall, cpu = map(float, times.split())
    return wall, cpu, json.loads(facts)


def before_after(baseline: Path, clips: list[Path], work: Path, workers: int, repeat: int,
                 count_instructions: bool) -> None:
    """This checkout's step against `baseline`'s, taking turns on the same clips in every round."""
    sides = {"this checkout": Path(__file__).resolve().parents[1], "baseline": baseline.resolve()}
    wall: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    facts = {}
    for round_ in range(repeat):
        for name in list(sides)[:: 1 if round_ % 2 == 0 else -1]:
            seconds, cpu_s, facts[name] = checkout_step(sides[name], clips, work / name.replace(" ", "-"), workers)
            wall[name].append(seconds)
            cpu[name].append(cpu_s)
        print(f"round {round_ + 1} ({load()}): " + ", ".join(
            f"{n} {wall[n][-1]:.2f} s wall / {cpu[n][-1]:.2f} s cpu" for n in sides), flush=True)
    ratios = [a / b for a, b in zip(wall["this checkout"], wall["baseline"])]
    print(f"renders step, this checkout / baseline: wall {statistics.median(ratios):.3f} (median of rounds "
          f"{', '.join(f'{r:.3f}' for r in ratios)}), cpu {sum(cpu['this checkout']) / sum(cpu['baseline']):.3f}")
    same = sum(a == b for a, b in zip(facts["this checkout"], facts["baseline"], strict=True))
    print(f"facts the same on {same} of {len(clips)} clips")
    for clip, a, b in zip(clips, facts["this checkout"], facts["baseline"]):
        if a != b:
            print(f"    {clip.stem}: " + ", ".join(f"{k} {b[k]} -> {a[k]}" for k in a if a[k] != b[k]))
    if count_instructions and shutil.which("valgrind"):
        clip = clips[min(1, len(clips) - 1)]
        script = _ONE_CLIP.format(brief=BRIEF, quality=JPEG_QUALITY)
        counts = {}
        for name, checkout in sides.items():
            env = os.environ | {"PYTHONPATH": str(checkout)}
            ours = callgrind([sys.executable, "-c", script, "ours", str(clip), str(work / "frames")],
                             work / "ours", env)
            bare = callgrind([sys.executable, "-c", script, "baseline"], work / "bare", env)
            counts[name] = sum(ours.values()) - sum(bare.values())
        print(f"instructions on {clip.name} (callgrind, imports left out): this checkout "
              f"{counts['this checkout'] / 1e9:.3f} G, baseline {counts['baseline'] / 1e9:.3f} G, "
              f"ratio {counts['this checkout'] / counts['baseline']:.3f}")


def _loop_seam(first: np.ndarray, last: np.ndarray) -> float:
    return round(float(np.abs(last.astype(np.int16) - first).mean()), 3)


def alternatives(clip: Path, work: Path) -> None:
    """What the two ways round the step's largest costs would give, on the same clip: the analysis
    picture as an exact box average in numpy (time, pixels, `loop_seam`), and the JPEGs made from
    the decoded planes (instructions, and how far the pictures move)."""
    reformatter = VideoReformatter()
    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        decoded = list(container.decode(stream))
    height = round(160 * decoded[0].height / decoded[0].width)
    factor = decoded[0].width // 160

    def libswscale(frame: av.VideoFrame) -> np.ndarray:
        return reformatter.reformat(frame, width=160, height=height, format="gray",
                                    interpolation=Interpolation.AREA, threads=1).to_ndarray()

    def numpy_box(frame: av.VideoFrame) -> np.ndarray:
        plane = frame.planes[0]
        luma = np.frombuffer(plane, np.uint8).reshape(frame.height, plane.line_size)[:, : frame.width]
        mean = luma.reshape(height, factor, 160, factor).sum(axis=(1, 3), dtype=np.uint32) / factor**2
        return np.clip(np.rint((mean - 16) * 255 / 219), 0, 255).astype(np.uint8)  # limited -> full range

    pictures, seconds = {}, {}
    for name, scale in (("libswscale", libswscale), ("numpy", numpy_box)):
        start = time.process_time()
        pictures[name] = np.stack([scale(frame) for frame in decoded])
        seconds[name] = time.process_time() - start
    differ = np.count_nonzero(pictures["libswscale"] != pictures["numpy"]) / pictures["numpy"].size
    print(f"analysis picture as an exact box average in numpy: {seconds['numpy'] / seconds['libswscale']:.1f}x "
          f"libswscale's CPU time; {differ:.0%} of pixels differ (at most "
          f"{int(np.abs(pictures['libswscale'].astype(np.int16) - pictures['numpy']).max())} level); loop_seam "
          f"{_loop_seam(pictures['libswscale'][0], pictures['libswscale'][-1]):.3f} -> "
          f"{_loop_seam(pictures['numpy'][0], pictures['numpy'][-1]):.3f}")

    script = _JPEG_PATHS.format(quality=JPEG_QUALITY)
    counts = {way: sum(callgrind([sys.executable, "-c", script, way, str(clip)], work / f"jpeg-{way}").values())
              for way in ("none", "rgb", "yuv")}
    moved = []
    for frame in decoded[::24][:14]:
        full = frame.reformat(format="yuvj420p", threads=1)
        planes = [np.ascontiguousarray(np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width])
                  for p in full.planes]
        ours_jpeg = simplejpeg.decode_jpeg(encode_frame(rgbx_array(frame, 0), JPEG_QUALITY))
        from_planes = simplejpeg.decode_jpeg(simplejpeg.encode_jpeg_yuv_planes(*planes, quality=JPEG_QUALITY))
        moved.append(float(np.abs(ours_jpeg.astype(np.int16) - from_planes).mean()))
    print(f"the 14 JPEGs from the decoded planes: {(counts['yuv'] - counts['none']) / 1e9:.3f} G instructions "
          f"against {(counts['rgb'] - counts['none']) / 1e9:.3f} G as the step makes them; the pictures move by "
          f"{statistics.mean(moved):.2f} levels on average")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; ratios are taken within a round")
    parser.add_argument("--keep", type=Path, help="folder for the clips, kept and reused between runs")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions on one clip under valgrind (slow: about a minute)")
    parser.add_argument("--baseline", type=Path,
                        help="a checkout of another commit: time its step against this one's instead")
    args = parser.parse_args()
    if not shutil.which("ffmpeg"):
        print("ffmpeg not found on PATH: no comparison", file=sys.stderr)
        return 2
    workers = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        clips = make_clips(args.keep or Path(tmp) / "clips", args.clips)
        frames = sum(round(PLANS[i % len(PLANS)]["duration_s"] * HD_FPS) for i in range(args.clips))
        print(f"cpus: {workers}  clips: {len(clips)} x {WIDTH}x{HEIGHT} @{HD_FPS} ({frames} frames, "
              f"{sum(c.stat().st_size for c in clips) >> 20} MiB; ready in {time.perf_counter() - start:.0f} s)  "
              f"{load()}")
        if args.baseline:
            (Path(tmp) / "work").mkdir()
            before_after(args.baseline, clips, Path(tmp) / "work", workers, args.repeat, args.instructions)
            return 0
        sample = partial(sample_times, brief=BRIEF)
        jobs = [RenderJob(clip, sample, Path(tmp) / "frames" / clip.stem, JPEG_QUALITY) for clip in clips]
        names = ("ours", "ffmpeg filters", "ffmpeg decode", "ours, processes")
        runs = {
            "ours": lambda: ours(jobs, workers),
            "ffmpeg filters": lambda: peer(clips, workers, FILTERS),
            "ffmpeg decode": lambda: peer(clips, workers),
            "ours, processes": lambda: ours_processes(jobs, workers),
        }
        wall: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        results = {}
        for round_ in range(args.repeat):
            # each round runs all four back to back, in a rotating order, so load hits them alike
            for name in names[round_ % 4:] + names[: round_ % 4]:
                before = cpu_seconds()
                seconds, results[name] = timed(runs[name])
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds() - before)
            print(f"round {round_ + 1} ({load()}): " + ", ".join(
                f"{n} {wall[n][-1]:.2f} s wall / {cpu[n][-1]:.2f} s cpu" for n in names), flush=True)
        rendered, logs = results["ours"], results["ffmpeg filters"]
        for peer_name, goal in (("ffmpeg filters", 1.0), ("ffmpeg decode", 1.25)):
            ratios = [o / p for o, p in zip(wall["ours"], wall[peer_name])]
            print(f"renders step / {peer_name}: wall {statistics.median(ratios):.2f} (median of rounds "
                  f"{', '.join(f'{r:.2f}' for r in ratios)}; goal <= {goal}), "
                  f"cpu {sum(cpu['ours']) / sum(cpu[peer_name]):.2f}")
        ratios = [o / p for o, p in zip(wall["ours, processes"], wall["ours"])]
        print(f"renders step with a process pool started per step / threads: wall {statistics.median(ratios):.2f}, "
              f"cpu {sum(cpu['ours, processes']) / sum(cpu['ours']):.2f}")

        counts = dict.fromkeys(("agree", "ours only", "ffmpeg only"), 0)
        for job, result, log in zip(jobs, rendered, logs, strict=True):
            plan = PLANS[clips.index(job.video) % len(PLANS)]
            frames_written = len(list(job.frames_dir.glob("f*.jpg")))
            line = [f"{job.video.stem}: {frames_written} frames, planted black {plan.get('black', [])} "
                    f"freeze {plan.get('freeze', [])}"]
            for kind, theirs in zip(("black", "freeze"), parse_detectors(log)):
                agree, only_ours, only_theirs = compare(result.facts[f"{kind}_ranges"], theirs)
                counts["agree"] += len(agree)
                counts["ours only"] += len(only_ours)
                counts["ffmpeg only"] += len(only_theirs)
                line += [f"{kind} {r} agrees with ffmpeg {t}" for r, t in agree]
                line += [f"{kind} {r} ours only" for r in only_ours]
                line += [f"{kind} {t} ffmpeg only" for t in only_theirs]
            print("\n    ".join(line))
        print(f"ranges: {counts['agree']} agree with ffmpeg, {counts['ours only']} ours only, "
              f"{counts['ffmpeg only']} ffmpeg only")
        print("by design: blackdetect and freezedetect read the full-size limited-range Y plane (and "
              "freezedetect all planes, against a -60 dB global mean); ours reads the 160 px full-range "
              "picture, with an 8x8-cell maximum for freezes; freezedetect needs d between first and "
              "last frozen frame pts, ours counts the last frame's duration too.")
        if args.instructions:
            if not shutil.which("valgrind"):
                print("valgrind not found on PATH (apt-get install valgrind): no instruction counts")
            else:
                (Path(tmp) / "callgrind").mkdir()
                instructions(clips[min(1, len(clips) - 1)], Path(tmp) / "callgrind")
                alternatives(clips[min(1, len(clips) - 1)], Path(tmp) / "callgrind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
