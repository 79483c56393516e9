"""The scrub applied to one line the pipeline prints or stores about an input: an error reason, a
file or folder name, a log line. Credentials and home paths are always replaced; the harness's
host and user names too when the caller knows them."""

from __future__ import annotations

from vae_pipeline.domain.scrub.texts import ScrubConfig, scrub_text

NO_NAMES = ScrubConfig()


def scrub_line(text: str, config: ScrubConfig = NO_NAMES) -> str:
    """`text` with what the scrub replaces replaced (findings such as e-mails are left as they are:
    they are reported, not secrets)."""
    if not text:
        return text
    return scrub_text(text.encode("utf-8", errors="replace"), "", config).data.decode("utf-8", errors="replace")
