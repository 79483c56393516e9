"""The scrub applied to one line the pipeline prints or stores about an input: an error reason, a
file or folder name, a log line. Credentials and home paths are always replaced; the harness's
host and user names too when the caller knows them."""

from __future__ import annotations

from functools import lru_cache

from vae_pipeline.domain.scrub.texts import ScrubConfig, scrub_text

NO_NAMES = ScrubConfig()
SHORT = 256  # a name or a value of series.json: the same few recur in every series and every build


def _scrubbed(text: str, config: ScrubConfig) -> str:
    return scrub_text(text.encode("utf-8", errors="replace"), "", config).data.decode("utf-8", errors="replace")


_scrubbed_short = lru_cache(maxsize=8192)(_scrubbed)


def scrub_line(text: str, config: ScrubConfig = NO_NAMES) -> str:
    """`text` with what the scrub replaces replaced (findings such as e-mails are left as they are:
    they are reported, not secrets). Short lines are remembered by text and names."""
    if not text:
        return text
    return _scrubbed_short(text, config) if len(text) <= SHORT else _scrubbed(text, config)
