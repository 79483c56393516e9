"""The scrub's keyword prefilter: one pass over a text finds every keyword of every kind.

Each kind of the rule table names the literal keywords one of which every match of it holds
(`keywords`, matched without regard to case). A Hyperscan database of all of them scans a text
once, at memory speed, however many kinds there are, and gives where each keyword occurs: a
kind's regex is only tried there. (Measured against Aho-Corasick through pyahocorasick and
ahocorasick-rs in docs/benchmarks.md: Hyperscan scans 12-30x faster and reports only the hits.)

A database serves every thread; each thread scans with its own scratch space.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import hyperscan


class Prefilter:
    """Where each of a set of keywords occurs in a text (start offsets, in order, any case)."""

    def __init__(self, keywords: Iterable[bytes]) -> None:
        self.keywords = tuple(sorted({k.lower() for k in keywords}))
        self._lengths = [len(k) for k in self.keywords]
        self._local = threading.local()
        self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        if self.keywords:
            self._database.compile(
                expressions=[_literal(k) for k in self.keywords],
                ids=list(range(len(self.keywords))),
                elements=len(self.keywords),
                flags=[hyperscan.HS_FLAG_CASELESS] * len(self.keywords),
            )

    def hits(self, data: bytes) -> dict[bytes, list[int]]:
        """Each keyword that occurs in `data`, with where it starts (every occurrence)."""
        if not data or not self.keywords:
            return {}
        found: list[list[int]] = [[] for _ in self.keywords]
        lengths = self._lengths

        def on_match(index: int, start: int, end: int, flags: int, context: object) -> None:
            found[index].append(end - lengths[index])

        self._database.scan(data, match_event_handler=on_match, scratch=self._scratch())
        return {self.keywords[i]: starts for i, starts in enumerate(found) if starts}

    def _scratch(self) -> hyperscan.Scratch:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        return scratch


def _literal(keyword: bytes) -> bytes:
    """A keyword as a Hyperscan expression that matches it literally."""
    return b"".join(b"\\x%02x" % byte for byte in keyword)
