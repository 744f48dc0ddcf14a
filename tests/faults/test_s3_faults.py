"""The S3 state backend under a hung endpoint, a reset, and a lost write response.

A proxy (tests.faults.s3_proxy) sits between the backend and a real S3 server (moto, then
SeaweedFS). Each case asserts the error message, the time bound, and that nothing recorded
was lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from trainform.planner.backends.s3 import S3Backend, S3StateError
from trainform.planner.state import State
from trainform.specs.models.config import ObjectStoreConnection

from tests.faults.s3_proxy import FaultProxy
from tests.services.s3 import S3Server

KEY = "team/state.json"


@pytest.fixture
def proxy(s3_env: S3Server) -> Iterator[FaultProxy]:
    made = FaultProxy(s3_env.endpoint)
    yield made
    made.close()


def backend_through(proxy: FaultProxy, bucket: str, timeout: float = 1.0) -> S3Backend:
    connection = ObjectStoreConnection(
        endpoint_url=proxy.endpoint, region="us-east-1", addressing_style="path"
    )
    return S3Backend(bucket, KEY, connection, timeout=timeout, max_attempts=2)


def created(address: str) -> dict:
    return {
        "type": "outcome",
        "address": address,
        "resource": {
            "kind": "Project",
            "providers": ["local"],
            "spec": {},
            "specHash": "sha256:" + "0" * 64,
        },
    }


def test_a_hung_endpoint_fails_within_the_configured_bound(
    s3_env: S3Server, proxy: FaultProxy
) -> None:
    bucket = s3_env.new_bucket()
    proxy.mode = "hang"
    started = time.monotonic()
    with pytest.raises(S3StateError, match="cannot read state"):
        backend_through(proxy, bucket).read()
    assert time.monotonic() - started < 2 * 1.0 * 2 + 5  # attempts x (connect + read) + slack


def test_a_lost_response_to_a_conditional_write_is_not_another_writer(
    s3_env: S3Server, proxy: FaultProxy
) -> None:
    bucket = s3_env.new_bucket()
    backend = backend_through(proxy, bucket, timeout=5.0)
    info = backend.lock("apply")
    state = State.new()
    backend.record(state, created("Project/a"))
    proxy.drop_suffix = KEY
    proxy.mode = "drop-conditional-put"

    backend.compact(state)

    assert proxy.dropped == 1
    backend.record(state, created("Project/b"))
    backend.compact(state)
    backend.unlock(info)
    final = backend_through(proxy, bucket).read()
    assert final is not None and sorted(final.resources) == ["Project/a", "Project/b"]


def test_an_outage_while_the_lock_is_held_names_the_lock_and_the_next_step(
    s3_env: S3Server, proxy: FaultProxy
) -> None:
    bucket = s3_env.new_bucket()
    backend = backend_through(proxy, bucket)
    info = backend.lock("apply")
    state = State.new()
    proxy.mode = "reset"
    with pytest.raises(S3StateError) as raised:
        backend.record(state, created("Project/a"))
    message = str(raised.value)
    assert f"The state lock {info.id} is held by this run" in message
    assert f"trainform force-unlock {info.id}" in message
    with pytest.raises(S3StateError, match=f"force-unlock {info.id}"):
        backend.unlock(info)
    proxy.mode = "forward"
    backend_through(proxy, bucket).force_unlock(info.id, force=True)  # held by this process
