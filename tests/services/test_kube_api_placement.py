"""The stand-in places (kube_api/nodes.py, kueue_tas.py, kueue_flavors.py): Kueue's flavor
assignment matches node affinity, TAS packs a Job's pods into one topology domain by best
fit and pins each pod to its node, and kube-scheduler binds pods only to nodes they fit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.kueue_tas import TOPOLOGY_GATE, decode
from tests.services.kube_api.nodes import add_node
from tests.services.test_kube_api_kueue import GPU, KUEUE, Cluster, V, unique

BLOCK, HOST = "example.com/block", "kubernetes.io/hostname"
NODE = {"cpu": "32", "memory": "256Gi", GPU: "8"}


class Placed(Cluster):
    """A Cluster with nodes, topologies and Jobs that carry pod template details."""

    def topology(self, name: str, levels: list[str]) -> str:
        body = {"apiVersion": f"{KUEUE}/{V}", "kind": "Topology", "metadata": {"name": name}}
        body["spec"] = {"levels": [{"nodeLabel": level} for level in levels]}
        self.custom.create_cluster_custom_object(KUEUE, V, "topologies", body)
        return name

    def nodes(self, pool: str, blocks: dict[str, int], **extra: Any) -> list[str]:
        names = []
        for block, count in blocks.items():
            for i in range(count):
                name = unique(f"{pool}-{block}-{i}")
                labels = {"pool": pool, BLOCK: f"{pool}-{block}"}
                add_node(self.api, name, labels, NODE, **extra)
                names.append(name)
        return names

    def placed_job(
        self, name: str, queue: str, pods: int, annotations: dict[str, str], **spec: Any
    ) -> None:
        resources = {"requests": {"cpu": "4", GPU: "8"}, "limits": {GPU: "8"}}
        container = {"name": "main", "image": "x:1", "resources": resources}
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {
                "suspend": True,
                "completionMode": "Indexed",
                "parallelism": pods,
                "completions": pods,
                "template": {
                    "metadata": {"annotations": annotations},
                    "spec": {"restartPolicy": "Never", "containers": [container], **spec},
                },
            },
        }
        self.batch.create_namespaced_job(self.namespace, body)

    def pods(self, job: str) -> list[dict[str, Any]]:
        core = client.CoreV1Api(self.client)
        listed = core.list_namespaced_pod(
            self.namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
        )
        return [self.client.sanitize_for_serialization(p) for p in listed.items]


@pytest.fixture
def placed(kueue: KubeAPI) -> Iterator[Placed]:
    before = kueue.snapshot()
    made = Placed(kueue)
    yield made
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def _tas_queue(placed: Placed, pool: str) -> str:
    topology = placed.topology(unique("topo"), [BLOCK, HOST])
    flavor = placed.flavor(unique(pool), nodeLabels={"pool": pool}, topologyName=topology)
    queue = unique("cq")
    placed.cluster_queue(queue, {flavor: {"cpu": 1000, GPU: 1000}})
    placed.local_queue("lq", queue)
    return flavor


def test_tas_packs_a_required_block_by_best_fit_and_pins_each_pod_to_its_node(
    placed: Placed,
) -> None:
    pool = unique("gpu")
    _tas_queue(placed, pool)
    big = placed.nodes(pool, {"a": 4})
    small = placed.nodes(pool, {"b": 3})
    required = {"kueue.x-k8s.io/podset-required-topology": BLOCK}

    placed.placed_job("three", "lq", 3, required)
    placed.placed_job("five", "lq", 5, required)

    assert placed.state("three")[0] == "True/QuotaReserved"
    [assignment] = placed.workload("three")["status"]["admission"]["podSetAssignments"]
    domains = decode(assignment["topologyAssignment"])
    assert assignment["topologyAssignment"]["levels"] == [HOST]
    assert sorted(values[0] for values, _ in domains) == sorted(small)  # the tightest block
    pods = placed.pods("three")
    assert len(pods) == 3
    for pod in pods:
        spec = pod["spec"]
        assert TOPOLOGY_GATE not in [g["name"] for g in spec.get("schedulingGates") or []]
        assert spec["nodeName"] == spec["nodeSelector"][HOST]
        assert spec["nodeName"] in small
    assert len({p["spec"]["nodeName"] for p in pods}) == 3
    status, message = placed.state("five")
    assert status == "False/Pending"
    assert "allows to fit only 4 out of 5 pod(s)" in message
    assert big  # five pods never fit one block of four


def test_tas_spreads_a_preferred_request_over_blocks_when_none_holds_it(
    placed: Placed,
) -> None:
    pool = unique("gpu")
    _tas_queue(placed, pool)
    first = placed.nodes(pool, {"a": 4})
    second = placed.nodes(pool, {"b": 2})

    placed.placed_job("wide", "lq", 5, {"kueue.x-k8s.io/podset-preferred-topology": BLOCK})

    nodes = sorted(p["spec"]["nodeName"] for p in placed.pods("wide"))
    assert len(nodes) == 5 and len(set(nodes)) == 5
    assert set(first) <= set(nodes) and len(set(nodes) & set(second)) == 1


def test_flavor_assignment_matches_node_affinity_and_the_scheduler_binds_where_it_fits(
    placed: Placed,
) -> None:
    a100, h100 = unique("a100"), unique("h100")
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    first = placed.flavor(
        a100,
        nodeLabels={"pool": a100},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    second = placed.flavor(h100, nodeLabels={"pool": h100})
    queue = unique("cq")
    placed.cluster_queue(queue, {first: {"cpu": 100, GPU: 100}, second: {"cpu": 100, GPU: 100}})
    placed.local_queue("lq", queue)
    [tainted] = placed.nodes(a100, {"a": 1}, taints=[taint])
    [plain] = placed.nodes(h100, {"a": 1})
    only_h100 = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": [h100]}]}
                ]
            }
        }
    }

    placed.placed_job("picky", "lq", 1, {}, affinity=only_h100)
    placed.placed_job("first", "lq", 1, {})
    placed.placed_job("second", "lq", 1, {})

    flavors = placed.workload("picky")["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors == {"cpu": second, GPU: second}  # the first flavor misses its affinity
    [picky] = placed.pods("picky")
    assert picky["spec"]["nodeName"] == plain
    [pod] = placed.pods("first")  # a100, tolerating the taint through the flavor
    assert pod["spec"]["nodeName"] == tainted
    [late] = placed.pods("second")  # admitted on a100, whose only node is full
    assert not late["spec"].get("nodeName")
    [scheduled] = [c for c in late["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["reason"] == "Unschedulable"
    assert "0/" in scheduled["message"] and "Insufficient nvidia.com/gpu" in scheduled["message"]


def test_a_topology_pod_set_may_count_pods_on_a_flavor_without_topology(
    placed: Placed,
) -> None:
    """hasOverlapWithPodRequestedResources: a flavor without a Topology in a group the pods
    request nothing of (Kueue's `pods` count) does not keep a TAS pod set out."""
    pool = unique("gpu")
    topology = placed.topology(unique("topo"), [BLOCK, HOST])
    tas = placed.flavor(unique(pool), nodeLabels={"pool": pool}, topologyName=topology)
    count = placed.flavor(unique("jobs"))
    queue = unique("cq")
    groups = [
        {
            "coveredResources": ["cpu", GPU],
            "flavors": [
                {
                    "name": tas,
                    "resources": [
                        {"name": "cpu", "nominalQuota": 100},
                        {"name": GPU, "nominalQuota": 100},
                    ],
                }
            ],
        },
        {
            "coveredResources": ["pods"],
            "flavors": [{"name": count, "resources": [{"name": "pods", "nominalQuota": 4}]}],
        },
    ]
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "ClusterQueue", "metadata": {"name": queue}}
    body["spec"] = {"namespaceSelector": {}, "resourceGroups": groups}
    placed.custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    placed.local_queue("lq", queue)
    placed.nodes(pool, {"a": 2})

    placed.placed_job("counted", "lq", 2, {"kueue.x-k8s.io/podset-required-topology": BLOCK})

    assert placed.state("counted")[0] == "True/QuotaReserved"
    [assigned] = placed.workload("counted")["status"]["admission"]["podSetAssignments"]
    assert assigned["flavors"] == {"cpu": tas, GPU: tas, "pods": count}
    assert sum(n for _, n in decode(assigned["topologyAssignment"])) == 2
