"""The fake API server's pod log subresource answers as a real one: the official client's
`read_namespaced_pod_log` reads what a test set, `tailLines`, `sinceSeconds` and
`limitBytes` cut it as the kubelet does, and refusals carry the real server's words."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI


@pytest.fixture
def core(kube_api: KubeAPI) -> Iterator[client.CoreV1Api]:
    before = kube_api.snapshot()
    with client.ApiClient(kube_api.configuration()) as api:
        yield client.CoreV1Api(api)
    kube_api.delete_created_since(before)


def _pod(
    core: client.CoreV1Api,
    namespace: str,
    containers: tuple[str, ...] = ("main",),
    node: str = "node-a",
    state: dict[str, Any] | None = None,
    name: str = "",
) -> str:
    name = name or f"pod-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]},
    }
    if node:
        body["spec"]["nodeName"] = node
    core.create_namespaced_pod(namespace, body)
    running = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    statuses = [
        {
            "name": c,
            "image": "busybox",
            "imageID": "",
            "ready": state is None,
            "restartCount": 0,
            "state": state or running,
        }
        for c in containers
    ]
    core.api_client.call_api(
        *core.api_client.param_serialize(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            header_params={"Content-Type": "application/merge-patch+json"},
            body={"status": {"phase": "Running", "containerStatuses": statuses}},
        )
    ).read()
    return name


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"logs-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _error(call: Any) -> tuple[int, str]:
    with pytest.raises(ApiException) as caught:
        call()
    return int(caught.value.status), str(json.loads(caught.value.body)["message"])


def test_a_pod_log_is_read_whole_or_cut_by_tail_lines_since_and_limit_bytes(
    kube_api: KubeAPI, core: client.CoreV1Api, namespace: str
) -> None:
    pod = _pod(core, namespace)
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    kube_api.set_pod_log(namespace, pod, "one\ntwo\n", at=old)
    kube_api.set_pod_log(namespace, pod, "three\nfour\n", append=True)

    assert core.read_namespaced_pod_log(pod, namespace) == "one\ntwo\nthree\nfour\n"
    assert core.read_namespaced_pod_log(pod, namespace, tail_lines=1) == "four\n"
    assert core.read_namespaced_pod_log(pod, namespace, tail_lines=0) == ""
    assert core.read_namespaced_pod_log(pod, namespace, since_seconds=60) == "three\nfour\n"
    assert core.read_namespaced_pod_log(pod, namespace, limit_bytes=6) == "one\ntw"
    assert core.read_namespaced_pod_log(pod, namespace, tail_lines=3, limit_bytes=4) == "two\n"
    assert core.read_namespaced_pod_log(pod, namespace, container="main", follow=True).endswith(
        "four\n"
    )
    stamped = core.read_namespaced_pod_log(pod, namespace, timestamps=True, tail_lines=1)
    assert stamped.endswith("Z four\n") and stamped[:4].isdigit()


def test_bad_options_and_containers_are_refused_in_the_real_servers_words(
    kube_api: KubeAPI, core: client.CoreV1Api, namespace: str
) -> None:
    pod = _pod(core, namespace, containers=("main", "sidecar"))
    read = core.read_namespaced_pod_log

    assert _error(lambda: read(pod, namespace, container="main", tail_lines=-1)) == (
        422,
        f'PodLogOptions "{pod}" is invalid: tailLines: Invalid value: -1: '
        "must be greater than or equal to 0",
    )
    assert _error(lambda: read(pod, namespace, container="main", limit_bytes=0))[0] == 422
    assert _error(lambda: read(pod, namespace, container="main", since_seconds=0))[0] == 422
    assert _error(lambda: read(pod, namespace)) == (
        400,
        f"a container name must be specified for pod {pod}, choose one of: [main sidecar]",
    )
    assert _error(lambda: read(pod, namespace, container="other")) == (
        400,
        f"container other is not valid for pod {pod}",
    )
    assert _error(lambda: read("missing", namespace)) == (404, 'pods "missing" not found')
    assert _error(lambda: read(pod, namespace, container="main", previous=True)) == (
        400,
        f'previous terminated container "main" in pod "{pod}" not found',
    )


def test_a_waiting_or_unscheduled_pod_has_no_log_yet(
    core: client.CoreV1Api, namespace: str
) -> None:
    waiting = _pod(core, namespace, state={"waiting": {"reason": "ContainerCreating"}})
    unscheduled = _pod(core, namespace, node="")

    assert _error(lambda: core.read_namespaced_pod_log(waiting, namespace)) == (
        400,
        f'container "main" in pod "{waiting}" is waiting to start: ContainerCreating',
    )
    assert core.read_namespaced_pod_log(unscheduled, namespace) == ""


def test_a_deleted_pod_takes_its_log_along(
    kube_api: KubeAPI, core: client.CoreV1Api, namespace: str
) -> None:
    pod = _pod(core, namespace)
    kube_api.set_pod_log(namespace, pod, "first life\n")
    core.delete_namespaced_pod(pod, namespace)
    _pod(core, namespace, name=pod)

    assert core.read_namespaced_pod_log(pod, namespace) == ""
