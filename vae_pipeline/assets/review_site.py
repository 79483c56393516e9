"""`review_site`: static pages for reviewing a release — never published, kept under VAE_HOME.

It reads what the pipeline already stores: the episode table, the published rows, the label
history in DuckDB, frames, contact sheets and staged videos under VAE_HOME, the latest results
of the publish checks from the instance (in a run with them, after them), and the leaderboard files when the dataset has them.
"""

import dagster as dg
import polars as pl

from vae_pipeline.assets.dataset import WITHHELD
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.labels import labels
from vae_pipeline.assets.publish_checks import AFTER_THE_CHECKS, PUBLISH_CHECKS
from vae_pipeline.assets.renders import renders
from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.domain.dataset.dataset_files import (
    AGREEMENT_PARQUET,
    LEADERBOARD_CHART,
    LEADERBOARD_PARQUET,
)
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.objects import exists
from vae_pipeline.domain.review.site import (
    BYTECODE,
    SITE_DIR,
    CheckResult,
    Leaderboard,
    SiteInputs,
    render_site,
    series_of_file,
    templates_version,
)
from vae_pipeline.domain.dataset.rows import load_withheld
from vae_pipeline.domain.verdicts.rubric import load_rubric
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.checks import check_items, check_outcomes
from vae_pipeline.storage.io_manager import read_table, stored_table
from vae_pipeline.storage.resources import (
    DatasetFolder,
    ProjectMeta,
    ScrubSettings,
    Warehouse,
    table_names,
)
from vae_pipeline.storage.versions import record_metadata

LEADERBOARD_FILES = (LEADERBOARD_CHART, LEADERBOARD_PARQUET, AGREEMENT_PARQUET)


def site_root(warehouse: Warehouse):
    return warehouse.root / SITE_DIR


def review_site_source(project_meta: ProjectMeta) -> str:
    """The version of what the site reads besides its upstream assets: its templates and the
    withheld list (for its reasons)."""
    return content_version(templates_version(), files_version([project_meta.root / WITHHELD]))


def latest_checks(instance: dg.DagsterInstance, warehouse: Warehouse,
                  specs: list[dg.AssetCheckSpec] | None = None) -> list[CheckResult]:
    """The latest result of every publish check (or of `specs`), as the instance recorded it
    (`passed` None when not evaluated), with every item it said (`check_items`)."""
    specs = specs if specs is not None else [spec for check in PUBLISH_CHECKS for spec in check.check_specs]
    outcomes = check_outcomes(instance, [spec.key for spec in specs])
    return [CheckResult(spec.name, spec.description or "", outcomes[spec.key].passed, outcomes[spec.key].description,
                        check_items(warehouse.home, outcomes[spec.key].metadata)) for spec in specs]


def build_warnings(instance: dg.DagsterInstance, warehouse: Warehouse) -> list[CheckResult]:
    """The build's own checks (the renders' and labels', e.g. the labels' drift warning): what the
    build prints of them, shown apart from what blocks the release."""
    return latest_checks(instance, warehouse, [spec for asset in (renders, labels) for spec in asset.check_specs])


def label_history(warehouse: Warehouse) -> dict[str, list[dict]]:
    with warehouse.connect() as con:
        if "label_history" not in table_names(con):
            return {}
        rows = con.execute("SELECT id, old_label, new_label, host_rubric_version, changed_at FROM label_history "
                           "ORDER BY changed_at").fetchall()
    history: dict[str, list[dict]] = {}
    for episode_id, old, new, version, changed_at in rows:
        history.setdefault(episode_id, []).append(
            {"old_label": old, "new_label": new, "host_rubric_version": version, "changed_at": changed_at})
    return history


def read_leaderboard(dataset_folder: DatasetFolder) -> Leaderboard | None:
    root = dataset_folder.root
    chart, ratings, agreement = (root / name for name in LEADERBOARD_FILES)
    if not (exists(chart) or exists(ratings)):
        return None
    return Leaderboard(chart=chart if exists(chart) else None,
                       ratings=read_table(ratings).to_dicts() if exists(ratings) else [],
                       agreement=read_table(agreement).to_dicts() if exists(agreement) else [])


def fetch_linked_files(warehouse: Warehouse, table: pl.DataFrame) -> None:
    """Every staged video, frame folder and archive the pages show or read, here (fetched from the
    home when it is a bucket: a listing per folder, not a request per file)."""
    def named(column: str) -> list[str]:
        return [name for name in table[column] if name] if column in table.columns else []

    warehouse.mirror.fetch(named("staged_video") + named("staged_archive"))
    warehouse.mirror.fetch_folders([sheet.rsplit("/", 1)[0] for sheet in named("contact_sheet")], "frames")


@dg.asset(code_version="review_site-2", group_name="review", kinds={"html"},
          deps=[dataset_episodes, dataset_card, "episode_table", "dataset_rows", "rubric"], op_tags=AFTER_THE_CHECKS)
def review_site(context: dg.AssetExecutionContext, project_meta: ProjectMeta, warehouse: Warehouse,
                dataset_folder: DatasetFolder, scrub_settings: ScrubSettings) -> dg.MaterializeResult:
    """Static pages to watch every episode with its facts, frames, verdict and scrub report; a new
    series renders its own pages and the index, not the others'."""
    try:
        _, _, withheld = load_withheld(project_meta.root / WITHHELD)
    except BadInput as exc:
        raise dg.Failure(description=f"meta/{exc}") from None
    dataset_rows, rubric = (stored_table(warehouse, name, context.instance) for name in ("dataset_rows", "rubric"))
    inputs = SiteInputs(
        rows=stored_table(warehouse, "episode_table", context.instance),
        published=set(dataset_rows["id"].to_list()) if dataset_rows.height else set(),
        withheld=withheld, checks=latest_checks(context.instance, warehouse), history=label_history(warehouse),
        rubric=load_rubric(project_meta.root / rubric["file"][0]), leaderboard=read_leaderboard(dataset_folder),
        scrub=scrub_config(scrub_settings), warnings=build_warnings(context.instance, warehouse))
    fetch_linked_files(warehouse, inputs.rows)
    report = render_site(inputs, warehouse.root, site_root(warehouse))
    # on a bucket one object a series (its pages, search entries and state), not one a page
    warehouse.mirror.publish_tree(site_root(warehouse), series_of_file, local_only=(f"{BYTECODE}/",))
    failing = [c.name for c in inputs.checks if c.passed is False]
    return dg.MaterializeResult(
        data_version=dg.DataVersion(content_version(report.index.read_bytes())),
        metadata={
            "site": dg.MetadataValue.url(report.index.resolve().as_uri()),
            # a page served over http may not open file:// links: say how else to get there
            "open_with": dg.MetadataValue.md("`vae review` prints this URL; `vae review --serve` serves the site "
                                             "on 127.0.0.1"),
            "series": len(report.series_rendered) + len(report.series_unchanged),
            "series_rendered": dg.MetadataValue.json(report.series_rendered),
            "series_unchanged": len(report.series_unchanged),
            "pages_written": report.pages_written,
            "failing_checks": dg.MetadataValue.md("\n".join(f"- `{name}`" for name in failing) or "none"),
            **record_metadata(context, review_site_source(project_meta)),
        })
