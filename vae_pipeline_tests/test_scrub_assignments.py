"""The scrub's secret-named assignments and people in version-control output (contract 3, "The
scrub"), what it never touches, and JSON that stays JSON: over every kind's examples, the whole
sample corpus and every hostile input."""

from __future__ import annotations

import io
import json
import shutil
import tarfile

import pytest
import zstandard

from vae_pipeline.domain.review.site import marked
from vae_pipeline.domain.scrub.texts import ScrubConfig, is_text_member, kind_specs, learn_user_names, scrub_text
from vae_pipeline.sample.generator import HARNESS_HOST, HARNESS_USER
from vae_pipeline_tests.test_hostile_input import CASES as HOSTILE_CASES
from vae_pipeline_tests.test_hostile_input import plant

REDACTED = "<redacted:secret_assignment>"

# (text, the literal value that must go, the key that must stay), one per context the contract names
ASSIGNMENTS = [
    (".env", "DB_PASSWORD=Xq7-rLp2vZ9", "Xq7-rLp2vZ9", "DB_PASSWORD"),
    (".env quoted", 'JWT_SECRET="m2Qx!9vLr#Tz"', "m2Qx!9vLr#Tz", "JWT_SECRET"),
    ("env dump", "HOME=/root\nSTRIPE_SECRET_KEY=q8Zt2LmR0vXa\nSHELL=/bin/zsh", "q8Zt2LmR0vXa", "STRIPE_SECRET_KEY"),
    ("export", "export GITHUB_TOKEN=Zk29xLq0PwAa", "Zk29xLq0PwAa", "GITHUB_TOKEN"),
    ("env before a command", "API_KEY=f1Xz92kqPlmN npm run deploy", "f1Xz92kqPlmN", "API_KEY"),
    ("yaml", "db:\n  password: hunter22pw\n  user: app", "hunter22pw", "password"),
    ("yaml quoted", "client_secret: 'f1Xz-92kq_PlmN'", "f1Xz-92kq_PlmN", "client_secret"),
    ("compose", "    environment:\n      POSTGRES_PASSWORD: s3cr3tPg", "s3cr3tPg", "POSTGRES_PASSWORD"),
    ("json", '{"username": "app", "password": "Pa55-w0rd!x"}', "Pa55-w0rd!x", '"password"'),
    ("json escapes", '{"api_key": "ab\\"c\\\\d9Zq"}', 'ab\\"c\\\\d9Zq', '"api_key"'),
    ("toml", '[auth]\ntoken = "gH7kP2qL9xW"', "gH7kP2qL9xW", "token"),
    ("ini", "[db]\npassword = hunter22pw\nhost = db", "hunter22pw", "password"),
    ("python", 'SECRET_KEY = "django-insecure-8fk2Lq0z"', "django-insecure-8fk2Lq0z", "SECRET_KEY"),
    ("python environ", 'os.environ["OPENAI_API_KEY"] = "Zr81xQpw0Lm"', "Zr81xQpw0Lm", "OPENAI_API_KEY"),
    ("python annotated", 'auth_token: str = "Tk8s0QpLm2"', "Tk8s0QpLm2", "auth_token"),
    ("js", "const apiKey = 'q8Zt2LmR0vXa';", "q8Zt2LmR0vXa", "apiKey"),
    ("js object", "fetch(url, { headers: { githubToken: `Zk29xLq0Pw` } })", "Zk29xLq0Pw", "githubToken"),
    ("go", 'accessKey := "AbC9xYz8WvU7"', "AbC9xYz8WvU7", "accessKey"),
    ("php", "'db_password' => 'Pa55w0rd!'", "Pa55w0rd!", "db_password"),
    ("header", "curl -H 'X-Api-Key: q8Zt2LmR0vXa' https://api.example.com", "q8Zt2LmR0vXa", "X-Api-Key"),
    ("flag", "mysql --password=hunter22pw -u app", "hunter22pw", "--password"),
    ("flag and space", "tool deploy --token Zk29xLq0PwA --yes", "Zk29xLq0PwA", "--token"),
    ("passphrase", 'password = "correct horse battery staple"', "correct horse battery staple", "password"),
]

# (text, the people's names and e-mails that must go, how many <person> placeholders)
PEOPLE = [
    ("git log", "commit 3f9c2e1d4b5a69780f1e2d3c4b5a69780f1e2d3c\nAuthor: Ana Lima <ana.lima@mail-corp.com>\n"
     "Date:   Tue Oct 21 08:03:11 2026 +0000\n\n    Title card\n", ["Ana Lima", "ana.lima@mail-corp.com"], 1),
    ("fuller", "Author:     Ana Lima <ana@mail-corp.com>\nAuthorDate: Tue Oct 21\n"
     "Commit:     Bo Chen <bo@mail-corp.com>\nCommitDate: Tue Oct 21\n", ["Ana Lima", "Bo Chen", "@mail-corp"], 2),
    ("trailers", "    Fix\n\n    Signed-off-by: Ana Lima <ana@mail-corp.com>\n"
     "    Co-Authored-By: Claude <noreply@anthropic.com>\n", ["Ana Lima", "ana@", "noreply@"], 2),
    ("config list", "core.editor=vim\nuser.name=Ana Lima\nuser.email=ana@mail-corp.com\n", ["Ana Lima", "ana@"], 2),
    ("config get", "$ git config user.name\nAna Lima\n$ git config --get user.email\nana@mail-corp.com\n$ ls\n",
     ["Ana Lima", "ana@"], 2),
    ("config set", 'git config --global user.name "Ana Lima" && git config --global user.email ana@mail-corp.com',
     ["Ana Lima", "ana@"], 2),
    ("git -c", "git -c user.name=AnaLima -c user.email=ana@mail-corp.com commit -m x", ["AnaLima", "ana@"], 2),
]

# Contract 3's "never touched", and assignments whose value is no literal secret: byte for byte
MUST_STAY = [
    "commit 3f9c2e1d4b5a69780f1e2d3c4b5a69780f1e2d3c",
    "tree 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    '      "integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+'
    'LFTGHVxVjcXPs817LmkHGwn9Ow8wGFIGc3zJHQ==",',
    '"integrity": "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="',
    '{"uuid": "550e8400-e29b-41d4-a716-446655440000", "sessionId": "4f1c2b9e-8d3a-4c5e-9f1a-2b3c4d5e6f70"}',
    '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "tool_use_id": "toolu_01A09q90qw90lq917835lq9"}',
    '"dependencies": {"@anthropic-ai/sdk": "^0.30.1", "gsap": "3.12.5"}, "lodash@4.17.21"',
    "pip install huggingface_hub==0.26.2 tokenizers==0.20.3",
    "curl -H 'Authorization: Bearer $API_KEY' https://api.example.com",
    'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" https://x.example.com',
    "TOKEN=$(gh auth token) && echo ${GITHUB_TOKEN:-none}",
    "const hf_requiredCharacteristicTypes = [];",
    "cfg->profile = &hf_servingcell;",
    "token_count = 12",
    "max_tokens: 4096",
    "password_min_length: 8",
    '"tokens": 1234',
    '{"input_tokens": 12, "output_tokens": 456, "cache_read_input_tokens": 1024, "apiKeySource": "none"}',
    "API_KEY=your_api_key_here\nSECRET=changeme\nTOKEN=xxxx\nPASSWORD=\nDB_PASSWORD=<your-password>",
    '{"api_key": "<your-key>", "token": "***", "secret": "sk-...", "password": ""}',
    "client = Client(api_key=api_key, token=self.token)",
    "token = os.environ['HF_TOKEN']\napi_key = os.getenv('API_KEY')\nsecret = process.env.SECRET;",
    "apiKey: string;\npassword: str\nsecret: true\ntoken: null",
    '{"eos_token": "<|endoftext|>", "pad_token": "[PAD]", "unk_token": "<unk>"}',
    "PWD=/workspace/app\nPASSWORD_FILE=/run/secrets/db",
    '{"password": "/run/secrets/db_password", "label": "password", "hint": "Forgot password?"}',
    "if token == \"abc\":\n    pass",
    "AuthorDate: Tue Oct 21 08:03:11 2026 +0000\nCommit: 3f9c2e1d4b5a69780f1e2d3c4b5a69780f1e2d3c",
    '{"author": "Ana Lima", "name": "site"}',
    "git config user.name\ngit config user.email",
    "See `git -c user.name=\u2026` and Author: <person>",
    '{"input_token": "next_token", "output_token": "NextToken", "nextToken": "1"}',
    '_RECEIVE_MESSAGE_TOKEN = "receive_message"\nSECRET_KEY = "AWS_SECRET_ACCESS_KEY"',
    "self.policies[policy.client_token] = policy\nusername, password = proxy_auth",
    'service_key = f"{cluster}:{name}"\nlog("error, token=%s" % tok)',
    '{"ChangeToken": "abcd12f2-46da-4fdb-b8d5-fbd4c466928f"}\nToken: "#d8dee9",',
]


def depth1(text: str) -> str:
    return json.dumps({"type": "text", "text": text})


def depth2(text: str) -> str:
    """A Read of a .jsonl file: JSON text inside a JSON string."""
    return json.dumps({"type": "tool_result", "content": json.dumps({"type": "text", "text": text})})


def read_depth(data: bytes, depth: int) -> str:
    if depth == 0:
        return data.decode()
    if depth == 1:
        return json.loads(data)["text"]
    return json.loads(json.loads(data)["content"])["text"]


FORMS = [pytest.param(0, id="plain"), pytest.param(1, id="in-json"), pytest.param(2, id="in-json-in-json")]


def _form(text: str, depth: int) -> str:
    return (text, depth1(text), depth2(text))[depth]


@pytest.mark.parametrize("depth", FORMS)
@pytest.mark.parametrize(("text", "secret", "key"), [pytest.param(*c[1:], id=c[0]) for c in ASSIGNMENTS])
def test_a_literal_assigned_to_a_secret_named_key_is_redacted_and_the_key_stays(text, secret, key, depth):
    result = scrub_text(_form(text, depth).encode(), "f.txt", ScrubConfig())
    read = read_depth(result.data, depth)  # parses: the redaction left whole escapes
    assert secret not in read and key in read
    assert read.count(REDACTED) == 1
    assert result.redacted_by_kind["secret_assignment"] == 1 and result.redacted == 1
    assert result.findings == []


# A header kept under a secret-named key: the token is its own kind's, redacted once; the
# header's name and the quoted value that holds the redaction are not taken for a second secret.
HEADERS_UNDER_A_KEY = [
    ("bare", "AUTH_HEADER_TOKEN=Authorization: token Zk29xLq0PwAaQ8v", "Zk29xLq0PwAaQ8v"),
    ("quoted", 'AUTH_HEADER_TOKEN="Authorization: token Zk29xLq0PwAaQ8v"', "Zk29xLq0PwAaQ8v"),
    ("yaml", 'auth_header_token: "Authorization: token Zk29xLq0PwAaQ8v"', "Zk29xLq0PwAaQ8v"),
]


@pytest.mark.parametrize("depth", FORMS)
@pytest.mark.parametrize(("text", "secret"), [pytest.param(*c[1:], id=c[0]) for c in HEADERS_UNDER_A_KEY])
def test_a_header_under_a_secret_named_key_is_redacted_once(text, secret, depth):
    result = scrub_text(_form(text, depth).encode(), "f.txt", ScrubConfig())
    read = read_depth(result.data, depth)
    assert secret not in read and "Authorization: token <redacted:auth_token>" in read
    assert result.redacted == 1 and dict(result.redacted_by_kind) == {"auth_token": 1}


@pytest.mark.parametrize("depth", FORMS)
@pytest.mark.parametrize(("text", "gone", "count"), [pytest.param(*c[1:], id=c[0]) for c in PEOPLE])
def test_people_in_version_control_output_become_person(text, gone, count, depth):
    result = scrub_text(_form(text, depth).encode(), "f.txt", ScrubConfig())
    read = read_depth(result.data, depth)
    assert not [g for g in gone if g in read]
    assert read.count("<person>") == count
    assert result.placeholders["person"] == count and result.redacted == 0
    assert result.findings == []  # the e-mail is no `email` finding: it is gone


@pytest.mark.parametrize("depth", FORMS)
@pytest.mark.parametrize("text", MUST_STAY)
def test_what_is_never_touched_comes_out_byte_for_byte(text, depth):
    data = _form(text, depth).encode()
    result = scrub_text(data, "f.txt", ScrubConfig())
    assert result.data == data
    assert result.findings == [] and result.redacted == 0 and not result.placeholders


def test_placeholders_substitutions_and_git_object_ids_stay_in_every_quoting():
    """The value forms that are no literal, each under a key of every family and quoting."""
    values = ["$API_KEY", "${API_KEY}", "$(pass show api)", "<your-key>", "xxxxxxxx", "changeme",
              "your_token_here", "***", "...", "{{ secrets.API_KEY }}", "%(password)s",
              "3f9c2e1d4b5a69780f1e2d3c4b5a69780f1e2d3c"]
    keys = ["password", "DB_PASSWORD", "secret", "clientSecret", "token", "GITHUB_TOKEN", "api_key", "apiKey",
            "ACCESS_KEY", "privateKey"]
    lines = [f'{k} = "{v}"' for k in keys for v in values] + [f"{k}: '{v}'" for k in keys for v in values]
    lines += [f"{k}={v}" for k in keys for v in values if not any(c in v for c in " {}()")]
    text = "\n".join(lines)
    for depth in (0, 1, 2):
        data = _form(text, depth).encode()
        result = scrub_text(data, "f.txt", ScrubConfig())
        assert result.data == data, depth
        assert result.redacted == 0


def _json_members(name: str, data: bytes) -> list[tuple[str, bytes]]:
    """The JSON and JSONL members a runs-root file gives: itself, or an archive's members."""
    if name.endswith(".tar.zst"):
        try:
            raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 30)
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                return [(f"{name}/{m.name}", tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]
        except (zstandard.ZstdError, tarfile.TarError):
            return []  # a broken archive (planted bad input): nothing in it is scrubbed
    return [(name, data)]


def _parses(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


def _parsing_units(path: str, data: bytes) -> list[bytes]:
    """What must parse: a .json member whole, a .jsonl member line by line."""
    if path.endswith(".jsonl"):
        return data.split(b"\n")
    return [data]


def assert_json_stays_json(members: dict[str, bytes]) -> int:
    """Scrub the members as the bundles stage does (users learnt from all of them, the harness's
    host and user told); every JSON text and JSONL line that parsed before parses after."""
    told = ScrubConfig(hostname=HARNESS_HOST, usernames=(HARNESS_USER,))
    config = told.with_usernames(n for path, data in members.items() if is_text_member(path, data)
                                 for n in learn_user_names(data))
    checked = 0
    for path, data in members.items():
        if not path.endswith((".json", ".jsonl")):
            continue
        parsed = [_parses(unit) for unit in _parsing_units(path, data)]
        if not any(parsed):
            continue
        after = scrub_text(data, path, config).data
        assert after.count(b"\n") == data.count(b"\n"), path
        broken = [i + 1 for i, (ok, unit) in enumerate(zip(parsed, _parsing_units(path, after), strict=True))
                  if ok and not _parses(unit)]
        assert broken == [], f"{path}: lines {broken[:5]} no longer parse"
        checked += sum(parsed)
    return checked


def test_every_kinds_example_stays_json_inside_json(tmp_path):
    """Every example of every kind (true and false), as a JSON string, as JSON text inside one,
    and as a JSONL log of both, still parses after the scrub."""
    examples = [e for spec in kind_specs() for key in ("true_examples", "false_examples", "word_examples")
                for e in spec.get(key, [])]
    members = {f"{i}-{d}.json": _form(e, d).encode() for i, e in enumerate(examples) for d in (1, 2)}
    members["log.jsonl"] = "\n".join(_form(e, d) for e in examples for d in (1, 2)).encode()
    assert assert_json_stays_json(members) == 2 * len(examples) + 2 * len(examples)


def test_the_whole_sample_corpus_stays_json(sample_runs):
    members: dict[str, bytes] = {}
    checked = 0
    for series in sorted(p for p in sample_runs.root.iterdir() if p.is_dir()):
        for entry in sorted(series.iterdir()):
            if entry.is_dir():
                episode = {p.relative_to(entry).as_posix(): p.read_bytes() for p in entry.rglob("*") if p.is_file()}
            else:
                episode = dict(_json_members(entry.name, entry.read_bytes()))
            checked += assert_json_stays_json(episode)
            members.update(episode)
    assert checked > 1000  # every episode's logs: thousands of lines
    assert any(k.endswith(".tar.zst/messages.jsonl") for k in members)  # archives were read too


@pytest.mark.parametrize("case", sorted(HOSTILE_CASES))
def test_every_hostile_input_stays_json(case, sample_runs, tmp_path):
    template = next(p for p in sample_runs.episodes if not p.archive and p.bad is None
                    and (sample_runs.root / p.series / p.episode_id / "judge.json").is_file())
    folder = tmp_path / "episode"
    shutil.copytree(sample_runs.root / template.series / template.episode_id, folder)
    plant(case, folder)
    members = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert assert_json_stays_json(members) > 0


def test_the_review_site_highlights_person_as_the_scrubs_own_text():
    scrubbed = scrub_text(b"Author: Ana Lima <ana@mail-corp.com>", "log.txt", ScrubConfig()).data.decode()
    assert str(marked(scrubbed)) == 'Author: <mark class="scrubbed">&lt;person&gt;</mark>'
