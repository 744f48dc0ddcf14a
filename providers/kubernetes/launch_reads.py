"""What submitting an attempt reads of the cluster besides the attempt itself: the pools
its queue admits onto (its Cohort's flavors, their ResourceFlavors and Topologies) and the
time limits of its queue and quota. Called by runs.py at submission; reads only.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.kinds import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    RESOURCE_FLAVOR,
    TOPOLOGY,
)
from trainform.providers.kubernetes.manifests import (
    MAX_RUNTIME_ANNOTATION,
    MAX_WALL_TIME_ANNOTATION,
)
from trainform.providers.kubernetes.naming import Naming, dns_label
from trainform.providers.kubernetes.placement import Placement, duration_seconds, flavor_pool, place


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def read_placement(
    client: KubeClient, naming: Naming, launch: JobLaunch, namespace: str
) -> tuple[Placement, int | None]:
    """The pools the launch can run on (the flavors of its queue's Cohort, their
    ResourceFlavors and Topologies), and the shortest time limit of its queue (the
    Cohort's annotation) and its quota (its project ClusterQueue's, when the Quota is
    applied: the TrainingJob depends on the Queue, not on the Quota)."""
    cohort = client.get(COHORT, naming.cluster_name(launch.queue))
    if cohort is None:
        raise PermanentProviderError(
            f"cannot submit {launch.address}: Cohort {naming.cluster_name(launch.queue)} of "
            f"queue {launch.queue} does not exist (apply the Queue first)"
        )
    local_queue = client.get(LOCAL_QUEUE, dns_label(launch.queue), namespace) or {}
    name = str((local_queue.get("spec") or {}).get("clusterQueue") or "")
    cluster_queue = (client.get(CLUSTER_QUEUE, name) if name else None) or {}
    flavors = {f["metadata"]["name"]: f for f in client.list(RESOURCE_FLAVOR, "")}
    topologies: dict[str, tuple[str, ...]] = {}
    if any((f.get("spec") or {}).get("topologyName") for f in flavors.values()):
        for topology in client.list(TOPOLOGY, ""):
            levels = (topology.get("spec") or {}).get("levels") or []
            topologies[topology["metadata"]["name"]] = tuple(
                str(level.get("nodeLabel")) for level in levels
            )
    pools = []
    for group in (cohort.get("spec") or {}).get("resourceGroups") or []:
        for entry in group.get("flavors") or []:
            flavor = flavors.get(str(entry.get("name")))
            if flavor is not None:
                pools.append(flavor_pool(flavor, topologies))
    per_node = launch.gpus // max(launch.nodes, 1)
    placement = place(pools, per_node, launch.cpu, launch.memory)
    if not placement.pools:
        raise PermanentProviderError(
            f"cannot submit {launch.address}: no pool of queue {launch.queue} has nodes "
            f"with {per_node} accelerators, {launch.cpu} cpu and {launch.memory} memory"
        )
    limits = [
        duration_seconds(_annotations(cohort).get(MAX_RUNTIME_ANNOTATION)),
        duration_seconds(_annotations(cluster_queue).get(MAX_WALL_TIME_ANNOTATION)),
    ]
    return placement, min((limit for limit in limits if limit), default=None)
