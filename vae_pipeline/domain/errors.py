"""The one error type for bad input: it always says which file, which line, and why."""

from __future__ import annotations


class BadInput(Exception):
    """A malformed input file. `reason` is one line and never quotes a secret or a home path."""

    def __init__(self, file: str, reason: str, line: int | None = None):
        self.file, self.reason, self.line = file, reason, line
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {reason}")
