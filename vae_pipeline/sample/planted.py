"""Fake secrets and personal values for the sample runs, one per kind the scrub must catch.

Each is well-formed (right prefix, alphabet and length) and random, so nothing real is ever
stored; the tests and the benchmark plant them and check none survives the scrub.
"""

from __future__ import annotations

import base64
import json
import random
import string

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": str(rng.randrange(10**9)), "name": "Sample User", "iat": 1_790_000_000}
    payload = _b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"


def _pem(rng: random.Random) -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{lines}\n-----END RSA PRIVATE KEY-----"


def planted_values(rng: random.Random) -> dict[str, str]:
    """One fake value per credential kind, plus a home path, an e-mail and a public IP.

    Keys name what was planted; the scrub kind that must catch each is in `PLANTED_KIND`.
    """
    return {
        "anthropic": "sk-ant-api03-" + _pick(rng, _URLSAFE, 93) + "AA",
        "openai": "sk-" + _pick(rng, _ALNUM, 20) + "T3BlbkFJ" + _pick(rng, _ALNUM, 20),
        "openai_project": "sk-proj-" + _pick(rng, _URLSAFE, 74) + "T3BlbkFJ" + _pick(rng, _URLSAFE, 74),
        "huggingface": "hf_" + _pick(rng, string.ascii_letters, 34),
        "github_ghp": "ghp_" + _pick(rng, _ALNUM, 36),
        "github_gho": "gho_" + _pick(rng, _ALNUM, 36),
        "github_ghu": "ghu_" + _pick(rng, _ALNUM, 36),
        "github_ghs": "ghs_" + _pick(rng, _ALNUM, 36),
        "github_ghr": "ghr_" + _pick(rng, _ALNUM, 36),
        "github_pat": "github_pat_11" + _pick(rng, string.ascii_uppercase + string.digits, 20)
        + "_" + _pick(rng, _ALNUM, 59),
        "aws_access_key_id": "AKIA" + _pick(rng, string.ascii_uppercase + "234567", 16),
        "aws_secret_access_key": base64.b64encode(rng.randbytes(30)).decode(),
        "slack": "xoxb-" + _pick(rng, string.digits, 12) + "-" + _pick(rng, string.digits, 13)
        + "-" + _pick(rng, _ALNUM, 24),
        "bearer": _pick(rng, _URLSAFE, 48),
        "jwt": _jwt(rng),
        "pem_private_key": _pem(rng),
        "home": "/home/" + _pick(rng, string.ascii_lowercase, 6),
        "email": _pick(rng, string.ascii_lowercase, 7) + "." + _pick(rng, string.ascii_lowercase, 5)
        + "@mail-" + _pick(rng, string.ascii_lowercase, 5) + ".com",
        "public_ip": f"{rng.choice([52, 34, 81, 151])}.{rng.randrange(1, 255)}"
        f".{rng.randrange(1, 255)}.{rng.randrange(1, 255)}",
    }


# Which scrub kind catches each planted value, and how (redacted, placeholder or finding).
PLANTED_KIND: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", "redact"),
    "openai": ("openai", "redact"),
    "openai_project": ("openai", "redact"),
    "huggingface": ("huggingface", "redact"),
    "github_ghp": ("github", "redact"),
    "github_gho": ("github", "redact"),
    "github_ghu": ("github", "redact"),
    "github_ghs": ("github", "redact"),
    "github_ghr": ("github", "redact"),
    "github_pat": ("github", "redact"),
    "aws_access_key_id": ("aws_access_key_id", "redact"),
    "aws_secret_access_key": ("aws_secret_access_key", "redact"),
    "slack": ("slack", "redact"),
    "bearer": ("bearer", "redact"),
    "jwt": ("jwt", "redact"),
    "pem_private_key": ("pem_private_key", "redact"),
    "home": ("home", "placeholder"),
    "email": ("email", "finding"),
    "public_ip": ("ip_address", "finding"),
}


def planted_text(values: dict[str, str]) -> str:
    """A few lines of shell-and-config text that carry every value in its natural setting.

    The AWS secret sits next to its key id and the bearer token in an Authorization header,
    which is how the scrub recognises them.
    """
    return "\n".join(
        [
            f"export ANTHROPIC_API_KEY={values['anthropic']}",
            f"OPENAI_API_KEY={values['openai']} OPENAI_PROJECT_KEY={values['openai_project']}",
            f"HF_TOKEN={values['huggingface']}",
            f"tokens: {values['github_ghp']} {values['github_gho']} {values['github_ghu']}",
            f"more: {values['github_ghs']} {values['github_ghr']} {values['github_pat']}",
            f"aws_access_key_id = {values['aws_access_key_id']}",
            f"aws_secret_access_key = {values['aws_secret_access_key']}",
            f"SLACK_BOT_TOKEN={values['slack']}",
            f"curl -H 'Authorization: Bearer {values['bearer']}' https://api.example.com/v1",
            f"session={values['jwt']}",
            values["pem_private_key"],
            f"cd {values['home']}/work && ls",
            f"contact {values['email']} from {values['public_ip']}",
        ]
    )
