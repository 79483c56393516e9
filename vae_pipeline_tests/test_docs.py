"""The project's documents stand alone: a README short enough to read at a glance, every relative
link resolving to a file of the checkout, nothing pointing outside it, no project history in the
README, and every setting the package reads in the README's configuration table."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from vae_pipeline.engines.settings import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SKIPPED_DIRS = {"node_modules", "__pycache__"}

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^)]*[\"'])?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
HTML_LINK = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
WEB_SCHEMES = {"http", "https", "mailto"}
# `../` paths anywhere in the text, code blocks included: a command that reads ../x leaves the checkout too
RELATIVE_PATH = re.compile(r"(?<![\w.])(?:\.\./)+[^\s`'\")\]>|,;]*")
# this machine's own folders (the project is checked out below one); `/Users/<name>/work/x` is no such path
MACHINE_PATH = re.compile(r"(?<![\w.~<>/-])/work/")
HISTORY = [
    re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE),
    re.compile(r"(?<![\w&/#])#\d+(?![\w-])"),
    re.compile(r"\bitems?\s+\d+", re.IGNORECASE),
    re.compile(r"\bthis round\b", re.IGNORECASE),
]
SETTING = re.compile(r"\bVAE_[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def markdown_files(root: Path = ROOT) -> list[Path]:
    """Every Markdown file of the project (not in hidden folders such as .venv, .git or .vae)."""
    return sorted(p for p in root.rglob("*.md")
                  if not any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info")
                             for part in p.relative_to(root).parts[:-1]))


def prose(text: str) -> str:
    """The text outside fenced code blocks (links there are not links)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        kept.append("" if fenced else line)
    return "\n".join(kept)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces as dashes."""
    found: set[str] = set()
    for line in prose(text).splitlines():
        heading = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        candidate, n = slug, 1
        while candidate in found:
            candidate, n = f"{slug}-{n}", n + 1
        found.add(candidate)
    return found


def link_targets(text: str) -> list[str]:
    body = prose(text)
    return [m.group(1) for pattern in (INLINE_LINK, REFERENCE_LINK, HTML_LINK) for m in pattern.finditer(body)]


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def link_problems(md: Path, text: str, root: Path = ROOT) -> list[str]:
    """Links that leave the checkout, are absolute, or name a file or heading that is not there."""
    problems = []
    for target in link_targets(text):
        where = f"{md.relative_to(root)}: link {target!r}"
        if not target:
            problems.append(f"{where} is empty")
            continue
        scheme = SCHEME.match(target)
        if scheme or target.startswith("//"):
            if not scheme or scheme.group(0)[:-1].lower() not in WEB_SCHEMES:
                problems.append(f"{where} names something outside the project")
            continue
        path_part, _, anchor = target.partition("#")
        if not path_part:
            if anchor not in anchors(text):
                problems.append(f"{where} names no heading of this file")
            continue
        if path_part.startswith("/") or path_part.startswith("~"):
            problems.append(f"{where} is an absolute path")
            continue
        resolved = (md.parent / unquote(path_part)).resolve()
        if not inside(resolved, root.resolve()):
            problems.append(f"{where} leaves the project")
        elif not resolved.exists():
            problems.append(f"{where} names no file of the project")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            problems.append(f"{where} names no heading of {resolved.relative_to(root.resolve())}")
    return problems


def path_problems(md: Path, text: str, root: Path = ROOT) -> list[str]:
    """Paths in the text, links or not, that lead outside the checkout or are this machine's."""
    where = md.relative_to(root)
    problems = [f"{where}: {m.group(0)!r} leaves the project" for m in RELATIVE_PATH.finditer(text)
                if not inside((md.parent / m.group(0)).resolve(), root.resolve())]
    problems += [f"{where}: {m.group(0)!r}… is a path of this machine" for m in MACHINE_PATH.finditer(text)]
    checkout = [str(root.resolve())] + [str(p) for p in root.resolve().parents if len(p.parts) > 2]
    problems += [f"{where}: names the checkout's absolute path {name}" for name in checkout if name in text]
    return problems


def history_problems(md: Path, text: str, root: Path = ROOT) -> list[str]:
    return [f"{md.relative_to(root)}: {m.group(0)!r} is the project's history, not its use"
            for pattern in HISTORY for m in pattern.finditer(text)]


def settings_read_by_the_package() -> set[str]:
    names = set(DEFAULTS)
    for source in (ROOT / "vae_pipeline").rglob("*.py"):
        names |= set(SETTING.findall(source.read_text(encoding="utf-8")))
    return {name for name in names if name.startswith("VAE_")}


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def test_the_readme_is_under_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 200


def test_the_readme_opens_with_the_two_commands_for_a_fresh_machine() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index("```sh")
    assert start < 5
    block = lines[start + 1:lines.index("```", start + 1)]
    assert [line.split("#")[0].strip() for line in block] == ["make demo", "make test"]


def test_the_documents_exist_and_are_linked_from_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    for name in ("formats", "operations", "deployment", "benchmarks", "decisions", "architecture"):
        assert (ROOT / "docs" / f"{name}.md").is_file()
        assert f"(docs/{name}.md" in text


def test_every_markdown_file_is_found() -> None:
    found = {p.relative_to(ROOT).as_posix() for p in markdown_files()}
    assert {"README.md", "docs/formats.md", "docs/operations.md", "meta/actor-prompt.md"} <= found


@pytest.mark.parametrize("md", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve_inside_the_project(md: Path) -> None:
    assert link_problems(md, md.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("md", markdown_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_path_outside_the_project(md: Path) -> None:
    assert path_problems(md, md.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("md", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_no_issue_numbers_or_history(md: Path) -> None:
    assert history_problems(md, md.read_text(encoding="utf-8")) == []


def test_every_setting_the_package_reads_is_in_the_configuration_table() -> None:
    table = section(README.read_text(encoding="utf-8"), "Configuration")
    documented = set(SETTING.findall(table))
    assert {"VAE_HOME", "VAE_EXECUTOR", "VAE_CELERY_BROKER"} <= settings_read_by_the_package()
    assert sorted(settings_read_by_the_package() - documented) == []


# ---------------------------------------------------------------- the rules catch planted breaches

@pytest.mark.parametrize(("text", "expected"), [
    ("see [the spec](../shared/spec/episodes.md)", "leaves the project"),
    ("see [the spec](/work/shared/spec/episodes.md)", "is an absolute path"),
    ("see [the file](file:///etc/passwd)", "names something outside the project"),
    ("see [formats](docs/nothere.md)", "names no file of the project"),
    ("see [formats](docs/formats.md#no-such-heading)", "names no heading"),
    ('<img src="/root/shot.png">', "is an absolute path"),
    ("[spec]: ../shared/spec/dataset.md", "leaves the project"),
    ("see [x](#nowhere)\n\n# Somewhere\n", "names no heading of this file"),
])
def test_link_rules_catch_a_planted_breach(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "formats.md").write_text("# Formats\n\n## The rows\n")
    md = tmp_path / "README.md"
    assert any(expected in problem for problem in link_problems(md, text, tmp_path))


def test_link_rules_accept_what_resolves(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "formats.md").write_text("# Formats\n\n## 1. The rows\n\n## When it fails: the way out\n")
    md = tmp_path / "docs" / "operations.md"
    text = ("[rows](formats.md#1-the-rows) [out](formats.md#when-it-fails-the-way-out) [up](../docs/formats.md) "
            "[hub](https://huggingface.co) [me](#ops)\n\n# Ops\n\n```\n[not a link](/nowhere)\n```\n")
    assert link_problems(md, text, tmp_path) == []


@pytest.mark.parametrize(("text", "expected"), [
    ("contract `../shared/spec/episodes.md`", "leaves the project"),
    ("```sh\ncat ../../spec/x.md\n```", "leaves the project"),
    ("run /work/main/.venv/bin/python", "a path of this machine"),
])
def test_path_rules_catch_a_planted_breach(tmp_path: Path, text: str, expected: str) -> None:
    assert any(expected in problem for problem in path_problems(tmp_path / "README.md", text, tmp_path))


def test_path_rules_accept_the_scrubs_examples(tmp_path: Path) -> None:
    text = ("`/home/<name>`, `/Users/ana/work/x` → `-Users-ana-work-x`, `~/.claude/projects/`, "
            "`/root` as a path prefix, `../vae_pipeline/` from docs/")
    (tmp_path / "docs").mkdir()
    assert path_problems(tmp_path / "docs" / "formats.md", text, tmp_path) == []


@pytest.mark.parametrize("text", ["as issue 12 asked", "see #12.", "item 10 of the list", "what changed in this round",
                                  "Issue #7"])
def test_history_rules_catch_a_planted_breach(tmp_path: Path, text: str) -> None:
    assert history_problems(tmp_path / "README.md", text, tmp_path) != []


def test_history_rules_accept_anchors_and_counts(tmp_path: Path) -> None:
    text = "[runs](docs/formats.md#1-the-runs-root), `#label=FAIL`, 14 items, &#124;"
    assert history_problems(tmp_path / "README.md", text, tmp_path) == []
