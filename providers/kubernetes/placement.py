"""Placement: which pools of its queue a job can run on, and what its pods must ask for.

A pod names one accelerator resource (nvidia.com/gpu, amd.com/gpu,
nvidia.com/mig-1g.10gb...), and Kueue admits a pod set only onto a flavor that has quota
for every resource it requests and whose nodeLabels agree with the pod's node affinity.
So a job on a queue with several accelerator types must request the resource of a pool
whose nodes can hold one of its pods, and say which pools those are:

- the candidates are the queue's pools in the queue's order (the order Kueue tries its
  flavors in) whose nodes have at least the job's accelerators, cpu and memory per node
  (a CPU-only job fits any pool with the cpu and memory);
- the job requests the accelerator resource of the first candidate, and its pods get a
  required node affinity with one term per candidate of that resource (each term the
  pool's nodeSelector), so neither Kueue nor kube-scheduler place them on a pool of the
  same resource whose nodes are too small;
- topology-aware scheduling (TAS) is asked for only where it costs no pool, as Kueue's
  flavor assigner decides (pkg/scheduler/flavorassigner/tas_flavorassigner.go,
  checkPodSetAndFlavorMatchForTAS): a pod set with a topology request is admitted only
  on flavors with a Topology carrying the requested level ('does not support
  TopologyAwareScheduling', 'does not contain the requested level'), one without a
  request only on flavors without a Topology ('supports only TopologyAwareScheduling')
  unless every flavor of the ClusterQueue has one. So when every candidate has a
  Topology, all are kept and the request names a level they all carry (`topology`: the
  levels common to all, widest first; pods.py picks one); when some have none, the job
  asks for no topology and keeps the candidates without one, the only ones Kueue would
  admit it on (a CPU job on a queue of a topology GPU pool and a CPU pool goes to the
  CPU pool); candidates whose topologies share no level keep those that share one with
  the first.

`Pool` is what a ResourceFlavor written by this provider says of its pool (the annotation
trainform.dev/pool, its nodeLabels, its Topology). Pure; no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainform.providers.kubernetes.manifests import DEFAULT_GPU, POOL_ANNOTATION
from trainform.specs.quantity import Duration, parse_quantity


@dataclass(frozen=True)
class Pool:
    name: str
    resource_name: str | None
    """The accelerator's extended resource name; None for a CPU-only pool."""
    accelerators: int
    cpu: Decimal | None
    memory: Decimal | None
    node_labels: dict[str, str] = field(default_factory=dict)
    topology: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    pools: tuple[Pool, ...]
    """The pools the job's pods may run on, all with the same accelerator resource."""

    @property
    def resource_name(self) -> str | None:
        return self.pools[0].resource_name if self.pools else None

    @property
    def topology(self) -> tuple[str, ...]:
        """The topology levels every pool carries (widest first, as the first pool lists
        them); empty when a pool has no topology."""
        return common_levels(self.pools)

    def node_affinity(self) -> dict[str, Any] | None:
        """A required node affinity naming the pools, or None when a pool has no labels
        (it selects every node, so no term can narrow it)."""
        if not self.pools or any(not pool.node_labels for pool in self.pools):
            return None
        terms = [
            {
                "matchExpressions": [
                    {"key": key, "operator": "In", "values": [value]}
                    for key, value in sorted(pool.node_labels.items())
                ]
            }
            for pool in self.pools
        ]
        return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None


def pool_from_facts(
    name: str,
    facts: dict[str, Any],
    node_labels: dict[str, str] | None = None,
    topology: tuple[str, ...] = (),
) -> Pool:
    """A Pool from the trainform.dev/pool annotation's facts (or a ResourcePool's spec)."""
    accelerator = facts.get("accelerator") or {}
    return Pool(
        name=name,
        resource_name=(accelerator.get("resourceName") or DEFAULT_GPU) if accelerator else None,
        accelerators=int(accelerator.get("count") or 0),
        cpu=_quantity(facts["cpu"]) if "cpu" in facts else None,
        memory=_quantity(facts["memory"]) if "memory" in facts else None,
        node_labels=dict(node_labels or {}),
        topology=tuple(topology),
    )


def flavor_pool(flavor: dict[str, Any], topologies: dict[str, tuple[str, ...]]) -> Pool:
    """A Pool from a live ResourceFlavor (and the Topologies by name)."""
    metadata = flavor.get("metadata") or {}
    spec = flavor.get("spec") or {}
    try:
        facts = json.loads((metadata.get("annotations") or {}).get(POOL_ANNOTATION, "{}"))
    except ValueError:
        facts = {}
    return pool_from_facts(
        str(metadata.get("name")),
        facts if isinstance(facts, dict) else {},
        spec.get("nodeLabels") or {},
        topologies.get(str(spec.get("topologyName")), ()) if spec.get("topologyName") else (),
    )


def duration_seconds(text: str | None) -> int | None:
    """Seconds of a trainform duration (`36h`), None when unset or unreadable."""
    try:
        return Duration(text).seconds if text else None
    except ValueError:
        return None


def fits(pool: Pool, per_node: int, cpu: Any, memory: Any) -> bool:
    """Whether one node of the pool holds one pod of the job (unknown sizes fit)."""
    if per_node and (pool.resource_name is None or pool.accelerators < per_node):
        return False
    wanted_cpu, wanted_memory = _quantity(cpu), _quantity(memory)
    if pool.cpu is not None and wanted_cpu is not None and wanted_cpu > pool.cpu:
        return False
    return not (
        pool.memory is not None and wanted_memory is not None and wanted_memory > pool.memory
    )


def common_levels(pools: tuple[Pool, ...] | list[Pool]) -> tuple[str, ...]:
    """The topology levels every pool has, in the first pool's order; empty for none."""
    if not pools or any(not pool.topology for pool in pools):
        return ()
    return tuple(
        level for level in pools[0].topology if all(level in pool.topology for pool in pools)
    )


def _topology_kept(candidates: list[Pool]) -> list[Pool]:
    """The candidates Kueue admits one pod set on: all of them when each has a Topology
    and they share a level, else those without a Topology (no request), else those
    sharing a level with the first."""
    if any(not pool.topology for pool in candidates):
        return [pool for pool in candidates if not pool.topology]
    kept: list[Pool] = []
    for pool in candidates:
        if common_levels([*kept, pool]):
            kept.append(pool)
    return kept


def place(pools: list[Pool], per_node: int, cpu: Any, memory: Any) -> Placement:
    """The pools (of the first fitting pool's accelerator resource) the job may run on;
    empty when none fits."""
    candidates = [pool for pool in pools if fits(pool, per_node, cpu, memory)]
    if not candidates:
        return Placement(())
    first = candidates[0]
    same_resource = [
        pool for pool in candidates if not per_node or pool.resource_name == first.resource_name
    ]
    return Placement(tuple(_topology_kept(same_resource)))
