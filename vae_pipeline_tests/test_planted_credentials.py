"""Every kind of credential the widely used scanners know is caught, in every ordinary context
(contract 3, "The scrub": the floor of the rule table, the assignments, the URL, `curl -u`, header
and SigV4 shapes, a key block with no END line).

The generator (`plants=True`) writes two episodes, a run folder and a `.tar.zst`, holding one fake
value per kind of `sample/credential_kinds.py` (gitleaks' default rule ids, common trufflehog
detectors, the contract's own shapes) in each of six contexts: an `env` dump, `cat .env`, a Write
of a config file and the file itself, a CLI command or its output, an assistant message, a Read of
a JSON file or a notebook. The values are written from each provider's published format, never
from the pipeline's rule table, and the plan says how often each was written.

`vae build` runs once; every byte it keeps is searched as test_nothing_leaks searches it (archives
unpacked, Parquet decoded, instance databases row by row, logs, the review site, the CLI's output),
each value raw, escaped, as base64 and by fragments. No planted value may be anywhere, and each
planted episode's `redacted_keys` is the plan's count of what was written.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

from vae_pipeline.sample.credential_plants import CONTEXTS, PlantedEpisode
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.test_nothing_leaks import (
    Needle,
    View,
    _run_cli,
    isolate_under,
    search,
    tree_views,
    value_needles,
)

SEED = 41


@dataclass
class PlantedWorld:
    planted: list[PlantedEpisode]
    dataset: Path
    codes: list[int]
    cli: list[tuple[str, str]]
    views: dict[str, list[View]]
    needles: list[Needle]


def plant_needles(episode: PlantedEpisode) -> list[Needle]:
    """Each planted value as test_nothing_leaks searches it; a key block also line by line."""
    needles = []
    for plant in episode.plants:
        origin = f"{episode.episode_id}: {plant.kind} in {plant.context}"
        needles += value_needles(plant.kind, plant.value, origin, "never", episode.episode_id, None)
        lines = plant.value.split("\n")
        needles += [Needle(line.encode(), plant.kind, "key block line", origin, "never")
                    for line in lines[1:] if len(line) >= 16]
    return needles


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> PlantedWorld:
    base = tmp_path_factory.mktemp("planted_credentials")
    runs, dataset, home = base / "runs", base / "dataset", base / "home"
    with pytest.MonkeyPatch.context() as mp:
        isolate_under(base, mp)
        sample = generate(runs, base / "meta", series=1, episodes=1, seed=SEED, bad=False, plants=True)
        code, out, err, records = _run_cli(["build", "--runs", str(runs), "--out", str(dataset),
                                            "--summary", str(base / "summary.json")])
    cli = [("vae build: stdout", out), ("vae build: stderr", err), ("vae build: log records", "\n".join(records))]
    scratch = base / "scratch"
    scratch.mkdir()
    views = {
        "runs": tree_views(runs, "runs", scratch),
        "kept": tree_views(dataset, "dataset", scratch) + tree_views(home, "VAE_HOME", scratch)
        + [View(what, text.encode()) for what, text in cli]
        + [View("vae build --summary", (base / "summary.json").read_bytes())],
    }
    needles = [n for episode in sample.planted for n in plant_needles(episode)]
    return PlantedWorld(sample.planted, dataset, [code], cli, views, needles)


def manifests(world: PlantedWorld) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (world.dataset / "episodes").rglob("*.json")}


def test_the_plan_covers_every_kind_in_every_context_and_the_build_published_it(world: PlantedWorld) -> None:
    """Preconditions: the searches below are not vacuous."""
    assert world.codes == [0], [text[-2000:] for _, text in world.cli]
    assert [e.archive for e in world.planted] == [False, True]
    per_kind = defaultdict(set)
    for episode in world.planted:
        for plant in episode.plants:
            per_kind[plant.kind].add(plant.context)
    assert len(per_kind) >= 250
    assert all(contexts == set(CONTEXTS) for contexts in per_kind.values())
    assert {e.episode_id for e in world.planted} <= set(manifests(world))
    runs_found = {n.planted_in for n, _ in search(world.views["runs"], world.needles) if n.form != "base64"}
    planted = {n.planted_in for n in world.needles}
    assert planted - runs_found == set(), "the search misses values where they were planted"


def test_no_planted_credential_is_kept_anywhere(world: PlantedWorld, record_property) -> None:
    """The dataset folder, VAE_HOME (instance databases, tables, warehouse, staged archives, compute
    logs, the review site) and the CLI's output hold none of the values, in any form."""
    leaked: dict[str, set[str]] = defaultdict(set)
    for needle, view in search(world.views["kept"], world.needles):
        leaked[needle.kind].add(needle.planted_in.split(": ", 1)[1].split(" in ", 1)[1])
    plants = [(p.kind, p.context) for e in world.planted for p in e.plants]
    record_property("summary", f"planted credentials kept: {sum(len(c) for c in leaked.values())} of {len(plants)} "
                               f"({len({k for k, _ in plants})} kinds x {len(CONTEXTS)} contexts)")
    assert not leaked, f"{len(leaked)} kind(s) leak:\n  " + "\n  ".join(
        f"{kind}: {', '.join(sorted(contexts))}" for kind, contexts in sorted(leaked.items()))


def test_every_json_member_of_the_planted_archives_still_parses(world: PlantedWorld) -> None:
    """Redactions of every kind, key blocks with no END line among them, leave whole JSON behind."""
    parsed = 0
    for episode in world.planted:
        archive = next(world.dataset.glob(f"episodes/*/{episode.episode_id}.tar.zst"))
        with tarfile.open(fileobj=io.BytesIO(zstandard.ZstdDecompressor().decompressobj().decompress(
                archive.read_bytes())), mode="r:") as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member).read() if member.isfile() else b""
                if member.name.endswith(".jsonl"):
                    parsed += sum(1 for line in data.splitlines() if line.strip() and json.loads(line) is not None)
                elif member.name.endswith((".json", ".ipynb")):
                    json.loads(data)
                    parsed += 1
    assert parsed >= 2 * 20  # both episodes' logs and files: every line of every call


def test_redacted_keys_count_every_planted_occurrence(world: PlantedWorld) -> None:
    found = manifests(world)
    counts = {e.episode_id: (found[e.episode_id]["redacted_keys"], e.redactions) for e in world.planted}
    assert all(got == planted for got, planted in counts.values()), counts
