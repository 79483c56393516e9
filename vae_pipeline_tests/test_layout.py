"""The package's rooms and the import rules between them, read from the source (every import,
also those inside functions): a domain module that imports Dagster, a room that imports one
above it, or a stage of `domain/` that imports a later stage of the lineage, fails here."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "vae_pipeline"

# Each room and the rooms it may import (besides itself). Lower rooms never import higher ones.
ALLOWED = {
    "domain": set(),
    "sample": {"domain"},
    "storage": {"domain"},
    "engines": {"domain"},
    "review": {"domain"},
    "assets": {"domain", "storage", "engines"},
    "automation": {"domain", "storage", "engines", "assets"},
    "definitions": {"domain", "storage", "engines", "assets", "automation"},
    "cli": {"domain", "sample", "storage", "engines", "review", "assets", "automation", "definitions"},
}
DAGSTER_FREE = {"domain", "sample"}

# `domain/`'s stages in lineage order: each imports only the shared modules at `domain/`'s top,
# the scrub (which every stage applies to what enters it) and the stages before it. The shared
# modules import only each other and the scrub.
SHARED = {"", "scrub"}
STAGES = ["episodes", "video", "verdicts", "bundles", "leaderboard", "dataset", "review"]


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def stage_of(module: str) -> str:
    """A domain module's stage: its folder under `domain/`, or "" for a shared module at the top."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and (PACKAGE / "domain" / parts[2]).is_dir() else ""


def stage_allows(here: str, there: str) -> bool:
    if there in SHARED or here == there:
        return True
    return here in STAGES and there in STAGES and STAGES.index(there) < STAGES.index(here)


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports (absolute names), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}:{node.lineno}: relative import")
            found.append((node.module, node.lineno))
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def violations(files: list[Path], read=imports_of) -> list[str]:
    """What breaks the rules in `files`: a Dagster import in a Dagster-free room, an upward import."""
    modules = {module_name(p) for p in sources()}
    problems = []
    for path in files:
        here = room_of(module_name(path))
        for name, line in read(path):
            top = name.split(".")[0]
            if here in DAGSTER_FREE and top.startswith("dagster"):
                problems.append(f"{path.name}:{line}: {here} imports {name}")
            if top != "vae_pipeline" or name not in modules:
                continue
            there = room_of(name)
            if there != here and there not in ALLOWED[here]:
                problems.append(f"{path.name}:{line}: {here} imports {there} ({name})")
            if here == there == "domain":
                stage, other = stage_of(module_name(path)), stage_of(name)
                if not stage_allows(stage, other):
                    problems.append(f"{path.name}:{line}: domain/{stage or '(top)'} imports domain/{other} ({name})")
    return problems


def test_the_package_top_holds_only_the_code_location_and_rooms() -> None:
    top = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert [name for name in top if name.endswith(".py")] == ["__init__.py", "definitions.py"]
    assert sorted(name for name in top if (PACKAGE / name).is_dir()) == sorted(set(ALLOWED) - {"definitions"})


def test_every_import_follows_the_rules() -> None:
    assert violations(sources()) == []


def test_domain_holds_only_shared_modules_and_stage_folders() -> None:
    domain = PACKAGE / "domain"
    folders = sorted(p.name for p in domain.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(SHARED - {""} | set(STAGES))


@pytest.mark.parametrize(("room", "line", "expected"), [
    ("domain", "import dagster as dg", "domain imports dagster"),
    ("domain", "from vae_pipeline.storage.resources import Warehouse", "domain imports storage"),
    ("assets", "from vae_pipeline.cli.build import build", "assets imports cli"),
    ("storage", "def f():\n    from vae_pipeline.assets import ASSETS\n", "storage imports assets"),
    ("domain/episodes", "from vae_pipeline.domain.bundles.slim import IMAGE_DIR", "domain/episodes imports domain/bundles"),
    ("domain", "from vae_pipeline.domain.video.sampler import write_frames", "domain/(top) imports domain/video"),
    ("domain/scrub", "def f():\n    from vae_pipeline.domain.review.site import render\n",
     "domain/scrub imports domain/review"),
    ("domain/verdicts", "from vae_pipeline.domain.dataset.card import card", "domain/verdicts imports domain/dataset"),
])
def test_the_rules_catch_a_planted_breach(tmp_path, room, line, expected) -> None:
    planted = PACKAGE / room / "planted_breach.py"  # never written: its text is read from tmp_path
    scratch = tmp_path / "planted.py"
    scratch.write_text(f"{line}\n")
    assert any(expected in problem for problem in violations([planted], read=lambda _: imports_of(scratch)))


def test_no_import_cycle_between_modules() -> None:
    """Module-level imports only: a cycle there fails at import, whatever order modules load in."""
    modules = {module_name(p): p for p in sources()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = {t for t in targets if t in modules and t != name}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, trail: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend(trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, [*trail, node]):
                return True
        state[node] = 2
        return False

    for module in sorted(graph):
        if state.get(module) is None and visit(module, []):
            break
    assert cycle == []


# Libraries only a step or a command needs: PyAV (decoding, sampling), the Hub client (a
# release), Jinja (rendering the review site), uvicorn and Starlette (serving it), matplotlib (the
# leaderboard chart). Every process that loads the definitions (each `vae` command, the code
# server, each run's worker) would otherwise import them at start, half a second in all.
LOADED_WHEN_USED = ("av", "huggingface_hub", "jinja2", "uvicorn", "starlette", "matplotlib")


def test_loading_the_definitions_imports_no_library_only_a_step_needs(tmp_path):
    probe = ("import sys, vae_pipeline.cli, vae_pipeline.definitions; "
             f"print(sorted(m for m in {LOADED_WHEN_USED!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
