"""`labels`: the host's label of every episode, recomputed from stored answers and video facts.

Rehosting lives here: a new rubric in force (the `rubric` asset's data version) or a change to
the gate code (this asset's code version) makes `labels` stale and nothing upstream, so a
rehost never parses, decodes or calls a model. Every label change is appended to the series'
label generations (append-only Parquet), which the warehouse's DuckDB holds as `label_history`.
"""

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.assets.meta import RUBRIC_IN_FORCE, rubric_file
from vae_pipeline.assets.metadata import markdown_table, with_run_table
from vae_pipeline.assets.verdicts import answer_of
from vae_pipeline.domain.errors import unforeseen
from vae_pipeline.domain.objects import fresh_listing, put_new
from vae_pipeline.domain.verdicts.host import carry_history, host_verdict
from vae_pipeline.domain.verdicts.rubric import AXES, RubricError, load_rubric
from vae_pipeline.storage.io_manager import (
    other_series_tables,
    parquet_bytes,
    read_tables,
    stored_series,
    stored_table,
    with_run_tables,
)
from vae_pipeline.storage.partitions import SERIES_BACKFILL, series_partitions
from vae_pipeline.storage.resources import LABEL_STATE, ProjectMeta, Warehouse
from vae_pipeline.storage.versions import series_output

# The gate and rule code: bump when host.py changes how a label is computed.
HOST_CODE_VERSION = "host-2"

LABELS_SCHEMA = {
    "id": pl.String, "label": pl.String, "host_rule": pl.String, "host_gates_failed": pl.List(pl.String),
    "positive_eligible": pl.Boolean, **{f"score_{axis}": pl.Int64 for axis in AXES},
    "defects_critical": pl.Int64, "defects_major": pl.Int64, "defects_minor": pl.Int64,
    "host_rubric_version": pl.String, "rubric_sha256": pl.String, "rehosted_at": pl.String,
    "previous_final_label": pl.String, "stored_host_label": pl.String, "judge_rubric_version": pl.String,
    "label_error": pl.String,  # why this episode's label could not be computed: it is made invalid
}  # fmt: skip
# What the checks read of each stage's stored table, for the series outside a run.
CHECKED_COLUMNS = {"episodes": ("id", "valid"), "verdicts": ("judge_valid",), "labels": tuple(LABELS_SCHEMA)}
FACT_COLUMNS = ("video_ok", "video_duration_s", "fps", "width", "height", "black_ranges", "freeze_ranges",
                "still", "loop_seam")


def facts_of(render: dict | None) -> dict | None:
    if render is None:
        return None
    return {**{c: render[c] for c in FACT_COLUMNS}, "aspect": render["video_aspect"]}


def compute_labels(episodes: pl.DataFrame, renders: pl.DataFrame, verdicts: pl.DataFrame, rubric,
                   previous: dict[str, dict], now: str) -> pl.DataFrame:
    """The label columns of every valid episode whose judge.json (if any) is valid; an episode
    whose label cannot be computed gets only a `label_error`, and the others go on."""
    renders_by_id = {r["id"]: r for r in renders.iter_rows(named=True)}
    verdicts_by_id = {v["id"]: v for v in verdicts.iter_rows(named=True)}
    rows = []
    for episode in episodes.filter(pl.col("valid")).iter_rows(named=True):
        verdict = verdicts_by_id.get(episode["id"])
        if verdict is not None and not verdict["judge_valid"]:
            continue  # an invalid judge.json makes the episode invalid
        stored = verdict["stored_host_label"] if verdict else None
        try:
            computed = host_verdict(answer=answer_of(verdict) if verdict else None,
                                    facts=facts_of(renders_by_id.get(episode["id"])),
                                    delivered=episode["delivered"], brief=json.loads(episode["brief"]),
                                    harness_error=episode["harness_error"], rubric=rubric)
            history = carry_history(new_label=computed["label"], previous=previous.get(episode["id"]),
                                    stored_host_label=stored, now=now)
            row = {"id": episode["id"], **computed, **history, "stored_host_label": stored,
                   "judge_rubric_version": verdict["rubric_version"] if verdict else None}
            pl.DataFrame([row], schema=LABELS_SCHEMA)  # fits its columns
        except Exception as exc:  # noqa: BLE001 — whatever it is, only this episode is invalid
            row = {"id": episode["id"], "label_error": unforeseen(exc, episode["source"]).reason}
        rows.append(row)
    return pl.DataFrame(rows, schema=LABELS_SCHEMA)


def labelled(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows that hold a label (not a `label_error`)."""
    return frame.filter(pl.col("label_error").is_null()) if "label_error" in frame.columns else frame


STATE_SCHEMA = {
    "series": pl.String, "id": pl.String, "label": pl.String, "rehosted_at": pl.String,
    "previous_final_label": pl.String, "changed": pl.Boolean, "old_label": pl.String,
    "host_rubric_version": pl.String, "changed_at": pl.String,
}  # fmt: skip


def state_dir(warehouse: Warehouse, series: str) -> UPath:
    return warehouse.home / LABEL_STATE / series


def listed_generations(warehouse: Warehouse) -> dict[str, dict[str, dict]]:
    """Every series' label generations from one listing of `label_state/` (for a run over many
    series: not a listing each), by series and file name."""
    found: dict[str, dict[str, dict]] = {}
    for name, info in fresh_listing(warehouse.home / LABEL_STATE).items():
        series, _, file = name.partition("/")
        if file and "/" not in file and file.endswith(".parquet"):
            found.setdefault(series, {})[file] = info
    return found


State = tuple[int, dict[str, dict]]  # a series' last label generation: its number, each episode's label


def latest_state(warehouse: Warehouse, series: str, listed: dict[str, dict] | None = None) -> State:
    """The series' last label generation: its number (0: none yet) and each episode's
    {label, rehosted_at, previous_final_label}. `listed`: its generations as a listing found them
    (listed afresh otherwise)."""
    if listed is None:
        listed = {name: info for name, info in fresh_listing(state_dir(warehouse, series)).items()
                  if "/" not in name and name.endswith(".parquet")}
    return latest_states(warehouse, {series: listed})[series]


def latest_states(warehouse: Warehouse, listed: dict[str, dict[str, dict]]) -> dict[str, State]:
    """`latest_state` of many series (their generations as a listing found them), the last
    generation of each read together (`read_tables`: a run over every series reads them in one go)."""
    last = {series: max(files) for series, files in listed.items() if files}
    tables, missing = read_tables({series: state_dir(warehouse, series) / name for series, name in last.items()},
                                  {series: listed[series][name] for series, name in last.items()})
    if missing:  # a generation is never removed: only a home changed under the run loses one
        raise FileNotFoundError(f"label generation {last[missing[0]]} of series {missing[0]} is gone")
    return {series: (int(last[series].removesuffix(".parquet")),
                     {r["id"]: {k: r[k] for k in ("label", "rehosted_at", "previous_final_label")}
                      for r in tables[series].iter_rows(named=True)}) if series in last else (0, {})
            for series in listed}


def record_labels(warehouse: Warehouse, series: str, compute: Callable[[dict[str, dict]], pl.DataFrame],
                  now: str, found: State | None = None) -> tuple[pl.DataFrame, list[tuple[str | None, str | None]]]:
    """Compute the series' labels from its last generation and append the next one; return the
    labels and the changes this call recorded.

    Each generation is a Parquet file `label_state/<series>/<n>.parquet`, never rewritten: every
    episode's latest label, with the rows whose label changed flagged (`label_history` is those
    rows, read by DuckDB). A file is created only if no other writer created generation n first
    (`put_new`: a hard link on disk, `If-None-Match: *` on a bucket); the loser reads the winner's generation and computes again, so two processes
    labelling the same series at once never record a change twice nor lose one. `found`: the
    series' last generation as read for the run (the first try only)."""
    while True:
        generation, previous = found if found is not None else latest_state(warehouse, series)
        found = None  # a try after a lost race lists afresh
        frame = compute(previous)
        rows = []
        for r in labelled(frame).iter_rows(named=True):
            before = previous.get(r["id"])
            changed = before is not None and before["label"] != r["label"]
            rows.append({"series": series, "id": r["id"], "label": r["label"], "rehosted_at": r["rehosted_at"],
                         "previous_final_label": r["previous_final_label"], "changed": changed,
                         "old_label": before["label"] if changed else None,
                         "host_rubric_version": r["host_rubric_version"], "changed_at": now if changed else None})
        state = pl.DataFrame(rows, schema=STATE_SCHEMA)
        changes = [(r["old_label"], r["label"]) for r in rows if r["changed"]]
        unchanged = {r["id"]: {k: r[k] for k in ("label", "rehosted_at", "previous_final_label")} for r in rows} == previous
        if unchanged or put_new(state_dir(warehouse, series) / f"{generation + 1:08d}.parquet", parquet_bytes(state)):
            return frame, changes


def _label_name(label: str | None) -> str:
    return label or "unjudged"


# on rubric_in_force too, not only through `rubric`: Dagster marks an asset unsynced when its own
# inputs changed, so only a direct edge shows the labels unsynced as soon as the rubric in force changes
@dg.asset(partitions_def=series_partitions, backfill_policy=SERIES_BACKFILL, code_version=HOST_CODE_VERSION,
          deps=[RUBRIC_IN_FORCE, "episodes", "renders", "verdicts", "rubric"], group_name="series",
          kinds={"duckdb", "parquet"},
          check_specs=[dg.AssetCheckSpec("labels_add_up", asset="labels",
                                         description="Every labelled episode of every series has exactly one "
                                                     "label (valid episodes minus invalid judge.json)"),
                       dg.AssetCheckSpec("no_drift_from_stored_host_label", asset="labels",
                                         description="Recomputed labels equal the host label judge.json stored "
                                                     "under the same rubric version (a warning: the host rules "
                                                     "changed); says how many it compared")])
def labels(context: dg.AssetExecutionContext, project_meta: ProjectMeta, warehouse: Warehouse):
    """label, host_rule, host_gates_failed, positive_eligible and the rehosting history, per episode."""
    loaded = rubric_checked_in_force(project_meta, stored_table(warehouse, "rubric", context.instance))
    keys = context.partition_keys
    episodes, renders, verdicts = (stored_series(warehouse, stage, keys) for stage in ("episodes", "renders", "verdicts"))
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    frames, metadata, counted = {}, {}, {}
    if len(keys) > 1:  # one listing of every series' generations, the last ones read together
        listed = listed_generations(warehouse)
        found = latest_states(warehouse, {series: listed.get(series, {}) for series in keys})
    else:
        found = {}
    for series in keys:
        frame, changes = record_labels(
            warehouse, series,
            lambda previous, s=series: compute_labels(episodes[s], renders[s], verdicts[s], loaded, previous, now), now,
            found.get(series))
        frames[series] = frame
        done = labelled(frame)
        counts = Counter(_label_name(label) for label in done["label"].to_list())
        relabelled = done.filter(pl.col("rehosted_at") == now)
        counted[series] = {"episodes": frame.height, **dict(sorted(counts.items())),
                           "labels_changed": relabelled.height}
        metadata[series] = {
            "episodes": frame.height,
            "label_errors": frame.height - done.height,
            "host_rubric_version": loaded.version,
            "labels": dg.MetadataValue.json(dict(sorted(counts.items()))),
            "labels_changed": relabelled.height,
            "label_history_rows": len(changes),
            "transitions": transitions_text(done, relabelled),
            "preview": markdown_table(frame, ("id", "label", "host_rule", "host_gates_failed", "positive_eligible",
                                              "previous_final_label", "rehosted_at")),
        }
    yield series_output(context, frames, with_run_table(metadata, counted), unversioned=("rehosted_at",))
    # the checks speak for every series: this run's, and the stored labels of the others
    others, other_series, outdated = other_series_tables(context, warehouse, CHECKED_COLUMNS)
    checked = sorted({*frames, *other_series})
    not_adding_up, drifted, compared = label_problems(
        checked, with_run_tables({s: episodes[s] for s in frames}, others["episodes"]),
        with_run_tables({s: verdicts[s] for s in frames}, others["verdicts"]),
        with_run_tables(frames, others["labels"]), loaded.version)
    where = {"series_checked": len(checked), "series_in_this_run": len(frames)}
    drift_text = "differ from judge.json host.label: " + ", ".join(
        f"{r['id']} ({r['stored_host_label']} → {_label_name(r['label'])})" for r in drifted[:30])
    yield dg.AssetCheckResult(
        check_name="labels_add_up", passed=not (not_adding_up or outdated), metadata=where,
        description="; ".join(not_adding_up + outdated)
        or f"every labelled episode of {len(checked)} series has exactly one label")
    yield dg.AssetCheckResult(
        check_name="no_drift_from_stored_host_label", passed=not (drifted or outdated),
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(([drift_text] if drifted else []) + outdated) or no_drift_text(compared, loaded.version,
                                                                                          len(checked)),
        metadata={"drifted": len(drifted), "compared": compared[loaded.version], **where})


def transitions_text(frame: pl.DataFrame, relabelled: pl.DataFrame) -> dg.MarkdownMetadataValue:
    """The label changes of this run (against the label computed before, or judge.json's host
    label the first time), and how many rows keep a change of an earlier run."""
    changes = Counter(f"{_label_name(r['previous_final_label'])} → {_label_name(r['label'])}"
                      for r in relabelled.iter_rows(named=True))
    lines = [f"- {t}: {n}" for t, n in sorted(changes.items())] or ["no label changed in this run"]
    earlier = frame.height - relabelled.height - frame.filter(pl.col("rehosted_at").is_null()).height
    if earlier:
        lines.append(f"\n{earlier} episode(s) keep the change of an earlier run (previous_final_label → label, "
                     "at rehosted_at)")
    return dg.MetadataValue.md("\n".join(lines))


def no_drift_text(compared: Counter, rubric_version: str, series: int) -> str:
    """A passing drift check: how many labels it compared, and when none, why."""
    if compared[rubric_version]:
        return (f"{compared[rubric_version]} recomputed label(s) equal the host label judge.json stored under rubric "
                f"{rubric_version} ({series} series)")
    stored = ", ".join(f"{n} under {version}" for version, n in sorted(compared.items())) or "none"
    return (f"0 compared: no judge.json host label was stored under rubric {rubric_version}, the one in force "
            f"(stored host labels: {stored}), so there is nothing to drift from ({series} series)")


def label_problems(checked: list[str], episodes: pl.DataFrame, verdicts: pl.DataFrame, labels: pl.DataFrame,
                   rubric_version: str) -> tuple[list[str], list[dict], Counter]:
    """The two checks over the series `checked` (each table with `series`, sorted by it), in one
    pass: why a series' labels do not add up (a line each, for those that do not), the labels that
    differ from the host label judge.json stored under the same rubric version, and how many stored
    host labels there are under each rubric version (those under `rubric_version` are compared)."""
    done = labelled(labels)
    per_series = pl.DataFrame({"series": checked}, schema={"series": pl.String})
    for name, rows in (("valid", episodes.filter(pl.col("valid"))), ("bad_judge", verdicts.filter(~pl.col("judge_valid"))),
                       ("rows", labels), ("labelled", done)):
        per_series = per_series.join(rows.group_by("series").len(name), on="series", how="left")
    per_series = per_series.fill_null(0).with_columns(
        expected=pl.col("valid") - pl.col("bad_judge") - (pl.col("rows") - pl.col("labelled")))  # label errors
    problems = []
    for series, expected in per_series.filter(pl.col("labelled") != pl.col("expected")) \
            .select("series", "expected").iter_rows():
        counts = Counter(_label_name(label) for label in done.filter(pl.col("series") == series)["label"].to_list())
        problems.append(f"{series}: {dict(sorted(counts.items()))} add up to {sum(counts.values())} of {expected} "
                        "labelled episodes")
    stored = done.filter(pl.col("stored_host_label").is_not_null())
    drifted = stored.filter((pl.col("judge_rubric_version") == rubric_version)
                            & (pl.col("stored_host_label") != pl.col("label").fill_null("unjudged"))).to_dicts()
    return problems, drifted, Counter(stored["judge_rubric_version"].fill_null("no version").to_list())


def rubric_checked_in_force(project_meta: ProjectMeta, rubric: pl.DataFrame):
    """The rubric the `rubric` asset stored, refused unless it is the one in force now
    (`VAE_RUBRIC_VERSION` and the file's bytes): a job that labels without re-materializing
    `rubric` first must fail, not label under the old rubric."""
    stored = rubric.row(0, named=True)
    try:
        in_force = rubric_file(project_meta)
    except RubricError as exc:
        raise dg.Failure(description=str(exc)) from None
    loaded = load_rubric(in_force)
    if (in_force.relative_to(project_meta.root).as_posix(), loaded.sha256) != (stored["file"], stored["sha256"]):
        raise dg.Failure(description=f"the rubric in force is {loaded.version} ({in_force.name}) but the `rubric` "
                                     f"asset holds {stored['version']}: materialize `rubric` first (the rehost "
                                     "job does)")
    return loaded
