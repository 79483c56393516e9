"""A dataset folder's bytes as two builds of the same runs must agree on: every file's sha256,
with the contract's clock readings masked (shared by the fault tests and the Celery benchmark)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import polars as pl

# The two clock readings the contract puts in the dataset: when a label was recomputed
# (`rehosted_at`, verdicts.md) and when the card was refreshed. Two clean builds differ there and
# nowhere else, so they are masked before hashing (in Parquet: the column, then its rows' bytes).
CLOCK_TEXT = [(re.compile(rb'("rehosted_at"\s*:\s*)"[^"]*"'), rb'\1"<clock>"'),
              (re.compile(rb"Last refreshed: [0-9: -]+ \(UTC\)"), b"Last refreshed: <clock> (UTC)")]
CLOCK_COLUMN = "rehosted_at"


def clock_masked(path: Path) -> bytes:
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        if CLOCK_COLUMN in frame.columns:
            return frame.with_columns(pl.lit("<clock>").alias(CLOCK_COLUMN)).write_ndjson().encode()
        return path.read_bytes()
    data = path.read_bytes()
    if path.suffix in (".json", ".jsonl", ".md"):
        for pattern, mask in CLOCK_TEXT:
            data = pattern.sub(mask, data)
    return data


def published(dataset: Path) -> dict[str, str]:
    """Every file of the dataset folder and the sha256 of its bytes (clock readings masked)."""
    return {p.relative_to(dataset).as_posix(): hashlib.sha256(clock_masked(p)).hexdigest()
            for p in sorted(dataset.rglob("*")) if p.is_file()}
