"""The one error type for bad input: it always says which file, which line, and why."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vae_pipeline.domain.scrub.lines import scrub_line


class BadInput(Exception):
    """A malformed input file. `reason` is one line and never quotes a secret or a home path: a
    file name or reason that holds one (an archive member named after a key) is scrubbed here, so
    no caller can print or store it."""

    def __init__(self, file: str, reason: str, line: int | None = None):
        self.file, self.reason, self.line = scrub_line(file), scrub_line(reason), line
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {self.reason}")


def unforeseen(exc: Exception, file: str) -> BadInput:
    """An error no check foresaw while reading `file` of one episode, as that episode's BadInput:
    the error's type and the first line of its message, so the stage goes on with the others."""
    first_line = next(iter(str(exc).splitlines()), "")[:200]
    return BadInput(file, f"could not be processed ({type(exc).__name__}{': ' + first_line if first_line else ''})")


@contextmanager
def reading(file: str) -> Iterator[None]:
    """Inside, any error but a BadInput becomes the BadInput of `file` (see `unforeseen`)."""
    try:
        yield
    except BadInput:
        raise
    except Exception as exc:  # noqa: BLE001 — the point: any error, as this file's BadInput
        raise unforeseen(exc, file) from None
