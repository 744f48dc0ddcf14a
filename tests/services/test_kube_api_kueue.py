"""The Kueue stand-in (kube_api/kueue*.py): Workloads for queued Jobs, admission by flavor
quota, borrowing in cohorts, queueing strategies, release, finalizers; through the client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.kueue_quota import Tree

KUEUE, V = "kueue.x-k8s.io", "v1beta2"
GPU = "nvidia.com/gpu"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


class Cluster:
    """Kueue objects and Jobs of one test, with unique names, on the shared server."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self.client = client.ApiClient(api.configuration())
        self.custom = client.CustomObjectsApi(self.client)
        self.batch = client.BatchV1Api(self.client)
        self.namespace = unique("ns")
        client.CoreV1Api(self.client).create_namespace({"metadata": {"name": self.namespace}})

    def flavor(self, name: str, **spec: Any) -> str:
        body = {"apiVersion": f"{KUEUE}/{V}", "kind": "ResourceFlavor"}
        body |= {"metadata": {"name": name}, "spec": spec}
        self.custom.create_cluster_custom_object(KUEUE, V, "resourceflavors", body)
        return name

    def cluster_queue(self, name: str, flavors: dict[str, dict[str, Any]], **spec: Any) -> None:
        """`flavors`: flavor -> {resource: nominal, or a dict of nominalQuota and limits}."""
        covered = sorted({r for quota in flavors.values() for r in quota})
        group = {
            "coveredResources": covered,
            "flavors": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": r, **(q if isinstance(q, dict) else {"nominalQuota": q})}
                        for r, q in sorted(quotas.items())
                    ],
                }
                for flavor, quotas in flavors.items()
            ],
        }
        body = {"apiVersion": f"{KUEUE}/{V}", "kind": "ClusterQueue", "metadata": {"name": name}}
        body["spec"] = {"namespaceSelector": {}, "resourceGroups": [group], **spec}
        self.custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)

    def local_queue(self, name: str, cluster_queue: str) -> None:
        body = {"apiVersion": f"{KUEUE}/{V}", "kind": "LocalQueue", "metadata": {"name": name}}
        body["spec"] = {"clusterQueue": cluster_queue}
        self.custom.create_namespaced_custom_object(KUEUE, V, self.namespace, "localqueues", body)

    def job(self, name: str, queue: str, gpus: int, pods: int = 1, **labels: str) -> None:
        resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, **labels}},
            "spec": {
                "suspend": True,
                "parallelism": pods,
                "completions": pods,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "x:1", "resources": resources}],
                    }
                },
            },
        }
        self.batch.create_namespaced_job(self.namespace, body)

    def workload(self, job: str) -> dict[str, Any]:
        listed = self.custom.list_namespaced_custom_object(KUEUE, V, self.namespace, "workloads")
        found = [w for w in listed["items"] if w["metadata"]["ownerReferences"][0]["name"] == job]
        assert len(found) == 1, f"{len(found)} workloads for job {job}"
        return found[0]  # type: ignore[no-any-return]

    def state(self, job: str) -> tuple[str, str]:
        """(QuotaReserved status/reason, message) of the job's workload."""
        conditions = {c["type"]: c for c in self.workload(job)["status"]["conditions"]}
        reserved = conditions["QuotaReserved"]
        return f"{reserved['status']}/{reserved['reason']}", reserved["message"]

    def suspended(self, job: str) -> bool:
        return bool(self.batch.read_namespaced_job(job, self.namespace).spec.suspend)

    def finish(self, job: str) -> None:
        status = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
        self.batch.patch_namespaced_job_status(job, self.namespace, status)


@pytest.fixture
def cluster(kueue: KubeAPI) -> Iterator[Cluster]:
    before = kueue.snapshot()
    made = Cluster(kueue)
    yield made
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def test_a_queued_job_gets_a_workload_that_is_admitted_and_unsuspends_it(
    cluster: Cluster,
) -> None:
    flavor = cluster.flavor(unique("h100"), nodeLabels={"pool": "h100"})
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 8}})
    cluster.local_queue(lq, cq)
    cluster.job("train", lq, gpus=4, pods=2)
    workload = cluster.workload("train")
    assert workload["metadata"]["name"].startswith("job-train-")
    assert workload["spec"]["podSets"][0]["count"] == 2
    assert workload["spec"]["queueName"] == lq
    assert workload["status"]["admission"] == {
        "clusterQueue": cq,
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {"cpu": flavor, GPU: flavor},
                "resourceUsage": {"cpu": "2", GPU: "8"},
                "count": 2,
            }
        ],
    }
    assert cluster.state("train") == ("True/QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
    job = cluster.batch.read_namespaced_job("train", cluster.namespace)
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {"pool": "h100"}
    queue = cluster.custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", cq)
    assert queue["status"]["admittedWorkloads"] == 1
    assert queue["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]


def test_a_workload_over_the_free_quota_waits_with_kueues_message_until_quota_is_released(
    cluster: Cluster,
) -> None:
    flavor = cluster.flavor(unique("f"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 8}})
    cluster.local_queue(lq, cq)
    cluster.job("first", lq, gpus=6)
    cluster.job("second", lq, gpus=4)
    cluster.job("huge", lq, gpus=12)
    assert cluster.state("second") == (
        "False/Pending",
        f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} "
        f"in flavor {flavor}, 2 more needed",
    )
    assert cluster.state("huge") == (
        "False/Pending",
        f"couldn't assign flavors to pod set main: insufficient quota for {GPU} in flavor "
        f"{flavor}, previously considered podsets requests (0) + current podset request (12) "
        f"> maximum capacity (8)",
    )
    assert cluster.suspended("second")
    cluster.finish("first")
    assert cluster.workload("first")["status"]["conditions"][-1]["type"] == "Finished"
    assert cluster.state("second")[0] == "True/QuotaReserved"
    assert not cluster.suspended("second")


def test_a_missing_local_queue_makes_the_workload_inadmissible(cluster: Cluster) -> None:
    cluster.job("lost", "nowhere", gpus=1)
    assert cluster.state("lost") == ("False/Inadmissible", "LocalQueue nowhere doesn't exist")


@pytest.mark.parametrize(
    ("strategy", "small_admitted"),
    [
        pytest.param("StrictFIFO", False, id="strict"),
        pytest.param("BestEffortFIFO", True, id="best-effort"),
    ],
)
def test_a_head_that_does_not_fit_blocks_only_under_strict_fifo(
    cluster: Cluster, strategy: str, small_admitted: bool
) -> None:
    flavor = cluster.flavor(unique("f"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 4}}, queueingStrategy=strategy)
    cluster.local_queue(lq, cq)
    cluster.job("running", lq, gpus=3)
    cluster.job("big", lq, gpus=4)
    cluster.job("small", lq, gpus=1)
    assert cluster.state("big")[0] == "False/Pending"
    assert (not cluster.suspended("small")) is small_admitted


def test_higher_priority_workloads_are_admitted_first(cluster: Cluster) -> None:
    flavor = cluster.flavor(unique("f"))
    high = unique("high")
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "WorkloadPriorityClass"}
    body |= {"metadata": {"name": high}, "value": 1000}
    cluster.custom.create_cluster_custom_object(KUEUE, V, "workloadpriorityclasses", body)
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 4}}, stopPolicy="Hold")
    cluster.local_queue(lq, cq)
    cluster.job("early", lq, gpus=4)
    cluster.job("urgent", lq, gpus=4, **{"kueue.x-k8s.io/priority-class": high})
    assert cluster.state("early") == ("False/Inadmissible", f"ClusterQueue {cq} is inactive")
    assert cluster.workload("urgent")["spec"]["priority"] == 1000
    cluster.custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", cq, {"spec": {"stopPolicy": "None"}}
    )
    assert cluster.state("urgent")[0] == "True/QuotaReserved"
    assert cluster.state("early")[0] == "False/Pending"


def test_borrowing_in_a_cohort_stops_at_the_borrowing_limit_and_the_lending_limit(
    cluster: Cluster,
) -> None:
    flavor = cluster.flavor(unique("f"))
    cohort = unique("cohort")
    lender, borrower, lq = unique("lender"), unique("borrower"), unique("lq")
    cluster.cluster_queue(
        lender,
        {flavor: {"cpu": 64, GPU: {"nominalQuota": 8, "lendingLimit": 4}}},
        cohortName=cohort,
    )
    cluster.cluster_queue(
        borrower,
        {flavor: {"cpu": 64, GPU: {"nominalQuota": 2, "borrowingLimit": 3}}},
        cohortName=cohort,
    )
    cluster.local_queue(lq, borrower)
    cluster.job("fits", lq, gpus=5)  # 2 own + 3 borrowed
    cluster.job("more", lq, gpus=1)
    assert cluster.state("fits")[0] == "True/QuotaReserved"
    assert cluster.state("more")[1].endswith(f"{GPU} in flavor {flavor}, 1 more needed")
    queue = cluster.custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", borrower)
    usage = {r["name"]: r for r in queue["status"]["flavorsReservation"][0]["resources"]}
    assert usage[GPU] == {"name": GPU, "total": "5", "borrowed": "3"}


def test_a_cohort_object_lends_its_own_quota_to_its_queues(cluster: Cluster) -> None:
    flavor = cluster.flavor(unique("f"))
    cohort = unique("cohort")
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "Cohort", "metadata": {"name": cohort}}
    body["spec"] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": 0},
                            {"name": GPU, "nominalQuota": 6},
                        ],
                    }
                ],
            }
        ]
    }
    cluster.custom.create_cluster_custom_object(KUEUE, V, "cohorts", body)
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 0}}, cohortName=cohort)
    cluster.local_queue(lq, cq)
    cluster.job("borrows", lq, gpus=6)
    cluster.job("beyond", lq, gpus=1)
    assert cluster.state("borrows")[0] == "True/QuotaReserved"
    assert cluster.state("beyond")[0] == "False/Pending"


def test_a_deleted_cluster_queue_stays_terminating_while_a_workload_holds_quota(
    cluster: Cluster,
) -> None:
    flavor = cluster.flavor(unique("f"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 8}})
    cluster.local_queue(lq, cq)
    cluster.job("holder", lq, gpus=2)
    cluster.custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", cq)
    queue = cluster.custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", cq)
    assert queue["metadata"]["deletionTimestamp"]
    active = {c["type"]: c for c in queue["status"]["conditions"]}["Active"]
    assert (active["reason"], active["message"]) == (
        "Terminating",
        "Can't admit new workloads; clusterQueue is terminating",
    )
    cluster.batch.delete_namespaced_job("holder", cluster.namespace)
    with pytest.raises(ApiException) as gone:
        cluster.custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", cq)
    assert gone.value.status == 404
    listed = cluster.custom.list_namespaced_custom_object(KUEUE, V, cluster.namespace, "workloads")
    assert listed["items"] == []


def test_a_flavor_listed_by_a_cluster_queue_and_its_topology_stay_until_it_is_unlisted(
    cluster: Cluster,
) -> None:
    """Kueue's resource-in-use finalizers (kueue_finalizers.py): a deleted flavor waits for
    the last ClusterQueue listing it, a deleted Topology for the last flavor naming it."""
    name = unique("tas")
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology", "metadata": {"name": name}}
    body["spec"] = {"levels": [{"nodeLabel": "block"}, {"nodeLabel": "kubernetes.io/hostname"}]}
    cluster.custom.create_cluster_custom_object(KUEUE, V, "topologies", body)
    cluster.flavor(name, nodeLabels={"pool": "h100"}, topologyName=name)
    spare = cluster.flavor(unique("spare"))
    cq = unique("cq")
    cluster.cluster_queue(cq, {name: {"cpu": 8}, spare: {"cpu": 8}})

    def read(plural: str, which: str) -> dict[str, Any] | None:
        try:
            return cluster.custom.get_cluster_custom_object(KUEUE, V, plural, which)  # type: ignore[no-any-return]
        except ApiException as error:
            assert error.status == 404
            return None

    for plural in ("topologies", "resourceflavors", "clusterqueues"):
        found = read(plural, cq if plural == "clusterqueues" else name)
        assert found is not None and found["metadata"]["finalizers"] == [
            "kueue.x-k8s.io/resource-in-use"
        ]
    cluster.custom.delete_cluster_custom_object(KUEUE, V, "topologies", name)
    cluster.custom.delete_cluster_custom_object(KUEUE, V, "resourceflavors", name)
    for plural in ("topologies", "resourceflavors"):
        held = read(plural, name)
        assert held is not None and held["metadata"]["deletionTimestamp"]
    queue = read("clusterqueues", cq)
    assert queue is not None
    queue["spec"]["resourceGroups"][0]["flavors"] = queue["spec"]["resourceGroups"][0]["flavors"][
        1:
    ]
    cluster.custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", cq, queue)
    assert read("resourceflavors", name) is None
    assert read("topologies", name) is None


def test_the_topology_name_of_a_flavor_cannot_change_or_go(cluster: Cluster) -> None:
    """The CRD's CEL rule: topologyName is immutable once set (and cannot be removed)."""
    name = unique("tas")
    cluster.flavor(name, nodeLabels={"pool": "h100"}, topologyName=name)
    for spec in (
        {"nodeLabels": {"pool": "h100"}},
        {"nodeLabels": {"pool": "h100"}, "topologyName": "x"},
    ):
        flavor = cluster.custom.get_cluster_custom_object(KUEUE, V, "resourceflavors", name)
        flavor["spec"] = spec
        with pytest.raises(ApiException) as refused:
            cluster.custom.replace_cluster_custom_object(KUEUE, V, "resourceflavors", name, flavor)
        assert refused.value.status == 422
        assert "topologyName is immutable when topologyName is set" in refused.value.body


def test_the_quota_tree_follows_kueues_resource_node_arithmetic() -> None:
    def queue(name: str, nominal: int, **limits: int) -> dict[str, Any]:
        resource = {"name": GPU, "nominalQuota": nominal, **limits}
        group = {"coveredResources": [GPU], "flavors": [{"name": "f", "resources": [resource]}]}
        return {"metadata": {"name": name}, "spec": {"cohortName": "c", "resourceGroups": [group]}}

    tree = Tree([queue("a", 4, borrowingLimit=2), queue("b", 8, lendingLimit=4)], [])
    key = ("f", GPU)
    assert (tree.potential("a", key), tree.potential("b", key)) == (6, 12)
    tree.add_usage("a", key, 5)
    assert (tree.available("a", key), tree.available("b", key)) == (1, 7)
    fresh = Tree([queue("a", 4, borrowingLimit=2), queue("b", 8, lendingLimit=4)], [])
    fresh.add_usage("b", key, 6)  # 4 of it stays below b's lending limit: 2 reach the cohort
    assert (fresh.available("a", key), fresh.cohorts["c"].usage[key]) == (6, 2)


def test_a_job_created_running_with_a_queue_name_is_suspended_by_kueues_webhook(
    cluster: Cluster,
) -> None:
    body = {
        "metadata": {"name": "eager", "labels": {"kueue.x-k8s.io/queue-name": "nowhere"}},
        "spec": {
            "suspend": False,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x:1"}]}
            },
        },
    }
    created = cluster.batch.create_namespaced_job(cluster.namespace, body)
    assert created.spec.suspend is True


def test_topology_requests_go_to_topology_flavors_and_plain_jobs_stay_off_them(
    cluster: Cluster,
) -> None:
    topology = unique("topo")
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology", "metadata": {"name": topology}}
    body["spec"] = {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}
    cluster.custom.create_cluster_custom_object(KUEUE, V, "topologies", body)
    tas = cluster.flavor(unique("tas"), nodeLabels={"pool": "tas"}, topologyName=topology)
    plain = cluster.flavor(unique("plain"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {tas: {"cpu": 8, GPU: 8}, plain: {"cpu": 8, GPU: 0}})
    cluster.local_queue(lq, cq)
    cluster.job("plain", lq, gpus=1)
    assert cluster.state("plain") == (
        "False/Pending",
        f'couldn\'t assign flavors to pod set main: Flavor "{tas}" supports only '
        f"TopologyAwareScheduling, insufficient quota for {GPU} in flavor {plain}, previously "
        f"considered podsets requests (0) + current podset request (1) > maximum capacity (0)",
    )
    job = {
        "metadata": {"name": "placed", "labels": {"kueue.x-k8s.io/queue-name": lq}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "rack"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "m", "image": "x:1", "resources": {"limits": {GPU: "2"}}}
                    ],
                },
            },
        },
    }
    cluster.batch.create_namespaced_job(cluster.namespace, job)
    assert cluster.workload("placed")["spec"]["podSets"][0]["topologyRequest"] == {
        "required": "rack"
    }
    assert cluster.state("placed")[0] == "True/QuotaReserved"


def test_pods_of_an_admitted_job_meet_the_resource_quota_only_at_pod_creation(
    cluster: Cluster,
) -> None:
    """The issue-17 failure mode: Kueue admits a 12-GPU job, the 8-GPU ResourceQuota then
    refuses its third pod (the Job controller stand-in records the 403)."""
    flavor = cluster.flavor(unique("f"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: 16}})
    cluster.local_queue(lq, cq)
    quota = {"metadata": {"name": "gpus"}, "spec": {"hard": {f"requests.{GPU}": "8"}}}
    client.CoreV1Api(cluster.client).create_namespaced_resource_quota(cluster.namespace, quota)
    refused = cluster.api.kueue.jobs.refused
    refused.clear()
    cluster.job("wide", lq, gpus=4, pods=3)
    assert cluster.state("wide")[0] == "True/QuotaReserved"
    pods = client.CoreV1Api(cluster.client).list_namespaced_pod(cluster.namespace).items
    assert len(pods) == 2
    assert cluster.batch.read_namespaced_job("wide", cluster.namespace).status.active == 2
    assert refused and refused[-1].endswith(
        f"exceeded quota: gpus, requested: requests.{GPU}=4, used: requests.{GPU}=8, "
        f"limited: requests.{GPU}=8"
    )
    cluster.batch.delete_namespaced_job("wide", cluster.namespace)
    assert client.CoreV1Api(cluster.client).list_namespaced_pod(cluster.namespace).items == []
