"""The one error type for bad input: it always says which file, which line, and why."""

from __future__ import annotations

from vae_pipeline.domain.line_scrub import scrub_line


class BadInput(Exception):
    """A malformed input file. `reason` is one line and never quotes a secret or a home path: a
    file name or reason that holds one (an archive member named after a key) is scrubbed here, so
    no caller can print or store it."""

    def __init__(self, file: str, reason: str, line: int | None = None):
        self.file, self.reason, self.line = scrub_line(file), scrub_line(reason), line
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {self.reason}")
