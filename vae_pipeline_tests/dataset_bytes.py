"""A dataset folder's bytes as two builds of the same runs must agree on: every file's sha256,
with the contract's clock readings masked (shared by the fault tests and the Celery benchmark;
`vae compare` compares two folders the same way)."""

from __future__ import annotations

from pathlib import Path

from vae_pipeline.domain.dataset.compare import masked_digests
from vae_pipeline.domain.objects import location


def published(dataset: Path) -> dict[str, str]:
    """Every file of the dataset folder and the sha256 of its bytes (clock readings masked)."""
    return masked_digests(location(str(dataset)))
