"""Versions of what an asset produced: a hash of values, or of a table's rows (all of it, or by series)."""

from __future__ import annotations

import hashlib
from array import array

import polars as pl


def content_version(*parts: object) -> str:
    """A data version from the values an asset produced (or any stable description of them)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def rows_version(frame: pl.DataFrame, *extra: object) -> str:
    """A version of a table's rows (plus anything else that identifies them): its schema and
    Polars' hash of each row, in order. Those hashes are stable within a Polars version, not
    across one: after an upgrade a table's version changes once, and what reads it is
    materialized again."""
    return content_version(str(frame.schema), frame.hash_rows().to_numpy().tobytes(), *extra)


def series_versions(frame: pl.DataFrame) -> dict[str, str]:
    """The version of each series' rows of a table with `series` (as `rows_version`, by series)."""
    if not frame.height:
        return {}
    schema = str(frame.schema)
    hashed = frame.select("series", pl.Series("row", frame.hash_rows()))
    return {series: content_version(schema, array("Q", rows).tobytes())
            for series, rows in hashed.group_by("series", maintain_order=True).agg("row").iter_rows()}
