"""User names (contract 3, "The scrub"): told (several) and learnt from an episode's homes,
replaced in paths, `user@host` prompts, `ls -l` columns (also inside JSON strings) and the CLI's
project-folder names; any other whole word a `user` finding; one episode's names apply to all
its files. Each shape in raw, JSON-escaped and UTF-16 forms, and one level deeper: in JSON text
that is a JSON string's value (a Read or a `cat` of a `.jsonl` file), where the rows of a
listing are separated by `\\\\n` and a path's slashes may be written `\\\\/` or `\\\\u002f`."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import zstandard

from vae_pipeline.assets.scrub_settings import scrub_config
from vae_pipeline.cli.common import scrubbed
from vae_pipeline.domain.bundles.bundle import build_bundle
from vae_pipeline.domain.episodes.episode_files import SourceMember
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.scrub.lines import scrub_line
from vae_pipeline.domain.scrub.texts import (
    ScrubConfig,
    learn_user_names,
    parse_user_names,
    scrub_text,
    value_sha256,
)
from vae_pipeline.storage.resources import ScrubSettings
from vae_pipeline_tests.conftest import read_json_escapes

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
    assert result.findings[0].sha256s == (value_sha256(b"ana"),)
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


# One level deeper. The user names: `anouk` learnt from a home in another file, `bertil` and
# `carmen` only from the double-escaped homes themselves, `vidbot` told (VAE_HARNESS_USER).
NESTED_USERS = ("anouk", "bertil", "carmen", "vidbot")
NESTED_PLANTED = {
    "anouk": "anouk", "bertil": "bertil", "vidbot": "vidbot",
    "prompt_anouk": "anouk@build:~$", "prompt_carmen": "carmen@mac:~$", "prompt_vidbot": "vidbot@ci:~$",
    "home_bertil": "/home/bertil", "home_carmen": "/Users/carmen", "home_vidbot": "/home/vidbot",
    "folder_carmen": "-Users-carmen", "folder_vidbot": "-home-vidbot",
}
# What contract 3 makes of each: user names <user>, homes (also in the project-folder form) <home>.
NESTED_PLACED = {key: "<home>" if key.startswith(("home_", "folder_"))
                 else value.replace(key.removeprefix("prompt_"), "<user>") for key, value in NESTED_PLANTED.items()}
# How the read file's JSON writer spells a "/" (and an "@"): escaped once more by the log's writer.
NESTED_SPELLINGS = {"\\/": {"/": "\\/"}, "\\u002f": {"/": "\\u002f", "@": "\\u0040"}}


def _nested_log(v: dict[str, str]) -> list[dict]:
    """The lines of the `.jsonl` file the agent reads, each user-named value taken from `v`."""
    listing = (f"{v['prompt_anouk']} ls -l\ntotal 12\n"
               f"-rw-r--r--  1 {v['anouk']}  {v['anouk']}  5120 Oct 21 08:03 index.html\n"
               f"-rw-rw-r--  1 root  {v['bertil']}  812 Oct 21 08:04 shared.css\n"
               f"-rw-r--r--  1 {v['vidbot']}  {v['vidbot']}  10 Oct 21 08:05 a.txt\n"
               f"{v['prompt_carmen']} pwd\n{v['home_carmen']}/work/site\n"
               f"{v['prompt_vidbot']} ls ~/.claude/projects\n"
               f"{v['folder_carmen']}-work-site\n{v['folder_vidbot']}-runs-x")
    return [
        {"type": "system", "subtype": "init", "cwd": f"{v['home_bertil']}/src/site"},
        {"type": "user", "toolUseResult": {"stdout": listing, "stderr": ""}},
        {"type": "attachment",
         "filename": f"{v['home_carmen']}/.claude/projects/{v['folder_carmen']}-work-site/x.jsonl",
         "cache": f"/srv/{v['vidbot']}/cache", "npm": f"{v['home_vidbot']}/.npm"},
    ]


def _read_result(text: str) -> str:
    """What the Read tool gives for a text file: its lines numbered, `cat -n` style."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(text.split("\n"), 1))


def _read_lines(result: str) -> list[dict]:
    return [json.loads(line.split("\t", 1)[1]) for line in result.split("\n")]


@pytest.mark.parametrize("spelling", NESTED_SPELLINGS)
def test_users_and_homes_in_json_text_inside_json_strings_are_replaced(tmp_path, spelling: str) -> None:
    inner = "\n".join(json.dumps(line) for line in _nested_log(NESTED_PLANTED))
    for char, escape in NESTED_SPELLINGS[spelling].items():
        inner = inner.replace(char, escape)
    read = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_r", "content": _read_result(inner)}]}, "uuid": "u-r"}
    cat = {"type": "user", "uuid": "u-c", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_c", "content": inner}]},
        "toolUseResult": {"stdout": inner, "stderr": "", "interrupted": False, "isImage": False}}
    files = {
        "work/notes.md": b"cd /home/anouk/site\n",
        "messages.jsonl": json.dumps(read).encode() + b"\n",
        "transcript/session.jsonl": json.dumps(cat).encode() + b"\n",
        "work/read.json": json.dumps(read).encode("utf-16"),
    }
    assert b"\\\\n-rw-r--r--  1 anouk  anouk" in files["messages.jsonl"]  # rows split by a double-escaped \n
    assert ("\\\\" + NESTED_SPELLINGS[spelling]["/"][1:] + "home").encode() in files["messages.jsonl"]  # \\/home
    members = [SourceMember(p, len(d), lambda d=d: io.BytesIO(d), reopenable=False) for p, d in files.items()]
    bundle = build_bundle(members, tmp_path / "a.tar.zst", config=ScrubConfig(usernames=parse_user_names("vidbot")))
    archive = _unpack(tmp_path / "a.tar.zst")
    expected = _nested_log(NESTED_PLACED)
    assert archive["work/notes.md"] == b"cd <home>/site\n"
    assert _read_lines(json.loads(archive["messages.jsonl"])["message"]["content"][0]["content"]) == expected
    assert _read_lines(json.loads(archive["work/read.json"].decode("utf-16"))["message"]["content"][0]["content"]) \
        == expected
    session = json.loads(archive["transcript/session.jsonl"])
    for text in (session["message"]["content"][0]["content"], session["toolUseResult"]["stdout"]):
        assert [json.loads(line) for line in text.split("\n")] == expected
    for path, data in archive.items():
        raw = data.decode("utf-16") if path == "work/read.json" else data.decode()
        once = read_json_escapes(raw.encode())
        for reading in (raw.encode(), once, read_json_escapes(once)):
            left = reading.replace(b"<home>", b"").replace(b"<user>", b"").lower()
            for word in (*NESTED_USERS, "home", "users"):
                assert word.encode() not in left, (path, word, reading)
    assert bundle.scrub["findings"] == []


def test_the_generated_read_of_a_jsonl_file_keeps_no_user_and_no_home(sample_runs, tmp_path) -> None:
    """The sample's subagent Reads a `.jsonl` log whose writer escapes "/": in the CLI's logs its
    home path reads `\\\\/Users\\\\/<mac>` and its `ls -l` rows are split by `\\\\n`."""
    plan = next(p for p in sample_runs.episodes if p.bad is None and not p.archive and p.people is not None)
    people = plan.people
    folder = sample_runs.root / plan.series / plan.episode_id
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    escaped_home = people.mac_home.replace("/", "\\\\/").encode()
    holding = sorted(name for name, data in files.items() if escaped_home in data)
    assert len(holding) == 2 and holding[0] == "messages.jsonl", holding  # and the subagent's log
    members = [SourceMember(p, len(d), lambda d=d: io.BytesIO(d), reopenable=False) for p, d in files.items()]
    build_bundle(members, tmp_path / "a.tar.zst", config=ScrubConfig())
    archive = _unpack(tmp_path / "a.tar.zst")
    # the plan's lines with the contract's placeholders for the operator's home and name
    placed = json.dumps(people.build_log_lines).replace(people.mac_home, "<home>").replace(people.mac_user, "<user>")
    expected = json.loads(placed)
    assert expected[0]["cwd"] == "<home>/work/site" and "1 <user>  <user>  2048" in expected[1]["stdout"]
    reads = []
    for name in holding:
        for line in archive[name].decode().splitlines():
            entry = json.loads(line)
            copy = entry.get("tool_use_result", entry.get("toolUseResult"))
            if isinstance(copy, dict) and copy.get("type") == "text" and copy["file"]["filePath"].endswith(".jsonl"):
                reads.append([json.loads(row) for row in copy["file"]["content"].splitlines()])
                content = entry["message"]["content"][0]["content"]
                reads.append([json.loads(row.split("\t", 1)[1]) for row in content.split("\n")])
    assert len(reads) == 2 * len(holding) and all(read == expected for read in reads)
    for name in holding:
        once = read_json_escapes(archive[name])
        for reading in (archive[name], once, read_json_escapes(once)):
            assert people.mac_user.encode() not in reading and b"/Users/" not in reading, name


def test_a_short_line_scrubbed_again_under_other_names_gets_those_names_answer() -> None:
    """`scrub_line` remembers short lines (a series.json value recurs in every series): the answer
    is the one for the names told this time, whichever was asked first."""
    line = "marisol@ci-runner-7:~$ ls /srv/marisol"
    told = ScrubConfig(hostname="ci-runner-7", usernames=("marisol",))
    for _ in range(2):
        assert scrub_line(line) == line
        assert scrub_line(line, told) == "<user>@<hostname>:~$ ls /srv/<user>"
    assert scrub_line(line) == line
