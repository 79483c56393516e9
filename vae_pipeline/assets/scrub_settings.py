"""The scrub's settings as the assets that scrub (`episodes` for the brief, `bundles`) see them."""

from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.scrub.texts import ScrubConfig, parse_user_names
from vae_pipeline.domain.scrub.allow import load_allow_list
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.resources import ProjectMeta, ScrubSettings

ALLOW_LIST = "scrub-allow.jsonl"


def scrub_config(settings: ScrubSettings, project_meta: ProjectMeta | None = None) -> ScrubConfig:
    """What the scrub replaces; with `project_meta`, also the reviewed findings it lets through."""
    allow = load_allow_list(project_meta.root / ALLOW_LIST) if project_meta else frozenset()
    return ScrubConfig(hostname=settings.harness_hostname or None, usernames=parse_user_names(settings.harness_user),
                       allow=allow)


def replacements_source(settings: ScrubSettings) -> str:
    """The version of what the scrub replaces (hashed: never the names themselves)."""
    return content_version(settings.harness_hostname, settings.harness_user)


def scrub_source(project_meta: ProjectMeta, settings: ScrubSettings) -> str:
    """`replacements_source` and the reviewed findings of meta/scrub-allow.jsonl."""
    return content_version(replacements_source(settings), files_version([project_meta.root / ALLOW_LIST]))
