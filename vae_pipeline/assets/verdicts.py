"""`verdicts`: the judge's stored answer of every judged episode, parsed and validated.

Only the structured parts are kept (scores, defect severities, versions, the stored host
label): the judge's free text stays in the archive, where the scrub sees it. The strings kept
(model, versions, time, labels) pass through the scrub too: judge.json is input.
"""

import dagster as dg
import polars as pl

from vae_pipeline.assets.metadata import markdown_table, with_run_table
from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import ScrubConfig
from vae_pipeline.domain.errors import BadInput, reading
from vae_pipeline.domain.verdicts.judge import parse_judge
from vae_pipeline.domain.verdicts.rubric import AXES
from vae_pipeline.storage.io_manager import stored_series
from vae_pipeline.storage.partitions import SERIES_BACKFILL, series_partitions
from vae_pipeline.storage.resources import RunsRoot, ScrubSettings, Warehouse
from vae_pipeline.storage.versions import series_output

VERDICTS_SCHEMA = {
    "id": pl.String, "judge_valid": pl.Boolean, "judge_error_file": pl.String,
    "judge_error_line": pl.Int64, "judge_error_reason": pl.String, "judge_model": pl.String,
    "rubric_version": pl.String, "judged_at": pl.String, "judge_verdict": pl.String,
    "stored_host_label": pl.String, "defect_severities": pl.List(pl.String),
    **{f"answer_{axis}": pl.Int64 for axis in AXES},
}  # fmt: skip


def answer_of(row: dict) -> dict | None:
    """The parts of the judge's answer the host rules read, rebuilt from a verdicts row."""
    if not row.get("judge_valid"):
        return None
    return {"scores": {axis: row[f"answer_{axis}"] for axis in AXES},
            "defects": [{"severity": s} for s in row["defect_severities"] or []]}


JUDGE = "judge.json"


def read_verdict(runs_root: RunsRoot, row: dict, config: ScrubConfig) -> dict:
    """The verdicts row of one judged episode, its strings scrubbed with `config`; any error
    reading it makes only this row invalid."""
    out = dict.fromkeys(VERDICTS_SCHEMA)
    out["id"] = row["id"]
    try:
        with reading(JUDGE):
            files = runs_root.read_files(row, lambda name: name == JUDGE, as_json=True)
            if JUDGE not in files.data:  # gone since the episode was parsed
                raise BadInput(JUDGE, "required file is missing")
            judge = parse_judge(files.data[JUDGE].decode("utf-8", errors="replace"))
            answer = judge["answer"]
            text = {key: scrub_line(value, config) if isinstance(value, str) else value for key, value in (
                ("judge_model", judge["judge_model"]), ("rubric_version", judge["rubric_version"]),
                ("judged_at", judge["judged_at"]), ("judge_verdict", answer.get("verdict")),
                ("stored_host_label", judge["stored_host_label"]))}
            parsed = dict(judge_valid=True, **text,
                          defect_severities=[scrub_line(d["severity"], config) if isinstance(d["severity"], str)
                                             else d["severity"] for d in answer.get("defects", [])],
                          **{f"answer_{axis}": answer["scores"][axis] for axis in AXES})
            pl.DataFrame([{**out, **parsed}], schema=VERDICTS_SCHEMA)  # fits its columns
    except BadInput as exc:
        out.update(judge_valid=False, judge_error_file=scrub_line(exc.file, config), judge_error_line=exc.line,
                   judge_error_reason=scrub_line(exc.reason, config))
        return out
    out.update(parsed)
    return out


@dg.asset(partitions_def=series_partitions, backfill_policy=SERIES_BACKFILL, code_version="verdicts-3",
          group_name="series", kinds={"parquet"}, deps=["episodes"])
def verdicts(context: dg.AssetExecutionContext, runs_root: RunsRoot, scrub_settings: ScrubSettings,
             warehouse: Warehouse) -> dg.Output[dict[str, pl.DataFrame]]:
    """judge.json of every judged episode: the answer's scores and defects, versions, stored host label."""
    keys = context.partition_keys
    episodes = stored_series(warehouse, "episodes", keys)
    frames, metadata = {}, {}
    config = scrub_config(scrub_settings)
    for series in keys:
        judged = episodes[series].filter(pl.col("valid") & pl.col("judged")).to_dicts()
        if judged:  # its files here: on a bucket, this machine may have run no other step of the series
            runs_root.series_dir(series)
        frame = pl.DataFrame([read_verdict(runs_root, row, config) for row in judged], schema=VERDICTS_SCHEMA)
        bad = frame.filter(~pl.col("judge_valid"))
        for row in bad.iter_rows(named=True):
            line = f":{row['judge_error_line']}" if row["judge_error_line"] is not None else ""
            context.log.warning(f"invalid episode {row['id']}: {row['judge_error_file']}{line}: {row['judge_error_reason']}")
        frames[series] = frame
        metadata[series] = {
            "judged": frame.height,
            "invalid_judge_json": bad.height,
            "by_judge_verdict": dg.MetadataValue.json(
                {str(k): v for k, v in frame.group_by("judge_verdict").len().iter_rows()}),
            "preview": markdown_table(frame, ("id", "judge_valid", "judge_verdict", "stored_host_label",
                                              "rubric_version", "judge_error_reason")),
        }
    return series_output(context, frames, with_run_table(metadata))
