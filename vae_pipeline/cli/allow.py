"""`vae allow`: accept one reviewed scrub finding, so it no longer blocks the release.

The finding is looked up in the last build's episode table (the rows the manifests' `scrub.findings`
are written from), and its file, kind and the sha256 of every value of that kind on its line appended
to meta/scrub-allow.jsonl as one entry with the reason, so the next build no longer blocks on it. The
values themselves are never read or printed: only their sha256s are stored.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vae_pipeline.assets.scrub_settings import ALLOW_LIST
from vae_pipeline.cli.common import CliError, episode_table_rows, say
from vae_pipeline.domain.scrub.allow import allow_finding
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline.storage.resources import Warehouse, sql_text


def finding_of(warehouse: Warehouse, episode: str, file: str, line: int, kind: str) -> dict:
    rows = episode_table_rows(warehouse, f"SELECT findings FROM episode_table WHERE id = {sql_text(episode)} AND valid")
    if not rows:
        raise CliError(f"no valid episode {episode} in the last build; run `vae build` first")
    findings = [f for (found,) in rows for f in found or []]
    for finding in findings:
        if (finding["file"], finding["line"], finding["kind"]) == (file, line, kind):
            return finding
    listed = ", ".join(f"{f['file']}:{f['line']} {f['kind']}" for f in findings[:10]) or "none"
    raise CliError(f"{episode} has no finding {file}:{line} {kind} (its findings: {listed})")


def cmd_allow(args: argparse.Namespace) -> int:
    file, _, line = args.where.rpartition(":")
    if not file or not line.isdigit():
        raise CliError(f"{args.where}: expected FILE:LINE, e.g. messages.jsonl:16")
    if not args.reason.strip():
        raise CliError("--reason must say why the finding is accepted")
    env = apply_defaults()
    finding = finding_of(Warehouse(path=env["VAE_HOME"], scratch_path=env["VAE_SCRATCH"]), args.episode, file, int(line), args.kind)
    path = Path(env["VAE_META_DIR"]) / ALLOW_LIST
    if allow_finding(path, args.episode, finding, args.reason.strip()):
        values = len(finding["sha256s"])
        say(f"allowed {args.episode} {file}:{line} {args.kind} ({values} value{'s' if values > 1 else ''}) in "
            f"{path.name}; the next `vae build` no longer blocks on it")
    else:
        say(f"{path.name} already accepts {args.episode} {file}:{line} {args.kind}")
    return 0
