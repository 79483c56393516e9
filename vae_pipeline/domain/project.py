"""Where the project's own files are: its checkout (an editable install runs from it) and its meta/."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# The project's own meta/, found from the package's location, so `vae` finds it from any folder and
# an operator's edits to it (withheld.jsonl, scrub-allow.jsonl, a new rubric) take effect at the next
# build; VAE_META_DIR overrides it.
PROJECT_META = PROJECT_ROOT / "meta"
