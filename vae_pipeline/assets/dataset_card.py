"""`dataset_card`: the dataset's README.md, its stats table regenerated from the published rows."""

from datetime import UTC, datetime

import dagster as dg

from vae_pipeline.assets.leaderboard import human_votes, pairwise_judgments
from vae_pipeline.domain.dataset.card import CARD_COLUMNS, render_card, stats_rows
from vae_pipeline.domain.leaderboard.tables import leaderboard_section
from vae_pipeline.domain.objects import put_bytes
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.io_manager import stored_table
from vae_pipeline.storage.resources import DatasetFolder, Warehouse
from vae_pipeline.storage.versions import record_metadata, written_source

CARD_INPUTS = ("dataset_rows", "rubric", "leaderboard", "judge_agreement", "entrants")  # the tables the card reads


# the comparisons: the leaderboard's publish checks on this asset read them (and entrants)
@dg.asset(code_version="dataset_card-2", group_name="dataset", kinds={"markdown"},
          deps=[pairwise_judgments, human_votes, *CARD_INPUTS])
def dataset_card(context: dg.AssetExecutionContext, dataset_folder: DatasetFolder,
                 warehouse: Warehouse) -> dg.MaterializeResult:
    """README.md with front matter (viewer configs), the stats and family tables, the leaderboard
    (naming the benchmark version it ranks and the series it does not), and the refresh time."""
    dataset_rows, rubric, leaderboard, judge_agreement, entrants = (
        stored_table(warehouse, name, context.instance) for name in CARD_INPUTS)
    rows = dataset_rows.select(c for c in CARD_COLUMNS if c in dataset_rows.columns).to_dicts()
    refreshed_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    series = sorted({row["series"] for row in rows})
    board = leaderboard_section(leaderboard, judge_agreement, entrants)
    card = render_card(rows, refreshed_at=refreshed_at, rubric_version=rubric["version"][0], series=series,
                       leaderboard=board)
    put_bytes(dataset_folder.root / "README.md", card.encode())
    stats = "\n".join(f"| {name} | {value} |" for name, value in stats_rows(rows))
    return dg.MaterializeResult(
        data_version=dg.DataVersion(content_version(stats, rubric["version"][0], series, board)),
        metadata={"rows": len(rows), "refreshed_at": refreshed_at,
                  "stats": dg.MetadataValue.md("| | |\n|---|---|\n" + stats),
                  **record_metadata(context, written_source(None, dataset_folder.source()))},
    )
