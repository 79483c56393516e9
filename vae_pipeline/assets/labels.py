"""`labels`: the host's label of every episode, recomputed from stored answers and video facts.

Rehosting lives here: a new rubric in force (the `rubric` asset's data version) or a change to
the gate code (this asset's code version) makes `labels` stale and nothing upstream, so a
rehost never parses, decodes or calls a model. Every label change is appended to the
`label_history` table of the DuckDB warehouse.
"""

import json
from collections import Counter
from datetime import UTC, datetime

import dagster as dg
import polars as pl

from vae_pipeline.assets.verdicts import answer_of
from vae_pipeline.domain.host import carry_history, host_verdict
from vae_pipeline.domain.rubric import AXES, load_rubric
from vae_pipeline.freshness import frame_version, record_metadata
from vae_pipeline.partitions import series_partitions
from vae_pipeline.resources import ProjectMeta, Warehouse
from vae_pipeline.ui import markdown_table

# The gate and rule code: bump when host.py changes how a label is computed.
HOST_CODE_VERSION = "host-1"

LABELS_SCHEMA = {
    "id": pl.String, "label": pl.String, "host_rule": pl.String, "host_gates_failed": pl.List(pl.String),
    "positive_eligible": pl.Boolean, **{f"score_{axis}": pl.Int64 for axis in AXES},
    "defects_critical": pl.Int64, "defects_major": pl.Int64, "defects_minor": pl.Int64,
    "host_rubric_version": pl.String, "rubric_sha256": pl.String, "rehosted_at": pl.String,
    "previous_final_label": pl.String, "stored_host_label": pl.String, "judge_rubric_version": pl.String,
}  # fmt: skip
FACT_COLUMNS = ("video_ok", "video_duration_s", "fps", "width", "height", "black_ranges", "freeze_ranges",
                "still", "loop_seam")


def facts_of(render: dict | None) -> dict | None:
    if render is None:
        return None
    return {**{c: render[c] for c in FACT_COLUMNS}, "aspect": render["video_aspect"]}


def compute_labels(episodes: pl.DataFrame, renders: pl.DataFrame, verdicts: pl.DataFrame, rubric,
                   previous: dict[str, dict], now: str) -> pl.DataFrame:
    """The label columns of every valid episode whose judge.json (if any) is valid."""
    renders_by_id = {r["id"]: r for r in renders.iter_rows(named=True)}
    verdicts_by_id = {v["id"]: v for v in verdicts.iter_rows(named=True)}
    rows = []
    for episode in episodes.filter(pl.col("valid")).iter_rows(named=True):
        verdict = verdicts_by_id.get(episode["id"])
        if verdict is not None and not verdict["judge_valid"]:
            continue  # an invalid judge.json makes the episode invalid
        computed = host_verdict(answer=answer_of(verdict) if verdict else None,
                                facts=facts_of(renders_by_id.get(episode["id"])),
                                delivered=episode["delivered"], brief=json.loads(episode["brief"]),
                                harness_error=episode["harness_error"], rubric=rubric)
        stored = verdict["stored_host_label"] if verdict else None
        history = carry_history(new_label=computed["label"], previous=previous.get(episode["id"]),
                                stored_host_label=stored, now=now)
        rows.append({"id": episode["id"], **computed, **history, "stored_host_label": stored,
                     "judge_rubric_version": verdict["rubric_version"] if verdict else None})
    return pl.DataFrame(rows, schema=LABELS_SCHEMA)


def previous_labels(warehouse: Warehouse, series: str) -> dict[str, dict]:
    with warehouse.connect() as con:
        _ensure_tables(con)
        rows = con.execute("SELECT id, label, rehosted_at, previous_final_label FROM labels_latest "
                           "WHERE series = ?", [series]).fetchall()
    return {r[0]: {"label": r[1], "rehosted_at": r[2], "previous_final_label": r[3]} for r in rows}


def _ensure_tables(con) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS labels_latest (series VARCHAR, id VARCHAR, label VARCHAR, "
                "rehosted_at VARCHAR, previous_final_label VARCHAR, PRIMARY KEY (series, id))")
    con.execute("CREATE TABLE IF NOT EXISTS label_history (series VARCHAR, id VARCHAR, old_label VARCHAR, "
                "new_label VARCHAR, host_rubric_version VARCHAR, changed_at VARCHAR)")


def record_labels(warehouse: Warehouse, series: str, labels: pl.DataFrame, previous: dict[str, dict],
                  now: str) -> list[tuple[str | None, str | None]]:
    """Store the labels as the latest and append every change to label_history; return the changes."""
    changes = [(previous[r["id"]]["label"], r["label"], r["id"], r["host_rubric_version"])
               for r in labels.iter_rows(named=True)
               if r["id"] in previous and previous[r["id"]]["label"] != r["label"]]
    with warehouse.connect() as con:
        _ensure_tables(con)
        con.execute("BEGIN")
        con.execute("DELETE FROM labels_latest WHERE series = ?", [series])
        latest = [(series, r["id"], r["label"], r["rehosted_at"], r["previous_final_label"])
                  for r in labels.iter_rows(named=True)]
        history = [(series, episode_id, old, new, version, now) for old, new, episode_id, version in changes]
        if latest:
            con.executemany("INSERT INTO labels_latest VALUES (?, ?, ?, ?, ?)", latest)
        if history:
            con.executemany("INSERT INTO label_history VALUES (?, ?, ?, ?, ?, ?)", history)
        con.execute("COMMIT")
    return [(old, new) for old, new, _, _ in changes]


def _label_name(label: str | None) -> str:
    return label or "unjudged"


@dg.asset(partitions_def=series_partitions, code_version=HOST_CODE_VERSION, group_name="series",
          kinds={"duckdb", "parquet"},
          check_specs=[dg.AssetCheckSpec("labels_add_up", asset="labels"),
                       dg.AssetCheckSpec("no_drift_from_stored_host_label", asset="labels")])
def labels(context: dg.AssetExecutionContext, project_meta: ProjectMeta, warehouse: Warehouse,
           episodes: pl.DataFrame, renders: pl.DataFrame, verdicts: pl.DataFrame, rubric: pl.DataFrame):
    """label, host_rule, host_gates_failed, positive_eligible and the rehosting history, per episode."""
    in_force = rubric.row(0, named=True)
    loaded = load_rubric(project_meta.root / in_force["file"])
    if loaded.sha256 != in_force["sha256"]:
        raise dg.Failure(description=f"{in_force['file']} changed since the rubric asset ran; "
                                     "materialize `rubric` first")
    series = context.partition_key
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    previous = previous_labels(warehouse, series)
    frame = compute_labels(episodes, renders, verdicts, loaded, previous, now)
    changes = record_labels(warehouse, series, frame, previous, now)
    transitions = Counter(f"{_label_name(old)} → {_label_name(new)}" for old, new in changes)
    counts = Counter(_label_name(label) for label in frame["label"].to_list())
    yield dg.Output(frame, data_version=frame_version(frame.drop("rehosted_at")), metadata={
        "episodes": frame.height,
        "host_rubric_version": loaded.version,
        "labels": dg.MetadataValue.json(dict(sorted(counts.items()))),
        "labels_changed": len(changes),
        "transitions": dg.MetadataValue.md("\n".join(f"- {t}: {n}" for t, n in sorted(transitions.items()))
                                           or "no label changed"),
        "preview": markdown_table(frame, ("id", "label", "host_rule", "host_gates_failed", "positive_eligible",
                                          "previous_final_label", "rehosted_at")),
        **record_metadata(context),
    })
    expected = episodes.filter(pl.col("valid")).height - verdicts.filter(~pl.col("judge_valid")).height
    yield dg.AssetCheckResult(
        check_name="labels_add_up", passed=sum(counts.values()) == expected == frame.height,
        description=f"{dict(sorted(counts.items()))} add up to {sum(counts.values())} of {expected} labelled episodes")
    drift = frame.filter((pl.col("judge_rubric_version") == loaded.version) & pl.col("stored_host_label").is_not_null()
                         & (pl.col("stored_host_label") != pl.col("label").fill_null("unjudged")))
    yield dg.AssetCheckResult(
        check_name="no_drift_from_stored_host_label", passed=drift.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description="recomputed labels equal the stored host labels under the judge's rubric version"
        if drift.height == 0 else "differ from judge.json host.label: " + ", ".join(
            f"{r['id']} ({r['stored_host_label']} → {_label_name(r['label'])})" for r in drift.head(30).iter_rows(named=True)),
        metadata={"drifted": drift.height})
