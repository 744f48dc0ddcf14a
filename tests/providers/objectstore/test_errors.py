"""Observe errors are errors, never "missing": an unreachable endpoint, a 5xx, a 403.

A Dataset observed as absent would be planned for creation (or reported missing by drift),
so every failure to read the marker must raise a provider error instead. The endpoints that
fail are a closed port and a stand-in HTTP server (standard library, in a thread) that
answers every request with one S3 XML error; wrong credentials are tried on SeaweedFS, the
test server that checks them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from trainform.planner.desired import build_desired
from trainform.planner.session import ProviderSet
from trainform.providers.errors import PermanentProviderError, ProviderError, TransientProviderError
from trainform.providers.objectstore.provider import ObjectStoreProvider
from trainform.specs import load_specs

from tests.engine.support import run_trainform
from tests.providers.contract.contract import desired_resource, request_for
from tests.providers.objectstore.fixtures import (
    DATASET,
    PROJECTS,
    dataset_folder,
    objectstore_config,
)
from tests.providers.objectstore.test_datasets import drop_bucket
from tests.services.common import free_ports
from tests.services.s3 import S3Server, credentials_env

ADDRESS = "Dataset/corpus"
BUCKET = "corpus-bucket"
WRONG_SECRET = "not-the-secret-0123456789"


class StandInS3:
    """An HTTP server answering every request with `status` and an S3 XML error `code`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.requests = 0
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            "<RequestId>stand-in</RequestId></Error>"
        ).encode()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                owner.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = answer

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> StandInS3:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def closed_endpoint() -> str:
    (port,) = free_ports(1)
    return f"http://127.0.0.1:{port}"


def folder_at(root: Path, endpoint: str) -> Path:
    """A spec folder declaring Dataset/corpus on `endpoint` (nothing is uploaded)."""
    stand_in = S3Server("stand-in", endpoint, process=None, checks_credentials=False)
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainform.yaml").write_text(objectstore_config(stand_in, BUCKET))
    (root / "projects.yaml").write_text(PROJECTS)
    (root / "datasets.yaml").write_text(
        DATASET.format(name="corpus", bucket=BUCKET, readers="research", policy="Abandon")
    )
    return root


def observe(root: Path) -> object:
    """Observe Dataset/corpus through the folder's objectstore instance."""
    specs = load_specs(root)
    providers = ProviderSet(specs.config, root)
    try:
        provider = providers.get("s3")
        assert isinstance(provider, ObjectStoreProvider)
        resource = desired_resource(build_desired(specs)[ADDRESS], {})
        return provider.observe([request_for(resource)])
    finally:
        providers.close()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test servers' credentials in the environment (the stand-ins ignore them)."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in credentials_env().items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def stand_in_500() -> Iterator[StandInS3]:
    with StandInS3(500, "InternalError", "We encountered an internal error.") as server:
        yield server


@pytest.fixture
def stand_in_403() -> Iterator[StandInS3]:
    with StandInS3(403, "AccessDenied", "Access Denied") as server:
        yield server


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.usefixtures("credentials")
def test_observe_with_the_endpoint_down_is_a_transient_error(tmp_path: Path) -> None:
    root = folder_at(tmp_path / "specs", closed_endpoint())

    with pytest.raises(TransientProviderError, match="unreachable"):
        observe(root)


@pytest.mark.usefixtures("credentials")
def test_observe_answered_500_is_a_transient_error_after_the_retries(
    tmp_path: Path, stand_in_500: StandInS3
) -> None:
    root = folder_at(tmp_path / "specs", stand_in_500.endpoint)

    with pytest.raises(TransientProviderError, match="InternalError") as raised:
        observe(root)

    # make_client's max_attempts=3 counts retries (botocore's `max_attempts`, not
    # `total_max_attempts`): the first request and three retries, with 50 ms-scale backoff.
    assert stand_in_500.requests == 4
    assert f"s3://{BUCKET}/datasets/corpus/.trainform/dataset.json" in str(raised.value)


@pytest.mark.usefixtures("credentials")
def test_observe_answered_403_is_a_permanent_error_without_retries(
    tmp_path: Path, stand_in_403: StandInS3
) -> None:
    root = folder_at(tmp_path / "specs", stand_in_403.endpoint)

    with pytest.raises(PermanentProviderError, match="AccessDenied: Access Denied"):
        observe(root)

    assert stand_in_403.requests == 1


def test_observe_with_wrong_credentials_names_the_code_and_hides_the_secret(
    tmp_path: Path,
    s3_env: S3Server,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if not s3_env.checks_credentials:
        pytest.skip("moto accepts any credentials (differs from AWS)")
    bucket = s3_env.new_bucket()
    request.addfinalizer(lambda: drop_bucket(s3_env, bucket))
    root = dataset_folder(tmp_path / "specs", s3_env, bucket)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody-we-know")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)

    with pytest.raises(ProviderError) as raised:
        observe(root)

    message = str(raised.value)
    assert isinstance(raised.value, PermanentProviderError), message
    assert "InvalidAccessKeyId" in message or "AccessDenied" in message, message
    assert WRONG_SECRET not in message


@pytest.mark.usefixtures("credentials")
def test_plan_with_the_endpoint_down_fails_clearly_and_writes_nothing(tmp_path: Path) -> None:
    root = folder_at(tmp_path / "specs", closed_endpoint())
    before = files_under(root)

    result = run_trainform("plan", ".", cwd=root)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: cannot refresh: "), result.stderr
    assert "\n  provider `s3` (objectstore): " in result.stderr
    assert "the S3 endpoint is unreachable" in result.stderr
    assert "Nothing was planned from a failed read" in result.stderr
    assert "will be created" not in result.stdout
    after = files_under(root)
    # The folder's `local` instance opens its platform database when configured; nothing
    # else may appear: no state, no lock, no saved plan.
    after.pop(".trainform/platform.db", None)
    assert after == before
