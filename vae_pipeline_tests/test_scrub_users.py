"""User names (contract 3, "The scrub"): told (several) and learnt from an episode's homes,
replaced in paths, `user@host` prompts, `ls -l` columns (also inside JSON strings) and the CLI's
project-folder names; any other whole word a `user` finding; one episode's names apply to all
its files. Each shape in raw, JSON-escaped and UTF-16 forms."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import zstandard

from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.cli.common import scrubbed
from vae_pipeline.domain.bundle import build_bundle
from vae_pipeline.domain.episode_files import SourceMember
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.line_scrub import scrub_line
from vae_pipeline.domain.scrub import (
    ScrubConfig,
    learn_user_names,
    parse_user_names,
    scrub_text,
    value_sha256,
)
from vae_pipeline.storage.resources import ScrubSettings

# (text holding the user "ana" or "bob", what the scrub makes of it, placeholders by kind)
SHAPES = {
    "path": ("cd /Users/ana/work/site && ls", "cd <home>/work/site && ls", {"home": 1}),
    "path elsewhere": ("cache in /var/lib/ana/cache and /tmp/ana", "cache in /var/lib/<user>/cache and /tmp/<user>",
                       {"user": 2}),
    "prompt": ("ana@build:~/work$ npm test", "<user>@build:~/work$ npm test", {"user": 1}),
    "bracket prompt": ("[ana@build site]$ ls", "[<user>@build site]$ ls", {"user": 1}),
    "ls -l": ("-rw-r--r--  1 ana  staff  5120 Oct 21 08:03 index.html",
              "-rw-r--r--  1 <user>  staff  5120 Oct 21 08:03 index.html", {"user": 1}),
    "ls -l, own group": ("drwxr-xr-x 3 bob bob 96 Oct 21 08:01 assets",
                         "drwxr-xr-x 3 <user> <user> 96 Oct 21 08:01 assets", {"user": 2}),
    "ls -l, root": ("-rw-r--r-- 1 root wheel 120 Oct 21 08:01 hosts", "-rw-r--r-- 1 root wheel 120 Oct 21 08:01 hosts", {}),
    "ls -l, root owner, user group": ("-rw-rw-r-- 1 root ana 120 Oct 21 08:01 shared",
                                      "-rw-rw-r-- 1 root <user> 120 Oct 21 08:01 shared", {"user": 1}),
    "project folder": ("~/.claude/projects/-Users-ana-work-site/4f1c.jsonl",
                       "~/.claude/projects/<home>-work-site/4f1c.jsonl", {"home": 1}),
    "project folder, home form": ("-home-bob-src-x", "<home>-src-x", {"home": 1}),
}
TOLD = ("ana", "bob")


def _forms(text: str) -> dict[str, tuple[bytes, callable]]:
    """The text raw, as a JSON string value (and the way back to text), and in UTF-16."""
    return {
        "raw": (text.encode(), lambda data: data.decode()),
        "json": (json.dumps({"text": text}).encode(), lambda data: json.loads(data)["text"]),
        "json \\u": (json.dumps({"text": text}).replace("a", "\\u0061").encode(), lambda data: json.loads(data)["text"]),
        "utf-16": (text.encode("utf-16"), lambda data: data.decode("utf-16")),
    }


@pytest.mark.parametrize("form", ["raw", "json", "json \\u", "utf-16"])
@pytest.mark.parametrize("shape", SHAPES)
def test_each_shape_in_each_form(shape: str, form: str) -> None:
    text, expected, placeholders = SHAPES[shape]
    data, read = _forms(text)[form]
    result = scrub_text(data, "notes.txt", ScrubConfig(usernames=TOLD))
    assert read(result.data) == expected
    assert dict(result.placeholders) == placeholders
    assert result.findings == []


@pytest.mark.parametrize("form", ["raw", "json", "utf-16"])
def test_an_ls_listing_in_a_json_string_is_scrubbed_without_being_told_the_owner(form: str) -> None:
    listing = ("total 24\n"
               "drwxr-xr-x   5 ana  staff   160 Oct 21 08:01 .\n"
               "-rw-r--r--@  1 ana  staff  5120 Oct 21 08:03 index.html\n"
               "lrwxrwxrwx   1 ci-bot ci-bot   7 Oct 21 08:04 out -> out.mp4\n"
               "-rw-r--r--   1 root wheel    12 Oct 21 08:05 hosts\n")
    data, read = _forms(listing)[form]
    result = scrub_text(data, "messages.jsonl", ScrubConfig())
    assert read(result.data) == ("total 24\n"
                                 "drwxr-xr-x   5 <user>  staff   160 Oct 21 08:01 .\n"
                                 "-rw-r--r--@  1 <user>  staff  5120 Oct 21 08:03 index.html\n"
                                 "lrwxrwxrwx   1 <user> <user>   7 Oct 21 08:04 out -> out.mp4\n"
                                 "-rw-r--r--   1 root wheel    12 Oct 21 08:05 hosts\n")
    assert result.placeholders == {"user": 4}


def test_a_whole_word_user_name_is_a_user_finding_and_an_address_an_email_finding() -> None:
    text = b"thanks ana for the review\nAna wrote it\nbanana and anagram\nmail ana@studio-mail.com\n"
    result = scrub_text(text, "notes.md", ScrubConfig(usernames=("ana",)))
    assert result.data == text  # reported, not changed
    assert [(f.line, f.kind) for f in result.findings] == [(1, "user"), (2, "user"), (4, "email")]
    assert result.findings[0].value_sha256 == value_sha256(b"ana")
    assert "ana" not in repr(result.findings).replace("allowed", "")


def test_names_learnt_from_a_home_apply_to_the_whole_text() -> None:
    text = b"ana said hi\ncd /home/ana/work\nana@build:~$ ls\n"
    result = scrub_text(text, "notes.md", ScrubConfig())
    assert result.data == b"ana said hi\ncd <home>/work\n<user>@build:~$ ls\n"
    assert [(f.line, f.kind) for f in result.findings] == [(1, "user")]
    assert learn_user_names(b'{"cwd": "\\/Users\\/ana\\/work", "x": "/home/root/y", "z": "/root/q"}') == ("ana",)
    assert learn_user_names("cd /home/bob/x".encode("utf-16")) == ("bob",)


def test_root_is_never_a_user_name() -> None:
    assert parse_user_names("ana, builder,,root , ANA") == ("builder", "ana")
    result = scrub_text(b"root said hi; cd /home/root/x", "a.txt", ScrubConfig(usernames=("root",)))
    assert result.data == b"root said hi; cd <home>/x"
    assert result.findings == []


def test_a_known_name_with_a_dash_is_whole_in_the_project_folder_form() -> None:
    text = b"-home-vae-runner-work-site and -Users-jane-doe-proj"
    result = scrub_text(text, "a.txt", ScrubConfig(usernames=("vae-runner", "jane.doe")))
    assert result.data == b"<home>-work-site and <home>-proj"


def _unpack(path) -> dict[str, bytes]:
    raw = zstandard.ZstdDecompressor().decompress(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {info.name: tar.extractfile(info).read() for info in tar.getmembers()}


def test_two_users_in_one_episode_each_named_in_one_file_are_scrubbed_in_every_file(tmp_path) -> None:
    files = {  # read in this order: the names come from the last two files
        "brief.json": json.dumps({"brief_id": "b", "note": "ana@mac:~$ and builder@ci:~$"}).encode(),
        "work/notes.md": b"built by builder\nsee /srv/ana/cache\n",
        "work/listing.txt": "-rw-r--r-- 1 builder builder 10 Oct 21 08:03 a.txt\n".encode("utf-16"),
        "messages.jsonl": json.dumps({"type": "system", "cwd": "/Users/ana/work/site"}).encode() + b"\n",
        "transcript/subagents/agent-1.jsonl": b'{"cwd": "\\/home\\/builder\\/ci"}\n',  # "/" written "\/"
    }
    members = [SourceMember(p, len(d), lambda d=d: io.BytesIO(d), reopenable=False) for p, d in files.items()]
    bundle = build_bundle(members, tmp_path / "a.tar.zst", config=ScrubConfig())
    archive = _unpack(tmp_path / "a.tar.zst")
    assert json.loads(archive["brief.json"])["note"] == "<user>@mac:~$ and <user>@ci:~$"
    assert archive["work/notes.md"] == b"built by builder\nsee /srv/<user>/cache\n"
    assert archive["work/listing.txt"].decode("utf-16") == "-rw-r--r-- 1 <user> <user> 10 Oct 21 08:03 a.txt\n"
    assert json.loads(archive["messages.jsonl"]) == {"type": "system", "cwd": "<home>/work/site"}
    assert json.loads(archive["transcript/subagents/agent-1.jsonl"]) == {"cwd": "<home>/ci"}
    for name in (b"ana", b"builder"):
        leftover = [p for p, data in archive.items() if name in data and p != "work/notes.md"]
        assert leftover == []
    assert [(f["file"], f["line"], f["kind"]) for f in bundle.scrub["findings"]] == [("work/notes.md", 1, "user")]


def test_the_told_names_come_from_the_setting_and_reach_printed_lines(monkeypatch) -> None:
    config = scrub_config(ScrubSettings(harness_user="ana,builder"))
    assert config.usernames == ("builder", "ana")
    monkeypatch.setenv("VAE_HARNESS_USER", "ana,builder")
    assert scrubbed("builder@ci:~$ failed in /srv/ana/x") == "<user>@ci:~$ failed in /srv/<user>/x"


def test_error_lines_go_through_the_same_rules() -> None:
    assert scrub_line("/Users/ana/work/a.json: ana@mac:~$ cat -Users-ana-work") == (
        "<home>/work/a.json: <user>@mac:~$ cat <home>-work")
    error = BadInput("-rw-r--r-- 1 ana staff 3 Oct 21 08:03 x", "not JSON")
    assert "ana" not in str(error)
