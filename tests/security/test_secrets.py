"""Secrets are never printed: not from a server's error body, not from a job's spec.

A registry that echoes the credentials it was sent (header, `user:password`, a URL with
them) makes `plan`, `lock`, `apply` and `drift` fail; the password appears in no output, no
state and no saved plan. A job with an AWS key id, a Hugging Face token and a random API key
in its parameters and env is denied by `secret-in-spec` (exit 3, file:line, the field, no
value); with the policy set to warn it applies: no renderer and no state shows the values,
the plan right after apply is empty, and the job itself receives the real values.
Property tests hold `redact` and `looks_secret` to their contract.
"""

from __future__ import annotations

import base64
import json
import random
import secrets as random_secrets
import string
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.specs.secrets import (
    forget_secrets,
    looks_secret,
    mask,
    redact,
    register_secret,
    same_secret,
    secret_reason,
)

from tests.helpers import run_cli, write_tree
from tests.security import support

USERNAME = "ci-robot"
PASSWORD = "Zq7-registry-pa55-" + random_secrets.token_hex(6)
USER_ENV, PASSWORD_ENV = "REG_LOGIN", "REG_PW"  # names that say nothing about credentials


class EchoingRegistry:
    """A registry front that refuses everyone and repeats the credentials it was sent: in
    the reason phrase of a HEAD, the body of a GET, and its token service's answer."""

    def __init__(self) -> None:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def reply(self) -> None:
                registry.answer(self)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = reply  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_port}"
        self.url = f"http://{self.host}"
        self.seen_authorization: list[str] = []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        sent = handler.headers.get("Authorization") or ""
        self.seen_authorization.append(sent)
        pair = ""
        if sent.lower().startswith("basic "):
            pair = base64.b64decode(sent.split(" ", 1)[1]).decode()
        words = f"denied {sent!r} ({pair}); retry https://{pair}@{self.host}/v2/ password={pair}"
        body = json.dumps({"errors": [{"code": "UNAUTHORIZED", "message": words}]}).encode()
        handler.send_response(401, f"Unauthorized {sent} {pair}")
        if not handler.path.startswith("/token"):
            realm = f'Bearer realm="{self.url}/token",service="echo"'
            handler.send_header("WWW-Authenticate", realm)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def echoing_registry() -> Iterator[EchoingRegistry]:
    registry = EchoingRegistry()
    yield registry
    registry.stop()


def registry_folder(root: Path, host: str) -> Path:
    return support.registry_folder(root, host, USER_ENV, PASSWORD_ENV)


def forms_of(secret: str, user: str = USERNAME) -> list[str]:
    """The secret as a server could echo it: raw, and in a Basic header."""
    return [secret, base64.b64encode(f"{user}:{secret}".encode()).decode()]


def files_under(root: Path) -> Iterator[Path]:
    for path in root.rglob("*"):
        if path.is_file():
            yield path


def assert_nowhere(secret_forms: list[str], outputs: list[str], root: Path | None = None) -> None:
    for output in outputs:
        for form in secret_forms:
            assert form not in output, f"{form!r} printed:\n{output}"
    for path in files_under(root) if root is not None else ():
        content = path.read_bytes().decode(errors="replace")
        for form in secret_forms:
            assert form not in content, f"{form!r} written to {path}"


def test_a_registry_echoing_credentials_leaks_them_nowhere(
    tmp_path: Path, echoing_registry: EchoingRegistry
) -> None:
    root = registry_folder(tmp_path / "platform", echoing_registry.host)
    env = {USER_ENV: USERNAME, PASSWORD_ENV: PASSWORD}
    saved = tmp_path / "platform" / "plan.json"

    runs = [
        run_cli("plan", str(root), cwd=root, env=env),
        run_cli("plan", str(root), "--format", "json", "-out", str(saved), cwd=root, env=env),
        run_cli("plan", str(root), "--format", "markdown", cwd=root, env=env),
        run_cli("lock", str(root), cwd=root, env=env),
        run_cli("apply", str(root), "--auto-approve", cwd=root, env=env),
        run_cli("drift", str(root), cwd=root, env=env),
    ]

    assert any(a.startswith("Basic ") for a in echoing_registry.seen_authorization)
    for result in runs[:5]:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "401" in result.stderr and "[REDACTED]" in result.stderr, result.stderr
        assert "usernameEnv/passwordEnv" in result.stderr  # the remedy survives redaction
    assert_nowhere(forms_of(PASSWORD), [r.stdout + r.stderr for r in runs], tmp_path / "platform")


def test_a_provider_error_is_redacted_when_made_and_when_printed() -> None:
    from trainform.providers.errors import PermanentProviderError, TransientProviderError

    late = "late-registered-" + random_secrets.token_hex(8)
    error = TransientProviderError(
        f"cannot push: Authorization: Bearer abc.def.ghi; {late}", retry_after=2.0
    )
    register_secret(late)
    try:
        assert "abc.def.ghi" not in str(error) and late not in str(error)
        assert error.retry_after == 2.0
        wrapped = PermanentProviderError(f"https://robot:{late}@registry.example.com/v2/")
        assert late not in str(wrapped) and "registry.example.com" in str(wrapped)
    finally:
        forget_secrets()


def test_an_s3_error_quoting_the_signing_credentials_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import ClientError
    from trainform.providers.objectstore.client import provider_error

    secret_key = "wJalrXUtnFI/K7MDENG/" + random_secrets.token_urlsafe(15)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)
    message = (
        f"The request signature we calculated does not match. StringToSign uses {secret_key}; "
        f"Credential={AWS_KEY_ID}/20240101/us-east-1/s3/aws4_request"
    )
    failure = ClientError(
        {"Error": {"Code": "SignatureDoesNotMatch", "Message": message}}, "GetObject"
    )

    error = provider_error(failure, "cannot read s3://bucket/manifest.json")

    assert "SignatureDoesNotMatch" in str(error)
    assert secret_key not in str(error) and AWS_KEY_ID not in str(error)


# -- secrets in job specs ---------------------------------------------------------------------

AWS_KEY_ID = "AKIA" + "".join(random_secrets.choice(string.ascii_uppercase) for _ in range(16))
HF_TOKEN = "hf_" + "".join(random_secrets.choice(string.ascii_letters) for _ in range(34))
# A fixed draw: about one random base62 string in 200 switches character class too rarely to
# pass the entropy heuristic, and a test key must not make the suite flaky.
_DRAW = random.Random(20261204)
WANDB_KEY = "".join(_DRAW.choice(string.ascii_letters + string.digits) for _ in range(40))
SECRETS = [AWS_KEY_ID, HF_TOKEN, WANDB_KEY]

RECORDER = """\
import json, os, sys
seen = {name: os.environ.get(name, "") for name in
        ("TRAINFORM_PARAM_APIKEY", "TRAINFORM_PARAM_HF_TOKEN", "WANDB_API_KEY")}
with open(sys.argv[1], "w") as handle:
    json.dump(seen, handle)
"""


def job_folder(root: Path, severity: str | None = None, received: Path | None = None) -> Path:
    policies = (
        f"policies:\n  settings:\n    secret-in-spec: {{severity: {severity}}}\n"
        if severity
        else ""
    )
    target = str(received or root / "received.json")
    write_tree(
        root,
        {
            "trainform.yaml": "apiVersion: trainform/v1\n"
            "providers:\n"
            "  - {name: local, type: local, connection: {root: .trainform}}\n"
            "state: {backend: local, path: .trainform/state.json}\n" + policies,
            "platform.yaml": """\
                apiVersion: trainform/v1
                kind: Project
                metadata: {name: research}
                spec: {owners: [ml-platform@example.com]}
                ---
                apiVersion: trainform/v1
                kind: ResourcePool
                metadata: {name: here}
                spec: {provider: local, nodes: 1, cpu: 2, memory: 2Gi}
                ---
                apiVersion: trainform/v1
                kind: Queue
                metadata: {name: main}
                spec:
                  pools:
                    - pool: here
                      nominalQuota: {cpu: 2, memory: 2Gi}
                ---
                apiVersion: trainform/v1
                kind: Image
                metadata: {name: host-python}
                spec: {runtime: host}
                """,
            "code/record.py": RECORDER,
            "job.yaml": f"""\
                apiVersion: trainform/v1
                kind: TrainingJob
                metadata: {{name: leaky, project: research}}
                spec:
                  queue: main
                  image: host-python
                  code: {{repo: code}}
                  command: [python3, record.py, "{target}"]
                  parameters:
                    apiKey: {AWS_KEY_ID}
                    hf_token: {HF_TOKEN}
                    steps: 3
                    model: meta-llama/Llama-2-7b-chat-hf
                  env:
                    WANDB_API_KEY: {WANDB_KEY}
                    WANDB_PROJECT: research
                  resources: {{cpu: 1, memory: 256Mi}}
                  maxRuntime: 10m
                """,
        },
    )
    return root


def test_secrets_in_a_job_are_denied_by_secret_in_spec_without_quoting_them(
    tmp_path: Path,
) -> None:
    root = job_folder(tmp_path / "platform")
    saved = root / "denied.plan"

    results = [
        run_cli("plan", str(root), "-out", str(saved), cwd=root),
        run_cli("plan", str(root), "--format", "json", cwd=root),
        run_cli("plan", str(root), "--format", "markdown", cwd=root),
        run_cli("show", str(saved), cwd=root),
        run_cli("show", "--format", "json", str(saved), cwd=root),
        run_cli("apply", str(saved), cwd=root),
    ]

    for result in results[:3] + results[5:]:
        assert result.returncode == 3, result.stdout + result.stderr
    text = results[0].stdout
    for field in ("spec.parameters.apiKey", "spec.parameters.hf_token", "spec.env.WANDB_API_KEY"):
        assert f"{field} looks like a secret" in text, text
    assert "job.yaml:" in text and "reference a secret the platform holds" in text
    assert "spec.parameters.model looks like" not in text
    assert "(sensitive:" in text
    report = json.loads(results[1].stdout)["policies"]
    flagged = {f["field"] for f in report["findings"] if f["policy"] == "secret-in-spec"}
    assert flagged == {
        "spec.parameters.apiKey",
        "spec.parameters.hf_token",
        "spec.env.WANDB_API_KEY",
    }
    assert all(
        f["location"].startswith("job.yaml:")
        for f in report["findings"]
        if f["policy"] == "secret-in-spec"
    )
    # a denied plan is saved masked: apply refuses it anyway
    assert_nowhere(SECRETS, [r.stdout + r.stderr for r in results], root / ".trainform")
    assert_nowhere(SECRETS, [saved.read_text()])


def test_warned_secrets_apply_masked_and_the_job_gets_the_real_values(tmp_path: Path) -> None:
    received = tmp_path / "received.json"
    root = job_folder(tmp_path / "platform", severity="warn", received=received)
    saved = tmp_path / "warned.plan"

    planned = run_cli("plan", str(root), "-out", str(saved), cwd=root)
    shown = [
        run_cli("plan", str(root), "--format", "json", cwd=root),
        run_cli("plan", str(root), "--format", "markdown", cwd=root),
        run_cli("show", str(saved), cwd=root),
        run_cli("show", "--format", "markdown", str(saved), cwd=root),
    ]
    applied = run_cli("apply", str(saved), cwd=root)
    after = [
        run_cli("plan", str(root), "--detailed-exitcode", cwd=root),
        run_cli("status", str(root), cwd=root),
        run_cli("drift", str(root), cwd=root),
        run_cli("state", "show", "TrainingJob/research/leaky", str(root), cwd=root),
    ]

    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "warn[secret-in-spec]" in planned.stdout
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert after[0].returncode == 0, after[0].stdout + after[0].stderr  # nothing left to do
    assert "No changes" in after[0].stdout
    assert "(sensitive:" in after[3].stdout, after[3].stdout
    outputs = [r.stdout + r.stderr for r in [planned, *shown, applied, *after]]
    assert_nowhere(SECRETS, outputs)
    state_files = [p for p in (root / ".trainform").glob("state.json*") if p.is_file()]
    assert state_files
    for path in [*state_files, saved]:  # the saved plan is masked too; apply unmasks it
        content = path.read_text(errors="replace")
        for secret in SECRETS:
            assert secret not in content, f"{path} holds a secret"
    deadline = time.monotonic() + 60
    while not received.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    seen = json.loads(received.read_text())
    assert seen == {
        "TRAINFORM_PARAM_APIKEY": AWS_KEY_ID,
        "TRAINFORM_PARAM_HF_TOKEN": HF_TOKEN,
        "WANDB_API_KEY": WANDB_KEY,
    }


def test_a_changed_secret_is_a_change_shown_only_by_its_mask(tmp_path: Path) -> None:
    received = tmp_path / "received.json"
    root = job_folder(tmp_path / "platform", severity="warn", received=received)
    applied = run_cli("apply", str(root), "--auto-approve", cwd=root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    job = root / "job.yaml"
    rotated = "".join(random_secrets.choice(string.ascii_letters) for _ in range(34))
    job.write_text(job.read_text().replace(HF_TOKEN, "hf_" + rotated))

    replanned = run_cli("plan", str(root), "--detailed-exitcode", cwd=root)

    assert replanned.returncode == 2, replanned.stdout + replanned.stderr
    assert "parameters.hf_token: (sensitive:" in replanned.stdout, replanned.stdout
    assert_nowhere([*SECRETS, rotated], [replanned.stdout + replanned.stderr])


# -- properties -------------------------------------------------------------------------------

SURROUNDING = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF), max_size=60
)
SECRET_VALUES = st.text(
    alphabet=string.ascii_letters + string.digits + '-_./+=:@!$%"\\', min_size=8, max_size=40
)


@settings(max_examples=60, deadline=None)
@given(before=SURROUNDING, secret=SECRET_VALUES, after=SURROUNDING)
def test_redact_never_leaves_a_registered_secret(before: str, secret: str, after: str) -> None:
    register_secret(secret)
    try:
        assert secret not in redact(before + secret + after)
        assert secret not in redact(f"{before}Authorization: Basic {secret}\n{after}")
    finally:
        forget_secrets()


JSON_LEAVES = st.one_of(
    SURROUNDING,
    SECRET_VALUES.map(lambda v: f"Authorization: Basic {v}"),
    SECRET_VALUES.map(lambda v: f"https://robot:{v}@registry.example.com/v2/"),
    SECRET_VALUES.map(lambda v: f"-----BEGIN RSA PRIVATE KEY-----\n{v}"),
    SECRET_VALUES.map(lambda v: f"password={v}&token: {v}"),
    st.integers(),
)


JSON_KEYS = st.one_of(
    SURROUNDING,
    st.sampled_from(["token", "password", "Authorization", "aws_secret_access_key", "apiKey"]),
)


@settings(max_examples=60, deadline=None)
@given(
    st.recursive(
        JSON_LEAVES | st.floats(allow_nan=False) | st.booleans() | st.none(),
        lambda inner: st.dictionaries(JSON_KEYS, inner, max_size=4) | st.lists(inner, max_size=3),
    )
)
def test_redacted_json_text_is_still_json(document: Any) -> None:
    for text in (json.dumps(document), json.dumps(document, indent=2)):
        json.loads(redact(text))


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_digests_and_commits_do_not_look_secret(raw: bytes) -> None:
    import hashlib
    import uuid

    assert looks_secret("sha256:" + hashlib.sha256(raw).hexdigest()) is None
    assert looks_secret(hashlib.sha1(raw).hexdigest()) is None
    assert looks_secret(str(uuid.UUID(bytes=raw[:16]))) is None


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=string.ascii_lowercase + "-_", max_size=30))
def test_short_or_plain_words_do_not_look_secret(word: str) -> None:
    assert looks_secret(word) is None


@pytest.mark.parametrize(
    "value",
    [
        "meta-llama/Llama-2-7b-chat-hf",
        "mistralai/Mistral-7B-Instruct-v0.2",
        "EleutherAI/gpt-neox-20b",
        "https://huggingface.co/datasets/allenai/c4",
        "s3://ml-data/corpus/v2",
        "/data/checkpoints/run-2024-01-05/step_1000",
        "--config=configs/llama2_7b_sft.yaml",
        "registry.example.com/ml/trainer:v1",
        "TrainingJobWithLongName2024",
        "2024-01-05T10:00:00Z",
    ],
)
def test_names_paths_and_urls_do_not_look_secret(value: str) -> None:
    assert looks_secret(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(AWS_KEY_ID, "an AWS access key id", id="aws-key-id"),
        pytest.param(HF_TOKEN, "an access token of a known service", id="hf-token"),
        pytest.param("ghp_" + "a1B2" * 9, "an access token of a known service", id="github"),
        pytest.param("glpat-" + "x" * 20, "an access token of a known service", id="gitlab"),
        pytest.param("xoxb-1234567890-abcdef", "an access token of a known service", id="slack"),
        pytest.param("-----BEGIN PRIVATE KEY-----\nMIIB\n", "a private key", id="private-key"),
        pytest.param("postgres://u:hunter22@db/x", "credentials in a URL", id="url"),
        pytest.param("--password=hunter22", "a `password=` pair", id="pair"),
        pytest.param(WANDB_KEY, "a high-entropy token", id="entropy"),
    ],
)
def test_secret_looking_values_say_why(value: str, reason: str) -> None:
    assert looks_secret(value) == reason


def test_a_name_can_make_a_plain_value_secret_but_not_a_reference() -> None:
    assert secret_reason("DB_PASSWORD", "hunter22") is not None
    assert secret_reason("hf_token", "HF_TOKEN") is None  # the name of a variable
    assert secret_reason("max_tokens", "2048") is None
    assert secret_reason("tokenizer", "gpt2-large-tokenizer") is None


def test_a_masked_value_compares_equal_only_to_its_own_secret() -> None:
    masked = mask(WANDB_KEY)
    assert masked.startswith("(sensitive:") and WANDB_KEY not in masked
    assert same_secret(masked, WANDB_KEY) and same_secret(WANDB_KEY, masked)
    assert not same_secret(masked, WANDB_KEY + "x")
    assert not same_secret(masked, masked)
