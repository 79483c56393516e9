"""`dataset_episodes`: the published episodes' files — videos, archives and manifests."""

import json
import os
from pathlib import Path

import dagster as dg
import polars as pl

from vae_pipeline.domain.episode_files import archive_digests
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import link_or_copy, sha256_file, write_if_changed
from vae_pipeline.domain.manifest import manifest_bytes
from vae_pipeline.domain.rows import said_of
from vae_pipeline.storage.resources import DatasetFolder, Warehouse
from vae_pipeline.storage.versions import content_version, record_metadata


def place(source: Path, target: Path) -> bool:
    """Make `target` hold `source`'s bytes; False when it already does."""
    if target.exists() and (os.path.samefile(source, target) or
                            (target.stat().st_size == source.stat().st_size and sha256_file(target) == sha256_file(source))):
        return False
    link_or_copy(source, target)
    return True


def _remove_unlisted(folder: Path, keep: set[Path]) -> int:
    removed = 0
    for path in sorted(folder.rglob("*")) if folder.exists() else []:
        if path.is_file() and path not in keep:
            path.unlink()
            removed += 1
    return removed


@dg.asset(code_version="dataset_episodes-1", group_name="dataset", kinds={"zstd"})
def dataset_episodes(context: dg.AssetExecutionContext, warehouse: Warehouse, dataset_folder: DatasetFolder,
                     episode_table: pl.DataFrame, dataset_rows: pl.DataFrame):
    """videos/<id>.mp4, episodes/<date>/<id>.tar.zst and <id>.json for every published row; nothing else."""
    root = dataset_folder.root
    published = set(dataset_rows["id"].to_list())
    rows = episode_table.filter(pl.col("id").is_in(sorted(published))).to_dicts() if published else []
    keep: set[Path] = set()
    written = 0
    for row in rows:
        if row["video"] and row.get("staged_video"):
            target = root / row["video"]
            written += place(warehouse.root / row["staged_video"], target)
            keep.add(target)
        archive = root / row["archive"]
        written += place(warehouse.root / row["staged_archive"], archive)
        manifest = archive.with_name(f"{row['id']}.json")
        written += write_if_changed(manifest, manifest_bytes(row, json.loads(row["bundle_parts"])))
        keep |= {archive, manifest}
    removed = _remove_unlisted(root / "videos", keep) + _remove_unlisted(root / "episodes", keep)
    version = content_version(sorted(str(p.relative_to(root)) for p in keep),
                              [(r["id"], r["archive_sha256"], r["label"], r["rehosted_at"]) for r in rows])
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={
        "episodes": len(rows), "files_written": written, "files_removed": removed,
        **record_metadata(context),
    })


def published_rows(dataset_folder: DatasetFolder, episode_table: pl.DataFrame) -> list[dict]:
    """The episode_table rows of the episodes the dataset folder's episodes.jsonl publishes now."""
    ids = {row["id"] for row in _jsonl_rows(dataset_folder.root)}
    return episode_table.filter(pl.col("id").is_in(sorted(ids))).to_dicts() if ids else []


def _jsonl_rows(root: Path) -> list[dict]:
    path = root / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def video_in_place(root: Path, row: dict) -> bool:
    path = root / row["video"]
    return path.is_file() and path.stat().st_size == row["video_size"] and sha256_file(path) == row["video_sha256"]


def archive_problems(root: Path, row: dict) -> list[str]:
    """The archive's sha256 against its manifest, and every member's size and sha256."""
    archive = root / row["archive"]
    manifest_path = archive.with_name(f"{row['id']}.json")
    if not archive.is_file() or not manifest_path.is_file():
        return [f"{row['archive']}: archive or manifest missing"]
    manifest = json.loads(manifest_path.read_text())
    if sha256_file(archive) != manifest["archive_sha256"]:
        return [f"{row['archive']}: sha256 differs from its manifest"]
    listed = {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]}
    try:
        found = archive_digests(archive)
    except BadInput as exc:
        return [f"{row['archive']}: {exc}"]
    return [f"{row['archive']}: {path} differs from its manifest"
            for path in sorted(set(listed) | set(found)) if listed.get(path) != found.get(path)]


def rows_vs_archives(root: Path) -> list[dict]:
    """Every row of episodes.jsonl has its archive and manifest with the row's sha256, and no
    archive lacks a row; what is wrong, by episode (`said_of`)."""
    problems = []
    listed = {}
    for row in _jsonl_rows(root):
        if row["archive"] is None:
            problems.append(said_of(row, "row has no archive"))
            continue
        listed[row["archive"]] = row
        manifest = (root / row["archive"]).with_name(f"{row['id']}.json")
        if not manifest.is_file() or json.loads(manifest.read_text())["archive_sha256"] != row["archive_sha256"]:
            problems.append(said_of(row, "archive_sha256 in episodes.jsonl differs from the manifest"))
    on_disk = {p.relative_to(root).as_posix() for p in (root / "episodes").rglob("*.tar.zst")} \
        if (root / "episodes").exists() else set()
    problems += [said_of(None, f"{path}: archive without a row") for path in sorted(on_disk - set(listed))]
    problems += [said_of(listed[path], f"{path}: row without an archive") for path in sorted(set(listed) - on_disk)]
    return problems
