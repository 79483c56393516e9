"""`renders`: the mechanical facts of every delivered video, the judge's 14 frames, a contact sheet."""

import base64
import io
import json
import os
from pathlib import Path

import dagster as dg
import polars as pl
from PIL import Image

from vae_pipeline.assets.meta import rubric_file
from vae_pipeline.assets.metadata import markdown_table, with_run_table
from vae_pipeline.domain.errors import BadInput, reading
from vae_pipeline.domain.files import link_or_copy, sha256_file, write_atomic
from vae_pipeline.domain.objects import fresh_listing, uploads_in_background
from vae_pipeline.domain.dataset.rows import JUDGE_FRAMES, RANGES
from vae_pipeline.domain.verdicts.rubric import load_rubric
from vae_pipeline.domain.video.sampler import sample_times
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.io_manager import other_series_tables, read_table, stored_series, with_run_tables
from vae_pipeline.storage.partitions import SERIES_BACKFILL, series_partitions
from vae_pipeline.storage.resources import ProjectMeta, RunsRoot, Warehouse
from vae_pipeline.storage.versions import series_output

RENDERS_SCHEMA = {
    "id": pl.String, "video_ok": pl.Boolean, "video_duration_s": pl.Float64, "fps": pl.Float64,
    "width": pl.Int64, "height": pl.Int64, "video_aspect": pl.String, "black_ranges": RANGES,
    "freeze_ranges": RANGES, "still": pl.Boolean, "loop_seam": pl.Float64, "video_error": pl.String,
    "judge_frames": JUDGE_FRAMES, "video_size": pl.Int64, "video_sha256": pl.String, "staged_video": pl.String,
    "contact_sheet": pl.String, "analysis_key": pl.String,
    "render_error": pl.String,  # an error no check foresaw: the episode is made invalid
}  # fmt: skip
RENDERS_CODE_VERSION = "renders-3"
CONTACT_SHEETS_SHOWN = 3


def stage_video(runs_root: RunsRoot, warehouse: Warehouse, row: dict, staged: Path,
                listed: dict[str, dict] | None = None) -> Path:
    """Put the episode's out.mp4 at `staged`, byte-identical: a hard link (or copy) for a run
    folder, the member's bytes for an archive; then in the home (`listed`: what a listing of its
    folder there found). The runs root is never written."""
    entry = runs_root.episode_entry(row)
    if entry.is_archive:
        files = runs_root.read_files(row, lambda name: name == "out.mp4")
        write_atomic(staged, files.data["out.mp4"])
    else:
        link_or_copy(entry.path / "out.mp4", staged)
    warehouse.mirror.publish(staged, listed)
    return staged


def _sampler(brief: dict, frames: int, min_gap_s: float):
    return lambda duration_s, fps: sample_times(duration_s, fps, brief, frames=frames, min_gap_s=min_gap_s)


def _thumbnail_markdown(episode_id: str, sheet: Path) -> str:
    """The contact sheet inline, small: it is stored in every materialization event, which the
    planning and the UI read back."""
    picture = Image.open(sheet)
    picture.thumbnail((640, 640))
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="JPEG", quality=60)
    return f"**{episode_id}**\n\n![{episode_id}](data:image/jpeg;base64,{base64.b64encode(buffer.getvalue()).decode()})"


def previous_analyses(warehouse: Warehouse, series: str, stored: dict[str, dict]) -> dict[str, dict]:
    """This series' rows from the last materialization, to reuse for videos that did not change
    (`stored`: a listing of the renders tables)."""
    path = warehouse.table(dg.AssetKey("renders"), series)
    if path.name not in stored:
        return {}
    frame = read_table(path, stored[path.name])
    return {row["id"]: row for row in frame.iter_rows(named=True)} if "analysis_key" in frame.columns else {}


def _reusable(old: dict | None, key: str, warehouse: Warehouse, listed: dict[str, dict]) -> bool:
    return (old is not None and old["analysis_key"] == key
            and (old["contact_sheet"] is None or warehouse.mirror.holds(old["contact_sheet"], listed)))


@dg.asset(partitions_def=series_partitions, backfill_policy=SERIES_BACKFILL, code_version=RENDERS_CODE_VERSION,
          group_name="series", kinds={"pyav", "parquet"}, pool="renders",  # vae_pipeline.engines.pools
          deps=["episodes"],
          check_specs=[dg.AssetCheckSpec("every_delivered_video_analysed", asset="renders",
                                         description="Every delivered out.mp4 of every series has its facts"),
                       dg.AssetCheckSpec("facts_in_domain", asset="renders",
                                         description="Sizes and fps positive, black and freeze ranges ordered "
                                                     "and inside the video's duration")])
def renders(context: dg.AssetExecutionContext, runs_root: RunsRoot, project_meta: ProjectMeta,
            warehouse: Warehouse):
    """Facts of every delivered out.mp4 (one decode pass each, in parallel), the judge's frames
    and a contact sheet per episode. A video whose bytes, brief and sampler settings are those of
    the last run is not decoded again: an episode added to a running series decodes alone."""
    keys = list(context.partition_keys)
    episodes = stored_series(warehouse, "episodes", keys)
    sampler_settings = load_rubric(rubric_file(project_meta)).sampler
    frames, metadata = {}, {}
    stored = fresh_listing(warehouse.home / "tables" / "renders")  # one LIST, not a HEAD a series
    # on a bucket, what the home holds of the run's videos and frames already: not a HEAD a file
    listed = warehouse.mirror.listed_for("videos", keys) | warehouse.mirror.listed_for("frames", keys)
    with uploads_in_background():  # the videos and frames go up while the next ones decode
        for series in keys:
            frames[series], metadata[series] = render_series(context, runs_root, warehouse, sampler_settings,
                                                             series, episodes[series], stored, listed)
    yield series_output(context, frames, with_run_table(metadata))
    # the checks speak for every series: this run's, and the stored facts of the others
    others, other_series, outdated = other_series_tables(context, warehouse, {"episodes": ("id", "valid", "delivered"),
                                                                              "renders": tuple(RENDERS_SCHEMA)})
    checked = {*frames, *other_series}
    missing, impossible = facts_problems(with_run_tables({s: episodes[s] for s in frames}, others["episodes"]),
                                         with_run_tables(frames, others["renders"]))
    problems = outdated + impossible
    where = {"series_checked": len(checked), "series_in_this_run": len(frames)}
    yield dg.AssetCheckResult(check_name="every_delivered_video_analysed", passed=not (missing or outdated),
                              metadata=where,
                              description="; ".join(([f"no facts for: {', '.join(missing)}"] if missing else [])
                                                    + outdated)
                              or f"every delivered video of {len(checked)} series has facts")
    yield dg.AssetCheckResult(check_name="facts_in_domain", passed=not problems, metadata=where,
                              description="; ".join(problems[:20])
                              or f"ranges ordered and inside the duration ({len(checked)} series)")


def render_series(context: dg.AssetExecutionContext, runs_root: RunsRoot, warehouse: Warehouse, sampler_settings,
                  series: str, episodes: pl.DataFrame, stored: dict[str, dict],
                  listed: dict[str, dict]) -> tuple[pl.DataFrame, dict]:
    """One series' facts, and what its materialization shows."""
    # PyAV and the decoding code: loaded by the step that decodes, not by every process that loads
    # the definitions
    from vae_pipeline.domain.video.renders import VIDEO, RenderJob, iter_renders

    delivered = episodes.filter(pl.col("valid") & pl.col("delivered")).to_dicts()
    runs_root.series_dir(series)  # its files here (fetched when the runs root is a bucket)
    videos_root = warehouse.root / "videos" / series
    previous = previous_analyses(warehouse, series, stored)
    jobs, todo, rows = [], [], []
    for row in delivered:
        try:
            with reading(VIDEO):
                staged = stage_video(runs_root, warehouse, row, videos_root / f"{row['id']}.mp4", listed)
                sha = sha256_file(staged)
                key = content_version(RENDERS_CODE_VERSION, sampler_settings, row["brief"], sha)
                sample = _sampler(json.loads(row["brief"]), sampler_settings.frames, sampler_settings.min_gap_s)
        except BadInput as exc:
            rows.append({"id": row["id"], "video_ok": False, "video_error": str(exc), "render_error": str(exc)})
            continue
        if _reusable(previous.get(row["id"]), key, warehouse, listed):
            rows.append(previous[row["id"]])
            continue
        todo.append((row, sha, key, staged))
        frames_dir = warehouse.root / warehouse.mirror.versioned(f"frames/{series}/{row['id']}", key[:16])
        jobs.append(RenderJob(staged, sample, frames_dir, sampler_settings.jpeg_quality))
    context.log.info(f"{series}: analysing {len(jobs)} videos on {os.cpu_count()} cores ({len(rows)} unchanged)")
    # each video's decode, JPEGs and contact sheet run on a worker; results arrive in order
    shown = []
    for (row, sha, key, staged), rendered in zip(todo, iter_renders(jobs, workers=os.cpu_count() or 1),
                                                 strict=True):
        facts, sheet = rendered.facts, rendered.contact_sheet
        if sheet and len(shown) < CONTACT_SHEETS_SHOWN:
            shown.append(_thumbnail_markdown(row["id"], sheet))
        frames_name = warehouse.mirror.publish_folder(sheet.parent, listed) if sheet else None
        rows.append({
            "id": row["id"], "video_ok": facts["video_ok"], "video_duration_s": facts["video_duration_s"],
            "fps": facts["fps"], "width": facts["width"], "height": facts["height"],
            "video_aspect": facts["aspect"], "black_ranges": facts["black_ranges"],
            "freeze_ranges": facts["freeze_ranges"], "still": facts["still"], "loop_seam": facts["loop_seam"],
            "video_error": facts["error"],
            "judge_frames": [{"t_s": f["t_s"], "reason": f["reason"]} for f in rendered.frames] or None,
            "video_size": staged.stat().st_size, "video_sha256": sha,
            "staged_video": staged.relative_to(warehouse.root).as_posix(),
            "contact_sheet": f"{frames_name}/{sheet.name}" if sheet else None,
            "analysis_key": None if rendered.error else key,  # a crash is tried again next time
            "render_error": rendered.error,
        })
    frame = pl.DataFrame(rows, schema=RENDERS_SCHEMA).sort("id")
    return frame, {
        "videos": frame.height,
        "decoded": len(jobs),
        "decodable": int(frame["video_ok"].sum() or 0),
        "minutes": round(float(frame["video_duration_s"].sum() or 0) / 60, 2),
        "preview": markdown_table(frame, ("id", "video_ok", "video_duration_s", "fps", "width", "height",
                                          "video_aspect", "black_ranges", "freeze_ranges", "still", "video_error")),
        "contact_sheets": dg.MetadataValue.md("\n\n".join(shown) or "no decodable video"),
    }


def facts_problems(episodes: pl.DataFrame, facts: pl.DataFrame) -> tuple[list[str], list[str]]:
    """The two checks over many series at once (each table with `series`, sorted by it): the
    valid delivered episodes without facts, by series and id, and the impossible facts."""
    delivered = episodes.filter(pl.col("valid") & pl.col("delivered")).select("series", "id").unique(maintain_order=True)
    missing = delivered.join(facts.select("series", "id"), on=["series", "id"], how="anti").sort("series", "id")
    return missing["id"].to_list(), facts_out_of_domain(facts)


def facts_out_of_domain(frame: pl.DataFrame) -> list[str]:
    """Episodes whose facts are impossible: unordered or overlapping ranges, ranges past the end."""
    positive = (pl.col("width").fill_null(0) > 0) & (pl.col("height").fill_null(0) > 0) \
        & (pl.col("fps").fill_null(0).fill_nan(0) > 0)  # Polars orders NaN above every number
    ranged = (pl.col("black_ranges").list.len().fill_null(0) > 0) | (pl.col("freeze_ranges").list.len().fill_null(0) > 0)
    problems = []
    # only a video with a range, or a size or fps not positive, can be wrong: the others (most of
    # every series) are not made dicts
    for row in frame.filter(pl.col("video_ok") & (~positive | ranged)).iter_rows(named=True):
        duration = row["video_duration_s"] or 0.0
        if not (row["width"] or 0) > 0 or not (row["height"] or 0) > 0 or not (row["fps"] or 0) > 0:
            problems.append(f"{row['id']}: non-positive size or fps")
        for name in ("black_ranges", "freeze_ranges"):
            previous_end = -1.0
            for start, end in row[name] or []:
                if not (0 <= start < end <= duration + 1e-3) or start < previous_end:
                    problems.append(f"{row['id']}: {name} [{start}, {end}] outside [0, {duration}] or unordered")
                previous_end = end
    return problems
