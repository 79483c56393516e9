"""Checks a matched value must pass before a kind acts on it (the rule table's `validate` and
`entropy`): how random it reads, and whether it is a literal rather than a variable or a
placeholder."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable


def shannon_entropy(value: bytes) -> float:
    """Bits per character of `value`'s own character frequencies (0 for an empty value)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _mixed_case(value: bytes) -> bool:
    """Random letters in both cases, as a Hugging Face token's are, not an identifier that
    starts with the same prefix (`hf_requiredCharacteristicTypes`): at least a quarter of the
    letters after the prefix's `_` are capitals and at least a quarter are small."""
    body = value.split(b"_")[-1]
    upper = sum(65 <= b <= 90 for b in body)
    lower = sum(97 <= b <= 122 for b in body)
    letters = upper + lower
    return letters > 0 and upper * 4 >= letters and lower * 4 >= letters


# Values that stand for a secret rather than being one: shell and template variables and
# substitutions, placeholders a README or an example config writes.
_NOT_LITERAL = re.compile(
    rb"[$%{(<\[*]|\\\$"  # $VAR ${VAR} $(cmd) %VAR% {{ var }} (cmd) <your-key> [REDACTED] ****
    rb"|(?i:x+|\.+|-+|_+|changeme|change_me|password|passwd|secret|token|example|placeholder|"
    rb"redacted|dummy|test|null|none|nil|true|false|undefined|your[_-]?\w*|my[_-]?\w*)$"
)


def _literal(value: bytes) -> bool:
    """A literal value: not a variable, substitution or placeholder, and not one character repeated."""
    return bool(value) and _NOT_LITERAL.match(value) is None and len(set(value)) > 1


VALUE_CHECKS: dict[str, Callable[[bytes], bool]] = {"mixed_case": _mixed_case, "literal": _literal}
