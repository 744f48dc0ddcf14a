"""Observing is batched: 500 Queues, 500 Quotas and 500 TrainingJobs cost one list request
per Kubernetes kind (plus one Workload list for the namespace with unfinished jobs),
counted from the fake API server's request log."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainform.providers.base import DesiredResource, ObserveRequest, ProviderContext
from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.jobs import job_manifest, ledger_entry, ledger_manifest
from trainform.providers.kubernetes.kinds import CONFIG_MAP
from trainform.providers.kubernetes.placement import Placement
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.providers.kubernetes.fixtures import unique_prefix
from tests.services.kube_api import KubeAPI

COUNT = 200  # per kind: enough that one request per object would show


def _document(spec: dict) -> dict:
    return {"metadata": {"labels": {}, "annotations": {}}, "spec": spec}


def _launch(index: int) -> JobLaunch:
    return JobLaunch(
        address=f"TrainingJob/vision/job-{index}",
        run_id="r-0123456789ab",
        attempt=1,
        kind="train",
        project="vision",
        queue="q-0",
        priority=0,
        command=["python"],
        code_dir=None,
        parameters={},
        env={},
        datasets=[],
        cpu="1",
        memory="1073741824",
        gpus=0,
        nodes=1,
        image="example.com/train@sha256:" + "2" * 64,
    )


def test_observing_600_resources_costs_one_list_per_kind(kube_api: KubeAPI, tmp_path: Path) -> None:
    prefix = unique_prefix()
    provider = KubernetesProvider(KubeClient(make_api_client(str(kube_api.kubeconfig), "")))
    provider.configure(
        "k8s", {"namespacePrefix": prefix, "namePrefix": prefix}, ProviderContext(tmp_path)
    )
    queue = _document(
        {
            "pools": [{"pool": "h100", "nominalQuota": {"gpu": "8", "cpu": "8", "memory": "8"}}],
            "defaultPriority": 0,
        }
    )
    requests = [
        ObserveRequest(f"Queue/q-{i}", "Queue", f"q-{i}", None, queue) for i in range(COUNT)
    ]
    requests += [
        ObserveRequest(
            f"Quota/vision/q-{i}",
            "Quota",
            f"q-{i}",
            "vision",
            _document({"queue": f"q-{i}", "limits": {"gpu": "4"}}),
        )
        for i in range(COUNT)
    ]
    requests += [
        ObserveRequest(f"TrainingJob/vision/job-{i}", "TrainingJob", f"job-{i}", "vision", {})
        for i in range(COUNT)
    ]
    namespace = f"{prefix}vision"
    project = _document({"owners": ["a@example.com"]})
    [namespace_object] = provider.render(
        DesiredResource("Project/vision", "Project", "vision", None, project)
    )
    provider.client.apply(namespace_object, "t", False)
    manifests = []
    for request in requests:
        if request.kind == "TrainingJob":
            launch = _launch(int(request.name.split("-")[1]))
            manifests.append(job_manifest(provider.naming, launch, Placement(()), None))
            entry = ledger_entry(launch, "2026-01-01T00:00:00Z")
            manifests.append(ledger_manifest(provider.naming, launch.address, namespace, [entry]))
        else:
            manifests += provider.render(
                DesiredResource(
                    request.address, request.kind, request.name, request.project, request.document
                )
            )
    kept = ("Cohort", "ClusterQueue", "LocalQueue", "Job", "ConfigMap")
    manifests = [m for m in manifests if m["kind"] in kept]  # what the count is about
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda m: provider.client.apply(m, "trainform", False), manifests))
    kube_api.reset_requests()

    seen = provider.observe(requests)

    assert len(seen) == 3 * COUNT
    assert [a for a, o in seen.items() if not o.exists] == []
    lists = sorted(r.path for r in kube_api.requests)
    assert [r.method for r in kube_api.requests] == ["GET"] * len(lists)
    assert lists == sorted(
        [
            "/apis/kueue.x-k8s.io/v1beta2/cohorts",
            "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
            "/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses",
            "/api/v1/namespaces",  # this instance's project namespaces
            f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads",  # queue usage
            "/apis/kueue.x-k8s.io/v1beta2/localqueues",
            "/apis/kueue.x-k8s.io/v1beta2/resourceflavors",  # a Quota's left-over flavors
            "/api/v1/configmaps",
            "/apis/batch/v1/jobs",
            f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads",  # job status
        ]
    )


def test_a_paged_list_follows_continue_tokens_to_the_last_page(kube_api: KubeAPI) -> None:
    client = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))
    namespace = f"{unique_prefix()}paged"
    client.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, "t", False
    )
    for index in range(5):
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"c{index}", "namespace": namespace},
        }
        client.apply(config_map, "t", False)
    kube_api.reset_requests()

    found = client.list(CONFIG_MAP, "", namespace, page=2)

    assert sorted(item["metadata"]["name"] for item in found) == [f"c{i}" for i in range(5)]
    queries = [r.query for r in kube_api.requests]
    assert [q.get("limit") for q in queries] == ["2", "2", "2"]
    assert "continue" not in queries[0] and all(q.get("continue") for q in queries[1:])
