"""Which process is this, and is another one still running: how a crash is told from a live writer.

A process is named by its host, its PID and its start time (ticks since boot, from /proc), so a
PID the kernel handed to a new process after the old one died is never taken for the old one.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessId:
    host: str
    pid: int
    start: str  # the process's start time in clock ticks since boot; "" where /proc is missing

    def running(self) -> bool:
        """True when this process is alive on this host (another host's process: never known)."""
        return self.host == host_name() and pid_running(self.pid, self.start)


def host_name() -> str:
    return socket.gethostname()


def host_mark(host: str | None = None) -> str:
    """A short fixed-width mark of a host, for file names (a host name may hold dots or be long)."""
    return hashlib.sha256((host or host_name()).encode()).hexdigest()[:6]


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (the state) on; [] if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return []
    # the command name (field 2) is in parentheses and may hold spaces: count from its end
    return stat[stat.rindex(")") + 2:].split()


def start_ticks(pid: int) -> str:
    """When process `pid` started (field 22 of /proc/PID/stat), "" if unknown."""
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else ""


def this_process() -> ProcessId:
    return ProcessId(host_name(), os.getpid(), start_ticks(os.getpid()))


def pid_running(pid: int, start: str = "") -> bool:
    """True when `pid` is a live process (and, when `start` is given, the one that started then)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, but another user's
    fields = _stat_fields(pid)
    if fields and fields[0] in ("Z", "X"):
        return False  # killed, not yet reaped by its parent
    return not start or not fields or fields[19] == start
