"""Built-in kinds on the fake API server: Services (defaults, headless, clusterIP rules)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI


@pytest.fixture
def api(kube_api: KubeAPI) -> Iterator[client.ApiClient]:
    before = kube_api.snapshot()
    with client.ApiClient(kube_api.configuration()) as made:
        yield made
    kube_api.delete_created_since(before)


def test_a_headless_service_keeps_cluster_ip_none_and_gets_the_server_defaults(
    api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api)
    namespace = f"svc-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "rendezvous"},
        "spec": {"clusterIP": "None", "selector": {"job": "x"}, "ports": [{"port": 29500}]},
    }
    first = core.patch_namespaced_service(
        "rendezvous",
        namespace,
        body,
        field_manager="t",
        _content_type="application/apply-patch+yaml",
    )
    created = first.to_dict()["spec"]
    assert (created["cluster_ip"], created["cluster_ips"], created["type"]) == (
        "None",
        ["None"],
        "ClusterIP",
    )
    assert created["ports"][0]["protocol"] == "TCP"
    assert created["ports"][0]["target_port"] == 29500
    again = core.patch_namespaced_service(
        "rendezvous",
        namespace,
        body,
        field_manager="t",
        _content_type="application/apply-patch+yaml",
    )
    assert again.metadata.resource_version == first.metadata.resource_version
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_service("rendezvous", namespace, {"spec": {"clusterIP": "10.96.0.9"}})
    assert caught.value.status == 422
    assert "may not change once set" in json.loads(caught.value.body)["message"]
    plain = core.create_namespaced_service(
        namespace, {"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}}
    )
    assert plain.spec.cluster_ip.startswith("10.96.")
