"""The scrub's prefilter: one pass over a text finds where every kind of the rule table may match.

Each kind names the literal keywords one of which every match of it holds (`keywords`, matched
without regard to case), or, for the few shapes with no literal (an IP address, an `ls -l`
line), regex `triggers`. A Hyperscan database of all of them scans a text once, at memory speed,
however many kinds there are, and gives where each keyword or trigger occurs: a kind's regex is
only tried there. (Measured against Aho-Corasick through pyahocorasick and ahocorasick-rs in
docs/benchmarks.md.)

A database serves every thread; each thread scans with its own scratch space.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import hyperscan


class Prefilter:
    """Where each of a set of keywords (any case) and triggers (regexes in the syntax Python's
    `re` and Hyperscan share) starts in a text: every occurrence, in order."""

    def __init__(self, keywords: Iterable[bytes], triggers: Iterable[bytes] = ()) -> None:
        self.keywords = tuple(sorted({k.lower() for k in keywords}))
        self.triggers = tuple(sorted(set(triggers)))
        self.keys = self.keywords + self.triggers
        self._lengths = [len(k) for k in self.keywords]
        self._local = threading.local()
        self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        if self.keys:
            self._database.compile(
                expressions=[_literal(k) for k in self.keywords] + list(self.triggers),
                ids=list(range(len(self.keys))),
                elements=len(self.keys),
                flags=[hyperscan.HS_FLAG_CASELESS] * len(self.keywords)
                + [hyperscan.HS_FLAG_SOM_LEFTMOST] * len(self.triggers),
            )

    def hits(self, data: bytes) -> dict[bytes, list[int]]:
        """Each keyword (lowercase) and trigger that occurs in `data`, with where it starts."""
        if not data or not self.keys:
            return {}
        found: dict[int, list[int]] = {}  # only the keys met: most texts meet none of hundreds
        lengths, literals = self._lengths, len(self.keywords)

        def on_match(index: int, start: int, end: int, flags: int, context: object) -> None:
            found.setdefault(index, []).append(end - lengths[index] if index < literals else start)

        self._database.scan(data, match_event_handler=on_match, scratch=self._scratch())
        # in key order; a trigger is reported at each end it can have: once per start, in order
        return {self.keys[i]: found[i] if i < literals else sorted(set(found[i])) for i in sorted(found)}

    def _scratch(self) -> hyperscan.Scratch:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        return scratch


def _literal(keyword: bytes) -> bytes:
    """A keyword as a Hyperscan expression that matches it literally."""
    return b"".join(b"\\x%02x" % byte for byte in keyword)
