"""The scrub: every kind's examples, planted values, findings, allow-list, untouched bytes."""

from __future__ import annotations

import base64
import io
import json
import random
import re

import pytest
from PIL import Image

from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.scrub.texts import (
    ScrubConfig,
    is_text_member,
    kind_specs,
    scrub_text,
    value_sha256,
)
from vae_pipeline.domain.scrub.allow import load_allow_list
from vae_pipeline.sample.planted import PLANTED_KIND, planted_text, planted_values

SPECS = kind_specs()


def _config(spec: dict) -> ScrubConfig:
    if spec.get("config") == "hostname":
        return ScrubConfig(hostname=spec["example_value"])
    if spec.get("config") == "usernames":
        return ScrubConfig(usernames=(spec["example_value"],))
    return ScrubConfig(usernames=tuple(spec.get("example_names", ())))


def _cases(key: str) -> list:
    return [
        pytest.param(spec, example, id=f"{spec['name']}-{i}")
        for spec in SPECS
        for i, example in enumerate(spec.get(key, []))
    ]


@pytest.mark.parametrize(("spec", "example"), _cases("true_examples"))
def test_true_example_is_caught(spec: dict, example: str) -> None:
    result = scrub_text(example.encode(), "f.txt", _config(spec))
    if spec["action"] == "finding":
        assert spec["name"] in {f.kind for f in result.findings}
        assert result.data == example.encode()  # findings are reported, never changed
    else:
        counted = result.placeholders[spec["name"]] + result.redacted_by_kind[spec["name"]]
        assert counted >= 1
        assert result.data != example.encode()
        expected = spec.get("placeholder", f"<redacted:{spec['name']}>").encode()
        assert expected in result.data
        assert not result.findings  # nothing credential-shaped is left behind


@pytest.mark.parametrize(("spec", "example"), _cases("false_examples"))
def test_false_example_is_left_alone(spec: dict, example: str) -> None:
    result = scrub_text(example.encode(), "f.txt", _config(spec))
    assert result.data == example.encode()
    assert result.findings == []
    assert result.redacted == 0 and not result.placeholders


@pytest.mark.parametrize(("spec", "example"), _cases("word_examples"))
def test_plain_word_host_or_user_is_reported_not_replaced(spec: dict, example: str) -> None:
    result = scrub_text(example.encode(), "f.txt", _config(spec))
    assert result.data == example.encode()
    assert [f.kind for f in result.findings] == [spec["name"]]


def test_required_false_examples_are_present() -> None:
    false = [e for spec in SPECS for e in spec["false_examples"]]
    assert any(re.fullmatch(r"commit [0-9a-f]{40}", e) for e in false)  # git SHA
    assert any(re.search(r"\b[0-9a-f]{64}\b", e) for e in false)  # sha256 hex
    assert any(re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", e) for e in false)  # UUID
    # long base64 (not an image, so scanned as text) with AKIA and hf_ inside a run
    assert any("AKIA" in e and re.search(r"[A-Za-z0-9+/_-]{512,}", e) for e in false)
    assert any("hf_" in e and re.search(r"[A-Za-z0-9+/_-]{512,}", e) for e in false)
    assert any(re.search(r"#[0-9a-f]{6}", e) for e in false)  # CSS colour
    assert {"task-sk-level", "desk-lamp"} <= set(false)
    assert any(e.startswith("/rooted") for e in false)


def test_every_trigger_starts_with_a_literal_and_is_in_every_true_example() -> None:
    for spec in SPECS:
        if spec.get("config"):
            continue
        for trigger in spec.get("triggers", []):
            assert trigger[0] not in "[(.?*+{|^$" or trigger.startswith("\\.")
        for example in spec["true_examples"]:
            assert any(re.search(t, example) for t in spec.get("triggers", [])) or any(
                k.lower() in example.lower() for k in spec.get("keywords", [])), (spec["name"], example)


@pytest.mark.parametrize("seed", range(20))
def test_no_planted_value_survives_raw_or_json_escaped(seed: int) -> None:
    values = planted_values(random.Random(seed))
    text = planted_text(values)
    for form in (text, json.dumps({"type": "text", "text": text})):
        result = scrub_text(form.encode(), "x.txt", ScrubConfig())
        out = result.data.decode()
        for key, value in values.items():
            kind, action = PLANTED_KIND[key]
            shown = value if form is text else json.dumps(value)[1:-1]
            if action == "finding":
                assert shown in out
            else:
                assert shown not in out, key
        assert "PRIVATE KEY" not in out
        assert result.redacted == sum(a == "redact" for _, a in PLANTED_KIND.values())
        assert result.redacted_by_kind["github"] == 6
        assert result.placeholders["home"] == 1
        assert {f.kind for f in result.findings} == {"email", "ip_address"}


def test_redacted_counts_every_occurrence_and_aws_pair_is_two() -> None:
    values = planted_values(random.Random(1))
    key = values["anthropic"]
    blob = "\n".join(f'{{"x-api-key": "{key}"}}' for _ in range(10))
    assert scrub_text(blob.encode(), "b.jsonl", ScrubConfig()).redacted == 10
    pair = f"{values['aws_access_key_id']},{values['aws_secret_access_key']}"
    result = scrub_text(pair.encode(), "c.txt", ScrubConfig())
    assert result.redacted == 2
    assert result.data == b"<redacted:aws_access_key_id>,<redacted:aws_secret_access_key>"


def test_findings_name_input_lines_once_per_line_and_kind_and_never_the_value() -> None:
    values = planted_values(random.Random(2))
    text = "\n".join(
        [
            "intro",
            values["pem_private_key"],  # several lines, replaced: later lines keep their numbers
            "mail a@x-mail.com and b@y-mail.com and 52.1.2.3",
            "plain",
        ]
    )
    result = scrub_text(text.encode(), "notes.md", ScrubConfig())
    mail_line = text.split("\n").index("mail a@x-mail.com and b@y-mail.com and 52.1.2.3") + 1
    assert [(f.line, f.kind) for f in result.findings] == [(mail_line, "email"), (mail_line, "ip_address")]
    assert result.data.count(b"\n") == text.count("\n")
    # one finding per line and kind, carrying the sha256 of every value of that kind on the line
    assert result.findings[0].sha256s == (value_sha256(b"a@x-mail.com"), value_sha256(b"b@y-mail.com"))
    assert result.findings[1].sha256s == (value_sha256(b"52.1.2.3"),)
    for finding in result.findings:
        assert "mail.com" not in repr(finding) and "52.1.2.3" not in repr(finding)


def test_line_map_gives_input_line_numbers() -> None:
    result = scrub_text(b"ok\nmail me@corp-mail.net\n", "m.jsonl", ScrubConfig(), line_map=[3, 7])
    assert [(f.line, f.kind) for f in result.findings] == [(7, "email")]


def test_allow_list_accepts_reviewed_values_only(tmp_path) -> None:
    text = b"first\nwrite to shown@studio-demo.com or real@corp-mail.net, again shown@studio-demo.com\n"
    shown, real = value_sha256(b"shown@studio-demo.com"), value_sha256(b"real@corp-mail.net")
    allow_file = tmp_path / "scrub-allow.jsonl"
    # an older line names one value by `sha256`: still read
    allow_file.write_text(
        json.dumps({"file": "work/index.html", "kind": "email", "sha256": shown, "reason": "on screen"})
        + "\n\n"
    )
    allow = load_allow_list(allow_file)
    assert allow == frozenset({("work/index.html", "email", shown)})

    partly = scrub_text(text, "work/index.html", ScrubConfig(allow=allow)).findings
    assert [(f.line, f.allowed, f.sha256s) for f in partly] == [(2, False, (shown, real))]

    # one entry listing every value of the finding, all at once, clears it
    allow_file.write_text(json.dumps({"file": "work/index.html", "kind": "email", "sha256s": [shown, real]}) + "\n")
    both = load_allow_list(allow_file)
    assert both == frozenset({("work/index.html", "email", shown), ("work/index.html", "email", real)})
    assert [f.allowed for f in scrub_text(text, "work/index.html", ScrubConfig(allow=both)).findings] == [True]
    elsewhere = scrub_text(text, "work/other.html", ScrubConfig(allow=both)).findings
    assert [f.allowed for f in elsewhere] == [False]  # allowed by file, not everywhere

    assert load_allow_list(tmp_path / "missing.jsonl") == frozenset()
    for bad in ('{"file": "a"}', '{"file": "a", "kind": "email", "sha256s": []}',
                '{"file": "a", "kind": "email", "sha256s": "ab"}', '{"file": "a", "kind": "email", "sha256s": [""]}'):
        allow_file.write_text(bad + "\n")
        with pytest.raises(BadInput) as error:
            load_allow_list(allow_file)
        assert error.value.line == 1, bad


def test_untouched_lines_are_copied_byte_for_byte() -> None:
    values = planted_values(random.Random(3))
    lines = [
        b"plain ascii line\r",
        "caf\u00e9 \u2014 unicode".encode(),
        b"\xff\xfe not utf-8 at all",
        f"export HF_TOKEN={values['huggingface']}".encode(),
        b"   trailing spaces   ",
        b"",
    ]
    data = b"\n".join(lines)
    out = scrub_text(data, "a.sh", ScrubConfig()).data.split(b"\n")
    assert len(out) == len(lines)
    for i, line in enumerate(lines):
        if i == 3:
            assert out[i] == b"export HF_TOKEN=<redacted:huggingface>"
        else:
            assert out[i] == line


def _png_base64(rng: random.Random) -> str:
    image = Image.frombytes("RGB", (40, 40), rng.randbytes(40 * 40 * 3))
    out = io.BytesIO()
    image.save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_only_base64_that_decodes_to_an_image_is_skipped() -> None:
    rng = random.Random(4)
    values = planted_values(rng)
    key = values["aws_access_key_id"]
    png = _png_base64(rng)
    assert len(png) > 1024
    inside = png[:600] + key + "/home/abc" + png[600:]  # inside a real image: image bytes, skipped
    url = "data:image/png;base64," + png[:300] + key + png[300:]
    image_doc = json.dumps({"data": inside, "url": url}).encode()
    result = scrub_text(image_doc, "m.json", ScrubConfig())
    assert result.data == image_doc
    assert result.findings == [] and result.redacted == 0

    not_image = base64.b64encode(rng.randbytes(450)).decode()  # 600 characters that are no image
    assert len(not_image) == 600
    svg = "data:image/svg+xml;utf8,<svg><text>ops@corp-mail.net 52.3.4.5</text></svg>"
    fake = "data:image/png;base64," + not_image[:100] + key
    doc = json.dumps({"data": not_image + key, "url": svg, "icon": fake}).encode()
    result = scrub_text(doc, "m.json", ScrubConfig())
    assert key.encode() not in result.data
    assert result.redacted_by_kind["aws_access_key_id"] == 2
    loaded = json.loads(result.data)
    assert loaded["data"] == not_image + "<redacted:aws_access_key_id>"
    assert {f.kind for f in result.findings} == {"email", "ip_address"}


def test_host_and_user_names() -> None:
    config = ScrubConfig(hostname="ci-runner", usernames=("vidbot",))
    text = b"vidbot@ci-runner:~$ ls\nssh ci-runner.corp.lan\nci-runner is busy\nby VIDBOT\n"
    result = scrub_text(text, "s.txt", config)
    assert result.data.split(b"\n")[:3] == [
        b"<user>@<hostname>:~$ ls",
        b"ssh <hostname>.corp.lan",
        b"ci-runner is busy",
    ]
    assert result.placeholders == {"user": 1, "hostname": 2}
    assert [(f.line, f.kind) for f in result.findings] == [(3, "hostname"), (4, "user")]
    # a dotted host name holds "." itself, so every occurrence is replaced
    dotted = scrub_text(b"on box7.lan today", "s.txt", ScrubConfig(hostname="box7.lan"))
    assert dotted.data == b"on <hostname> today" and not dotted.findings


def test_is_text_member() -> None:
    for path in ("a.json", "t/session.jsonl", "README.MD", "x.txt", "w/i.html", "m.js", "s.css",
                 "a.ts", "p.py", "r.sh", "c.yaml", "c.yml"):
        assert is_text_member(path)
    for path in ("out.mp4", "frames/f00.jpg", "images/a.webp", "w/a.mjs", "Makefile"):
        assert not is_text_member(path)


def test_credentials_right_after_a_json_escape_are_redacted() -> None:
    """Inside a JSON string a value often follows an escaped newline or tab (`\\n`, `\\t`): the
    escape's letter must not count as part of the value's word."""
    values = planted_values(random.Random(3))
    credentials = {k: v for k, v in values.items() if PLANTED_KIND[k][1] == "redact" and "\n" not in v
                   and k not in ("bearer", "aws_secret_access_key")}
    text = "".join(f"line\n{v}\tx\r{v} " for v in credentials.values())
    data = (json.dumps({"text": text}) + "\n").encode()
    result = scrub_text(data, "messages.jsonl", ScrubConfig())
    for kind, value in credentials.items():
        assert value.encode() not in result.data, kind
    assert result.redacted == 2 * len(credentials)
