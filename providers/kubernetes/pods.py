"""What an attempt's pods need besides their container: placement on the queue's pools,
topology requests, one pod per node, rendezvous for multi-node training, and how
disruptions and time limits are handled. jobs.py assembles the Job from these.

- Topology: when the pools the job may run on have topology levels (a Kueue Topology),
  the pod template asks Kueue's topology-aware scheduling for them: a multi-node job
  `kueue.x-k8s.io/podset-preferred-topology` at the widest level (packed into one block
  when one has room, spread over several when none has), a single pod
  `kueue.x-k8s.io/podset-required-topology` at the narrowest (one host). Kueue places a
  pod set carrying either only on flavors with a topology, which is why placement.py
  never mixes pools with and without one.
- One pod per node: a multi-node job's pods repel each other on `kubernetes.io/hostname`
  (required pod anti-affinity on the Job's `batch.kubernetes.io/job-name` label).
- Rendezvous: a multi-node job gets a headless Service named as the Job, selecting its
  pods, and each pod the `subdomain` of that Service, so pod `<job>-<index>` resolves as
  `<job>-<index>.<job>.<namespace>.svc`. MASTER_ADDR is index 0's name, MASTER_PORT
  29500 (torch.distributed's default), WORLD_SIZE the number of nodes, RANK and
  NODE_RANK the pod's completion index.
- Disruptions: a `podFailurePolicy` that ignores pods failed with the condition
  DisruptionTarget (drain, preemption, node shutdown): the Job controller recreates the
  pod instead of failing the attempt; any other failure fails it (`backoffLimit: 0`,
  trainform resumes from a checkpoint as a new attempt).
- Time limits: the label `kueue.x-k8s.io/max-exec-time-seconds` (Kueue counts admitted
  time, across requeues, and evicts the Workload past it) and `activeDeadlineSeconds`
  (the Job controller fails it with DeadlineExceeded, which status reads as time-limit).

Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.placement import Placement

RENDEZVOUS_PORT = 29500
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

DISRUPTIONS_IGNORED = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
}


def topology_annotations(placement: Placement, nodes: int) -> dict[str, str]:
    levels = placement.topology
    if not levels:
        return {}
    if nodes > 1:
        return {PREFERRED_TOPOLOGY: levels[0]}
    return {REQUIRED_TOPOLOGY: levels[-1]}


def spread_affinity(job: str) -> dict[str, Any]:
    """Required pod anti-affinity: no two pods of the Job on one node."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {JOB_NAME_LABEL: job}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


def affinity(job: str, placement: Placement, nodes: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    node_affinity = placement.node_affinity()
    if node_affinity is not None:
        found["nodeAffinity"] = node_affinity
    if nodes > 1:
        found.update(spread_affinity(job))
    return found


def rendezvous_environment(job: str, namespace: str, nodes: int) -> list[dict[str, Any]]:
    """MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and NODE_RANK of a multi-node job."""
    if nodes <= 1:
        return []
    index = {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    return [
        {"name": "MASTER_ADDR", "value": f"{job}-0.{job}.{namespace}.svc"},
        {"name": "MASTER_PORT", "value": str(RENDEZVOUS_PORT)},
        {"name": "WORLD_SIZE", "value": str(nodes)},
        {"name": "RANK", **index},
        {"name": "NODE_RANK", **index},
    ]


def headless_service(
    job: str, namespace: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """The Service that gives a multi-node job's pods their DNS names."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": job,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_NAME_LABEL: job},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
        },
    }
