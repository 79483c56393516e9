"""Every credential shape that once leaked, planted in one build next to a good series, searched
for in every byte the pipeline keeps: the dataset folder (archives unpacked, Parquet decoded),
`VAE_HOME` with the Dagster instance's databases, and what `vae build` printed.

The shapes: a key written with JSON escapes (at its start, in its middle), an AWS secret written
with `\\/`, 600 base64 characters followed directly by an AWS key id, a base64 "image" block whose
bytes are text, a UTF-16 text file, a key in a PNG `tEXt` chunk, a key in a `work/` file name, a
key in an archive member's name, an episode folder named like a key, and a key in
`series.json`'s `actor.model`. Each value is searched raw, JSON-escaped, in UTF-16 (both byte
orders) and by a middle chunk (the tail an escape would leave).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import random
import shutil
import string
import tarfile
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from vae_pipeline.cli import main
from vae_pipeline.sample.generator import generate
from vae_pipeline.sample.planted import planted_values
from vae_pipeline_tests.conftest import META


def _anthropic(rng: random.Random) -> str:
    return planted_values(rng)["anthropic"]


def _png_with_text(keyword: str, text: str) -> bytes:
    """A 2x2 PNG with a `tEXt` chunk holding `text`, built chunk by chunk."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    raw = b"".join(b"\x00" + b"\x80\x80\x80" * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", (2).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00")
            + chunk(b"tEXt", keyword.encode() + b"\x00" + text.encode()) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


def _escaped(value: str, positions: list[int]) -> str:
    """`value` as JSON string text with the characters at `positions` written as \\u escapes."""
    return "".join(f"\\u{ord(c):04x}" if i in positions else c for i, c in enumerate(value))


def _tool_result_line(text_json: str, uuid: str) -> str:
    """A main-agent user line whose tool result is `text_json` (already JSON string text)."""
    return ('{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x",'
            f'"content":"{text_json}","is_error":false}}]}},"parent_tool_use_id":null,"uuid":"{uuid}"}}')


@pytest.fixture(scope="module")
def leaks(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaks")
    runs = root / "runs"
    run = generate(runs, META, series=3, episodes=3, seed=11, bad=False, drifted=0)
    completed = sorted(s for s, status in run.series.items() if status == "completed")
    good_series, hostile_series = completed[0], completed[1]
    series_dir = runs / hostile_series
    template = next(p for p in run.episodes if p.series == hostile_series and not p.archive
                    and (series_dir / p.episode_id / "judge.json").is_file())
    rng = random.Random(7)
    values = {name: _anthropic(rng) for name in
              ("escaped_start", "escaped_middle", "fake_image", "utf16", "png_text", "file_name", "member_name",
               "series_json")}
    aws = planted_values(rng)
    secret = [rng.choice(string.ascii_letters + string.digits) for _ in range(40)]  # an AWS secret's 40 characters,
    secret[10] = secret[25] = "/"  # with slashes to write as \/
    values["aws_secret"] = "".join(secret)
    values["aws_id_after_base64"] = aws["aws_access_key_id"]
    values["episode_folder"] = "xoxb-" + "".join(rng.choice(string.digits) for _ in range(12)) + "-" + \
        "".join(rng.choice(string.digits) for _ in range(13)) + "-" + \
        "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(24)) + "-s2"
    brief_id = template.brief["brief_id"]
    planted = {}

    # one valid episode holding the shapes that do not make it invalid
    valid = series_dir / f"{brief_id}-hleaks"
    shutil.copytree(series_dir / template.episode_id, valid)
    not_an_image = base64.b64encode(f"export ANTHROPIC_API_KEY={values['fake_image']}\n".encode() * 20).decode()
    lines = [
        _tool_result_line(f"key: {_escaped(values['escaped_start'], [0])}", "u-l1"),
        _tool_result_line(f"key: {_escaped(values['escaped_middle'], [20, 21])}", "u-l2"),
        _tool_result_line(f"AWS_ACCESS_KEY_ID={aws['aws_access_key_id']} AWS_SECRET_ACCESS_KEY="
                          + values["aws_secret"].replace("/", "\\/"), "u-l3"),
        _tool_result_line(base64.b64encode(rng.randbytes(450)).decode() + values["aws_id_after_base64"], "u-l4"),
        '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_y",'
        '"content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"'
        + not_an_image + '"}}]}]},"parent_tool_use_id":null,"uuid":"u-l5"}',
    ]
    with (valid / "messages.jsonl").open("a") as log:
        log.write("".join(line + "\n" for line in lines))
    (valid / "work" / "notes.txt").write_bytes(f"deploy token {values['utf16']}\n".encode("utf-16"))
    (valid / "observations").mkdir(exist_ok=True)
    (valid / "observations" / "frame-0.png").write_bytes(_png_with_text("Comment", values["png_text"]))
    planted["valid"] = valid.name

    # a key in a work/ file name: that episode is invalid, its name never shown
    named = series_dir / f"{brief_id}-hname"
    shutil.copytree(series_dir / template.episode_id, named)
    (named / "work" / f"{values['file_name']}.txt").write_text("notes\n")
    planted["file_name"] = named.name

    # a key in an archive member's name
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted((series_dir / template.episode_id).rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(series_dir / template.episode_id)))
        member = tarfile.TarInfo(f"work/{values['member_name']}.md")
        member.size = 6
        tar.addfile(member, io.BytesIO(b"notes\n"))
    (series_dir / f"{brief_id}-hmember.tar.zst").write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    planted["member_name"] = f"{brief_id}-hmember"

    # an episode folder named like a key (a valid episode id)
    shutil.copytree(series_dir / template.episode_id, series_dir / values["episode_folder"])

    # a key in series.json's actor.model
    info = json.loads((series_dir / "series.json").read_text())
    info["actor"]["model"] = f"claude-opus-5.5 {values['series_json']}"
    (series_dir / "series.json").write_text(json.dumps(info, indent=2))

    meta = root / "meta"
    shutil.copytree(META, meta)
    home, dataset = root / "home", root / "dataset"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("VAE_HOME", str(home))
        monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
        monkeypatch.setenv("VAE_META_DIR", str(meta))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            code = main(["build", "--runs", str(runs), "--out", str(dataset), "--summary", str(root / "summary.json")])
    return {"root": root, "home": home, "dataset": dataset, "values": values, "planted": planted, "code": code,
            "printed": printed.getvalue(), "summary": json.loads((root / "summary.json").read_text()),
            "good_series": good_series, "hostile_series": hostile_series, "run": run}


def _forms(value: str) -> list[bytes]:
    """The value as a reader of any kept byte could find it: raw, JSON-escaped (also `\\/`), UTF-16
    in both byte orders, as base64 at each of the three alignments (the characters no neighbour can change),
    and a middle chunk (what an escape or a partial match would leave)."""
    middle = value[len(value) // 2 - 8: len(value) // 2 + 8]
    in_base64 = [base64.b64encode(b"\0" * pad + value.encode())[4:-4] for pad in range(3)]
    return [value.encode(), json.dumps(value)[1:-1].encode(), value.replace("/", "\\/").encode(),
            value.encode("utf-16-le"), value.encode("utf-16-be"), *in_base64, middle.encode()]


def _kept_bytes(root: Path) -> dict[str, bytes]:
    """Every file under `root`, with each `.tar.zst` also unpacked member by member and each
    Parquet file also decoded to its rows' text."""
    kept = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        name = str(path.relative_to(root))
        kept[name] = data
        if data[:4] == b"\x28\xb5\x2f\xfd" and name.endswith(".tar.zst"):
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as stream, \
                    tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    kept[f"{name}!{member.name}"] = member.name.encode() + b"\n" + (
                        tar.extractfile(member).read() if member.isfile() else b"")
        elif name.endswith(".parquet"):
            kept[f"{name}!rows"] = json.dumps(pq.read_table(path).to_pylist(), default=str).encode()
    return kept


def _leaked(leaks, where: dict[str, bytes]) -> list[str]:
    found = []
    for name, value in leaks["values"].items():
        for form in _forms(value):
            found += [f"{name} in {file}" for file, data in where.items() if form in data or form in file.encode()]
    return sorted(set(found))


def test_the_build_ran_and_the_good_series_is_published(leaks) -> None:
    assert leaks["code"] == 0 and leaks["summary"]["failed_runs"] == []
    rows = [json.loads(line) for line in (leaks["dataset"] / "episodes.jsonl").read_text().splitlines()]
    run = leaks["run"]
    good = sorted(p.episode_id for p in run.episodes if p.series == leaks["good_series"])
    assert sorted(r["id"] for r in rows if r["series"] == leaks["good_series"]) == good
    assert leaks["planted"]["valid"] in {r["id"] for r in rows}  # the shapes that make no episode invalid


def test_names_holding_a_key_make_their_episode_invalid_without_naming_it(leaks) -> None:
    invalid = {i["episode"]: i for i in leaks["summary"]["invalid_episodes"]}
    for planted in ("file_name", "member_name"):
        entry = invalid[leaks["planted"][planted]]
        assert "<redacted:anthropic>" in entry["file"], entry
    shown = [i for i in invalid.values() if i["episode"].startswith("redacted-")]
    assert len(shown) == 1 and shown[0]["series"] == leaks["hostile_series"]


def test_no_planted_value_is_kept_anywhere(leaks, record_property) -> None:
    kept = {**{f"dataset/{k}": v for k, v in _kept_bytes(leaks["dataset"]).items()},
            **{f"home/{k}": v for k, v in _kept_bytes(leaks["home"]).items()},
            "vae build output": leaks["printed"].encode(),
            "summary": json.dumps(leaks["summary"]).encode()}
    leaked = _leaked(leaks, kept)
    record_property("summary", f"planted values leaked: {len({item.split(' in ')[0] for item in leaked})} "
                               f"of {len(leaks['values'])} (every byte kept: dataset, VAE_HOME, instance, output)")
    assert leaked == []


def test_the_search_finds_every_planted_value_in_the_runs_root(leaks) -> None:
    """The search is not blind: each value (in one of its forms) is in the input as planted."""
    runs = _kept_bytes(leaks["root"] / "runs")
    for name, value in leaks["values"].items():
        forms = _forms(value)
        assert any(form in data or form in file.encode() for file, data in runs.items() for form in forms), name
