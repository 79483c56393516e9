"""Strict JSON (`domain/episodes/strict_json.py`): what Python's `json` accepts and the pipeline refuses,
with the file and line of each refusal, and JSONL read as a stream under a line limit."""

from __future__ import annotations

import json

import pytest

from vae_pipeline.definitions import resources_from_environ
from vae_pipeline.domain.episodes.episode import parse_episode
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.json_schema import SchemaValidator
from vae_pipeline.domain.episodes.series import episode_entries
from vae_pipeline.domain.episodes.strict_json import MAX_DEPTH, jsonl, loads
from vae_pipeline.engines.settings import apply_defaults
from vae_pipeline.sample.generator import generate
from vae_pipeline_tests.conftest import META

# text -> (line, words of the reason, what Python's json.loads does: None = takes it, or the
# error it raises — no JSONDecodeError, which is why one such file used to stop a whole stage)
REFUSED = {
    '{"a": 1,\n "b": NaN}': (2, "NaN is not a JSON number", None),
    '{"a": 1,\n "b": -Infinity}': (2, "-Infinity is not a JSON number", None),
    '{"a":\n [1,\n  1e309]}': (3, "too large to be finite", None),
    '{"a": 1,\n\n "a": 2}': (3, 'duplicate key "a"', None),
    '{"a":\n [' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]}": (2, f"nested deeper than {MAX_DEPTH} levels", None),
    "[" * 100_000 + "]" * 100_000: (1, f"nested deeper than {MAX_DEPTH} levels", RecursionError),
    '{"a":\n 9223372036854775808}': (2, "does not fit in 64 bits", None),
    '{"a":\n -9223372036854775809}': (2, "does not fit in 64 bits", None),
    '{"a":\n 1' + "0" * 5000 + "}": (2, "does not fit in 64 bits", ValueError),
    '{\n"t": "\\udc00"}': (2, "lone surrogate", None),
}


@pytest.mark.parametrize("text", REFUSED)
def test_what_python_accepts_is_refused_with_its_line(text):
    line, words, python_raises = REFUSED[text]
    if python_raises is None:
        json.loads(text)
    else:
        with pytest.raises(python_raises):
            json.loads(text)
    with pytest.raises(BadInput) as refused:
        loads(text.encode(), "doc.json")
    assert (refused.value.file, refused.value.line) == ("doc.json", line)
    assert refused.value.reason.startswith("not valid JSON: ") and words in refused.value.reason


def test_good_json_reads_as_python_reads_it():
    text = '{"a": [1, 2.5, -3, "é", {"b": null, "c": true}], "n": 9223372036854775807, "d": ' \
           + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}"
    assert loads(text, "doc.json") == json.loads(text)
    assert loads(b"\xef\xbb\xbf[1]", "doc.json") == [1]  # a UTF-8 byte order mark, as json.loads(bytes)


def test_a_syntax_error_keeps_the_parser_s_line():
    with pytest.raises(BadInput) as refused:
        loads(b'{\n "a": 1\n "b": 2}', "doc.json")
    assert refused.value.line == 3 and refused.value.reason.startswith("not valid JSON (")


def test_jsonl_names_the_line_and_skips_blank_ones():
    assert list(jsonl(b'{"a": 1}\n\n{"b": 2}\r\n', "m.jsonl")) == [(1, {"a": 1}), (3, {"b": 2})]
    with pytest.raises(BadInput) as refused:
        list(jsonl(b'{"a": 1}\n{"a": 1, "a": 2}\n', "m.jsonl"))
    assert (refused.value.file, refused.value.line) == ("m.jsonl", 2) and "duplicate key" in refused.value.reason


def test_a_line_over_the_limit_is_refused_after_reading_only_the_limit(tmp_path):
    limit = 1024**2
    path = tmp_path / "messages.jsonl"
    with path.open("wb") as out:
        out.write(b'{"type": "user"}\n"' + b"x" * (limit - 2) + b'"\n"')  # line 2: exactly the limit
        out.write(b"y" * (20 * limit) + b'"\n')
    with path.open("rb") as stream:
        lines = jsonl(stream, "messages.jsonl", limit)
        assert [n for n, _ in (next(lines), next(lines))] == [1, 2]
        with pytest.raises(BadInput) as refused:
            next(lines)
        read = stream.raw.tell()
    assert refused.value.line == 3
    assert "longer than the line limit (1,048,576 bytes, VAE_MAX_LINE_BYTES)" in refused.value.reason
    assert read < 3 * limit, read  # two short lines and the limit of the third, not its 20 MiB


def test_the_line_limit_is_a_setting_that_reaches_the_episodes_stage(tmp_path):
    env = apply_defaults({"VAE_HOME": str(tmp_path / "home"), "VAE_RUNS_ROOT": str(tmp_path),
                          "VAE_DATASET_DIR": str(tmp_path / "dataset")})
    assert env["VAE_MAX_LINE_BYTES"] == str(64 * 1024**2)
    assert resources_from_environ(env)["runs_root"].max_line_bytes == 64 * 1024**2
    env["VAE_MAX_LINE_BYTES"] = "100"
    runs_root = resources_from_environ(env)["runs_root"]
    assert runs_root.max_line_bytes == 100
    run = generate(tmp_path / "runs", META, series=1, episodes=1, seed=2, bad=False)
    entry = next(e for e in episode_entries(run.root / next(iter(run.series)))[0] if not e.is_archive)
    briefs = SchemaValidator.from_file(META / "brief.schema.json")
    series = next(iter(run.series))
    row = parse_episode(series, entry, briefs, max_line_bytes=runs_root.max_line_bytes)
    # brief.json is one JSON text, larger than the limit: refused before it is read
    assert (row["valid"], row["error_file"], row["error_line"]) == (False, "brief.json", None)
    assert row["error_reason"] == "is larger than the line limit (100 bytes, VAE_MAX_LINE_BYTES): not read"
    # with a limit above its documents' sizes, a longer message line planted at its end is refused
    limit = 4096
    assert max((entry.path / name).stat().st_size for name in ("brief.json", "result.json")) < limit
    long_line = json.dumps({"type": "user", "message": {"content": "x" * limit}}).encode() + b"\n"
    with (entry.path / "messages.jsonl").open("ab") as messages:
        messages.write(long_line)
    lines = (entry.path / "messages.jsonl").read_bytes().count(b"\n")
    row = parse_episode(series, entry, briefs, max_line_bytes=limit)
    assert (row["valid"], row["error_file"], row["error_line"]) == (False, "messages.jsonl", lines)
    assert "longer than the line limit (4,096 bytes" in row["error_reason"]
    assert parse_episode(series, entry, briefs)["valid"]  # the default limit takes it
