"""Built-in kinds on the fake API server: Services (defaults, headless, clusterIP rules)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

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


def test_a_cluster_with_an_older_kueue_serves_only_v1beta1(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path, crd_versions=("v1beta1",))
    try:
        with client.ApiClient(server.configuration()) as made:
            groups = client.ApisApi(made).get_api_versions().groups
            kueue = next(g for g in groups if g.name == "kueue.x-k8s.io")
            assert [v.version for v in kueue.versions] == ["v1beta1"]
            with pytest.raises(ApiException) as caught:
                client.CustomObjectsApi(made).list_cluster_custom_object(
                    "kueue.x-k8s.io", "v1beta2", "clusterqueues"
                )
            assert caught.value.status == 404
    finally:
        server.stop()
