"""meta/scrub-allow.jsonl: the reviewed findings an operator accepted, by file, kind and the value's sha256."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from vae_pipeline.domain.errors import BadInput


def load_allow_list(path: Path) -> frozenset[tuple[str, str, str]]:
    """Read meta/scrub-allow.jsonl: one {"file", "kind", "sha256"} object a line.

    A missing file is an empty list. A malformed line is bad input: it names the line only.
    """
    path = Path(path)
    if not path.exists():
        return frozenset()
    allowed: set[tuple[str, str, str]] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            digest = row.get("sha256", row.get("value_sha256"))
            entry = (row["file"], row["kind"], digest)
        except (ValueError, KeyError, AttributeError, TypeError):
            raise BadInput(path.name, "not a {file, kind, sha256} object", line=number) from None
        if not all(isinstance(part, str) and part for part in entry):
            raise BadInput(path.name, "file, kind and sha256 must be non-empty strings", line=number)
        allowed.add(entry)
    return frozenset(allowed)


def allow_finding(path: Path, episode: str, finding: dict, reason: str) -> bool:
    """Append one reviewed finding ({file, line, kind, value_sha256}) to the allow list, with who
    reviewed it where and why; False when the list already accepts that file, kind and value."""
    path = Path(path)
    if (finding["file"], finding["kind"], finding["value_sha256"]) in load_allow_list(path):
        return False
    entry = {"file": finding["file"], "kind": finding["kind"], "sha256": finding["value_sha256"],
             "episode": episode, "line": finding["line"], "reason": reason,
             "allowed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    with path.open("a", encoding="utf-8") as out:
        out.write(("\n" if text and not text.endswith("\n") else "") + json.dumps(entry, ensure_ascii=False) + "\n")
    return True
