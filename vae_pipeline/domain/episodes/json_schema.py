"""Validating an input file against its JSON Schema in `meta/`, with errors a person can act on.

Every input file with a schema (brief.json, judge.json, result.json, series.json) is checked the
same way: the first error becomes a BadInput naming the field, what the schema expects there,
the file and the line — in the schema's words, never the value found (a value may hold a secret
or a home path).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from json.decoder import scanstring
from pathlib import Path

import jsonschema

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.project import PROJECT_META


def _is_integer(_checker: object, value: object) -> bool:
    # JSON Schema counts 7.0 as an integer; a score written 7.0 is not one in the contract's terms
    return isinstance(value, int) and not isinstance(value, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)

_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
               "null": "null", "object": "a JSON object", "array": "a list"}
_PLURALS = {"string": "strings", "integer": "integers", "number": "numbers", "object": "objects"}


class SchemaValidator:
    """One schema of `meta/`, checked once when loaded."""

    def __init__(self, schema: dict):
        _Validator.check_schema(schema)
        self.schema = schema
        self._validator = _Validator(schema)

    @classmethod
    def from_file(cls, path: Path) -> SchemaValidator:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    def validate(self, doc: object, text: str, file: str) -> None:
        """Raise BadInput for the most relevant error of `doc` (parsed from `text`), if any."""
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(doc))
        if error is None:
            return
        path = list(error.absolute_path)
        if error.validator == "required":
            missing = next(key for key in error.validator_value if key not in error.instance)
            raise BadInput(file, f"missing field {_field([*path, missing])}", line=line_of(text, path))
        if error.validator == "additionalProperties":
            allowed = ", ".join(error.schema.get("properties", {}))
            raise BadInput(file, f"{_field(path)} holds a key that is not one of {allowed}", line=line_of(text, path))
        raise BadInput(file, f"{_field(path)} must be {describe(error.schema)}", line=line_of(text, path))


@lru_cache
def contract_validator(name: str) -> SchemaValidator:
    """The schema of one of contract 1's input files (`judge`, `result`, `series`), from the
    project's meta/: the code is written against these formats, so they go with the code and are
    not taken from an overriding VAE_META_DIR."""
    return SchemaValidator.from_file(PROJECT_META / f"{name}.schema.json")


def describe(schema: dict) -> str:
    """What a (sub)schema expects, in words."""
    if "enum" in schema:
        return "one of " + ", ".join(v if isinstance(v, str) else json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return f"exactly {json.dumps(schema['const'])}"
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(describe(branch) for branch in schema[key])
    kinds = schema.get("type", [])
    words = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        word = _TYPE_WORDS[kind]
        items = schema.get("items")
        if kind == "array" and isinstance(items, dict) and items.get("type") in _PLURALS:
            word += f" of {_PLURALS[items['type']]}"
        elif kind in ("integer", "number"):
            word += _bounds(schema)
        elif kind == "string":
            word += _string_rules(schema)
        words.append(word)
    return " or ".join(words) or "what the schema allows"


def _bounds(schema: dict) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    parts = [f"at least {low}" if low is not None else "", f"at most {high}" if high is not None else "",
             f"greater than {schema['exclusiveMinimum']}" if "exclusiveMinimum" in schema else "",
             f"less than {schema['exclusiveMaximum']}" if "exclusiveMaximum" in schema else ""]
    shown = [p for p in parts if p]
    return " " + " and ".join(shown) if shown else ""


def _string_rules(schema: dict) -> str:
    rules = []
    if schema.get("minLength"):
        rules.append(f"of at least {schema['minLength']} character(s)")
    if "pattern" in schema:
        rules.append(f"matching {schema['pattern']}")
    return " " + " and ".join(rules) if rules else ""


def _field(path: Sequence[str | int]) -> str:
    """`answer.defects[0].severity`; the whole document is "the file"."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "the file"


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def line_of(text: str, path: Sequence[str | int]) -> int | None:
    """The line of `text` where the member at `path` starts (its key, inside an object); None for
    the whole document or a path the text does not hold."""
    if not path:
        return None
    pos, start = _SPACE.match(text, 0).end(), None
    try:
        for step in path:
            if isinstance(step, str) and text[pos] == "{":
                pos, start = _member(text, pos, step)
            elif isinstance(step, int) and text[pos] == "[":
                pos = _SPACE.match(text, pos + 1).end()
                for _ in range(step):
                    pos = _after_value(text, pos)
                start = pos
            else:
                return None
            if pos is None:
                return None
    except (ValueError, IndexError):
        return None
    return text.count("\n", 0, start) + 1


def _member(text: str, pos: int, key: str) -> tuple[int | None, int | None]:
    """(where the value of `key` starts, where its key starts) in the object opening at `pos`."""
    pos = _SPACE.match(text, pos + 1).end()
    while text[pos] == '"':
        start = pos
        name, pos = scanstring(text, pos + 1)
        pos = _SPACE.match(text, pos).end()
        pos = _SPACE.match(text, pos + 1).end()  # past the colon
        if name == key:
            return pos, start
        pos = _after_value(text, pos)
    return None, None


def _after_value(text: str, pos: int) -> int:
    """Past the value at `pos` and its comma, to the next member or item."""
    _, end = _DECODER.raw_decode(text, pos)
    pos = _SPACE.match(text, end).end()
    if text[pos] == ",":
        pos = _SPACE.match(text, pos + 1).end()
    return pos
