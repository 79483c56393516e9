"""The files of a dataset folder that the pipeline produced: the publish plan sends these and
nothing else, so a `.part` left by a killed write, an editor backup or a file a person dropped
there never reaches the Hub.

What is ours: the files at fixed paths below (by the asset that writes them), the files every
published row names (its video, its archive and the manifest beside it), and the dataset's
`meta/` files as `dataset_meta` writes them (the caller passes that list).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl
from upath import UPath

from vae_pipeline.domain.objects import listing, read_bytes
from vae_pipeline.domain.check_items import said_of

ROWS_JSONL = "episodes.jsonl"
ROWS_PARQUET = "data/episodes.parquet"
LEADERBOARD_PARQUET = "data/leaderboard.parquet"
LEADERBOARD_CHART = "leaderboard.png"
AGREEMENT_PARQUET = "data/judge_agreement.parquet"


@dataclass(frozen=True)
class ProducedFile:
    """A file at a fixed path of the dataset folder and the asset that writes it. `required`:
    always written (missing means the folder is not a finished build); otherwise sent when present."""

    path: str
    asset: str
    required: bool = True


# A stage that writes a new file to the dataset folder registers it here.
PRODUCED_FILES: tuple[ProducedFile, ...] = (
    ProducedFile(ROWS_JSONL, "dataset_rows"),
    ProducedFile(ROWS_PARQUET, "dataset_rows"),
    ProducedFile("README.md", "dataset_card"),
    ProducedFile(LEADERBOARD_PARQUET, "leaderboard"),
    ProducedFile(LEADERBOARD_CHART, "leaderboard"),
    ProducedFile(AGREEMENT_PARQUET, "judge_agreement"),
)


class DatasetFolderError(Exception):
    """The dataset folder cannot be published as it is; one line."""


def row_files(row: dict) -> list[str]:
    """The files a published row names: its video (if delivered), archive and manifest."""
    files = [row["video"]] if row.get("video") else []
    if row.get("archive"):
        archive = row["archive"]
        files += [archive, archive.removesuffix(".tar.zst") + ".json"]
    return files


def read_jsonl_rows(dataset_dir: UPath) -> list[dict]:
    path = dataset_dir / ROWS_JSONL
    try:
        return [json.loads(line) for line in read_bytes(path).decode("utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetFolderError(f"{ROWS_JSONL}: cannot be read ({type(exc).__name__})") from None


def produced_files(dataset_dir: UPath, meta_files: Iterable[str]) -> set[str]:
    """Every path (relative, posix) of the dataset folder the pipeline produced and publishes.

    Raises DatasetFolderError when one of them is missing: the folder is not a finished build,
    and planning without it would delete the file from the Hub.
    """
    present = set(listing(dataset_dir))
    ours = {f.path for f in PRODUCED_FILES if f.required or f.path in present}
    ours |= set(meta_files)
    if ROWS_JSONL in present:
        ours |= {path for row in read_jsonl_rows(dataset_dir) for path in row_files(row)}
    writers = {f.path: f.asset for f in PRODUCED_FILES}
    missing = [f"{path} (from {writers[path]})" if path in writers else path
               for path in sorted(ours) if path not in present]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise DatasetFolderError(f"missing from the dataset folder: {shown}; run `vae build`")
    return ours


def rows_files_disagree(dataset_dir: UPath) -> list[dict]:
    """How episodes.jsonl and data/episodes.parquet differ, by episode (`said_of`; empty: the same rows)."""
    root = dataset_dir
    try:
        parquet = pl.read_parquet(io.BytesIO(read_bytes(root / ROWS_PARQUET)))
    except (OSError, pl.exceptions.PolarsError) as exc:
        return [said_of(None, f"{ROWS_PARQUET}: cannot be read ({type(exc).__name__})")]
    # the parquet rows as the same frame would be written to JSON lines: byte for byte what the
    # build writes to episodes.jsonl, so equal bytes need no row parsed
    as_jsonl = parquet.write_ndjson()
    try:
        if read_bytes(root / ROWS_JSONL) == as_jsonl.encode() and not parquet["id"].is_duplicated().any():
            return []
    except (OSError, pl.exceptions.ColumnNotFoundError):
        pass  # said below, row by row
    try:
        jsonl = read_jsonl_rows(root)
    except DatasetFolderError as exc:
        return [said_of(None, str(exc))]
    from_parquet = [json.loads(line) for line in as_jsonl.splitlines() if line.strip()]
    by_id_jsonl, by_id_parquet = _by_id(jsonl), _by_id(from_parquet)
    problems = [said_of(by_id_jsonl[i], f"only in {ROWS_JSONL}")
                for i in sorted(by_id_jsonl.keys() - by_id_parquet.keys())]
    problems += [said_of(by_id_parquet[i], f"only in {ROWS_PARQUET}")
                 for i in sorted(by_id_parquet.keys() - by_id_jsonl.keys())]
    problems += [said_of(by_id_jsonl[i], f"the row differs between {ROWS_JSONL} and {ROWS_PARQUET}")
                 for i in sorted(by_id_jsonl.keys() & by_id_parquet.keys()) if by_id_jsonl[i] != by_id_parquet[i]]
    if len(jsonl) != len(by_id_jsonl) or len(from_parquet) != len(by_id_parquet):
        problems.append(said_of(None, "an episode id appears twice"))
    return problems


def _by_id(rows: list[dict]) -> dict[str, dict]:
    return {str(row.get("id")): row for row in rows}
