"""Error mapping of the client: throttling, server errors and unreachable servers are
transient (with Retry-After), conflicts name the other field manager, the rest is
permanent; every message says what could not be done."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE

QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}}


class Answer:
    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.status, self._body, self.headers = status, json.dumps(body).encode(), headers

    def read(self) -> bytes:
        return self._body


class Scripted:
    """An ApiClient stand-in answering every request with one scripted answer."""

    def __init__(self, answer: Answer | Exception) -> None:
        self.answer = answer

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[Any, ...]:
        return method, "http://cluster" + path, {}, None, []

    def call_api(self, *args: Any, **kwargs: Any) -> Answer:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def status(code: int, message: str, **details: Any) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "message": message, "details": details}


def test_throttling_is_transient_and_keeps_retry_after() -> None:
    client = KubeClient(Scripted(Answer(429, status(429, "slow down"), {"Retry-After": "3"})))

    with pytest.raises(TransientProviderError, match="cannot list clusterqueues: 429") as caught:
        client.list(CLUSTER_QUEUE)

    assert caught.value.retry_after == 3.0


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(Answer(503, status(503, "etcd"), {}), TransientProviderError, id="5xx"),
        pytest.param(
            urllib3.exceptions.MaxRetryError(None, "/", "refused"),
            TransientProviderError,
            id="unreachable",
        ),
        pytest.param(
            ApiException(status=502, reason="Bad Gateway"),
            TransientProviderError,
            id="api-exception-5xx",
        ),
        pytest.param(Answer(403, status(403, "forbidden"), {}), PermanentProviderError, id="403"),
        pytest.param(Answer(422, status(422, "invalid"), {}), PermanentProviderError, id="422"),
    ],
)
def test_errors_map_to_transient_or_permanent(answer: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="^cannot read ClusterQueue q: "):
        KubeClient(Scripted(answer)).get(CLUSTER_QUEUE, "q")


def test_a_conflict_names_the_other_manager_and_the_fields() -> None:
    conflict = status(
        409,
        'Apply failed with 1 conflict: conflict with "kubectl-edit" using '
        "kueue.x-k8s.io/v1beta2: .spec.stopPolicy",
        causes=[
            {
                "reason": "FieldManagerConflict",
                "message": 'conflict with "kubectl-edit" using kueue.x-k8s.io/v1beta2',
                "field": ".spec.stopPolicy",
            }
        ],
    )
    client = KubeClient(Scripted(Answer(409, conflict, {})))

    with pytest.raises(PermanentProviderError) as caught:
        client.apply(QUEUE, "trainform", False)

    message = str(caught.value)
    assert message.startswith(
        "cannot apply ClusterQueue q: conflict with field manager kubectl-edit"
    )
    assert ".spec.stopPolicy" in message and "forceConflicts" in message


def test_a_missing_kubeconfig_is_a_configuration_error(tmp_path: Any) -> None:
    from trainform.providers.errors import ProviderConfigError

    with pytest.raises(ProviderConfigError, match="cannot load kubeconfig"):
        make_api_client(str(tmp_path / "nowhere"), "")
