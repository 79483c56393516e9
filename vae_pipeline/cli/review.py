"""`vae review`: the review site's address, or the site served on 127.0.0.1."""

from __future__ import annotations

import argparse
from pathlib import Path

from vae_pipeline.cli.common import CliError, recovered_instance, say
from vae_pipeline.domain.review.site import BYTECODE, SITE_DIR
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline.storage.resources import Warehouse


def review_index(env: dict[str, str]) -> Path:
    """The review site's index under VAE_HOME (written by the `review_site` asset); on a bucket
    home, in this machine's copy, with the videos and frames its pages show."""
    mirror = Warehouse(path=env["VAE_HOME"], scratch_path=env.get("VAE_SCRATCH", "")).mirror
    mirror.sync(SITE_DIR, local_only=(f"{BYTECODE}/",))  # the compiled templates stay this machine's
    mirror.sync("videos")
    mirror.sync_folders("frames")
    index = mirror.local / SITE_DIR / "index.html"
    if not index.exists():
        raise CliError(f"no review site in {index.parent}; run `vae build` first")
    return index


def cmd_review(args: argparse.Namespace) -> int:
    env = apply_defaults()
    recovered_instance(env).dispose()
    index = review_index(env)
    if not args.serve:
        say(index.as_uri())
        return 0
    from vae_pipeline.review.server import review_server  # uvicorn and Starlette: only when serving

    server = review_server(index.parent.parent, args.port)
    say(f"http://127.0.0.1:{server.server_port}/{SITE_DIR}/index.html (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
