"""What an attempt's pods need besides their container: placement on the queue's pools,
topology requests, one pod per node only where it cannot contradict Kueue, the launch
contract's environment, and how failures, disruptions and time limits are handled.
jobs.py assembles the Job from these (docs/distributed.md, docs/kubernetes.md).

- Topology: when the pools the job may run on have topology levels (a Kueue Topology),
  the pod template asks Kueue's topology-aware scheduling (TAS) for them: a multi-node job
  `kueue.x-k8s.io/podset-preferred-topology` at the widest level every pool carries
  (packed into one block when one has room, spread over several when none has), a single
  pod `kueue.x-k8s.io/podset-required-topology` at the narrowest (one host). Kueue places
  a pod set carrying either only on flavors whose Topology has that level, which is why
  placement.py asks for topology only when every pool it keeps has one.
- Placement is Kueue's: TAS packs pods onto nodes by free capacity and pins each pod to
  its node, and ignores pod (anti-)affinities, so a required anti-affinity that forbids
  two pods of the job on one node leaves a pod TAS packed beside another unschedulable,
  its Workload holding the quota. One pod per node is required (anti-affinity over
  `kubernetes.io/hostname` on the Job's `batch.kubernetes.io/job-name` label) only when a
  pod asks for whole nodes: its accelerators per node equal the accelerators per node of
  every pool it may run on, so no placement, TAS's or kube-scheduler's, puts two on one.
- Launch contract (providers/launch.py): a distributed job (more than one process in
  all) gets, per pod, what its launcher reads, the node rank from the completion index
  annotation (a fieldRef), the master on node 0: for torchrun PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT; for another
  command MASTER_ADDR, MASTER_PORT, WORLD_SIZE (all processes), LOCAL_WORLD_SIZE,
  NODE_RANK, GROUP_RANK, and with one process per pod RANK (the index) and LOCAL_RANK 0
  (with several, the launcher of launcher.py sets them per process). Node 0 is
  `<job>-0.<service>.<namespace>.svc` on several nodes (the headless Service below, each
  pod its `subdomain`), 127.0.0.1 on one.
- Failure and disruptions: a distributed job's `podFailurePolicy` first ignores pods
  failed with the condition DisruptionTarget (drain, preemption, node shutdown: the Job
  controller recreates the pod), then fails the Job (FailJob) when the container exits
  non-zero, so one dead worker ends the group at once, the Job's condition naming the pod.
  A single-process job keeps the Ignore rule alone; with `backoffLimit: 0` any other
  failure fails it too. trainform resumes a failed attempt from its latest valid
  checkpoint as a new attempt.
- Time limit: one, `activeDeadlineSeconds`: past it the Job controller deletes the pods
  and fails the Job (reason DeadlineExceeded), a terminal end Kueue sees as the Workload
  Finished (quota released), which status reads as time-limit and the plan retries. Never
  Kueue's `kueue.x-k8s.io/max-exec-time-seconds` as well: it counts from admission, so it
  fires first, and it deactivates the Workload and suspends the Job, which then never
  ends (deactivation.py reads such an end all the same). docs/kubernetes.md has the why.

Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.job_names import pod_address, service_name
from trainform.providers.kubernetes.placement import Placement
from trainform.providers.launch import RENDEZVOUS_PORT, Launch, node_environment

REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
CONTAINER = "main"
SINGLE_NODE_MASTER = "127.0.0.1"
_FROM_INDEX = "\0completion-index"  # a placeholder node rank, become a fieldRef

DISRUPTIONS_IGNORED = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
}
"""A single-process job's podFailurePolicy (as it has always been)."""
GROUP_FAILURE_POLICY = {
    "rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": CONTAINER, "operator": "NotIn", "values": [0]},
        },
    ]
}
"""A distributed job's: disruptions recreate the pod, any other failure fails the group."""


def failure_policy(launch: Launch) -> dict[str, Any]:
    return GROUP_FAILURE_POLICY if launch.distributed else DISRUPTIONS_IGNORED


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


def whole_nodes(placement: Placement, per_node: int) -> bool:
    """Whether a pod asking for `per_node` accelerators takes a whole node of every pool
    it may run on."""
    return bool(per_node and placement.pools) and all(
        pool.accelerators == per_node for pool in placement.pools
    )


def affinity(job: str, placement: Placement, nodes: int, per_node: int = 0) -> dict[str, Any]:
    found: dict[str, Any] = {}
    node_affinity = placement.node_affinity()
    if node_affinity is not None:
        found["nodeAffinity"] = node_affinity
    if nodes > 1 and whole_nodes(placement, per_node):
        found.update(spread_affinity(job))
    return found


def master_address(job: str, namespace: str, launch: Launch) -> str:
    """Node 0 of the job: pod 0 under the headless Service, or this pod on one node."""
    return pod_address(job, namespace) if launch.nodes > 1 else SINGLE_NODE_MASTER


def launch_environment(job: str, namespace: str, launch: Launch) -> list[dict[str, Any]]:
    """The launch contract's variables for every pod of the Job (none for one process)."""
    if not launch.distributed:
        return []
    values = node_environment(launch, _FROM_INDEX, master_address(job, namespace, launch))
    if not launch.torchrun and launch.procs_per_node == 1:
        values |= {"RANK": _FROM_INDEX, "LOCAL_RANK": "0"}
    index = {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    return [
        {"name": name, **(index if value == _FROM_INDEX else {"value": value})}
        for name, value in values.items()
    ]


def contract_names(launch: Launch) -> set[str]:
    """The variables the launch contract sets for the job's processes (none for one)."""
    if not launch.distributed:
        return set()
    names = set(node_environment(launch, 0, SINGLE_NODE_MASTER))
    return names if launch.torchrun else names | {"RANK", "LOCAL_RANK"}


def headless_service(
    job: str, namespace: str, labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """The Service that gives a multi-node job's pods their DNS names."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(job),
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
