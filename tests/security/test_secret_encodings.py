"""A credential is redacted in every form a server echoes it, and prose is left alone.

A registry password read the way the registry provider reads it (`credentials_from_env`)
leaves no trace in a JSON error body once redacted: not as it is, not as base64 of
`user:password` (the Basic credential without its keyword, either alphabet, padded or
not), not as base64 or hex of the password alone, not percent-encoded. Sentences that name
a signature, a token, a password or a key keep every word. End to end, a real
docker-registry behind a token service that refuses with those forms in its error body
makes the CLI fail with the service's words, the forms absent from its output and files.
"""

from __future__ import annotations

import base64
import json
import secrets as random_secrets
import string
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote, quote_plus

import pytest
import requests
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from trainform.providers.oci.auth import credentials_from_env
from trainform.specs.secrets import (
    REDACTED,
    Redactor,
    forget_secrets,
    known_secrets,
    redact,
    register_credential,
    register_secret,
)

from tests.helpers import run_cli
from tests.security import support
from tests.services.common import find_program, free_ports, launch, unavailable, wait_for_port
from tests.services.registry import ISSUER, SERVICE, RegistryServer, TokenService

USER_ENV, PASSWORD_ENV = "REG_LOGIN", "REG_PW"  # names that say nothing about credentials
USERNAME = "ci-robot"
PASSWORD = "Zq7 tok/en+" + random_secrets.token_hex(6)  # a space, `/` and `+` to encode


def b64(data: str, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(data.encode()).decode()


def echoed_forms(username: str, password: str) -> dict[str, str]:
    """The password as a server may echo it, by name (computed here, not by the code under
    test)."""
    pair = f"{username}:{password}"
    forms = {"plain": password, "json": json.dumps(password)[1:-1]}
    for name, text in (("pair", pair), ("password", password)):
        for urlsafe in (False, True):
            encoded = b64(text, urlsafe)
            alphabet = "urlsafe" if urlsafe else "standard"
            forms[f"base64 {alphabet} of {name}"] = encoded
            forms[f"base64 {alphabet} of {name}, unpadded"] = encoded.rstrip("=")
    forms["hex"] = password.encode().hex()
    forms["HEX"] = password.encode().hex().upper()
    forms["percent"] = quote(password, safe="")
    forms["percent, + for space"] = quote_plus(password)
    return forms


def assert_absent(forms: dict[str, str], text: str, where: str = "the output") -> None:
    for name, form in forms.items():
        assert form not in text, f"{name} ({form!r}) left in {where}:\n{text}"


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


# -- properties -------------------------------------------------------------------------------

CHARACTERS = st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\0", max_codepoint=0x2FF
)
PASSWORDS = st.text(alphabet=CHARACTERS, min_size=6, max_size=40)
USERNAMES = st.text(alphabet=string.ascii_letters + string.digits + "-_.@", min_size=1, max_size=20)
TEXT = st.text(alphabet=CHARACTERS, max_size=40)
DETAILS = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.dictionaries(TEXT, inner, max_size=3) | st.lists(inner, max_size=3),
    max_leaves=6,
)


def read_like_the_registry_provider(username: str, password: str) -> None:
    with mock.patch.dict("os.environ", {USER_ENV: username, PASSWORD_ENV: password}):
        credentials_from_env(USER_ENV, PASSWORD_ENV)


@settings(max_examples=80, deadline=None)
@given(
    username=USERNAMES,
    password=PASSWORDS,
    form=st.sampled_from(sorted(set(echoed_forms("u", "password")) - {"json"})),
    before=TEXT,
    after=TEXT,
    code=TEXT,
    detail=DETAILS,
    indent=st.sampled_from([None, 2]),
)
def test_no_form_of_a_registered_password_survives_in_a_json_error_body(
    username: str,
    password: str,
    form: str,
    before: str,
    after: str,
    code: str,
    detail: Any,
    indent: int | None,
) -> None:
    forms = echoed_forms(username, password)
    assume(not any(f in REDACTED or REDACTED in f for f in forms.values()))
    assume(not password.isdigit())  # redacted inside a number too, where JSON stops parsing
    read_like_the_registry_provider(username, password)
    try:
        message = before + forms[form] + after
        body = {"errors": [{"code": code, "message": message, "detail": detail}]}
        text = json.dumps(body, indent=indent)

        redacted = redact(text)

        json.loads(redacted)  # still JSON
        assert_absent(forms, redacted)
        assert_absent({k: json.dumps(v)[1:-1] for k, v in forms.items()}, redacted)
    finally:
        forget_secrets()


@settings(max_examples=60, deadline=None)
@given(username=USERNAMES, password=PASSWORDS, before=TEXT, after=TEXT)
def test_a_password_inside_a_longer_base64_text_is_redacted_whole(
    username: str, password: str, before: str, after: str
) -> None:
    """The base64 of `anyone:password\\n` holds no run of the password's encoding."""
    assume(len(password.encode()) >= 8)
    register_credential(username, password)
    try:
        encoded = b64(f"someone-else:{password}\n")
        redacted = redact(f"{before} {encoded} {after}")
        assert encoded not in redacted and encoded[6:-6] not in redacted
    finally:
        forget_secrets()


VOCABULARY = [
    "the", "plan", "carries", "no", "signature", "sign", "it", "with", "token", "budget",
    "exceeded", "password", "required", "key", "secret", "credential", "authorization",
    "bearer", "basic", "missing", "expired", "only", "value", "rotate", "service", "denied",
    "api", "access", "private", "session", "usernameEnv", "sign-key", "max_tokens", "2048",
    "Signature", "Token", "Password", "KEY", "Basic", "Bearer", "realm", "Authorization",
]  # fmt: skip
SEPARATORS = [" ", ": ", ", ", "; ", " - ", ". ", "\n"]
NAMES = ["signature", "token", "password", "secret", "api_key", "access_token", "credential"]
PROSE_WORDS = st.tuples(st.sampled_from(VOCABULARY), st.sampled_from(SEPARATORS))
ASSIGNMENTS = st.builds(
    "{}{}{} ".format,
    st.sampled_from(NAMES),
    st.sampled_from(["=", " = "]),
    st.sampled_from(VOCABULARY) | st.integers(0, 10**9).map(str),
).map(lambda assignment: (assignment, " "))


@settings(max_examples=200, deadline=None)
@given(st.lists(PROSE_WORDS | ASSIGNMENTS, min_size=1, max_size=12))
def test_prose_about_signatures_tokens_and_keys_passes_unchanged(words: list[Any]) -> None:
    """Sentences of words, some of them names of credentials, and names given a word or a
    number (`signature=missing`, `max_tokens = 2048`), alone and as JSON values."""
    sentence = "".join(word + separator for word, separator in words).strip()
    assert redact(sentence) == sentence
    document = json.dumps({words[0][0]: sentence, "detail": [w for w, _ in words]})
    assert redact(document) == document


@pytest.mark.parametrize(
    "sentence",
    [
        "the plan carries no signature: sign it with --sign-key",
        "TRAINFORM_PLAN_KEY is set, and the plan carries no signature: only a plan made by "
        "`trainform plan -out` with the same TRAINFORM_PLAN_KEY may be applied",
        "its signature does not match under TRAINFORM_PLAN_KEY: the plan was altered",
        "token budget exceeded",
        "the token service answered without a token",
        "password: required; secret: none; key: value",
        "authorization: denied for this repository",
        "Authorization: Bearer",
        "the registry asks for bearer authentication; basic authentication failed",
        'Bearer realm="https://auth.example.com/token",service="registry.example.com"',
        '{"token": "expired", "signature": "absent", "password": "required"}',
        "signature=missing token=expired api_key=unset",
        "check the credentials named by the registry provider's usernameEnv/passwordEnv",
        "max_tokens=2048 tokenizer=gpt2 sort_key=loss",
        "the private key: /etc/trainform/signing.pem",
        "secret-in-spec: spec.parameters.apiKey looks like a secret",
        "digest sha256:" + "ab12" * 16,
        "https://registry.example.com/v2/ml/trainer/manifests/v1",
        "aws_session_token: not configured",
    ],
)
def test_ordinary_sentences_pass_unchanged(sentence: str) -> None:
    assert redact(sentence) == sentence


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        pytest.param("Authorization: Bearer abc.def.ghi", "abc.def.ghi", id="header"),
        pytest.param('{"Authorization": "Basic dXNlcjpodW50ZXIy"}', "dXNlcjpodW50ZXIy", id="json"),
        pytest.param("retry with bearer eyJhbGciOi.J9x3Kq1", "eyJhbGciOi.J9x3Kq1", id="bearer"),
        pytest.param("https://robot:hunter22@registry.example.com/v2/", "hunter22", id="url"),
        pytest.param("--password=hunter22", "hunter22", id="assignment"),
        pytest.param("?X-Amz-Signature=3f2a9c0d8e7b6a5f", "3f2a9c0d8e7b6a5f", id="query"),
        pytest.param(
            "aws_secret_access_key = wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            id="aws-secret",
        ),
        pytest.param(
            "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBg\n-----END PRIVATE KEY-----",
            "MIIBVQIBADANBg",
            id="pem",
        ),
    ],
)
def test_shapes_only_credentials_have_are_still_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


def test_short_values_stay_unregistered() -> None:
    register_secret("abc12")
    register_credential("robot", "pw123")
    assert "abc12" not in known_secrets([])
    assert redact("abc12 pw123 " + b64("robot:pw123")) == "abc12 pw123 " + b64("robot:pw123")


def test_the_user_name_stays_readable_and_the_pair_does_not() -> None:
    register_credential("ci-robot", "s3cr3t-Pa55word")
    text = f"user ci-robot sent {b64('ci-robot:s3cr3t-Pa55word').rstrip('=')}"
    assert redact(text) == f"user ci-robot sent {REDACTED}"


def test_the_matcher_is_built_once_per_set_of_secrets() -> None:
    register_credential("ci-robot", "s3cr3t-Pa55word")
    assert Redactor().known is Redactor().known
    register_secret("another-secret-value")
    assert Redactor().known is not Redactor([]).known


def test_redacting_a_large_text_with_many_secrets_takes_one_pass() -> None:
    for index in range(20):
        register_credential(f"user{index}", random_secrets.token_urlsafe(24))
    leaked = random_secrets.token_urlsafe(24)
    register_secret(leaked)
    filler = "".join(random_secrets.choice(string.printable) for _ in range(200_000))
    text = (filler + b64(leaked) + " ") * 5
    redact("warm up")
    started = time.perf_counter()
    redacted = redact(text)
    assert time.perf_counter() - started < 5.0  # about 0.05 s: one pass, not one per form
    assert b64(leaked) not in redacted


# -- end to end: a real registry behind a token service that echoes -------------------------


class EchoingTokenService(TokenService):
    """The registry's token service, refusing every request with `body` (401) and keeping
    the Authorization headers it was sent."""

    body = b"{}"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.authorizations: list[str] = []

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        self.authorizations.append(handler.headers.get("Authorization") or "")
        handler.send_response(401)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(self.body)))
        handler.end_headers()
        handler.wfile.write(self.body)


@pytest.fixture(scope="module")
def echoing_token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """docker-registry with token auth whose realm is an `EchoingTokenService`."""
    program = find_program("docker-registry") or find_program("registry")
    if program is None:
        unavailable("docker-registry is not installed (scripts/services.sh installs it)")
    folder = tmp_path_factory.mktemp("echoing-token-registry")
    tokens = EchoingTokenService(folder)
    (port,) = free_ports(1)
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
        "http": {"addr": f"127.0.0.1:{port}", "secret": "trainform-test-secret"},
        "auth": {
            "token": {
                "realm": tokens.realm,
                "service": SERVICE,
                "issuer": ISSUER,
                "rootcertbundle": str(tokens.certificate_file),
            }
        },
    }
    (folder / "config.yml").write_text(json.dumps(config), encoding="utf-8")
    log = folder / "registry.log"
    process = launch(
        [program, "serve", str(folder / "config.yml")], folder, log, {"PATH": "/usr/bin:/bin"}
    )
    wait_for_port(port, process, log, timeout=30)
    host = f"127.0.0.1:{port}"
    server = RegistryServer(f"http://{host}", host, folder / "data", process, "token", tokens)
    challenge = requests.get(f"{server.url}/v2/", timeout=10).headers.get("WWW-Authenticate")
    if tokens.realm not in (challenge or ""):  # another server took the port first
        server.stop()
        pytest.fail(f"port {port} is not this test's registry (challenge {challenge!r})")
    yield server
    server.stop()


FORMS = echoed_forms(USERNAME, PASSWORD)
PROSE = f"user {USERNAME} refused, the token carries no signature: only"


def distribution_body() -> bytes:
    shown = ["base64 standard of pair", "base64 standard of password", "hex", "HEX", "percent"]
    message = " ".join([PROSE, *(FORMS[name] for name in shown), "end-of-body"])
    detail = {name: form for name, form in FORMS.items() if name != "plain"}
    errors = [{"code": "UNAUTHORIZED", "message": message, "detail": detail}]
    return json.dumps({"errors": errors}).encode()


def oauth_body() -> bytes:
    shown = ["base64 urlsafe of pair, unpadded", "hex", "percent, + for space"]
    description = " ".join([PROSE, *(FORMS[name] for name in shown), "end-of-body"])
    return json.dumps({"error": "invalid_grant", "error_description": description}).encode()


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        pytest.param(distribution_body, 5, id="distribution-errors"),
        pytest.param(oauth_body, 3, id="oauth-error"),
    ],
)
def test_a_token_service_echoing_the_password_encoded_leaks_it_nowhere(
    tmp_path: Path, echoing_token_registry: RegistryServer, body: Any, shown: int
) -> None:
    tokens = echoing_token_registry.tokens
    assert isinstance(tokens, EchoingTokenService)
    tokens.body = body()
    root = support.registry_folder(
        tmp_path / "platform", echoing_token_registry.host, USER_ENV, PASSWORD_ENV
    )
    env = {USER_ENV: USERNAME, PASSWORD_ENV: PASSWORD}
    saved = root / "plan.json"

    runs = [
        run_cli("plan", str(root), cwd=root, env=env),
        run_cli("plan", str(root), "--format", "json", "-out", str(saved), cwd=root, env=env),
        run_cli("apply", str(root), "--auto-approve", cwd=root, env=env),
        run_cli("drift", str(root), cwd=root, env=env),
    ]

    assert tokens.authorizations, runs[0].stderr
    assert all(a == "Basic " + b64(f"{USERNAME}:{PASSWORD}") for a in tokens.authorizations)
    for result in runs[:3]:
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert "401" in result.stderr and "the token service" in result.stderr, output
        assert PROSE in result.stderr, output  # prose and the user name are kept
        assert "end-of-body" in result.stderr, output  # the forms were not cut off
        assert result.stderr.count(REDACTED) >= shown, output
        assert "usernameEnv/passwordEnv" in result.stderr  # the remedy survives redaction
    for result in runs:
        assert_absent(FORMS, result.stdout + result.stderr)
    for path in (p for p in root.rglob("*") if p.is_file()):
        assert_absent(FORMS, path.read_bytes().decode(errors="replace"), str(path))
