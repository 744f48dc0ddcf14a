"""How the provider's client reads the fake API server's answers that a real server gives:
a 409 from its own earlier Update entries (taken over, only when nothing else conflicts)
and the 5xx answers that no retry cures (permanent, with the server's message) against
those that are transient."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from trainform.providers.errors import PermanentProviderError, TransientProviderError
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, KUEUE

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.faults import webhook_unreachable

MANAGER = "trainform"


@pytest.fixture(scope="module")
def client(kube_api: KubeAPI) -> Iterator[KubeClient]:
    before = kube_api.snapshot()
    made = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))
    yield made
    made.close()
    kube_api.delete_created_since(before)


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"namespaceSelector": {}, **spec},
    }


def _owners(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}


def test_an_apply_takes_over_what_only_its_own_update_holds(client: KubeClient) -> None:
    name = f"own-{uuid.uuid4().hex[:8]}"
    client.apply(_queue(name, stopPolicy="None"), MANAGER, False)
    client.merge_patch(CLUSTER_QUEUE, name, None, {"spec": {"stopPolicy": "Hold"}}, MANAGER)

    applied = client.apply(_queue(name, stopPolicy="HoldAndDrain"), MANAGER, False)

    assert applied["spec"]["stopPolicy"] == "HoldAndDrain"
    assert _owners(applied) == {(MANAGER, "Apply")}


def test_an_apply_never_takes_over_when_another_manager_conflicts_too(
    client: KubeClient,
) -> None:
    name = f"own-{uuid.uuid4().hex[:8]}"
    client.apply(_queue(name, stopPolicy="None", queueingStrategy="StrictFIFO"), MANAGER, False)
    client.merge_patch(CLUSTER_QUEUE, name, None, {"spec": {"stopPolicy": "Hold"}}, MANAGER)
    patch = {"spec": {"queueingStrategy": "BestEffortFIFO"}}
    client.merge_patch(CLUSTER_QUEUE, name, None, patch, "kubectl-edit")

    with pytest.raises(PermanentProviderError, match="kubectl-edit"):
        client.apply(
            _queue(name, stopPolicy="HoldAndDrain", queueingStrategy="StrictFIFO"), MANAGER, False
        )

    live = client.get(CLUSTER_QUEUE, name)
    assert live is not None and live["spec"]["stopPolicy"] == "Hold"
    assert live["spec"]["queueingStrategy"] == "BestEffortFIFO"


WEBHOOK = webhook_unreachable(
    "vclusterqueue.kb.io", "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"
)


@pytest.mark.parametrize(
    ("fault", "error", "said"),
    [
        pytest.param(
            {"code": 500, "reason": "InternalError", "message": WEBHOOK},
            PermanentProviderError,
            'failed calling webhook "vclusterqueue.kb.io"',
            id="webhook-failing-closed",
        ),
        pytest.param(
            {
                "code": 500,
                "reason": "InternalError",
                "message": 'Internal error occurred: admission webhook "v.example.com" '
                "denied the request: queue names are reserved",
            },
            PermanentProviderError,
            "queue names are reserved",
            id="webhook-denial-with-500",
        ),
        pytest.param(
            {"code": 501, "reason": "NotImplemented", "message": "not implemented"},
            PermanentProviderError,
            "501 not implemented",
            id="501",
        ),
        pytest.param(
            {"code": 500, "reason": "BadRequest", "message": "the body cannot be decoded"},
            PermanentProviderError,
            "the body cannot be decoded",
            id="500-blaming-the-request",
        ),
        pytest.param({"code": 500}, TransientProviderError, "injected fault", id="500"),
        pytest.param(
            {"code": 500, "reason": "InternalError", "message": WEBHOOK, "retry_after": 2},
            TransientProviderError,
            "failed calling webhook",
            id="500-asking-for-a-retry",
        ),
        pytest.param({"code": 503}, TransientProviderError, "unable to handle", id="503"),
        pytest.param({"code": 504}, TransientProviderError, "Timeout", id="504"),
        pytest.param({"code": 429}, TransientProviderError, "Too many", id="429"),
    ],
)
def test_a_server_error_is_permanent_only_when_no_retry_cures_it(
    client: KubeClient,
    kube_api: KubeAPI,
    fault: dict[str, Any],
    error: type[Exception],
    said: str,
) -> None:
    name = f"err-{uuid.uuid4().hex[:8]}"
    path = f"/apis/{KUEUE}/clusterqueues/{name}"
    kube_api.fail(method="PATCH", path_prefix=path, **fault)

    with pytest.raises(error, match=f"^cannot apply ClusterQueue {name}: ") as caught:
        client.apply(_queue(name), MANAGER, False)

    assert said in str(caught.value)
    assert client.get(CLUSTER_QUEUE, name) is None  # refused: nothing was written
    if "failed calling webhook" in said and error is PermanentProviderError:
        assert "Kueue's controller manager" in str(caught.value)
