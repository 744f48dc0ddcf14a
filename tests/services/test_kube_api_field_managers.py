"""The fake API server keys field managers by name and operation, as a real one does
(apimachinery managedfields/internal/managedfields.go, BuildManagerIdentifier): an Update
and an Apply sent under one name are two managers, and an Apply that changes what the
same name's Update owns is a 409 naming `"<name>" using <apiVersion>`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI

KUEUE = "kueue.x-k8s.io"
V = "v1beta2"


@pytest.fixture(scope="module")
def custom(kube_api: KubeAPI) -> Iterator[client.CustomObjectsApi]:
    before = kube_api.snapshot()
    with client.ApiClient(kube_api.configuration()) as api:
        yield client.CustomObjectsApi(api)
    kube_api.delete_created_since(before)


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"namespaceSelector": {}, **spec},
    }


def _apply(custom: client.CustomObjectsApi, body: dict[str, Any], manager: str) -> Any:
    return custom.patch_cluster_custom_object(
        KUEUE,
        V,
        "clusterqueues",
        body["metadata"]["name"],
        body,
        field_manager=manager,
        _content_type="application/apply-patch+yaml",
    )


def _merge(custom: client.CustomObjectsApi, name: str, patch: Any, manager: str) -> Any:
    return custom.patch_cluster_custom_object(
        KUEUE,
        V,
        "clusterqueues",
        name,
        patch,
        field_manager=manager,
        _content_type="application/merge-patch+json",
    )


def _entries(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"])


def test_an_apply_over_the_same_names_update_is_a_409(custom: client.CustomObjectsApi) -> None:
    name = f"cq-{uuid.uuid4().hex[:8]}"
    _apply(custom, _queue(name, cohortName="a", stopPolicy="None"), "trainform")
    patched = _merge(custom, name, {"spec": {"stopPolicy": "Hold"}}, "trainform")
    assert _entries(patched) == [("trainform", "Apply"), ("trainform", "Update")]

    with pytest.raises(ApiException) as caught:
        _apply(custom, _queue(name, cohortName="a", stopPolicy="HoldAndDrain"), "trainform")

    body = json.loads(caught.value.body)
    assert caught.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        f'Apply failed with 1 conflict: conflict with "trainform" using {KUEUE}/{V}: '
        ".spec.stopPolicy"
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "trainform" using {KUEUE}/{V}',
            "field": ".spec.stopPolicy",
        }
    ]


def test_an_apply_of_the_value_the_update_set_shares_it(
    custom: client.CustomObjectsApi,
) -> None:
    name = f"cq-{uuid.uuid4().hex[:8]}"
    _apply(custom, _queue(name, cohortName="a"), "trainform")
    _merge(custom, name, {"spec": {"stopPolicy": "Hold"}}, "trainform")

    shared = _apply(custom, _queue(name, cohortName="a", stopPolicy="Hold"), "trainform")

    owners = {
        e["operation"]: e["fieldsV1"]["f:spec"]
        for e in shared["metadata"]["managedFields"]
        if e["manager"] == "trainform"
    }
    assert "f:stopPolicy" in owners["Apply"] and "f:stopPolicy" in owners["Update"]


def test_conflicts_with_several_owners_are_grouped_by_owner(
    custom: client.CustomObjectsApi,
) -> None:
    name = f"cq-{uuid.uuid4().hex[:8]}"
    _apply(custom, _queue(name, cohortName="a", stopPolicy="None"), "first")
    _merge(custom, name, {"spec": {"queueingStrategy": "StrictFIFO"}}, "first")

    with pytest.raises(ApiException) as caught:
        _apply(
            custom,
            _queue(name, cohortName="b", stopPolicy="Hold", queueingStrategy="BestEffortFIFO"),
            "second",
        )

    assert json.loads(caught.value.body)["message"] == (
        "Apply failed with 3 conflicts: "
        'conflicts with "first":\n- .spec.cohortName\n- .spec.stopPolicy\n'
        f'conflicts with "first" using {KUEUE}/{V}:\n- .spec.queueingStrategy'
    )
