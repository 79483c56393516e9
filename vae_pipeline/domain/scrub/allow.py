"""meta/scrub-allow.jsonl: the reviewed findings an operator accepted, by file, kind and the
sha256 of each of the finding's values, all at once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from vae_pipeline.domain.errors import BadInput

def _digests(row: dict) -> list:
    """An entry's sha256s: its `sha256s` list, or the one `sha256` (`value_sha256`) of an older line."""
    if "sha256s" in row:
        digests = row["sha256s"]
        if not isinstance(digests, list) or not digests:
            raise TypeError
        return digests
    return [row.get("sha256", row.get("value_sha256"))]


def load_allow_list(path: Path) -> frozenset[tuple[str, str, str]]:
    """Read meta/scrub-allow.jsonl: one {"file", "kind", "sha256s": [...]} object a line (an older
    line's single "sha256" is read too), as the (file, kind, sha256) of every value it accepts.

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
            entries = [(row["file"], row["kind"], digest) for digest in _digests(row)]
        except (ValueError, KeyError, AttributeError, TypeError):
            raise BadInput(path.name, "not a {file, kind, sha256s} object", line=number) from None
        if not all(isinstance(part, str) and part for entry in entries for part in entry):
            raise BadInput(path.name, "file, kind and every sha256 must be non-empty strings", line=number)
        allowed.update(entries)
    return frozenset(allowed)


def allow_finding(path: Path, episode: str, finding: dict, reason: str) -> bool:
    """Append one reviewed finding ({file, line, kind, sha256s}) to the allow list — every value's
    sha256 in one entry — with who reviewed it where and why; False when the list already accepts
    every one of them."""
    path = Path(path)
    accepted = load_allow_list(path)
    if all((finding["file"], finding["kind"], digest) in accepted for digest in finding["sha256s"]):
        return False
    entry = {"file": finding["file"], "kind": finding["kind"], "sha256s": list(finding["sha256s"]),
             "episode": episode, "line": finding["line"], "reason": reason,
             "allowed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    with path.open("a", encoding="utf-8") as out:
        out.write(("\n" if text and not text.endswith("\n") else "") + json.dumps(entry, ensure_ascii=False) + "\n")
    return True
