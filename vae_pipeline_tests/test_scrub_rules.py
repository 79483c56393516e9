"""The scrub's rule table (contract 3, "The scrub"): every row's own examples, in plain text and
inside JSON strings (escaped newlines, `\\/`, `\\u00XX`), leave the JSON parseable and no value
behind; the keyword prefilter finds every row; what must stay comes out byte for byte; the table
covers the kinds of gitleaks' default configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vae_pipeline.domain.scrub.texts import ScrubConfig, kind_specs, prefilter, scrub_text

SPECS = kind_specs()
REDACT = [spec for spec in SPECS if spec["action"] == "redact"]


def _placeholder(spec: dict) -> str:
    return spec.get("placeholder", f"<redacted:{spec['name']}>")


def _cases(key: str, specs: list[dict]) -> list:
    return [
        pytest.param(spec, i, id=f"{spec['name']}-{j}-{i}")
        for j, spec in enumerate(specs)
        for i in range(len(spec[key]))
    ]


def test_every_row_is_complete() -> None:
    """One row a kind: its keywords (or, for a shape with no literal, triggers), a regex that
    compiles, what it is, and examples; a redacting row names each example's secret."""
    for spec in SPECS:
        assert spec["name"] and spec["about"], spec["name"]
        assert spec.get("keywords") or spec.get("triggers") or spec.get("config"), spec["name"]
        for keyword in spec.get("keywords", []):
            assert keyword.strip(), spec["name"]
        re.compile(spec["pattern"].replace("{assign}", "").replace("{names}", "x").replace("{value}", "x"))
        assert spec["true_examples"] and spec["false_examples"], spec["name"]
    for spec in REDACT:
        assert len(spec["secrets"]) == len(spec["true_examples"]), spec["name"]
        for example, secret in zip(spec["true_examples"], spec["secrets"]):
            assert secret in example, spec["name"]


@pytest.mark.parametrize(("spec", "i"), _cases("true_examples", REDACT))
def test_true_example_is_redacted_in_plain_text(spec: dict, i: int) -> None:
    example, secret = spec["true_examples"][i], spec["secrets"][i]
    result = scrub_text(example.encode(), "notes.txt", ScrubConfig())
    assert secret.encode() not in result.data
    assert _placeholder(spec).encode() in result.data
    assert result.redacted_by_kind[spec["name"]] >= 1
    assert "credential" not in {f.kind for f in result.findings}


def _json_forms(example: str) -> list[bytes]:
    """The example as a JSON string value: as written by json.dumps, with every `/` as `\\/`,
    with its first letters as `\\u00XX` escapes, and one level deeper (a Read of a JSONL file)."""
    plain = json.dumps({"type": "text", "text": example, "after": "kept"})
    slashes = plain.replace("/", "\\/")
    body = json.dumps(example)[1:-1]
    spelt = "".join(f"\\u{ord(c):04x}" if c.isalnum() and k % 7 == 0 else c for k, c in enumerate(body))
    unicode = '{"type": "text", "text": "' + spelt + '", "after": "kept"}'
    deeper = json.dumps({"type": "tool_result", "content": plain, "after": "kept"})
    return [form.encode() for form in (plain, slashes, unicode, deeper)]


@pytest.mark.parametrize(("spec", "i"), _cases("true_examples", REDACT))
def test_true_example_is_redacted_inside_json_strings(spec: dict, i: int) -> None:
    example, secret = spec["true_examples"][i], spec["secrets"][i]
    for form in _json_forms(example):
        data = form + b"\n" + form + b"\n"  # two JSONL lines
        result = scrub_text(data, "messages.jsonl", ScrubConfig())
        lines = result.data.split(b"\n")
        assert len(lines) == 3 and lines[2] == b""
        for line in lines[:2]:
            doc = json.loads(line)  # still parses
            assert doc["after"] == "kept"
            text = doc["text"] if "text" in doc else json.loads(doc["content"])["text"]
            assert secret not in text
            assert _placeholder(spec) in text
        assert result.redacted >= 2


@pytest.mark.parametrize(("spec", "i"), _cases("false_examples", [s for s in SPECS if not s.get("config")]))
def test_false_example_is_untouched_inside_a_json_string(spec: dict, i: int) -> None:
    example = spec["false_examples"][i]
    data = json.dumps({"text": example}).encode()
    config = ScrubConfig(usernames=tuple(spec.get("example_names", ())))
    result = scrub_text(data, "m.jsonl", config)
    assert result.data == data
    assert result.redacted == 0


def test_the_prefilter_finds_every_rows_keywords() -> None:
    scanner = prefilter()
    for spec in SPECS:
        for keyword in spec.get("keywords", []):
            for spelt in (keyword, keyword.upper(), keyword.lower()):
                hits = scanner.hits(f"a {spelt} b".encode())
                assert hits.get(keyword.lower().encode()) == [2], (spec["name"], keyword)
        keys = [k.lower().encode() for k in spec.get("keywords", [])] + [t.encode() for t in spec.get("triggers", [])]
        for example in spec["true_examples"] if keys else []:
            hits = scanner.hits(example.encode())
            assert any(k in hits for k in keys), (spec["name"], example)


def test_the_prefilter_reports_every_occurrence_where_it_starts() -> None:
    hits = prefilter().hits(b"sk-ant- then SK-ANT- and glpat- glpat- at 10.1.22.3 and 10.0.0.1")
    assert hits[b"sk-ant-"] == [0, 13]
    assert hits[b"sk-"] == [0, 13]
    assert hits[b"glpat-"] == [25, 32]
    assert hits[rb"\.[0-9]{1,3}\.[0-9]{1,3}\."] == [44, 58]  # a trigger: once per start
    assert prefilter().hits(b"") == {}


# What contract 3 says is never touched, and what issue reports found touched.
MUST_STAY = [
    "commit 3f9c2e1d4b5a69780f1e2d3c4b5a69780f1e2d3c",
    "Merge: 1a2b3c4 5d6e7f8",
    '      "integrity": "sha512-Q1xmB0m9yP3kRr8w7Zb3cVxL0H2nT5Fq9gJkD4sLwE6uY1iO8pA7zC2vN3mX5bQ9rT6yU4eW1oI7sK8dF0gH3j==",',
    '"resolved": "https://registry.npmjs.org/react/-/react-18.2.0.tgz", "integrity": "sha1-3b8a1c2d4e5f60718293a4b5c6d7e8f901234567"',
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "550e8400-e29b-41d4-a716-446655440000",
    '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "tool_use_id": "toolu_01A09q90qw90lq917835lq9"}',
    "npm i gsap@3.12.5 @hyperframes/cli@0.4.1 && pip install dagster==1.13.27",
    'curl -H "Authorization: Bearer $API_KEY" https://api.example.com/v1/models',
    'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" https://aiplatform.googleapis.com/v1/x',
    "Authorization: Bearer ${OPENAI_API_KEY}",
    "export OPENAI_API_KEY=$(op read op://vault/openai/key)",
    "const hf_requiredCharacteristicTypes = [1, 2];",
    "if (x &hf_servingcell) return;",
    "from huggingface_hub import hf_hub_download",
    "postgres://app:${DB_PASSWORD}@db/videos",
    "curl -u \"$USER:$PASS\" https://x.example.com",
    "git push -u origin main",
    ".sk-fading-circle-animation-container { color: #1a2b3c; }",
    "the key-value store and the monkey-patched api-client",
    "SG.Button msg.content npm_config_cache=/tmp/npm",
    "run dapi_client.py --api-version 2024-10-21",
]


@pytest.mark.parametrize("text", MUST_STAY)
def test_what_must_stay_comes_out_byte_for_byte(text: str) -> None:
    for data in (text.encode(), json.dumps({"text": text}).encode()):
        result = scrub_text(data, "x.jsonl", ScrubConfig())
        assert result.data == data
        assert result.redacted == 0
        assert result.findings == []


def test_a_key_block_with_no_end_line_ends_with_its_json_string() -> None:
    """The block stops at the end of the string that holds it; the members after it and every
    other line of the file still parse (a block with no END line once took the rest of a line)."""
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\nAAAAMwAAAAtzc2gtZW"
    lines = [json.dumps({"type": "tool_result", "content": f"$ head -3 ~/.ssh/id\n{block}", "is_error": False,
                         "next": {"a": [1, 2, "x"]}}) for _ in range(3)]
    data = ("\n".join(lines) + "\n").encode()
    result = scrub_text(data, "session.jsonl", ScrubConfig())
    out = [json.loads(line) for line in result.data.decode().splitlines()]
    assert len(out) == 3
    for doc in out:
        assert doc["content"] == "$ head -3 ~/.ssh/id\n<redacted:pem_private_key>"
        assert doc["is_error"] is False and doc["next"] == {"a": [1, 2, "x"]}
    assert result.redacted_by_kind["pem_private_key"] == 3
    # in a plain file it ends where the file ends
    plain = scrub_text(block.encode(), "id.txt", ScrubConfig())
    assert plain.data == b"<redacted:pem_private_key>\n\n"


def test_sigv4_credential_key_id_is_redacted() -> None:
    line = (b"> Authorization: AWS4-HMAC-SHA256 Credential=AKIAQX4BLN7ZWT2PEDRS/20261021/us-east-1/s3/"
            b"aws4_request, SignedHeaders=host;x-amz-date, Signature=" + b"ab" * 32)
    result = scrub_text(line, "curl.txt", ScrubConfig())
    assert b"AKIAQX4BLN7ZWT2PEDRS" not in result.data
    assert b"Credential=<redacted:aws_access_key_id>/20261021/us-east-1/s3/aws4_request" in result.data
    assert result.findings == []


def test_url_user_info_keeps_the_user() -> None:
    result = scrub_text(b"DATABASE_URL=postgres://app:Zq8w-R3x9@db:5432/videos", ".env", ScrubConfig())
    assert result.data == b"DATABASE_URL=postgres://app:<redacted:password>@db:5432/videos"
    curl = scrub_text(b"curl -u admin:Tr0ub4dor3 https://ci.example.com", "c.sh", ScrubConfig())
    assert curl.data == b"curl -u admin:<redacted:password> https://ci.example.com"


def test_long_github_app_tokens_and_openai_service_account_keys() -> None:
    ghs = "ghs_" + "aB3dE5gH7jK9" * 14  # 172 characters
    svc = "sk-svcacct-" + "Ab1_Cd2-Ef3" * 7 + "T3BlbkFJ" + "Gh4_Ij5-Kl6" * 7
    result = scrub_text(f"token={ghs}\nOPENAI_API_KEY={svc}\n".encode(), ".env", ScrubConfig())
    assert result.data == b"token=<redacted:github>\nOPENAI_API_KEY=<redacted:openai>\n"


# gitleaks' default configuration (config/gitleaks.toml): the rule ids the table covers, and
# those left to the secret-named assignment rows or outside text (a reason each).
GITLEAKS_LEFT_OUT = {
    "generic-api-key": "a secret-named key's literal value: the assignment rows",
    "database-password": "a secret-named key's literal value: the assignment rows",
    "hashicorp-tf-password": "a secret-named key's literal value: the assignment rows",
    "kubernetes-secret-yaml": "a Secret manifest's data values: the assignment rows",
    "pkcs12-file": "a binary file by its name, not text",
}
GITLEAKS_IDS = """1password-secret-key 1password-service-account-token adafruit-api-key adobe-client-id
adobe-client-secret age-secret-key airtable-api-key algolia-api-key alibaba-access-key-id alibaba-secret-key
anthropic-admin-api-key anthropic-api-key artifactory-api-key artifactory-reference-token asana-client-id
asana-client-secret atlassian-api-token authress-service-client-access-key aws-access-token azure-ad-client-secret
beamer-api-token bitbucket-client-id bitbucket-client-secret bittrex-access-key bittrex-secret-key
cisco-meraki-api-key clickhouse-cloud-api-secret-key clojars-api-token cloudflare-api-key cloudflare-global-api-key
cloudflare-origin-ca-key codecov-access-token cohere-api-token coinbase-access-token confluent-access-token
confluent-secret-key contentful-delivery-api-token curl-auth-header curl-auth-user database-password
databricks-api-token datadog-access-token defined-networking-api-token digitalocean-access-token digitalocean-pat
digitalocean-refresh-token discord-api-token discord-client-id discord-client-secret doppler-api-token
droneci-access-token dropbox-api-token dropbox-long-lived-api-token dropbox-short-lived-api-token duffel-api-token
dynatrace-api-token easypost-api-token easypost-test-api-token etsy-access-token facebook-access-token
facebook-page-access-token facebook-secret fastly-api-token finicity-api-token finicity-client-secret
finnhub-access-token flickr-access-token flutterwave-encryption-key flutterwave-public-key flutterwave-secret-key
flyio-access-token frameio-api-token freemius-secret-key freshbooks-access-token gcp-api-key generic-api-key
github-app-token github-fine-grained-pat github-oauth github-pat github-refresh-token gitlab-cicd-job-token
gitlab-deploy-token gitlab-feature-flag-client-token gitlab-feed-token gitlab-incoming-mail-token
gitlab-kubernetes-agent-token gitlab-oauth-app-secret gitlab-pat gitlab-pat-routable gitlab-ptt gitlab-rrt
gitlab-runner-authentication-token gitlab-runner-authentication-token-routable gitlab-scim-token
gitlab-session-cookie gitter-access-token gocardless-api-token grafana-api-key grafana-cloud-api-token
grafana-service-account-token harness-api-key hashicorp-tf-api-token hashicorp-tf-password heroku-api-key
heroku-api-key-v2 hubspot-api-key huggingface-access-token huggingface-organization-api-token infracost-api-token
intercom-api-key intra42-client-secret jfrog-api-key jfrog-identity-token jwt jwt-base64 kraken-access-token
kubernetes-secret-yaml kucoin-access-token kucoin-secret-key launchdarkly-access-token linear-api-key
linear-client-secret linkedin-client-id linkedin-client-secret lob-api-key lob-pub-api-key mailchimp-api-key
mailgun-private-api-token mailgun-pub-key mailgun-signing-key mapbox-api-token mattermost-access-token
maxmind-license-key messagebird-api-token messagebird-client-id microsoft-teams-webhook netlify-access-token
new-relic-browser-api-token new-relic-insert-key new-relic-user-api-id new-relic-user-api-key notion-api-token
npm-access-token nuget-config-password nytimes-access-token octopus-deploy-api-key okta-access-token openai-api-key
openshift-user-token perplexity-api-key pkcs12-file plaid-api-token plaid-client-id plaid-secret-key
planetscale-api-token planetscale-oauth-token planetscale-password postman-api-token prefect-api-token private-key
privateai-api-token pulumi-api-token pypi-upload-token rapidapi-access-token readme-api-token rubygems-api-token
scalingo-api-token sendbird-access-id sendbird-access-token sendgrid-api-token sendinblue-api-token
sentry-access-token sentry-org-token sentry-user-token settlemint-application-access-token
settlemint-personal-access-token settlemint-service-access-token shippo-api-token shopify-access-token
shopify-custom-access-token shopify-private-app-access-token shopify-shared-secret sidekiq-secret
sidekiq-sensitive-url slack-app-token slack-bot-token slack-config-access-token slack-config-refresh-token
slack-legacy-bot-token slack-legacy-token slack-legacy-workspace-token slack-user-token slack-webhook-url
snyk-api-token sonar-api-token sourcegraph-access-token square-access-token squarespace-access-token
stripe-access-token sumologic-access-id sumologic-access-token telegram-bot-api-token travisci-access-token
twilio-api-key twitch-api-token twitter-access-secret twitter-access-token twitter-api-key twitter-api-secret
twitter-bearer-token typeform-api-token vault-batch-token vault-service-token yandex-access-token yandex-api-key
yandex-aws-access-token zendesk-secret-key""".split()


def test_every_gitleaks_default_kind_is_a_row_or_left_out_for_a_reason() -> None:
    covered = {c.removeprefix("gitleaks ") for spec in SPECS for c in spec.get("covers", []) if c.startswith("gitleaks ")}
    assert len(GITLEAKS_IDS) >= 200
    missing = [i for i in GITLEAKS_IDS if i not in covered and i not in GITLEAKS_LEFT_OUT]
    assert missing == []
    assert set(GITLEAKS_LEFT_OUT) <= set(GITLEAKS_IDS)


def test_docs_list_every_kind_with_its_placeholder() -> None:
    formats = (Path(__file__).resolve().parent.parent / "docs" / "formats.md").read_text(encoding="utf-8")
    for spec in REDACT:
        assert f"| `{spec['name']}` |" in formats and f"`{_placeholder(spec)}` |" in formats, spec["name"]
