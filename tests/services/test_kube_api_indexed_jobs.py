"""An Indexed Job's pods get their identity from the Job controller stand-in as from the real
one: name `<job>-<index>-<5>`, hostname `<job>-<index>`, the template's subdomain, the
completion-index annotation and label, JOB_COMPLETION_INDEX; a failed index is recreated
with the same index. Pods the real server would refuse (a hostname over 63 characters) are
refused here too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.job_controller import INDEX_ANNOTATION, generate_name_with_index
from tests.services.test_kube_api_kueue import Cluster, unique


@pytest.fixture
def cluster(kueue: KubeAPI) -> Iterator[Cluster]:
    before = kueue.snapshot()
    made = Cluster(kueue)
    flavor = made.flavor(unique("f"))
    made.cluster_queue("cq-" + made.namespace, {flavor: {"cpu": 64}})
    made.local_queue("lq", "cq-" + made.namespace)
    yield made
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def _indexed_job(name: str, pods: int, subdomain: str) -> dict[str, Any]:
    container = {"name": "main", "image": "x:1", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": subdomain,
                    "containers": [container],
                }
            },
        },
    }


def _pods(cluster: Cluster) -> dict[int, Any]:
    listed = client.CoreV1Api(cluster.client).list_namespaced_pod(cluster.namespace).items
    running = [p for p in listed if p.status.phase not in ("Failed", "Succeeded")]
    return {int(p.metadata.annotations[INDEX_ANNOTATION]): p for p in running}


@pytest.mark.parametrize("name", ["trainer-0a1b2c3d-1", "n" * 60], ids=["short", "60-characters"])
def test_each_index_gets_its_pod_name_hostname_subdomain_and_index(
    cluster: Cluster, name: str
) -> None:
    cluster.batch.create_namespaced_job(cluster.namespace, _indexed_job(name, 3, "svc-x"))

    pods = _pods(cluster)
    assert sorted(pods) == [0, 1, 2]
    for index, pod in pods.items():
        prefix = generate_name_with_index(name, index)
        assert pod.metadata.name.startswith(prefix) and len(pod.metadata.name) == len(prefix) + 5
        assert len(pod.metadata.name) <= 63
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"{name}-{index}", "svc-x")
        assert pod.metadata.labels[INDEX_ANNOTATION] == str(index)
        [env] = [e for e in pod.spec.containers[0].env if e.name == "JOB_COMPLETION_INDEX"]
        assert env.value_from.field_ref.field_path == f"metadata.annotations['{INDEX_ANNOTATION}']"
    assert generate_name_with_index("n" * 60, 1) == "n" * 55 + "-1-"


def test_a_failed_index_is_recreated_with_the_same_index(cluster: Cluster) -> None:
    cluster.batch.create_namespaced_job(cluster.namespace, _indexed_job("pair", 2, "pair"))
    failed = _pods(cluster)[1]
    core = client.CoreV1Api(cluster.client)
    core.patch_namespaced_pod_status(
        failed.metadata.name, cluster.namespace, {"status": {"phase": "Failed"}}
    )
    cluster.batch.patch_namespaced_job(
        "pair", cluster.namespace, {"metadata": {"labels": {"poke": "1"}}}
    )

    pods = _pods(cluster)
    assert sorted(pods) == [0, 1]
    assert pods[1].metadata.name != failed.metadata.name
    assert pods[1].spec.hostname == "pair-1"


def test_an_indexed_job_whose_last_hostname_is_over_63_characters_is_refused(
    cluster: Cluster,
) -> None:
    name = "a" * 61
    with pytest.raises(ApiException) as refused:
        cluster.batch.create_namespaced_job(cluster.namespace, _indexed_job(name, 11, "s"))

    assert refused.value.status == 422
    assert f"will not able to create pod with invalid DNS label: {name}-10" in refused.value.body
