"""Contract 1 by hand: counting rules, harness errors and every kind of bad input, without Dagster."""

import io
import json
import tarfile
from pathlib import Path

import pytest
import zstandard

from vae_pipeline.domain.episodes.episode import parse_episode
from vae_pipeline.domain.errors import BadInput
from vae_pipeline.domain.episodes.json_schema import SchemaValidator
from vae_pipeline.domain.episodes.series import discover_series, episode_entries, read_series_json

META = Path(__file__).resolve().parent.parent / "meta"
BRIEF = json.loads((META / "brief-bank-v1.jsonl").read_text().splitlines()[0])


def _assistant(*blocks, usage=None):
    return {"type": "assistant", "message": {"content": list(blocks), "usage": usage or {}}}


def _tool(name, **tool_input):
    return {"type": "tool_use", "id": "t", "name": name, "input": tool_input}


def _jsonl(*objects):
    return "".join(json.dumps(o) + "\n" for o in objects).encode()


RESULT = {"status": "completed", "error": None, "started_at": "2026-10-21T23:59:59-02:00",
          "turns": 4, "tool_calls": 6,
          "usage": {"input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3,
                    "cache_creation_input_tokens": 4}}

# Four assistant messages (one reply split over two), six tool calls.
MESSAGES = [
    {"type": "system", "subtype": "init"},
    _assistant({"type": "text", "text": "plan"}, _tool("Read", file_path="/w/ref.PNG")),
    {"type": "stream_event", "event": {"type": "content_block_delta"}},
    _assistant(_tool("Bash", command="npx hyperframes render --out a.mp4"), _tool("Read", file_path="/w/notes.txt")),
    _assistant(_tool("Bash", command="npx hyperframes snapshot --at 1")),
    _assistant({"type": "thinking", "thinking": "x", "signature": "s"},
               _tool("Read", file_path="/w/snap.webp"), _tool("Bash", command="ls")),
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": []}]}},
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 4, "result": "done",
     "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 30,
               "cache_creation_input_tokens": 40}},
]


def episode_files(**overrides):
    files = {"brief.json": json.dumps(BRIEF, indent=2).encode(),
             "result.json": json.dumps(RESULT).encode(),
             "messages.jsonl": _jsonl(*MESSAGES)}
    files.update(overrides)
    return {k: v for k, v in files.items() if v is not None}


def write_folder(series_dir: Path, name: str, files: dict) -> None:
    for rel, data in files.items():
        (series_dir / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (series_dir / name / rel).write_bytes(data)


def tar_zst(files: dict, extra: list[tarfile.TarInfo] = ()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.size else None)
    return zstandard.ZstdCompressor().compress(buffer.getvalue())


def parse_one(tmp_path: Path, name: str, **kwargs) -> dict:
    entries, _ = episode_entries(tmp_path)
    entry = next(e for e in entries if e.name == name)
    return parse_episode("s", entry, SchemaValidator.from_file(META / "brief.schema.json"), **kwargs)


def test_counting_columns_follow_the_contract(tmp_path):
    write_folder(tmp_path, "ui-product-001-s1", episode_files())
    row = parse_one(tmp_path, "ui-product-001-s1")
    assert row["valid"], row["error_reason"]
    assert (row["turns"], row["tool_calls"], row["images_read"], row["renders"], row["snapshots"]) == (4, 6, 2, 1, 1)
    # tokens from the `result` message, not result.json
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"], row["cache_creation_tokens"]) \
        == (10, 20, 30, 40)
    assert row["looked_at_final_render"] is True  # the .webp Read comes after the snapshot
    assert row["harness_error"] is False
    assert row["date"] == "2026-10-22"  # 23:59:59-02:00 is the next day in UTC
    assert row["brief_id"] == BRIEF["brief_id"] and row["sample"] == "s1"
    assert json.loads(row["brief"]) == BRIEF
    assert row["warnings"] == []


def test_tokens_fall_back_to_result_json_and_count_mismatch_is_a_warning(tmp_path):
    no_result = [m for m in MESSAGES if m["type"] != "result"]
    write_folder(tmp_path, "a-s1", episode_files(**{"messages.jsonl": _jsonl(*no_result),
                                                     "result.json": json.dumps({**RESULT, "turns": 9}).encode()}))
    row = parse_one(tmp_path, "a-s1")
    assert row["valid"]
    assert (row["input_tokens"], row["output_tokens"]) == (1, 2)
    assert any("turns" in w for w in row["warnings"])


def test_looked_at_final_render_is_false_without_a_read_after_the_last_render(tmp_path):
    messages = MESSAGES[:6] + [_assistant(_tool("Bash", command="hyperframes render"))] + MESSAGES[6:]
    write_folder(tmp_path, "a-s1", episode_files(**{"messages.jsonl": _jsonl(*messages)}))
    assert parse_one(tmp_path, "a-s1")["looked_at_final_render"] is False
    no_render = [_assistant(_tool("Read", file_path="x.png"))]
    write_folder(tmp_path, "b-s1", episode_files(**{"messages.jsonl": _jsonl(*no_render)}))
    assert parse_one(tmp_path, "b-s1")["looked_at_final_render"] is False


@pytest.mark.parametrize("result_override, final_text, expected", [
    ({"status": "error", "error": "HTTP 403 Forbidden"}, "done", True),
    ({"status": "error", "error": "HTTP 500"}, "done", False),
    ({"status": "completed", "error": None}, "API Error: 403", True),
    ({"status": "timeout", "error": "403"}, "done", False),
])
def test_harness_error(tmp_path, result_override, final_text, expected):
    messages = MESSAGES[:-1] + [{**MESSAGES[-1], "result": final_text}]
    write_folder(tmp_path, "a-s1", episode_files(**{"result.json": json.dumps({**RESULT, **result_override}).encode(),
                                                     "messages.jsonl": _jsonl(*messages)}))
    assert parse_one(tmp_path, "a-s1")["harness_error"] is expected


def _member(name, kind, size=0):
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


GOOD = episode_files()
WRONG_TYPE_BRIEF = json.dumps({**BRIEF, "duration_s": "8"}, indent=2)
WRONG_TYPE_LINE = 1 + WRONG_TYPE_BRIEF.splitlines().index('  "duration_s": "8",')
WRONG_TYPE_RESULT = json.dumps({**RESULT, "turns": "4"}, indent=2)
WRONG_TYPE_RESULT_LINE = 1 + WRONG_TYPE_RESULT.splitlines().index('  "turns": "4",')
BAD_MESSAGES = GOOD["messages.jsonl"].replace(b'"subtype": "init"}', b'"subtype": "init"', 1)


@pytest.mark.parametrize("name, data, file, line, reason", [
    ("a-s1", {**GOOD, "result.json": None}, "result.json", None, "required file is missing"),
    ("a-s1", {**GOOD, "brief.json": b'{"brief_id": \n'}, "brief.json", 2, "not valid JSON"),
    ("a-s1", {**GOOD, "messages.jsonl": BAD_MESSAGES}, "messages.jsonl", 1, "not valid JSON"),
    ("a-s1", {**GOOD, "brief.json": WRONG_TYPE_BRIEF.encode()}, "brief.json", WRONG_TYPE_LINE, "duration_s"),
    ("a-s1", {**GOOD, "result.json": WRONG_TYPE_RESULT.encode()}, "result.json", WRONG_TYPE_RESULT_LINE,
     "turns must be an integer"),
    ("Bad_ID-s1", GOOD, "Bad_ID-s1", None, "not a valid episode id"),
])
def test_bad_folder_episodes_name_file_line_and_reason(tmp_path, name, data, file, line, reason):
    write_folder(tmp_path, name, {k: v for k, v in data.items() if v is not None})
    row = parse_one(tmp_path, name)
    assert row["valid"] is False
    assert (row["error_file"], row["error_line"]) == (file, line)
    assert reason in row["error_reason"]


@pytest.mark.parametrize("archive, reason", [
    (lambda: b"\x1f\x8b\x08\x00" + b"0" * 64, "not a zstd archive"),
    (lambda: tar_zst(GOOD)[:-40], "truncated"),
    (lambda: zstandard.ZstdCompressor().compress(b"not a tar" * 100), "not a readable zstd tar"),
    (lambda: tar_zst(GOOD, [_member("/etc/cron.d/x", tarfile.REGTYPE, 1)]), "absolute path"),
    (lambda: tar_zst(GOOD, [_member("work/../../x", tarfile.REGTYPE, 1)]), "'..'"),
    (lambda: tar_zst(GOOD, [_member("work/l", tarfile.SYMTYPE)]), "is a link"),
    (lambda: tar_zst(GOOD, [_member("work/h", tarfile.LNKTYPE)]), "is a link"),
    (lambda: tar_zst(GOOD, [_member("work/d", tarfile.CHRTYPE)]), "device"),
    (lambda: tar_zst(GOOD, [_member("work/p", tarfile.FIFOTYPE)]), "FIFO"),
])
def test_bad_archives_are_invalid_and_nothing_is_written(tmp_path, archive, reason):
    (tmp_path / "a-s1.tar.zst").write_bytes(archive())
    before = sorted(p.name for p in tmp_path.rglob("*"))
    row = parse_one(tmp_path, "a-s1.tar.zst")
    assert row["valid"] is False and reason in row["error_reason"]
    assert "/etc" not in row["error_reason"] and "/etc" not in row["error_file"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not Path("/etc/cron.d/x").exists()


def test_archive_past_the_size_limit_is_invalid(tmp_path):
    (tmp_path / "a-s1.tar.zst").write_bytes(tar_zst({**GOOD, "work/big.bin": b"0" * 5000}))
    assert parse_one(tmp_path, "a-s1.tar.zst")["valid"] is True
    row = parse_one(tmp_path, "a-s1.tar.zst", size_limit=4000)
    assert row["valid"] is False and "size limit" in row["error_reason"]


def test_a_good_archive_parses_like_the_folder(tmp_path):
    write_folder(tmp_path, "a-s1", GOOD)
    (tmp_path / "b-s1.tar.zst").write_bytes(tar_zst(GOOD))
    folder, archive = parse_one(tmp_path, "a-s1"), parse_one(tmp_path, "b-s1.tar.zst")
    assert archive["valid"] and archive["is_archive"]
    drop = {"id", "source", "is_archive", "warnings"}
    assert {k: v for k, v in folder.items() if k not in drop} == {k: v for k, v in archive.items() if k not in drop}


def test_series_discovery_skips_bad_ids_and_unreadable_series_json(tmp_path):
    good = tmp_path / "2026-10-21-s1"
    good.mkdir()
    (good / "series.json").write_text(json.dumps({"series_id": good.name, "sample": "s1", "status": "completed"}))
    for name, content in (("bad..name", "{}"), ("2026-10-22-s2", "{not json"), ("no-json", None)):
        (tmp_path / name).mkdir()
        if content is not None:
            (tmp_path / name / "series.json").write_text(content)
    found, skipped = discover_series(tmp_path)
    assert [s.series_id for s in found] == ["2026-10-21-s1"]
    assert {s.name: s.reason.split(":")[0] for s in skipped} == {
        "bad..name": "folder name is not a valid series id",
        "2026-10-22-s2": "no readable series.json",
        "no-json": "no readable series.json",
    }


SERIES = {"series_id": "2026-10-21-s1", "sample": "s1", "status": "completed", "actor": {"model": "m"}}


@pytest.mark.parametrize("change, reason, key", [
    (lambda d: d.update(status="done"), "status must be one of running, paused, completed", "status"),
    (lambda d: d.update(series_id=5), "series_id must be a string", "series_id"),
    (lambda d: d.pop("sample"), "missing field sample", None),
    (lambda d: d.update(actor="secret-actor"), "actor must be a JSON object", "actor"),
])
def test_series_json_is_checked_against_its_schema_by_field_and_line(tmp_path, change, reason, key):
    doc = json.loads(json.dumps(SERIES))
    change(doc)
    text = json.dumps(doc, indent=2)
    (tmp_path / "series.json").write_text(text)
    with pytest.raises(BadInput) as caught:
        read_series_json(tmp_path / "series.json")
    assert (caught.value.file, caught.value.reason) == ("series.json", reason)
    expected_line = None if key is None else 1 + [n for n, line in enumerate(text.splitlines())
                                                  if line.startswith(f'  "{key}"')][0]
    assert caught.value.line == expected_line
    assert "done" not in reason and "secret-actor" not in reason


def test_the_input_schemas_sit_in_meta_beside_the_brief_schema():
    for name in ("brief", "judge", "result", "series"):
        schema = json.loads((META / f"{name}.schema.json").read_text())
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == f"vae-pipeline/{name}.schema.json"


def _line(message_id, block, parent=None):
    return {"type": "assistant", "message": {"id": message_id, "content": [block], "usage": {"output_tokens": 1}},
            "parent_tool_use_id": parent}


def _result(output_tokens, cache_read):
    return {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": "ok",
            "usage": {"input_tokens": 5, "output_tokens": output_tokens, "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": 1}}


# Two responses streamed a block a line (msg_1 over three lines, msg_2 over two), one line without
# an id, a subagent (parent toolu_task) with two calls and its own render and image Read, and two
# result lines.
STREAMED = [
    {"type": "system", "subtype": "init", "model": "claude-opus-4-5-20251101"},
    _line("msg_1", {"type": "thinking", "thinking": "", "signature": "RXFvQg" * 100}),
    _line("msg_1", {"type": "text", "text": "rendering"}),
    _line("msg_1", {**_tool("Bash", command="npx hyperframes render"), "id": "toolu_r", "caller": {"type": "direct"}}),
    _line("msg_2", {**_tool("Task", prompt="look", description="look"), "id": "toolu_task"}),
    _line("msg_s", _tool("Bash", command="npx hyperframes snapshot --at 1"), parent="toolu_task"),
    _line("msg_s", _tool("Read", file_path="/w/s.png"), parent="toolu_task"),
    _line("msg_2", _tool("Read", file_path="/w/final.png")),
    _result(100, 1000),
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "no id: a turn"}]}},
    _result(20, 300),
]


def test_one_reply_over_several_lines_is_one_turn_and_a_subagents_calls_are_apart(tmp_path):
    result = {**RESULT, "turns": 3, "tool_calls": 3}
    name = f"{BRIEF['brief_id']}-s1"
    write_folder(tmp_path, name, episode_files(**{"messages.jsonl": _jsonl(*STREAMED),
                                                   "result.json": json.dumps(result).encode()}))
    row = parse_one(tmp_path, name)
    assert row["valid"], row["error_reason"]
    # turns: msg_1, msg_2, the line without an id; main calls: render, Task, Read; the subagent's two
    assert (row["turns"], row["tool_calls"], row["subagent_tool_calls"]) == (3, 3, 2)
    assert (row["images_read"], row["renders"], row["snapshots"], row["looked_at_final_render"]) == (1, 1, 0, True)
    # every result line: 100 + 20 output, 1000 + 300 cache read
    assert (row["input_tokens"], row["output_tokens"], row["cache_read_tokens"], row["cache_creation_tokens"]) \
        == (10, 120, 1300, 2)
    assert row["warnings"] == []


SDK_OBJECTS = [
    {"_type": "SystemMessage", "subtype": "init", "data": {"model": "claude-opus-4-5-20251101"}},
    {"_type": "AssistantMessage", "content": [{"_type": "TextBlock", "text": "hi"}], "model": "m"},
    {"_type": "AssistantMessage", "content": [{"_type": "ToolUseBlock", "id": "t", "name": "Bash",
                                               "input": {"command": "npx hyperframes render"}}], "model": "m"},
    {"_type": "ResultMessage", "subtype": "success", "num_turns": 2, "usage": {"output_tokens": 9}},
]


def test_a_log_in_another_form_is_refused_not_counted_as_an_empty_run(tmp_path):
    write_folder(tmp_path, "a-s1", episode_files(**{"messages.jsonl": _jsonl(*SDK_OBJECTS)}))
    row = parse_one(tmp_path, "a-s1")
    assert row["valid"] is False
    assert (row["error_file"], row["error_line"]) == ("messages.jsonl", None)
    assert '{"type": "assistant", "message"' in row["error_reason"] and "4 turns" in row["error_reason"]
    assert "\n" not in row["error_reason"]
    # a run that reports no turn and logged none is an empty run, not a log in another form
    no_turns = {**RESULT, "turns": 0, "tool_calls": 0}
    write_folder(tmp_path, "b-s1", episode_files(**{"messages.jsonl": _jsonl(SDK_OBJECTS[0]),
                                                     "result.json": json.dumps(no_turns).encode()}))
    row = parse_one(tmp_path, "b-s1")
    assert row["valid"] and (row["turns"], row["tool_calls"]) == (0, 0)
