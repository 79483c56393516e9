"""The transcript, judge's answer and findings a review page shows, read from a hand-made archive in
the CLI's real stream-json shapes (contract 1), slimmed and scrubbed by the pipeline's own steps and
packed as a zstd tar: one message from several lines sharing `message.id`, a subagent's thread under
the `Task` call that started it, a `Read` image whose `tool_use_result` copy the slimming turned into
a path (shown once), results as strings and as block lists, system lines folded, two `result` lines,
placeholders highlighted and a finding's value masked everywhere."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import polars as pl
import zstandard

from vae_pipeline.domain.review.site import SiteInputs, archive_review, marked
from vae_pipeline.domain.review.transcript import (
    each_call,
    finding_context,
    judge_answer,
    lines_of,
    paged,
    read_archive,
    split_threads,
    transcript,
)
from vae_pipeline.domain.verdicts.rubric import load_rubric
from vae_pipeline.domain.scrub.texts import ScrubConfig, scrub_text
from vae_pipeline.domain.bundles.slim import ImageStore, slim_member
from vae_pipeline_tests.conftest import META
from vae_pipeline_tests.long_transcript import (
    SESSION_AGENT,
    SESSION_REFERENCE,
    SESSION_TASK,
    SUBAGENT_CALL,
    long_messages,
    real_session_log,
)

EMAIL = "jane.roe@example.org"
HOME = "/home/ana"
INPUTS = SiteInputs(rows=pl.DataFrame(), published=set(), withheld={}, checks=[], history={},
                    rubric=load_rubric(META / "rubric-v1.2.json"), scrub=ScrubConfig())
JUDGE = {"judge_model": "claude-fable-5.1", "answer": {
    "scores": {"brief_fidelity": 7, "composition": 6}, "verdict": "PASS_WITH_NITS",
    "defects": [{"severity": "major", "t_s": 2.1, "text": f"title clips; mail {EMAIL}"},
                {"severity": "minor", "t_s": 5, "text": "slight jitter"}],
    "summary": "Clear motion."}}


def pack(members: dict[str, bytes], path: Path) -> Path:
    """A zstd tar with the members sorted by name, as the bundle writes them."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def staged(tmp_path: Path, messages: bytes) -> tuple[Path, dict, list[dict]]:
    """messages.jsonl slimmed and scrubbed as the bundle does; the archive, its images and findings."""
    store = ImageStore()
    slimmed = slim_member("messages.jsonl", messages, store)
    scrubbed = scrub_text(slimmed.data, "messages.jsonl", ScrubConfig(), line_map=slimmed.line_map)
    members = {"messages.jsonl": scrubbed.data, "judge.json": json.dumps(JUDGE).encode(), **store.files,
               "transcript/session.jsonl": b"{}\n"}
    return pack(members, tmp_path / "e.tar.zst"), store.files, [f.as_dict() for f in scrubbed.findings]


def test_one_message_per_id_results_under_their_calls_and_the_subagent_under_its_task(tmp_path):
    data, plan = long_messages(24, HOME, f"write to {EMAIL}")
    archive, images, findings = staged(tmp_path, data)
    view = read_archive(archive, set())
    assert view.logs["messages.jsonl"] is not None and HOME.encode() not in view.logs["messages.jsonl"]  # what is shown is the scrubbed member
    shown = transcript(view.logs["messages.jsonl"], INPUTS.masked)
    assert shown.lines == plan.lines - plan.stream_events
    main = [r for r in shown.rows if r["kind"] == "assistant"]
    assert len(main) == plan.messages  # three lines per id, one message
    first = main[0]
    assert [b["type"] for b in first["blocks"]] == ["thinking", "text", "tool_use"] and len(first["lines"]) == 3
    assert first["blocks"][0]["size"] == 0  # an empty thinking block, its signature never shown
    calls = list(each_call(shown.rows))
    assert [c["id"] for c in calls] == [*plan.main_calls[:12], *plan.subagent_calls, *plan.main_calls[12:]]
    task = next(c for c in calls if c["id"] == SUBAGENT_CALL)
    assert task["name"] == "Task" and task["result"]["parts"][0]["text"] == "Every frame looks right."
    thread_calls = [c["id"] for c in each_call(task["thread"])]
    assert thread_calls == plan.subagent_calls
    assert all(c["result"] is not None for c in calls)  # string and block-list results both placed
    reads = [c for c in calls if c["name"] == "Read"]
    for read in reads:  # the picture once, from the slimmed block; the tool_use_result copy is not shown again
        assert [p["type"] for p in read["result"]["parts"]] == ["image"]
        assert read["result"]["parts"][0]["src"] in images
    assert shown.images == set(images) and len(images) == plan.images
    system = [r for r in shown.rows if r["kind"] == "system"]
    assert len(system) == 1 and [line["subtype"] for line in system[0]["lines"]] == ["init", "hook_started"]
    assert [r["body"]["text"] for r in shown.rows if r["kind"] == "result"] == ["First part done.", "Done."]
    assert any(r["kind"] == "user" and r["parts"][0]["text"] == "Now polish the ending." for r in shown.rows)
    orphan = next(r for r in shown.rows if r["kind"] == "orphan_result")
    part = orphan["result"]["parts"][0]
    assert part["hidden"] > 0 and not orphan["result"]["open"]  # a long result is cut and starts collapsed
    assert [(f["line"], f["kind"]) for f in findings] == [(next(n for n, line in enumerate(data.splitlines(), 1)
                                                                 if EMAIL.encode() in line), "email")]


def test_placeholders_are_highlighted_and_a_finding_never_reaches_a_page(tmp_path):
    data, _ = long_messages(24, HOME, f"write to {EMAIL}")
    archive, _, _ = staged(tmp_path, data)
    shown = transcript(read_archive(archive, set()).logs["messages.jsonl"], INPUTS.masked)
    texts = json.dumps(shown.rows)
    assert EMAIL not in texts and "<finding:email>" in texts and "<home>/work" in texts
    html = marked('ls <home>/work, <redacted:github> & <finding:email> "<b>"')
    assert html == ('ls <mark class="scrubbed">&lt;home&gt;</mark>/work, <mark class="scrubbed">&lt;redacted:github&gt;'
                    '</mark> &amp; <mark class="finding">&lt;finding:email&gt;</mark> &#34;&lt;b&gt;&#34;')


def test_the_judges_answer_and_a_finding_in_its_line(tmp_path):
    data, _ = long_messages(24, HOME, f"write to {EMAIL} today")
    archive, _, findings = staged(tmp_path, data)
    view = read_archive(archive, {"messages.jsonl"})
    answer = judge_answer(view.judge, INPUTS.masked)
    assert answer["defects"] == [{"severity": "major", "t_s": 2.1, "text": "title clips; mail <finding:email>"},
                                 {"severity": "minor", "t_s": 5.0, "text": "slight jitter"}]
    assert answer["summary"] == "Clear motion." and answer["scores"] == {"brief_fidelity": 7, "composition": 6}
    (finding,) = findings
    assert finding["sha256s"] == [hashlib.sha256(EMAIL.encode()).hexdigest()]
    context = finding_context(view.members["messages.jsonl"], finding, INPUTS.finding_kinds, INPUTS.masked)
    archive_line = next(n for n, line in enumerate(view.logs["messages.jsonl"].splitlines(), 1) if EMAIL.encode() in line)
    assert context["line"] == archive_line
    assert context["before"].endswith("write to ") and context["after"].startswith(" today")
    assert EMAIL not in json.dumps(context)


def test_pages_keep_rows_whole_and_bounded():
    rows = [{"kind": "user", "line": n, "parts": [{"type": "text", "text": "x" * 1000}]} for n in range(1000)]
    pages = paged(rows, items=150, chars=100_000)
    assert [r for p in pages for r in p] == rows
    texts = [sum(len(r["parts"][0]["text"]) for r in p) for p in pages]
    assert all(30_000 <= t <= 100_000 for t in texts[:-1]) and texts[-1] <= 100_000  # the budget, not the count
    assert all(len(p) < 100 for p in pages)
    markup = [{"kind": "user", "line": 0, "parts": [{"type": "text", "text": "<home>&" * 100}]}] * 100
    assert len(paged(markup, items=150, chars=100_000)) > len(paged(rows[:100], items=150, chars=100_000))
    assert [len(p) for p in paged(rows[:400], items=150, chars=10**9)] == [150, 150, 100]


def test_a_long_subagent_thread_gets_pages_of_its_own(tmp_path):
    data, plan = long_messages(24, HOME, "nothing")
    archive, _, _ = staged(tmp_path, data)
    shown = transcript(read_archive(archive, set()).logs["messages.jsonl"], INPUTS.masked)
    assert split_threads(shown.rows) == []  # three calls stay under their Task call
    (thread,) = split_threads(shown.rows, inline=1_000)
    task = next(c for c in each_call(shown.rows) if c["id"] == SUBAGENT_CALL)
    assert task["thread"] is None and task["thread_of"] == 1 and task["thread_rows"] == len(thread)
    assert [c["id"] for c in each_call(thread)] == plan.subagent_calls
    assert [c["id"] for c in each_call(shown.rows)] == plan.main_calls


def test_a_truncated_archive_is_named_on_its_page_and_stops_nothing(tmp_path):
    data, _ = long_messages(24, HOME, "nothing")
    archive, _, _ = staged(tmp_path, data)
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    review = archive_review({"staged_archive": archive.name, "bundle_parts": None}, INPUTS, tmp_path)
    assert list(review) == ["error"] and "\n" not in review["error"]
    assert review["error"].startswith("the staged archive cannot be read (e.tar.zst: ")
    assert review["error"].endswith("): run `vae build` again")


def test_a_session_log_shows_every_line_unknown_types_by_their_fields_and_names_its_subagent():
    files, plan = real_session_log(HOME, "site")
    session = transcript(files["transcript/session.jsonl"], INPUTS.masked)
    assert sorted(set(lines_of(session.rows))) == list(range(1, plan.lines["transcript/session.jsonl"] + 1))
    other = {r["type"]: r for r in session.rows if r["kind"] == "other"}
    assert {kind: row["line"] for kind, row in other.items()} == plan.unknown  # each line of its own, with its type
    assert {"key": "permissionMode", "text": "bypassPermissions", "hidden": 0, "size": 17} in \
        other["permission-mode"]["fields"]
    system = [line for r in session.rows if r["kind"] == "system" for line in r["lines"]]
    assert [line["line"] for line in system] == plan.system
    assert {f["key"]: f["text"] for f in system[-1]["fields"]}["content"] == "Conversation compacted"
    calls = {c["id"]: c for c in each_call(session.rows)}
    assert calls[SESSION_TASK]["agent"] == SESSION_AGENT  # the Task call's result names the subagent's log
    assert calls["toolu_01Search"]["result"]["parts"] == [{"type": "tool_reference", "name": SESSION_REFERENCE,
                                                           "size": 0}]
    assert (session.tool_calls, session.subagent_tool_calls) == (3, 0)
    agent = transcript(files[f"transcript/subagents/agent-{SESSION_AGENT}.jsonl"], INPUTS.masked)
    assert [c["id"] for c in each_call(agent.rows)] == plan.subagent_calls
    assert sorted(set(lines_of(agent.rows))) == list(range(1, plan.lines[f"transcript/subagents/agent-{SESSION_AGENT}.jsonl"] + 1))
    assert not any(e in json.dumps(session.rows) for e in plan.emails)  # masked, every one


def test_a_line_that_is_no_object_or_does_not_parse_is_still_shown():
    shown = transcript(b'[1, 2]\n\n"text"\n{not json\n{"type": "assistant", "message": "odd"}\n', INPUTS.masked)
    assert sorted(set(lines_of(shown.rows))) == [1, 3, 4, 5] and shown.lines == 5
    assert [r["kind"] for r in shown.rows] == ["other", "other", "unparsed", "other"]
