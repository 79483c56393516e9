"""The leaderboard (contract 4): who is ranked, the pairwise judgments and human votes, the
ratings per source and axis, and the judge's agreement with people.

These assets read the episodes, the judge's scores and the bundles (which decide what is
published), never the labels: a rehost does not recompute them. A new series or a new
comparisons batch does.
"""

import base64

import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.assets.dataset import join_stages, read_withheld, stage_tables, withheld_source
from vae_pipeline.assets.metadata import REFUSES_THE_RELEASE, markdown_table, problem_list
from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.domain.dataset.dataset_files import (
    AGREEMENT_PARQUET,
    LEADERBOARD_CHART,
    LEADERBOARD_PARQUET,
)
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.leaderboard.ratings import (
    EVALUATION,
    OVERALL,
    Entrant,
    bad_lines_frame,
    combine_orders,
    rank_within_minor_version,
    ranked_series,
    ranked_version,
    read_judgments,
    read_votes,
    unranked_series,
)
from vae_pipeline.domain.leaderboard.ratings import (
    judge_agreement as agreement_table,
)
from vae_pipeline.domain.leaderboard.ratings import (
    leaderboard as leaderboard_table,
)
from vae_pipeline.domain.leaderboard.tables import axis_table, chart_of, rows_of
from vae_pipeline.domain.objects import read_bytes, write_if_changed
from vae_pipeline.domain.dataset.rows import publishable
from vae_pipeline.domain.verdicts.rubric import AXES as SCORE_AXES
from vae_pipeline.domain.episodes.series import COMPARISONS_DIR, discover_series
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.io_manager import parquet_bytes, stored_table
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, RunsRoot, ScrubSettings, Warehouse
from vae_pipeline.storage.versions import frame_version, record_metadata, written_source

HUMAN_DIR = "human"

ENTRANT_SCHEMA = {
    "id": pl.String, "series": pl.String, "brief_id": pl.String, "model": pl.String, "ranked": pl.Boolean,
    "harness_error": pl.Boolean, **{f"score_{axis}": pl.Int64 for axis in SCORE_AXES},
    "benchmark_version": pl.String, "not_ranked": pl.String,
}  # fmt: skip


# ---------------------------------------------------------------- who is ranked


def read_evaluation(project_meta: ProjectMeta) -> list[str] | None:
    """The series `meta/evaluation.json` lists, or None when there is no such file (raises BadInput)."""
    return ranked_series(project_meta.root / EVALUATION)


def actor_models(runs_root: RunsRoot, scrub_settings: ScrubSettings) -> dict[str, str | None]:
    """Each series' `actor.model` from its series.json (None when it names none), scrubbed with
    the harness's names."""
    found, _ = discover_series(runs_root.root, scrub_config(scrub_settings))
    models = {}
    for series in found:
        actor = series.info.get("actor") or {}
        models[series.series_id] = actor.get("model") if isinstance(actor.get("model"), str) else None
    return models


def entrants_source(runs_root: RunsRoot, project_meta: ProjectMeta, scrub_settings: ScrubSettings,
                    models: dict[str, str | None] | None = None) -> str:
    """What `entrants` reads besides its inputs: withheld and evaluation lists, each series' model
    (`models` when the caller has read them: every series.json is read once)."""
    models = models if models is not None else actor_models(runs_root, scrub_settings)
    return content_version(withheld_source(project_meta), files_version([project_meta.root / EVALUATION]),
                           sorted(models.items()))


@dg.asset(code_version="entrants-4", group_name="leaderboard", kinds={"polars"},
          deps=("episodes", "verdicts", "bundles"))
def entrants(context: dg.AssetExecutionContext, runs_root: RunsRoot, project_meta: ProjectMeta,
             scrub_settings: ScrubSettings, warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """Every published episode with its actor model, its judge's scores, and whether it is ranked
    (its series is listed in `meta/evaluation.json`, or there is none; not a harness error; of the
    newest benchmark minor version), or why not."""
    try:
        listed = read_evaluation(project_meta)
    except BadInput as exc:
        raise dg.Failure(description=f"meta/{exc}") from None
    withheld_episodes, withheld_series = read_withheld(project_meta)
    table = join_stages(*stage_tables(context, warehouse, ("episodes", "verdicts", "bundles")))
    published = publishable(table, withheld_episodes, withheld_series) if table.height else table
    models = actor_models(runs_root, scrub_settings)
    unjudged = [pl.lit(None, pl.Int64).alias(f"answer_{axis}") for axis in SCORE_AXES
                if f"answer_{axis}" not in published.columns]  # no stored verdict has rows
    frame = pl.DataFrame(schema=ENTRANT_SCHEMA) if not published.height else rank_within_minor_version(
        published.with_columns(
            *unjudged, model=pl.col("series").replace_strict(models, default=None, return_dtype=pl.String),
        ).select(
            "id", "series", "brief_id", "model", harness_error=pl.col("harness_error").fill_null(False),
            **{f"score_{axis}": f"answer_{axis}" for axis in SCORE_AXES}, benchmark_version="benchmark_version",
        ), listed).select(*ENTRANT_SCHEMA).cast(ENTRANT_SCHEMA)
    ranked = frame.filter("ranked")
    # the listing is part of the version: a listed series that is not published changes no row, but
    # must re-render the card so that its check `ranked_series_published` runs again
    return dg.Output(frame, data_version=frame_version(frame, listed), metadata={
        "published": frame.height,
        "ranked": ranked.height,
        "models": dg.MetadataValue.json(dict(sorted(ranked.group_by("model").len().iter_rows()))),
        "ranked_series": dg.MetadataValue.json(sorted(set(ranked["series"]))),
        "benchmark_version_ranked": ranked_version(frame) or "none",
        "not_ranked": markdown_table(pl.DataFrame(unranked_series(frame), schema={
            "series": pl.String, "model": pl.String, "benchmark_version": pl.String, "reason": pl.String}),
            ("series", "model", "benchmark_version", "reason")),
        **record_metadata(context, entrants_source(runs_root, project_meta, scrub_settings, models)),
    })


def entrant_map(frame: pl.DataFrame) -> dict[str, Entrant]:
    return {row["id"]: Entrant(row["brief_id"], row["model"], row["ranked"]) for row in frame.iter_rows(named=True)}


# ---------------------------------------------------------------- comparisons


def comparison_files(runs_root: RunsRoot, human: bool) -> list[tuple[str, str]]:
    """(name under comparisons/, text) of the judge's batches or of the human votes, sorted."""
    folder = runs_root.mirror.sync(COMPARISONS_DIR) / (HUMAN_DIR if human else "")
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    prefix = f"{HUMAN_DIR}/" if human else ""
    return [(prefix + path.name, path.read_text(encoding="utf-8", errors="replace")) for path in paths]


def comparisons_source(runs_root: RunsRoot, human: bool) -> str:
    """Names, sizes and mtimes (ETags on a bucket) of the batches (or of the human votes)."""
    folder = f"{COMPARISONS_DIR}/{HUMAN_DIR}" if human else COMPARISONS_DIR
    if not runs_root.holds_folder(folder):
        return "absent"
    return content_version(runs_root.fingerprint(folder, top_jsonl=not human))


def _with_bad_lines(valid: pl.DataFrame, bad: list) -> pl.DataFrame:
    """Valid rows and bad lines in one table; a bad line has its `reason` and nothing else."""
    return pl.concat([valid.with_columns(reason=pl.lit(None, pl.String)), bad_lines_frame(bad)],
                     how="diagonal_relaxed").sort("file", "line", nulls_last=True)


def _report_bad(context: dg.AssetExecutionContext, bad: list) -> None:
    for line in bad:
        context.log.warning(f"comparisons/{line.file}:{line.line}: {line.reason} (line skipped)")


@dg.asset(code_version="pairwise_judgments-1", group_name="leaderboard", kinds={"polars"}, deps=["entrants"])
def pairwise_judgments(context: dg.AssetExecutionContext, runs_root: RunsRoot,
                       warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """The pairwise judge's lines from `comparisons/*.jsonl`, one row per line and axis; a bad line
    is a row with its file, line and reason, and takes no further part."""
    entrants = stored_table(warehouse, "entrants", context.instance)
    judgments, bad = read_judgments(comparison_files(runs_root, human=False), entrant_map(entrants))
    _report_bad(context, bad)
    frame = _with_bad_lines(judgments, bad)
    return dg.Output(frame, data_version=frame_version(frame), metadata={
        "lines": judgments.select("file", "line").n_unique() if judgments.height else 0,
        "judgments": judgments.height,
        "bad_lines": len(bad),
        "bad_preview": markdown_table(bad_lines_frame(bad), ("file", "line", "reason")),
        **record_metadata(context, comparisons_source(runs_root, human=False)),
    })


@dg.asset(code_version="human_votes-1", group_name="leaderboard", kinds={"polars"}, deps=["entrants"])
def human_votes(context: dg.AssetExecutionContext, runs_root: RunsRoot,
                warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """People's votes from `comparisons/human/*.jsonl`, one row per line (bad lines as in
    `pairwise_judgments`)."""
    entrants = stored_table(warehouse, "entrants", context.instance)
    votes, bad = read_votes(comparison_files(runs_root, human=True), entrant_map(entrants))
    _report_bad(context, bad)
    frame = _with_bad_lines(votes, bad)
    return dg.Output(frame, data_version=frame_version(frame), metadata={
        "lines": votes.height, "bad_lines": len(bad),
        "bad_preview": markdown_table(bad_lines_frame(bad), ("file", "line", "reason")),
        **record_metadata(context, comparisons_source(runs_root, human=True)),
    })


def valid_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("reason").is_null()).drop("reason")


# ---------------------------------------------------------------- ratings and agreement


def leaderboard_source(project_meta: ProjectMeta) -> str:
    return content_version(project_meta.leaderboard_rounds, project_meta.leaderboard_seed)


def overall_markdown(table: pl.DataFrame) -> str:
    parts = []
    for source in ("scores", "pairwise"):
        rows = rows_of(table, source, OVERALL)
        if rows:
            parts += [f"**{source} · overall**", "", axis_table(rows), ""]
    return "\n".join(parts) or "no leaderboard: fewer than two actor models on shared briefs"


def _drawn(path: UPath) -> bytes | None:
    """The chart the dataset folder holds (None: none there)."""
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


@dg.asset(code_version="leaderboard-1", group_name="leaderboard", kinds={"parquet"},
          deps=["entrants", "pairwise_judgments"])
def leaderboard(context: dg.AssetExecutionContext, project_meta: ProjectMeta, dataset_folder: DatasetFolder,
                warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """Bradley–Terry ratings per source (`scores`, `pairwise`), axis and `overall`, with bootstrap
    intervals and ranks: `data/leaderboard.parquet` and the chart `leaderboard.png`."""
    entrants = stored_table(warehouse, "entrants", context.instance)
    ranked = entrants.filter("ranked") if entrants.height else entrants
    combined = combine_orders(valid_rows(stored_table(warehouse, "pairwise_judgments", context.instance)))
    table = leaderboard_table(ranked, combined, rounds=project_meta.leaderboard_rounds,
                              seed=project_meta.leaderboard_seed)
    root = dataset_folder.root
    write_if_changed(root / LEADERBOARD_PARQUET, parquet_bytes(table))
    chart = chart_of(table, _drawn(root / LEADERBOARD_CHART))
    write_if_changed(root / LEADERBOARD_CHART, chart)
    image = f"![leaderboard](data:image/png;base64,{base64.b64encode(chart).decode()})"
    return dg.Output(table, data_version=frame_version(table), metadata={
        "models": table["model"].n_unique() if table.height else 0,
        "rows": table.height,
        "overall": dg.MetadataValue.md(overall_markdown(table)),
        "chart": dg.MetadataValue.md(image),
        "rounds": project_meta.leaderboard_rounds, "seed": project_meta.leaderboard_seed,
        "parquet": dg.MetadataValue.path(str(root / LEADERBOARD_PARQUET)),
        **record_metadata(context, written_source(leaderboard_source(project_meta), dataset_folder.source())),
    })


@dg.asset(code_version="judge_agreement-1", group_name="leaderboard", kinds={"parquet"},
          deps=["pairwise_judgments", "human_votes"])
def judge_agreement(context: dg.AssetExecutionContext, dataset_folder: DatasetFolder,
                    warehouse: Warehouse) -> dg.Output[pl.DataFrame]:
    """How far the pairwise judge agrees with people, by confidence bucket; its order consistency
    and position bias: `data/judge_agreement.parquet`."""
    judgments = valid_rows(stored_table(warehouse, "pairwise_judgments", context.instance))
    votes = valid_rows(stored_table(warehouse, "human_votes", context.instance))
    table = agreement_table(judgments, combine_orders(judgments), votes)
    write_if_changed(dataset_folder.root / AGREEMENT_PARQUET, parquet_bytes(table))
    return dg.Output(table, data_version=frame_version(table), metadata={
        "vote_lines": int(table.filter(pl.col("bucket") == "all")["lines"].sum() or 0),
        "table": markdown_table(table, ("axis", "bucket", "lines", "agreement", "order_consistency",
                                        "position_bias"), limit=40),
        **record_metadata(context, written_source(None, dataset_folder.source())),
    })


# ---------------------------------------------------------------- publish checks
# On `dataset_card`, which the release depends on and which re-renders whenever these inputs
# change, so a refresh re-runs them; a failure refuses the release (see hub_release), nothing else.


def ranked_series_published(project_meta: ProjectMeta, entrants: pl.DataFrame) -> dg.AssetCheckResult:
    try:
        listed = read_evaluation(project_meta) or []
    except BadInput as exc:
        return dg.AssetCheckResult(check_name="ranked_series_published", passed=False,
                                   description=f"meta/{exc}. Fix meta/evaluation.json.")
    published = set(entrants["series"])
    missing = [series for series in listed if series not in published]
    return dg.AssetCheckResult(
        check_name="ranked_series_published", passed=not missing,
        description="every ranked series is published" if not missing else
        f"meta/{EVALUATION} ranks series the dataset does not publish: {', '.join(missing)}. Complete or "
        f"un-withhold the series, or remove it from meta/{EVALUATION}.",
        metadata={"listed": len(listed), "not_published": len(missing)})


def no_bad_comparisons(pairwise_judgments: pl.DataFrame, human_votes: pl.DataFrame) -> dg.AssetCheckResult:
    bad = pl.concat([frame.filter(pl.col("reason").is_not_null()).select("file", "line", "reason")
                     for frame in (pairwise_judgments, human_votes)]).unique().sort("file", "line")
    problems = [f"comparisons/{r['file']}:{r['line']} {r['reason']}" for r in bad.iter_rows(named=True)]
    return dg.AssetCheckResult(
        check_name="no_bad_comparisons", passed=not problems,
        description="every comparisons line is valid" if not problems else
        problem_list(f"{len(problems)} bad comparisons line(s), skipped by the leaderboard:", problems,
                     "Fix or remove the lines."),
        metadata={"bad_lines": len(problems), "lines": markdown_table(bad, ("file", "line", "reason"))})


CARD_CHECKS = {
    "ranked_series_published": "Every series meta/evaluation.json ranks is published",
    "no_bad_comparisons": "Every line of comparisons/ (judge batches and human votes) is valid",
}


@dg.multi_asset_check(specs=[dg.AssetCheckSpec(name, asset="dataset_card", description=about + REFUSES_THE_RELEASE,
                                              additional_deps=["entrants", "pairwise_judgments", "human_votes"])
                             for name, about in CARD_CHECKS.items()],
                      can_subset=True)
def dataset_card_checks(context: dg.AssetCheckExecutionContext, project_meta: ProjectMeta, warehouse: Warehouse):
    """The leaderboard's publish checks that the run selected, in one step (one step's cost, not two)."""
    selected = {key.name for key in context.selected_asset_check_keys}
    if "ranked_series_published" in selected:
        yield ranked_series_published(project_meta, stored_table(warehouse, "entrants", context.instance))
    if "no_bad_comparisons" in selected:
        yield no_bad_comparisons(*(stored_table(warehouse, name, context.instance)
                                   for name in ("pairwise_judgments", "human_votes")))


LEADERBOARD_CHECKS = [dataset_card_checks]
