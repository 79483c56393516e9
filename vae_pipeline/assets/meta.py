"""`brief_bank`, `rubric` and `dataset_meta`: the project's `meta/` folder, validated and published."""

import hashlib
import json
import warnings
from pathlib import Path

import dagster as dg
import polars as pl
from dagster._core.definitions.data_version import DATA_VERSION_TAG, extract_data_version_from_entry

from vae_pipeline.assets.metadata import markdown_table
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.files import files_version
from vae_pipeline.domain.episodes.json_schema import SchemaValidator
from vae_pipeline.domain.objects import files_under, heads_under, remove, write_if_changed
from vae_pipeline.domain.verdicts.rubric import (
    ARCHIVE_DIR,
    RubricError,
    load_rubric,
    rubric_in_force,
)
from vae_pipeline.domain.episodes.strict_json import loads
from vae_pipeline.domain.table_versions import content_version
from vae_pipeline.storage.resources import DatasetFolder, ProjectMeta, meta_problem
from vae_pipeline.storage.versions import frame_version, record_metadata, written_source

PUBLISHED_META = ("brief.schema.json", "actor-prompt.md")


def brief_bank_source(project_meta: ProjectMeta) -> str:
    meta = project_meta.root
    return files_version(sorted(meta.glob("brief-bank-*.jsonl")) + [meta / "brief.schema.json"])


def read_brief_bank(meta: Path, schema: Path) -> pl.DataFrame:
    """Every brief of every bank, validated against the schema; raises BadInput naming file and line."""
    validator = SchemaValidator.from_file(schema)
    rows, seen = [], set()
    for path in sorted(meta.glob("brief-bank-*.jsonl")):
        bank = path.stem.removeprefix("brief-bank-")
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                brief = loads(line.encode(), path.name)
                validator.validate(brief, line, path.name)
            except BadInput as exc:
                raise BadInput(path.name, exc.reason, line=lineno) from None
            if brief["bank"] not in (bank, "one-shot"):
                raise BadInput(path.name, f"brief of bank {brief['bank']} in bank file {bank}", line=lineno)
            if brief["brief_id"] in seen:
                raise BadInput(path.name, f"duplicate brief_id {brief['brief_id']}", line=lineno)
            seen.add(brief["brief_id"])
            rows.append({"brief_id": brief["brief_id"], "bank": brief["bank"], "family": brief["family"],
                         "aspect": brief["aspect"], "duration_s": float(brief["duration_s"]),
                         "loop": bool(brief.get("loop", False)), "hold": brief.get("hold") is not None,
                         "task_type": brief["task_type"], "brief": json.dumps(brief, ensure_ascii=False)})
    return pl.DataFrame(rows)


@dg.asset(code_version="brief_bank-1", group_name="meta", kinds={"polars"})
def brief_bank(context: dg.AssetExecutionContext, project_meta: ProjectMeta) -> dg.Output[pl.DataFrame]:
    """The brief banks of `meta/`, every brief validated against `meta/brief.schema.json`."""
    try:
        frame = read_brief_bank(project_meta.root, project_meta.required("brief.schema.json"))
    except BadInput as exc:
        raise dg.Failure(description=f"brief bank: {exc}") from None
    return dg.Output(frame, data_version=frame_version(frame), metadata={
        "briefs": frame.height,
        "families": frame["family"].n_unique(),
        "by_bank": dg.MetadataValue.json(dict(frame.group_by("bank").len().iter_rows())),
        "preview": markdown_table(frame, ("brief_id", "bank", "family", "aspect", "duration_s", "loop", "hold")),
        **record_metadata(context, brief_bank_source(project_meta)),
    })


def rubric_file(project_meta: ProjectMeta) -> Path:
    return rubric_in_force(project_meta.root, project_meta.pinned_rubric_version)


def check_meta_folder(project_meta: ProjectMeta) -> None:
    """Before a build plans anything: the files every build reads are there (dg.Failure otherwise)."""
    project_meta.required("brief.schema.json")
    try:
        rubric_file(project_meta)
    except RubricError as exc:
        raise dg.Failure(description=meta_problem(f"{project_meta.root}: {exc}")) from None


def rubric_source(project_meta: ProjectMeta) -> str:
    """The rubric in force: which file, and its bytes."""
    path = rubric_file(project_meta)
    return content_version(path.name, hashlib.sha256(path.read_bytes()).hexdigest())


RUBRIC_IN_FORCE = dg.AssetKey("rubric_in_force")


def rubric_in_force_observation(project_meta: ProjectMeta) -> dg.ObserveResult:
    """What `rubric_in_force` observes: the rubric file in force, its name and bytes the data
    version (what `rubric` records as its input, so both it and `labels` show unsynced when it changes)."""
    try:
        path = rubric_file(project_meta)
        loaded = load_rubric(path)
    except RubricError as exc:
        raise dg.Failure(description=meta_problem(f"{project_meta.root}: {exc}")) from None
    return dg.ObserveResult(data_version=dg.DataVersion(rubric_source(project_meta)),
                            metadata={"version": loaded.version, "file": path.name, "rubric_sha256": loaded.sha256})


warnings.filterwarnings("ignore", message="Function `observable_source_asset`", category=dg.BetaWarning)


@dg.observable_source_asset(key=RUBRIC_IN_FORCE, group_name="meta",
                            description="The host rubric in force (`VAE_RUBRIC_VERSION`, else the newest "
                                        "`meta/rubric-v*.json`), observed when `vae ui` or `vae build` starts (or "
                                        "by *Observe* here). When it changes, `rubric` and every `labels` partition "
                                        "show unsynced: launch the rehost (Jobs → rehost → Materialize all… → All "
                                        "→ Launch backfill).")
def rubric_in_force_asset(project_meta: ProjectMeta) -> dg.ObserveResult:
    return rubric_in_force_observation(project_meta)


def observe_rubric_in_force(instance: dg.DagsterInstance, project_meta: ProjectMeta) -> None:
    """Record the rubric in force (a run-less observation) unless the latest one says the same."""
    observed = rubric_in_force_observation(project_meta)
    latest = instance.get_latest_data_version_record(RUBRIC_IN_FORCE, is_source=True)
    if latest is None or extract_data_version_from_entry(latest.event_log_entry) != observed.data_version:
        instance.report_runless_asset_event(dg.AssetObservation(
            RUBRIC_IN_FORCE, metadata=observed.metadata, tags={DATA_VERSION_TAG: observed.data_version.value}))


@dg.asset(deps=[rubric_in_force_asset], code_version="rubric-1", group_name="meta", kinds={"json"})
def rubric(context: dg.AssetExecutionContext, project_meta: ProjectMeta) -> dg.Output[pl.DataFrame]:
    """The host rubric in force: the newest `meta/rubric-v*.json`, or the configured version."""
    try:
        path = rubric_file(project_meta)
        loaded = load_rubric(path)
    except RubricError as exc:
        raise dg.Failure(description=meta_problem(f"{project_meta.root}: {exc}")) from None
    frame = pl.DataFrame([{"version": loaded.version, "sha256": loaded.sha256,
                           "file": path.relative_to(project_meta.root).as_posix()}])
    return dg.Output(frame, data_version=dg.DataVersion(loaded.sha256[:24]), metadata={
        "version": loaded.version, "rubric_sha256": loaded.sha256,
        "rules": len(loaded.rules), "gates": ", ".join(g.id for g in loaded.gates),
        **record_metadata(context, rubric_source(project_meta)),
    })


def published_meta_files(meta: Path, rubric_path: Path) -> dict[str, Path]:
    """Dataset path -> project file: brief banks, schema, rubric in force (+ write-up), archive, prompt."""
    files = {f"meta/{p.name}": p for p in sorted(meta.glob("brief-bank-*.jsonl"))}
    files.update({f"meta/{name}": meta / name for name in PUBLISHED_META if (meta / name).exists()})
    files[f"meta/{rubric_path.name}"] = rubric_path
    write_up = rubric_path.with_suffix(".md")
    if write_up.exists():
        files[f"meta/{write_up.name}"] = write_up
    others = [p for p in sorted(meta.glob("rubric-v*.json")) + sorted((meta / ARCHIVE_DIR).glob("rubric-v*.json"))
              if p.resolve() != rubric_path.resolve()]
    files.update({f"meta/{ARCHIVE_DIR}/{p.name}": p for p in others})
    return files


def dataset_meta_source(project_meta: ProjectMeta) -> str:
    return files_version(list(published_meta_files(project_meta.root, rubric_file(project_meta)).values()))


@dg.asset(deps=[brief_bank, rubric], code_version="dataset_meta-1", group_name="dataset")
def dataset_meta(context: dg.AssetExecutionContext, project_meta: ProjectMeta,
                 dataset_folder: DatasetFolder) -> dg.MaterializeResult:
    """The dataset's `meta/`: brief banks, brief schema, rubric in force, rubric archive, actor prompt."""
    wanted = published_meta_files(project_meta.root, rubric_file(project_meta))
    version = dataset_meta_source(project_meta)
    for name, stale in files_under(dataset_folder.root / "meta"):
        if f"meta/{name}" not in wanted:
            remove(stale)
    heads = heads_under(dataset_folder.root / "meta")  # one LIST, not a HEAD a file
    for dest, src in wanted.items():
        write_if_changed(dataset_folder.root / dest, src.read_bytes(), heads)
    return dg.MaterializeResult(data_version=dg.DataVersion(version), metadata={
        "files": dg.MetadataValue.json(sorted(wanted)),
        **record_metadata(context, written_source(version, dataset_folder.source())),
    })
