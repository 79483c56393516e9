"""Test-only: with this folder on PYTHONPATH and VAE_TEST_DAEMON_TICK_S set, the `dagster-daemon`
that `dagster dev` starts (`python -m dagster._daemon`) waits that long between its loops instead
of 30 s — an asset backfill takes one loop per stage. Nothing else changes; other processes
(webserver, code server, runs) are left alone."""

import os
import sys

if os.environ.get("VAE_TEST_DAEMON_TICK_S") and sys.orig_argv[1:3] == ["-m", "dagster._daemon"]:
    import dagster._daemon.controller

    dagster._daemon.controller.DEFAULT_DAEMON_INTERVAL_SECONDS = float(os.environ["VAE_TEST_DAEMON_TICK_S"])
