"""`vae compare`: whether two dataset folders (on disk or on a bucket) hold the same dataset."""

from __future__ import annotations

import argparse

from vae_pipeline.cli.common import CliError, say
from vae_pipeline.domain.dataset.compare import differences, masked_digests
from vae_pipeline.domain.objects import absolute, location
from vae_pipeline.engines.settings import check_bucket


def cmd_compare(args: argparse.Namespace) -> int:
    folders = []
    for given in (args.first, args.second):
        url = absolute(given)
        check_bucket("a dataset folder", url)
        if not location(url).is_dir():
            raise CliError(f"dataset folder {given} does not exist")
        folders.append(location(url))
    digests = [masked_digests(folder) for folder in folders]
    lines = differences(*digests, (args.first, args.second))
    for line in lines:
        say(line)
    if lines:
        say(f"{len(lines)} difference(s)")
        return 1
    say(f"same dataset: {len(digests[0])} files (rehosted_at and the card's refresh time masked)")
    return 0
