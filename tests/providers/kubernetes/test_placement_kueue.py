"""Placement end to end: the provider's rendered Jobs, admitted by the Kueue stand-in's flavor
assignment and topology-aware scheduling, their pods bound to the stand-in's nodes.

- examples/platform's finetune queue (a100 before h100, different topologies): a fine-tune
  that fits an A100 runs on the A100s and, once its project's A100 quota is used up, on
  the H100 quota, as the example's comment says, each packed into a topology block.
- a queue of a topology GPU pool and a CPU pool: a CPU job lands on the CPU pool (no
  topology request, so Kueue keeps it off the topology flavor), a GPU job on the GPU pool
  with a topology assignment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainform.providers.kubernetes import pods
from trainform.providers.kubernetes.jobs import job_name
from trainform.providers.kubernetes.kinds import JOB, WORKLOAD
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import kubernetes_config, unique_prefix
from tests.providers.kubernetes.test_jobs import launch
from tests.services.kube_api import KubeAPI
from tests.services.kube_api.nodes import add_node

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "platform"
BLOCK = "cloud.google.com/gce-topology-block"
SUBBLOCK = "cloud.google.com/gce-topology-subblock"
HOST = "kubernetes.io/hostname"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _documents(relative: str, wanted: set[tuple[str, str]]) -> str:
    """The example's documents of these (kind, name), as written there."""
    found = [
        d
        for d in yaml.safe_load_all((EXAMPLE / relative).read_text(encoding="utf-8"))
        if d and (d["kind"], d["metadata"]["name"]) in wanted
    ]
    assert len(found) == len(wanted), (relative, wanted)
    return yaml.safe_dump_all(found, sort_keys=False)


def _folder(root: Path, api: KubeAPI, prefix: str, files: dict[str, str]) -> SpecFolder:
    root.mkdir(parents=True)
    config = kubernetes_config(api, prefix).replace("name: k8s", "name: gke-prod")
    (root / "trainform.yaml").write_text(config, encoding="utf-8")
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    folder = SpecFolder(root)
    folder.converge()
    return folder


def _provider(folder: SpecFolder) -> KubernetesProvider:
    provider = folder.providers().get("gke-prod")
    assert isinstance(provider, KubernetesProvider)
    return provider


def _nodes(
    api: KubeAPI,
    prefix: str,
    labels: dict[str, str],
    blocks: dict[tuple[str, ...], int],
    capacity: dict[str, str],
    taints: list[dict[str, str]] | None = None,
) -> list[str]:
    """Nodes of one pool; `blocks`: (block[, sub-block]) -> how many nodes."""
    names = []
    for where, count in blocks.items():
        for i in range(count):
            name = f"{prefix}{'-'.join(where)}-{i}"
            placed = {BLOCK: where[0], **({SUBBLOCK: where[1]} if len(where) > 1 else {})}
            add_node(api, name, {**labels, **placed}, capacity, taints)
            names.append(name)
    return names


def _attempt(
    provider: KubernetesProvider, namespace: str, name: str, **changes: Any
) -> dict[str, Any]:
    """Submit through the provider; the Job it rendered and the Workload Kueue made of it."""
    address = f"TrainingJob/{changes['project']}/{name}"
    submitted = launch(address=address, run_id=f"r-{name}", **changes)
    provider.submit(submitted)
    job = provider.client.get(JOB, job_name(submitted), namespace)
    assert job is not None
    [workload] = [
        w
        for w in provider.client.list(WORKLOAD, "", namespace)
        if w["metadata"]["ownerReferences"][0]["name"] == job["metadata"]["name"]
    ]
    return {"job": job, "workload": workload, "name": job["metadata"]["name"]}


def _pod_nodes(api: KubeAPI, namespace: str, job: str) -> list[str]:
    found = [
        p
        for p in api.store.items("", "pods", namespace)
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job
    ]
    return sorted(str((p.get("spec") or {}).get("nodeName") or "") for p in found)


@pytest.fixture
def finetune(tmp_path: Path, kueue: KubeAPI) -> Iterator[tuple[SpecFolder, str]]:
    prefix = unique_prefix()
    files = {
        "platform/pools.yaml": _documents(
            "platform/pools.yaml", {("ResourcePool", "h100"), ("ResourcePool", "a100")}
        ),
        "platform/queues.yaml": _documents("platform/queues.yaml", {("Queue", "finetune")}),
        "platform/projects.yaml": _documents(
            "platform/projects.yaml", {("Project", "llm-pretrain")}
        ),
        "teams/llm-pretrain/quotas.yaml": _documents(
            "teams/llm-pretrain/quotas.yaml", {("Quota", "finetune")}
        ),
    }
    folder = _folder(tmp_path / "specs", kueue, prefix, files)
    yield folder, prefix
    folder.close()


def test_a_finetune_that_fits_an_a100_spills_onto_the_h100_quota_when_the_a100s_are_full(
    finetune: tuple[SpecFolder, str], kueue: KubeAPI
) -> None:
    folder, prefix = finetune
    provider = _provider(folder)
    namespace = f"{prefix}llm-pretrain"
    a100 = {
        "cloud.google.com/gke-accelerator": "nvidia-a100-80gb",
        "cloud.google.com/gke-nodepool": "a100-train",
    }
    h100 = {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-nodepool": "h100-train",
    }
    a100_nodes = _nodes(
        kueue,
        f"{prefix}a",
        a100,
        {("a1",): 6, ("a2",): 4},
        {"cpu": "90", "memory": "1300Gi", "nvidia.com/gpu": "8"},
        [GPU_TAINT],
    )
    h100_nodes = _nodes(
        kueue,
        f"{prefix}h",
        h100,
        {("h1", "s1"): 2, ("h1", "s2"): 2},
        {"cpu": "200", "memory": "1800Gi", "nvidia.com/gpu": "8"},
        [GPU_TAINT],
    )
    sft = dict(project="llm-pretrain", queue="finetune", cpu="80", memory=str(1200 * 2**30))

    first = _attempt(provider, namespace, "sft-a", nodes=8, gpus=64, **sft)  # the A100 limit
    second = _attempt(provider, namespace, "sft-b", nodes=2, gpus=16, **sft)

    template = second["job"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {pods.PREFERRED_TOPOLOGY: BLOCK}
    terms = template["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    pools = {e["values"][0] for t in terms for e in t["matchExpressions"]}
    assert {"a100-train", "h100-train"} <= pools  # both pools, a100 first
    flavors = [
        {
            a["flavors"]["nvidia.com/gpu"]
            for a in w["workload"]["status"]["admission"]["podSetAssignments"]
        }
        for w in (first, second)
    ]
    assert flavors == [{f"{prefix}a100"}, {f"{prefix}h100"}]
    first_nodes = _pod_nodes(kueue, namespace, first["name"])
    assert len(set(first_nodes)) == 8 and set(first_nodes) <= set(a100_nodes)
    assert set(a100_nodes[:6]) <= set(first_nodes)  # no block holds 8: the largest, then best fit
    second_nodes = _pod_nodes(kueue, namespace, second["name"])
    assert len(set(second_nodes)) == 2 and set(second_nodes) <= set(h100_nodes)
    assert set(second_nodes) == set(h100_nodes[:2])  # one block, one sub-block


CPU_AND_GPU = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: gpu}
spec:
  provider: gke-prod
  nodes: 2
  accelerator: {type: nvidia-h100-80gb, count: 8}
  cpu: 200
  memory: 1800Gi
  nodeSelector: {example.com/pool: gpu}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  topology: [cloud.google.com/gce-topology-block, kubernetes.io/hostname]
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: cpu}
spec:
  provider: gke-prod
  nodes: 2
  cpu: 32
  memory: 128Gi
  nodeSelector: {example.com/pool: cpu}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: mixed}
spec:
  pools:
    - pool: gpu
      nominalQuota: {gpu: 16, cpu: 400, memory: 3600Gi}
    - pool: cpu
      nominalQuota: {cpu: 64, memory: 256Gi}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: vision}
spec: {owners: [leads@example.com]}
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: mixed, project: vision}
spec: {queue: mixed, limits: {gpu: 16}}
"""


def test_a_cpu_job_lands_on_the_cpu_pool_of_a_queue_with_a_topology_gpu_pool(
    tmp_path: Path, kueue: KubeAPI
) -> None:
    prefix = unique_prefix()
    folder = _folder(tmp_path / "specs", kueue, prefix, {"platform.yaml": CPU_AND_GPU})
    provider = _provider(folder)
    namespace = f"{prefix}vision"
    gpu_nodes = _nodes(
        kueue,
        f"{prefix}g",
        {"example.com/pool": "gpu"},
        {("b1",): 2},
        {"cpu": "200", "memory": "1800Gi", "nvidia.com/gpu": "8"},
        [GPU_TAINT],
    )
    cpu_nodes = _nodes(
        kueue,
        f"{prefix}c",
        {"example.com/pool": "cpu"},
        {("c1",): 2},
        {"cpu": "32", "memory": "128Gi"},
    )
    try:
        cpu_job = _attempt(
            provider,
            namespace,
            "prep",
            project="vision",
            queue="mixed",
            nodes=1,
            gpus=0,
            cpu="4",
            memory=str(8 * 2**30),
        )
        gpu_job = _attempt(
            provider,
            namespace,
            "train",
            project="vision",
            queue="mixed",
            nodes=1,
            gpus=8,
            cpu="16",
            memory=str(64 * 2**30),
        )
    finally:
        folder.close()

    template = cpu_job["job"]["spec"]["template"]
    assert not (template["metadata"].get("annotations") or {})  # no topology request
    [assigned] = cpu_job["workload"]["status"]["admission"]["podSetAssignments"]
    assert set(assigned["flavors"].values()) == {f"{prefix}cpu"}
    assert _pod_nodes(kueue, namespace, cpu_job["name"])[0] in cpu_nodes
    [assigned] = gpu_job["workload"]["status"]["admission"]["podSetAssignments"]
    assert set(assigned["flavors"].values()) == {f"{prefix}gpu"}
    assert assigned["topologyAssignment"]["levels"] == [HOST]
    assert _pod_nodes(kueue, namespace, gpu_job["name"])[0] in gpu_nodes
