"""The asset graph, one module per stage of the lineage (Dagster wiring; the logic is in `domain`)."""

from vae_pipeline.assets.bundles import bundles
from vae_pipeline.assets.dataset import dataset_rows, episode_table
from vae_pipeline.assets.dataset_card import dataset_card
from vae_pipeline.assets.dataset_episodes import dataset_episodes
from vae_pipeline.assets.episodes import episodes
from vae_pipeline.assets.labels import labels
from vae_pipeline.assets.leaderboard import entrants, human_votes, judge_agreement, leaderboard, pairwise_judgments
from vae_pipeline.assets.meta import brief_bank, dataset_meta, rubric
from vae_pipeline.assets.publish_checks import PUBLISH_CHECKS
from vae_pipeline.assets.renders import renders
from vae_pipeline.assets.review_site import review_site
from vae_pipeline.assets.verdicts import verdicts

ASSETS = [brief_bank, rubric, dataset_meta, episodes, renders, verdicts, labels, bundles, episode_table,
          dataset_rows, dataset_episodes, dataset_card, review_site, entrants, pairwise_judgments, human_votes,
          leaderboard, judge_agreement]

__all__ = ["ASSETS", "PUBLISH_CHECKS"]
