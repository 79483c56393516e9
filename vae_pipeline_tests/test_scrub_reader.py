"""The scrub sees what a reader of the file sees: every planted credential shape caught in its
raw, JSON-escaped (`\\u00XX` at its start, in its middle, throughout; `\\/`) and UTF-16/UTF-32
forms, counted once, the JSON left valid and no tail of a value left behind — also one level
deeper, in JSON text that is itself a JSON string's value (a Read or a `cat` of a `.jsonl` file:
`\\\\u0073`, `\\\\/`, `\\\\n`)."""

from __future__ import annotations

import codecs
import json
import random

import pytest

from vae_pipeline.domain.scrub.texts import (
    ScrubConfig,
    is_text_member,
    scrub_text,
    value_sha256,
)
from vae_pipeline.domain.scrub.views import VIEW_BYTES, DecodedView, NestedView, readings
from vae_pipeline.sample.planted import PLANTED_KIND, planted_text, planted_values
from vae_pipeline_tests.conftest import read_json_escapes

REDACTED = [key for key, (_, action) in PLANTED_KIND.items() if action == "redact"]
# the AWS documentation's example secret: it holds "/", which some JSON writers escape as "\/"
AWS_SECRET_WITH_SLASHES = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _values(seed: int) -> dict[str, str]:
    values = planted_values(random.Random(seed))
    values["aws_secret_access_key"] = AWS_SECRET_WITH_SLASHES
    return values


def _u(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _escaped(value: str, how: str) -> str:
    """The value as it sits in a JSON string, spelt with escapes a reader decodes."""
    plain = json.dumps(value)[1:-1]
    if how == "first":
        return _u(value[0]) + json.dumps(value[1:])[1:-1]
    if how == "middle":
        at = len(value) // 2
        while value[at] in "\n":
            at += 1
        return json.dumps(value[:at])[1:-1] + _u(value[at]) + json.dumps(value[at + 1 :])[1:-1]
    if how == "every":
        return "".join("\\n" if c == "\n" else _u(c) for c in value)
    if how == "slash":
        return plain.replace("/", "\\/")
    raise AssertionError(how)


def _document(values: dict[str, str], spell) -> str:
    """The planted text as one JSON string value, each planted value spelt by `spell`."""
    text = json.dumps(planted_text(values))
    for key, value in sorted(values.items(), key=lambda kv: -len(kv[1])):
        plain = json.dumps(value)[1:-1]
        assert plain in text
        text = text.replace(plain, spell(key, value))
    return '{"type": "user", "text": ' + text + "}"


def _tails(value: str) -> list[str]:
    """Pieces of a value that must not survive: its last 8 characters, and each PEM body line."""
    pieces = [value[-8:]] if "PRIVATE KEY" not in value else value.splitlines()[1:-1]
    return [p for p in pieces if len(p) >= 8]


@pytest.mark.parametrize("how", ["first", "middle", "every", "slash"])
@pytest.mark.parametrize("seed", range(4))
def test_escaped_credentials_are_redacted_once_leaving_valid_json(seed: int, how: str) -> None:
    values = _values(seed)
    document = _document(values, lambda key, value: _escaped(value, how) if key in REDACTED else json.dumps(value)[1:-1])
    data = (document + "\n").encode()
    assert json.loads(data)["text"] == planted_text(values)  # the reader's view holds every value
    result = scrub_text(data, "messages.jsonl", ScrubConfig())
    text = json.loads(result.data)["text"]  # still one valid JSON line
    for key in REDACTED:
        assert values[key] not in text, key
        for tail in _tails(values[key]):
            assert tail not in text and tail.encode() not in result.data, key
        assert f"<redacted:{PLANTED_KIND[key][0]}>" in text
    assert result.redacted == len(REDACTED)  # each value counted once, not once per reading
    assert {f.kind for f in result.findings} == {"email", "ip_address"}


@pytest.mark.parametrize("codec", ["utf-8", "utf-16"])
@pytest.mark.parametrize("how", ["first", "middle", "every", "slash"])
def test_escaped_credentials_in_json_text_inside_a_json_string_are_redacted_once(how: str, codec: str) -> None:
    """A tool result that is the text of a `.jsonl` file the agent read: its lines' own escapes
    are escaped once more (`\\\\u0073k-ant-…`, `\\\\/` in an AWS secret, `\\\\n` in a PEM block)."""
    values = _values(8)
    inner = _document(values, lambda key, value: _escaped(value, how) if key in REDACTED else json.dumps(value)[1:-1])
    line = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "content": inner}]}})
    data = (line + "\n").encode(codec)
    read = json.loads(data.decode(codec))["message"]["content"][0]["content"]
    assert json.loads(read)["text"] == planted_text(values)
    result = scrub_text(data, "messages.jsonl", ScrubConfig())
    outer = result.data.decode(codec)
    text = json.loads(json.loads(outer)["message"]["content"][0]["content"])["text"]  # both levels still valid JSON
    once = read_json_escapes(outer.encode())
    twice = read_json_escapes(once)
    for key in REDACTED:
        assert values[key] not in text, key
        for tail in _tails(values[key]):
            for reading in (outer.encode(), once, twice):
                assert tail.encode() not in reading, key
        assert f"<redacted:{PLANTED_KIND[key][0]}>" in text
    assert result.redacted == len(REDACTED)
    assert {f.kind for f in result.findings} == {"email", "ip_address"}


def test_escaped_home_email_and_ip_are_read_decoded() -> None:
    values = _values(7)
    document = _document(values, lambda key, value: _escaped(value, "every" if key in ("email", "public_ip") else "slash"))
    result = scrub_text(document.encode(), "session.jsonl", ScrubConfig())
    text = json.loads(result.data)["text"]
    assert values["home"] not in text and "cd <home>/work" in text
    findings = {f.kind: f for f in result.findings}
    assert set(findings) == {"email", "ip_address"}
    # a finding names what a reader sees: the sha256 of the decoded value
    assert findings["email"].sha256s == (value_sha256(values["email"].encode()),)
    assert findings["ip_address"].sha256s == (value_sha256(values["public_ip"].encode()),)


def test_a_key_in_a_string_with_other_escapes_is_counted_once() -> None:
    key = _values(1)["anthropic"]
    line = json.dumps({"text": f"caf\u00e9 \u2014 {key} done"}, ensure_ascii=True) + "\n"
    assert "\\u00e9" in line and "\\u2014" in line
    result = scrub_text(line.encode(), "m.jsonl", ScrubConfig())
    assert result.redacted == 1
    assert json.loads(result.data)["text"] == "caf\u00e9 \u2014 <redacted:anthropic> done"
    assert result.data.startswith(b'{"text": "caf\\u00e9 \\u2014 <redacted')  # the rest as it was


def test_lines_without_a_value_keep_their_escapes_byte_for_byte() -> None:
    values = _values(2)
    lines = [
        r'{"path": "a\/b\/c", "t": "\u00e9\u00e8"}',
        r'{"url": "https:\/\/example.com\/docs\/index.html"}',
        '{"key": "' + _escaped(values["github_ghp"], "middle") + '"}',
        r'{"note": "\u0048\u0069 there"}',
    ]
    data = "\n".join(lines).encode()
    out = scrub_text(data, "m.jsonl", ScrubConfig()).data.split(b"\n")
    assert [out[0], out[1], out[3]] == [lines[0].encode(), lines[1].encode(), lines[3].encode()]
    assert json.loads(out[2]) == {"key": "<redacted:github>"}


CODECS = [("utf-16", "utf-16-le bom"), ("utf-16-be", "utf-16-be, no bom"), ("utf-16-le", "utf-16-le, no bom"),
          ("utf-32", "utf-32-le bom"), ("utf-32-be", "utf-32-be, no bom")]


@pytest.mark.parametrize(("codec", "label"), CODECS, ids=[label for _, label in CODECS])
@pytest.mark.parametrize("wrap", ["raw", "json"])
def test_wide_text_is_decoded_scrubbed_and_written_back_in_its_encoding(codec: str, label: str, wrap: str) -> None:
    values = _values(3)
    text = planted_text(values) if wrap == "raw" else json.dumps({"text": planted_text(values)})
    text = "intro line\n" + text + "\nlast line, untouched\n"
    data = text.encode(codec)
    assert b"\0" in data
    result = scrub_text(data, "notes.txt", ScrubConfig())
    assert result.data != data
    has_bom = result.data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE,
                                      codecs.BOM_UTF32_BE))
    assert has_bom == ("no bom" not in label)
    out = result.data.decode(codec)  # written back in the member's own encoding
    for key, (kind, action) in PLANTED_KIND.items():
        if action == "finding":
            assert values[key] in out
        else:
            assert values[key] not in out and json.dumps(values[key])[1:-1] not in out, key
    assert result.redacted == len(REDACTED)
    assert out.split("\n")[0] == "intro line" and out.split("\n")[-2] == "last line, untouched"
    assert out.count("\n") == text.count("\n")
    mail_line = next(i for i, line in enumerate(text.split("\n"), 1) if values["email"] in line)
    assert [(f.line, f.kind) for f in result.findings] == [(mail_line, "email"), (mail_line, "ip_address")]


def test_wide_text_with_nothing_to_change_is_copied_byte_for_byte() -> None:
    data = "plain notes \u00e9\nsecond line\n".encode("utf-16")
    assert scrub_text(data, "notes.txt", ScrubConfig()).data == data


def test_a_wide_member_without_a_text_extension_is_text() -> None:
    assert is_text_member("logs/run.log", "started\nok\n".encode("utf-16"))
    assert is_text_member("logs/run", "started\nok\n".encode("utf-16-le"))
    assert not is_text_member("logs/blob", bytes(range(256)) * 4)


def test_a_line_longer_than_one_view_is_scrubbed_across_its_pieces() -> None:
    """An escaped line of several MiB is decoded a piece at a time: values planted across every
    piece boundary are caught whole, each once, and the rest of the line is left as it was."""
    values = _values(5)
    keys = [values[k] for k in ("anthropic", "github_pat", "slack", "jwt")]
    filler = "see \\/srv\\/www\\/index.html and more " * 40  # 1,480 bytes, "/" written "\\/"
    head = '{"text": "'
    chunks, planted = [head], 0
    while sum(map(len, chunks)) < 3 * VIEW_BYTES + 50_000:
        size = sum(map(len, chunks))
        if VIEW_BYTES - 3 * len(filler) < size % VIEW_BYTES < VIEW_BYTES - 60 or planted < 4:
            chunks.append(" " + _escaped(keys[planted % len(keys)], "middle") + " ")
            planted += 1
        elif size < VIEW_BYTES < size + len(filler):  # a value across the first piece's end
            chunks.append("x" * (VIEW_BYTES - size - 40) + " " + _escaped(keys[0], "first") + " ")
            planted += 1
        else:
            chunks.append(filler)
    line = "".join(chunks) + '"}\n'
    assert len(line) > 3 * VIEW_BYTES and planted > 12
    result = scrub_text(line.encode(), "blob.jsonl", ScrubConfig())
    text = json.loads(result.data)["text"]
    assert result.redacted == planted
    assert not any(k in text or k[-8:] in text for k in keys)
    assert text.count("/srv/www/index.html") == line.count("\\/srv\\/www\\/index.html")
    assert result.data.count(b"\\/srv\\/www") == line.count("\\/srv\\/www")  # untouched bytes as they were


def test_a_decoded_view_maps_every_stretch_back_to_the_bytes_that_spell_it() -> None:
    rng = random.Random(0)
    pieces = ["a", "z", "n", "u", "\\\\", "\\n", '\\"', "\\/", "\\u0041", "\\u00e9", "\\u2014", "\\ud83d", "\\u005c",
              "\\u005cn", "\\x", "\\"]
    for _ in range(600):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 16))).encode()
        view = DecodedView(raw)
        assert view.data == read_json_escapes(raw), raw
        for start in range(len(view.data)):
            for end in range(start + 1, len(view.data) + 1):
                source_start, source_end = view.source_span(start, end)
                assert view.data[start:end] in read_json_escapes(raw[source_start:source_end]), (raw, start, end)
        if view.data:
            assert view.source_span(0, len(view.data)) == (0, len(raw))


def test_a_nested_view_maps_every_stretch_of_its_deepest_reading_back_to_the_bytes_that_spell_it() -> None:
    rng = random.Random(1)
    pieces = ["a", "n", "/", "\\/", "\\u0041", "\\\\/", "\\\\u0041", "\\\\n", '\\\\\\"', "\\\\\\\\", "\\\\\\\\\\/",
              "\\"]
    deepest = 0
    for _ in range(400):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12))).encode()
        levels = readings(raw)
        view = NestedView(levels)
        expected = raw
        for _ in levels:
            expected = read_json_escapes(expected)
        assert view.data == expected, raw
        deepest = max(deepest, len(levels))
        for start in range(len(view.data)):
            for end in range(start + 1, len(view.data) + 1):
                source_start, source_end = view.source_span(start, end)
                spelt = raw[source_start:source_end]
                for _ in levels:
                    spelt = read_json_escapes(spelt)
                assert view.data[start:end] in spelt, (raw, start, end)
    assert deepest >= 3


def test_values_across_the_edges_of_an_escapes_stretch_are_caught_whole() -> None:
    """Only the stretch around an escape is read decoded; a value that stretch cuts at either
    edge is left to the byte-level pass, which sees it whole: no prefix replaced, no tail left."""
    key = _values(6)["anthropic"]
    run = " ".join([key] * 1200)  # ~130 KB of keys: whichever byte a stretch ends at lies in one
    line = json.dumps({"text": run + " \\/ " + run}).replace("\\\\/", "\\/")
    assert line.count("\\/") == 1
    result = scrub_text(line.encode(), "m.jsonl", ScrubConfig())
    text = json.loads(result.data)["text"]
    assert text == " ".join(["<redacted:anthropic>"] * 1200) + " / " + " ".join(["<redacted:anthropic>"] * 1200)
    assert result.redacted == 2400
