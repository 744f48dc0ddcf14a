"""Which pools a job's pods may use (placement.py) and what its pod template asks of Kueue
and the scheduler (pods.py): topology requests, one pod per node, rendezvous, disruptions
and time limits. Pure; rendered objects are checked against the client's models."""

from __future__ import annotations

import pytest
from trainform.providers.kubernetes import pods
from trainform.providers.kubernetes.jobs import job_manifest
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import Placement, Pool, place, pool_from_facts

from tests.providers.kubernetes.schemas import check_manifest
from tests.providers.kubernetes.test_manifests import _launch

BLOCK = ("example.com/block", "kubernetes.io/hostname")
SUBBLOCK = ("example.com/block", "example.com/subblock", "kubernetes.io/hostname")


def _pool(name: str, resource: str | None, count: int, topology: tuple[str, ...] = ()) -> Pool:
    accelerator = {"type": name, "count": count, "resourceName": resource} if resource else None
    facts = {"cpu": "64", "memory": str(512 * 2**30), "accelerator": accelerator}
    return pool_from_facts(name, facts, {"example.com/pool": name}, topology)


QUEUE = [
    _pool("plain-h100", "nvidia.com/gpu", 8),
    _pool("tas-h100", "nvidia.com/gpu", 8, BLOCK),
    _pool("mi300", "amd.com/gpu", 8, BLOCK),
    _pool("cpu", None, 0),
]


@pytest.mark.parametrize(
    ("pools", "per_node", "cpu", "expected"),
    [
        pytest.param(QUEUE, 8, "8", ["plain-h100"], id="topology-and-plain-never-mixed"),
        pytest.param(QUEUE[1:], 8, "8", ["tas-h100"], id="first-fit-resource-only"),
        pytest.param(QUEUE, 0, "8", ["plain-h100", "cpu"], id="cpu-job-on-plain-pools"),
        pytest.param(QUEUE, 9, "8", [], id="no-node-large-enough"),
        pytest.param(QUEUE, 1, "65", [], id="more-cpu-than-a-node"),
        pytest.param([QUEUE[1], QUEUE[3]], 0, "8", ["cpu"], id="cpu-job-off-a-topology-gpu-pool"),
        pytest.param(
            [QUEUE[1], _pool("sub-h100", "nvidia.com/gpu", 8, SUBBLOCK)],
            8,
            "8",
            ["tas-h100", "sub-h100"],
            id="topology-pools-sharing-levels-all-kept",
        ),
        pytest.param(
            [QUEUE[1], _pool("rack", "nvidia.com/gpu", 8, ("example.com/rack",)), QUEUE[1]],
            8,
            "8",
            ["tas-h100", "tas-h100"],
            id="topologies-sharing-no-level-keep-the-first-ones",
        ),
    ],
)
def test_a_job_is_placed_on_the_fitting_pools_of_one_resource_kueue_admits_it_on(
    pools: list[Pool], per_node: int, cpu: str, expected: list[str]
) -> None:
    placement = place(pools, per_node, cpu, "1Gi")

    assert [pool.name for pool in placement.pools] == expected


def test_a_multi_node_job_on_topology_pools_asks_kueue_for_a_block_one_pod_per_node() -> None:
    placement = place(QUEUE[1:], 8, "16", "64Gi")
    job = job_manifest(Naming("trainform", "ml-"), _launch(), placement, "train", 7200)

    check_manifest(job)
    name, spec = job["metadata"]["name"], job["spec"]
    template = spec["template"]
    assert template["metadata"]["annotations"] == {pods.PREFERRED_TOPOLOGY: BLOCK[0]}
    assert spec["podFailurePolicy"] == pods.GROUP_FAILURE_POLICY
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in job["metadata"]["labels"]  # one limit
    assert spec["activeDeadlineSeconds"] == 7200
    pod = template["spec"]
    assert pod["subdomain"] == name
    [spread] = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == {pods.JOB_NAME_LABEL: name}
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["MASTER_ADDR"]["value"] == f"{name}-0.{name}.ml-vision.svc"
    assert (env["MASTER_PORT"]["value"], env["WORLD_SIZE"]["value"]) == ("29500", "16")
    assert env["LOCAL_WORLD_SIZE"]["value"] == "8"
    assert "job-completion-index" in env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"


def test_pods_asking_for_part_of_a_node_leave_placement_to_kueue() -> None:
    """TAS packs two 4-GPU pods onto one 8-GPU node and pins them there; a required
    anti-affinity would leave the second unschedulable, its Workload holding the quota."""
    placement = place(QUEUE[1:], 4, "16", "64Gi")
    job = job_manifest(Naming(), _launch(gpus=8), placement, None)

    check_manifest(job)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert "podAntiAffinity" not in pod["affinity"]
    assert pods.whole_nodes(placement, 8) and not pods.whole_nodes(placement, 4)
    assert not pods.whole_nodes(Placement(()), 8)


def test_a_single_pod_on_a_topology_pool_requires_one_host_and_gets_no_rendezvous() -> None:
    placement = place(QUEUE[1:2], 8, "16", "64Gi")
    job = job_manifest(Naming(), _launch(nodes=1, gpus=8, procs_per_node=1), placement, None)

    check_manifest(job)
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {pods.REQUIRED_TOPOLOGY: BLOCK[-1]}
    assert "subdomain" not in template["spec"]
    assert "podAntiAffinity" not in template["spec"]["affinity"]
    assert "MASTER_ADDR" not in {e["name"] for e in template["spec"]["containers"][0]["env"]}
    assert "activeDeadlineSeconds" not in job["spec"]
    assert job["spec"]["podFailurePolicy"] == pods.DISRUPTIONS_IGNORED


def test_a_single_pod_of_several_processes_meets_on_itself() -> None:
    job = job_manifest(Naming(), _launch(nodes=1, gpus=8), Placement(()), None)

    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert "subdomain" not in pod
    assert (env["MASTER_ADDR"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == (
        "127.0.0.1",
        "8",
        "8",
    )
    assert pod["containers"][0]["command"][:2] == ["sh", "-c"]


def test_pools_without_node_labels_get_no_node_affinity() -> None:
    bare = Pool("bare", "nvidia.com/gpu", 8, None, None)

    assert Placement((bare,)).node_affinity() is None


def test_the_headless_service_selects_the_jobs_pods() -> None:
    service = pods.headless_service("resnet-1", "ml-vision", {"a": "b"}, {})

    check_manifest(service)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {pods.JOB_NAME_LABEL: "resnet-1"}


def test_pools_of_different_topologies_are_asked_for_a_level_they_all_carry() -> None:
    """examples/platform's finetune queue: a100 (block, host) before h100 (block,
    sub-block, host); Kueue may use either when the request names a level both have."""
    pools = [QUEUE[1], _pool("sub-h100", "nvidia.com/gpu", 8, SUBBLOCK)]
    placement = place(pools, 8, "16", "64Gi")

    assert placement.topology == BLOCK
    assert pods.topology_annotations(placement, 2) == {pods.PREFERRED_TOPOLOGY: BLOCK[0]}
    assert pods.topology_annotations(placement, 1) == {pods.REQUIRED_TOPOLOGY: BLOCK[-1]}
    terms = placement.node_affinity()["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["matchExpressions"][0]["values"] for t in terms["nodeSelectorTerms"]] == [
        ["tas-h100"],
        ["sub-h100"],
    ]
