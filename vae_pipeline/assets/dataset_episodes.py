"""`dataset_episodes`: the published episodes' files — videos, archives and manifests."""

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import polars as pl
from upath import UPath

from vae_pipeline.domain.episodes.episode_files import archive_digests
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.objects import (
    exists,
    heads_under,
    identity_now,
    is_local,
    known_bytes,
    listed_identity,
    listing,
    location,
    place_file,
    put_bytes,
    read_bytes,
    readable_copy,
    remove,
    sha256_of,
    uploads_in_background,
    write_if_changed,
)
from vae_pipeline.domain.bundles.manifest import MADE_FROM, manifest_bytes, manifest_inputs
from vae_pipeline.domain.check_items import said_of
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.io_manager import ROLLUPS, stored_table
from vae_pipeline.storage.resources import DatasetFolder, Warehouse
from vae_pipeline.storage.versions import record_metadata, written_source


PUBLISHED_FOLDERS = ("videos", "episodes")  # what `dataset_episodes` writes in the dataset folder


def _listed(root: UPath) -> dict[str, dict]:
    """One listing of each folder the step writes, by name relative to the dataset folder."""
    return {f"{folder}/{name}": info for folder in PUBLISHED_FOLDERS for name, info in listing(root / folder).items()}


def _remove_unlisted(root: UPath, listed: dict[str, dict], keep: set[str]) -> int:
    """Remove the files of `listed` whose names (relative to `root`) are not in `keep`."""
    gone = sorted(name for name in listed if name not in keep)
    for name in gone:
        remove(root / name)
    return len(gone)


# what every published row is taken with: where its files are, and what the step's version reads
# (a row's manifest columns, its brief and bundle among them, only where the manifest is made)
PLACED_FROM = ("id", "series", "video", "staged_video", "video_sha256", "archive", "staged_archive", "archive_sha256",
               "label", "rehosted_at")
MANIFEST_FROM = list(dict.fromkeys((*MADE_FROM, *PLACED_FROM)))  # a row whose manifest is made


def _placed_files(row: dict) -> list[tuple[str, str, str]]:
    """(name in the dataset folder, staged name in the home, sha256) of the row's video and archive."""
    video = [(row["video"], row["staged_video"], row["video_sha256"])] if row["video"] and row.get("staged_video") \
        else []
    return [*video, (row["archive"], row["staged_archive"], row["archive_sha256"])]


@dg.asset(code_version="dataset_episodes-1", group_name="dataset", kinds={"zstd"},
          deps=["episode_table", "dataset_rows"])
def dataset_episodes(context: dg.AssetExecutionContext, warehouse: Warehouse, dataset_folder: DatasetFolder):
    """`videos/<id>.mp4`, `episodes/<date>/<id>.tar.zst` and `<id>.json` for every published row; nothing else.

    A file found in place by an earlier build (its staged bytes' sha256 and the dataset's listing
    of it unchanged since) is not compared again, so a new series costs its own files and one
    listing, not a stat and a comparison of every published file."""
    root = dataset_folder.root
    episode_table = stored_table(warehouse, "episode_table", context.instance)
    published = set(stored_table(warehouse, "dataset_rows", context.instance)["id"].to_list())
    table = episode_table.filter(pl.col("id").is_in(sorted(published))) if published else None
    rows = table.select(PLACED_FROM).to_dicts() if table is not None else []
    listed = _listed(root)
    made_before, placed_before = _made_before(warehouse, root)
    identity = {name: listed_identity(info) for name, info in listed.items()}
    files = [placed for row in rows for placed in _placed_files(row)]
    # in place: what an earlier build found there, from the same staged bytes, untouched since
    to_place = [(target, staged_name) for target, staged_name, sha in files
                if placed_before.get(target) != [sha, identity.get(target)]]
    keep = {target for target, _, _ in files}
    written = 0
    heads = heads_under(root)  # one LIST of the dataset folder, not a HEAD per file
    staged = warehouse.fetch_all(sorted({staged_name for _, staged_name in to_place}))
    placed_now = {target: [sha, identity.get(target)] for target, _, sha in files}
    made: dict[str, list] = {}
    written_now: list[str] = []
    with uploads_in_background():
        for target, staged_name in to_place:
            if place_file(staged[staged_name], root / target, heads):
                written += 1
                written_now.append(target)
        to_make = []
        for row, inputs in zip(rows, manifest_inputs(table) if rows else [], strict=True):
            manifest = manifest_name(row)
            made[manifest] = [inputs, made_before.get(manifest, [None, None])[1]]
            keep.add(manifest)
            if made[manifest] != made_before.get(manifest) or listed.get(manifest, {}).get("size") != made[manifest][1]:
                to_make.append(row["id"])
        for row in table.filter(pl.col("id").is_in(to_make)).select(MANIFEST_FROM).to_dicts() if to_make else []:
            manifest = manifest_name(row)
            data = manifest_bytes(row, json.loads(row["bundle_parts"]))
            written += write_if_changed(root / manifest, data, heads)
            made[manifest][1] = len(data)
    for target in written_now:  # as the next build's listing will show it (on a bucket, compared once more)
        placed_now[target][1] = identity_now(root / target)
    if (made, placed_now) != (made_before, placed_before):  # after every upload: what it says was made is there
        put_bytes(warehouse.home / ROLLUPS / MANIFESTS_MADE,
                  json.dumps({"dataset": _folder_digest(root), "manifests": made, "placed": placed_now},
                             sort_keys=True).encode())
    removed = _remove_unlisted(root, listed, keep)
    version = content_version(sorted(keep),
                              [(r["id"], r["archive_sha256"], r["label"], r["rehosted_at"]) for r in rows])
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={
        "episodes": len(rows), "files_written": written, "files_removed": removed,
        **record_metadata(context, written_source(None, dataset_folder.source())),
    })


MANIFESTS_MADE = "dataset_episodes-manifests.json"  # under rollups/: what the step made and found in place


def _made_before(warehouse: Warehouse, root: UPath) -> tuple[dict[str, list], dict[str, list]]:
    """What the last build made in the dataset folder `root`: each manifest's [inputs' digest,
    size], and each video and archive it found in place, [its staged bytes' sha256, its listed
    identity], by name; nothing for another folder, or when the note is gone or unreadable
    (every manifest is then made again, every file compared again)."""
    try:
        noted = json.loads(read_bytes(warehouse.home / ROLLUPS / MANIFESTS_MADE))
    except (FileNotFoundError, ValueError):
        return {}, {}
    if noted.get("dataset") != _folder_digest(root):
        return {}, {}
    return noted.get("manifests", {}), noted.get("placed", {})


def _folder_digest(root: UPath) -> str:
    """Which dataset folder, without its path (which may name a user) in the home."""
    return hashlib.sha256(str(root).encode()).hexdigest()[:16]


def manifest_name(row: dict) -> str:
    """The manifest beside an episode's archive, relative to the dataset folder."""
    return f"{row['archive'].rsplit('/', 1)[0]}/{row['id']}.json"


PUBLISHED_KEYS = {"id": pl.String, "series": pl.String, "archive": pl.String, "archive_sha256": pl.String}


def published_rows(dataset_folder: DatasetFolder) -> list[dict]:
    """What the publish checks read of each row of the dataset folder's episodes.jsonl (none when
    it is absent): PUBLISHED_KEYS, a key a row lacks as None, parsed by Polars (a tenth of the
    standard library's time for a row's hundred values). A line that is no JSON object raises."""
    path = dataset_folder.root / "episodes.jsonl"
    return pl.read_ndjson(io.BytesIO(read_bytes(path)), schema=PUBLISHED_KEYS).to_dicts() if exists(path) else []


def published_table(episode_table: pl.DataFrame, rows: list[dict]) -> pl.DataFrame:
    """The episode_table rows of the episodes `rows` (of episodes.jsonl) publish (a table: a check
    takes the columns it reads, not every row's hundred)."""
    ids = {row["id"] for row in rows}
    return episode_table.filter(pl.col("id").is_in(sorted(ids))) if ids else episode_table.clear()


def video_in_place(root: UPath, row: dict, found: dict | None, local: Path | None = None) -> bool:
    """Whether the delivered video is in videos/ with the row's size and sha256. `found`: its entry
    in a listing of videos/ (None: absent); `local`: a local copy that, when the listing shows the
    bucket holds its bytes, is read instead of the object."""
    path = root / row["video"]
    if found is None or found["size"] != row["video_size"]:
        return False
    return sha256_of(readable_copy(path, local, found)) == row["video_sha256"]


def archive_problems(root: UPath, row: dict, found: list[dict | None] | None = None,
                     local: Path | None = None) -> list[str]:
    """The archive's sha256 against its manifest, and every member's size and sha256. `found`: the
    archive's and the manifest's entries in a listing of their folder (None: asked of each);
    `local`: a copy of the archive read instead of the object when the listing shows the bucket
    holds its bytes, as the manifest the row would write is taken for the stored one."""
    archive = root / row["archive"]
    manifest_path = archive.with_name(f"{row['id']}.json")
    if found is None:
        found = [{} if exists(path) else None for path in (archive, manifest_path)]
    if found[0] is None or found[1] is None:
        return [f"{row['archive']}: archive or manifest missing"]
    manifest = json.loads(_stored_manifest(manifest_path, row, found[1]))
    source = readable_copy(archive, local, found[0])
    if sha256_of(source) != manifest["archive_sha256"]:
        return [f"{row['archive']}: sha256 differs from its manifest"]
    listed = {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]}
    try:
        found_members = archive_digests(source)
    except BadInput as exc:
        return [f"{row['archive']}: {exc}"]
    return [f"{row['archive']}: {path} differs from its manifest"
            for path in sorted(set(listed) | set(found_members)) if listed.get(path) != found_members.get(path)]


def _stored_manifest(path: UPath, row: dict, found: dict | None) -> bytes:
    """The stored manifest's bytes: on a bucket, those the row writes when a listing shows they
    are the ones stored (no request); else read (on disk a read costs less than writing them)."""
    if row.get("bundle_parts") and found is not None and not is_local(location(path)):
        return known_bytes(path, manifest_bytes(row, json.loads(row["bundle_parts"])), found)
    return read_bytes(path)


def manifest_checked_part(root: UPath, row: dict, found: dict | None = None) -> str | None:
    """A hash of what `archive_problems` compares of the manifest (the archive's sha256 and every
    member's path, size and sha256: not the verdict a rehost changes); None when it cannot be read."""
    try:
        manifest = json.loads(_stored_manifest((root / row["archive"]).with_name(f"{row['id']}.json"), row, found))
        checked = json.dumps([manifest["archive_sha256"], manifest["files"]], sort_keys=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hashlib.sha256(checked.encode()).hexdigest()


def rows_vs_archives(root: UPath, rows: list[dict],
                     written_of: Callable[[list[str]], dict[str, dict]] | None = None,
                     agreed_before: dict[str, list] | None = None,
                     episodes_listed: dict[str, dict] | None = None) -> tuple[list[dict], dict[str, list]]:
    """Every row of episodes.jsonl (`rows`) has its archive and manifest with the row's sha256, and
    no archive lacks a row; what is wrong, by episode (`said_of`), and the manifests that agree
    with their rows: [the manifest's `listed_identity`, the row's archive_sha256] by name.

    `agreed_before`: what an earlier call returned; a manifest with the same identity and row is
    not read again (a new series reads its own manifests, not all). `written_of`: the episode_table
    rows of the ids given, by id, asked once for the manifests left to read: one that a listing
    shows is the one the row writes is not read. `episodes_listed`: the caller's listing of
    episodes/ (default: one taken here)."""
    agreed_before = agreed_before or {}
    listed_now = episodes_listed if episodes_listed is not None else listing(root / "episodes")
    stored = {f"episodes/{name}": info for name, info in listed_now.items()}

    def seen_of(row: dict) -> list | None:
        name = manifest_name(row)
        return [listed_identity(stored[name]), row["archive_sha256"]] if name in stored else None

    to_read = [row["id"] for row in rows if row["archive"] is not None
               and (seen := seen_of(row)) is not None and seen != agreed_before.get(manifest_name(row))]
    written = written_of(to_read) if written_of is not None and to_read else {}
    problems = []
    listed = {}
    agreed: dict[str, list] = {}
    for row in rows:
        if row["archive"] is None:
            problems.append(said_of(row, "row has no archive"))
            continue
        listed[row["archive"]] = row
        name, seen = manifest_name(row), seen_of(row)
        if seen is not None and (seen == agreed_before.get(name) or manifest_archive_sha256(
                root / name, written.get(row["id"], {}), stored[name]) == row["archive_sha256"]):
            agreed[name] = seen
        else:
            problems.append(said_of(row, "archive_sha256 in episodes.jsonl differs from the manifest"))
    on_disk = {name for name in stored if name.endswith(".tar.zst")}
    problems += [said_of(None, f"{path}: archive without a row") for path in sorted(on_disk - set(listed))]
    problems += [said_of(listed[path], f"{path}: row without an archive") for path in sorted(set(listed) - on_disk)]
    return problems, agreed


def manifest_archive_sha256(path: UPath, row: dict, found: dict) -> str | None:
    """The archive_sha256 a stored manifest gives (None: it cannot be read as one)."""
    try:
        return json.loads(_stored_manifest(path, row, found))["archive_sha256"]
    except (ValueError, KeyError, TypeError):
        return None
