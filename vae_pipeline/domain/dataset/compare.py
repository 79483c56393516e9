"""Two dataset folders compared as their readers see them: every file by name and bytes, with the
two clock readings the contract puts in a dataset masked — `rehosted_at` (when a label was
recomputed, verdicts.md) and the card's "Last refreshed" time. Two builds of the same runs, on disk
or on a bucket, differ there and nowhere else."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import PurePosixPath

import polars as pl
from upath import UPath

from vae_pipeline.domain.objects import files_under, read_bytes

CLOCK_TEXT = [(re.compile(rb'("rehosted_at"\s*:\s*)"[^"]*"'), rb'\1"<clock>"'),
              (re.compile(rb"Last refreshed: [0-9: -]+ \(UTC\)"), b"Last refreshed: <clock> (UTC)")]
CLOCK_COLUMN = "rehosted_at"


def clock_masked(name: str, data: bytes) -> bytes:
    """The file's bytes with the clock readings masked (a Parquet table: its rows, the column masked)."""
    suffix = PurePosixPath(name).suffix
    if suffix == ".parquet":
        frame = pl.read_parquet(io.BytesIO(data))
        if CLOCK_COLUMN in frame.columns:
            return frame.with_columns(pl.lit("<clock>").alias(CLOCK_COLUMN)).write_ndjson().encode()
        return data
    if suffix in (".json", ".jsonl", ".md"):
        for pattern, mask in CLOCK_TEXT:
            data = pattern.sub(mask, data)
    return data


def masked_digests(folder: UPath) -> dict[str, str]:
    """Every file under the folder (or bucket prefix) by its relative name: the sha256 of its
    bytes, clock readings masked."""
    return {name: hashlib.sha256(clock_masked(name, read_bytes(path))).hexdigest() for name, path in files_under(folder)}


def differences(first: dict[str, str], second: dict[str, str], names: tuple[str, str]) -> list[str]:
    """One line per file in one folder only, or whose masked bytes differ, from each folder's
    `masked_digests` (`names`: how to call the two folders); none when they hold the same dataset."""
    return ([f"only in {names[0]}: {name}" for name in sorted(first.keys() - second.keys())]
            + [f"only in {names[1]}: {name}" for name in sorted(second.keys() - first.keys())]
            + [f"differs: {name}" for name in sorted(first.keys() & second.keys()) if first[name] != second[name]])
