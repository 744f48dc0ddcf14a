"""ResourceQuota admission and finalizers on the fake API server (admission.py, deletion.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI

GPU = "nvidia.com/gpu"


@pytest.fixture
def api(kube_api: KubeAPI) -> Iterator[client.ApiClient]:
    before = kube_api.snapshot()
    with client.ApiClient(kube_api.configuration()) as made:
        yield made
    kube_api.delete_created_since(before)


@pytest.fixture
def namespace(api: client.ApiClient) -> str:
    name = f"quota-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def quota(api: client.ApiClient, namespace: str, hard: dict[str, str], **spec: Any) -> None:
    body = {"metadata": {"name": "q"}, "spec": {"hard": hard, **spec}}
    client.CoreV1Api(api).create_namespaced_resource_quota(namespace, body)


def pod(
    name: str, requests: dict[str, str], limits: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    resources = {"requests": requests, "limits": limits if limits is not None else requests}
    container = {"name": "main", "image": "x:1", "resources": resources}
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


def refusal(error: ApiException) -> tuple[int, str, str]:
    body = json.loads(error.body)
    return error.status, body["reason"], body["message"]


def used(api: client.ApiClient, namespace: str) -> dict[str, str]:
    found = client.CoreV1Api(api).read_namespaced_resource_quota("q", namespace)
    return dict(found.status.used)


def test_a_pod_over_the_gpu_quota_is_forbidden_and_used_tracks_the_pods(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    quota(api, namespace, {f"requests.{GPU}": "8", "requests.cpu": "4"})
    core.create_namespaced_pod(namespace, pod("a", {GPU: "4", "cpu": "1500m"}))
    core.create_namespaced_pod(namespace, pod("b", {GPU: "4", "cpu": "1"}))
    assert used(api, namespace) == {f"requests.{GPU}": "8", "requests.cpu": "2500m"}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod("c", {GPU: "1", "cpu": "1"}))
    assert refusal(caught.value) == (
        403,
        "Forbidden",
        f'pods "c" is forbidden: exceeded quota: q, requested: requests.{GPU}=1, '
        f"used: requests.{GPU}=8, limited: requests.{GPU}=8",
    )
    core.delete_namespaced_pod("a", namespace)
    assert used(api, namespace)[f"requests.{GPU}"] == "4"
    core.create_namespaced_pod(namespace, pod("c", {GPU: "1", "cpu": "1"}))


def test_count_of_jobs_counts_finished_jobs_too(api: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(api)
    quota(api, namespace, {"count/jobs.batch": "2"})

    def job(name: str) -> dict[str, Any]:
        template = {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x:1"}]}
        }
        return {"metadata": {"name": name}, "spec": {"suspend": True, "template": template}}

    for name in ("one", "two"):
        batch.create_namespaced_job(namespace, job(name))
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    batch.patch_namespaced_job_status("one", namespace, done)
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(namespace, job("three"))
    assert refusal(caught.value)[2] == (
        'jobs.batch "three" is forbidden: exceeded quota: q, requested: count/jobs.batch=1, '
        "used: count/jobs.batch=2, limited: count/jobs.batch=2"
    )


def test_a_pod_without_a_constrained_limit_must_specify_it(
    api: client.ApiClient, namespace: str
) -> None:
    quota(api, namespace, {"limits.memory": "8Gi"})
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).create_namespaced_pod(namespace, pod("bare", {"cpu": "1"}, {}))
    assert refusal(caught.value)[2] == (
        'pods "bare" is forbidden: failed quota: q: must specify limits.memory for: main'
    )


def test_a_priority_class_scoped_quota_counts_only_pods_of_that_class(
    api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    high = f"high-{namespace}"
    client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": high}, "value": 1000})
    selector = {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [high]}]
    }
    quota(api, namespace, {"pods": "1"}, scopeSelector=selector)
    core.create_namespaced_pod(namespace, pod("low-1", {"cpu": "1"}))
    core.create_namespaced_pod(namespace, pod("low-2", {"cpu": "1"}))
    core.create_namespaced_pod(namespace, pod("high-1", {"cpu": "1"}, priorityClassName=high))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod("high-2", {"cpu": "1"}, priorityClassName=high))
    assert caught.value.status == 403
    assert used(api, namespace) == {"pods": "1"}


KUEUE, V = "kueue.x-k8s.io", "v1beta2"


def local_queue(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "finalizers": finalizers or []}
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": metadata,
        "spec": {"clusterQueue": "cq"},
    }


def test_a_terminating_object_may_lose_finalizers_but_not_gain_one(
    api: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", local_queue("lq", ["a.io/x"])
    )
    marked = custom.delete_namespaced_custom_object(KUEUE, V, namespace, "localqueues", "lq")
    again = custom.delete_namespaced_custom_object(KUEUE, V, namespace, "localqueues", "lq")
    assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    changed = custom.patch_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", "lq", {"spec": {"stopPolicy": "Hold"}}
    )
    assert changed["spec"]["stopPolicy"] == "Hold"  # other fields may still change
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(
            KUEUE,
            V,
            namespace,
            "localqueues",
            "lq",
            {"metadata": {"finalizers": ["a.io/x", "b.io/y"]}},
        )
    body = json.loads(caught.value.body)
    assert (caught.value.status, body["details"]["causes"][0]) == (
        422,
        {
            "reason": "FieldValueForbidden",
            "field": "metadata.finalizers",
            "message": "Forbidden: no new finalizers can be added if the object is being "
            'deleted, found new finalizers []string{"b.io/y"}',
        },
    )


def test_a_namespace_stays_terminating_while_an_object_in_it_has_finalizers(
    api: client.ApiClient, namespace: str
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", local_queue("held", ["a.io/x"])
    )
    custom.create_namespaced_custom_object(KUEUE, V, namespace, "localqueues", local_queue("free"))
    core.delete_namespace(namespace)
    assert core.read_namespace(namespace).status.phase == "Terminating"
    names = [
        i["metadata"]["name"]
        for i in custom.list_namespaced_custom_object(KUEUE, V, namespace, "localqueues")["items"]
    ]
    assert names == ["held"]
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(
            KUEUE, V, namespace, "localqueues", local_queue("late")
        )
    assert refusal(caught.value) == (
        403,
        "Forbidden",
        f"unable to create new content in namespace {namespace} because it is being terminated",
    )
    custom.patch_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", "held", {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespace(namespace)
    assert gone.value.status == 404
