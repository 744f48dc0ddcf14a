"""What the Kubernetes API server, Kueue's CRD rules and Kueue's scheduler would refuse, or
never admit, found at plan time so apply never fails half-way. Called by kueue_rules.py;
each problem names the field (the engine adds file:line).

One resource at a time (`limit_problems`):

- ResourcePool: more than 8 nodeSelector labels or tolerations (ResourceFlavor
  `nodeLabels` maxProperties, `tolerations` maxItems), more than 16 topology levels
  (Topology `levels` maxItems), a toleration key that is not a qualified name;
- Queue: a defaultPriority above 1,000,000,000 (the largest value a PriorityClass outside
  `system-` may have), a queue whose PriorityClass name would start with `system-`
  (reserved), a maxPriorityThreshold outside int32;
- TrainingJob: a priority outside int32 (WorkloadPriorityClass `value`).

Across resources (`queue_size_problems`, `job_fit_problems`):

- a ClusterQueue with more than 512 flavor x resource pairs (Kueue's webhook limit);
- a job whose pods fit no node of any pool of its queue (accelerators, cpu or memory per
  node), or whose accelerators exceed what every pool it fits can ever admit: the queue's
  nominalQuota plus its borrowingLimit, or without one, what the other queues of its
  cohort hold on that pool (lendingLimit or nominalQuota). A cohort queue with no
  accelerator quota of its own and none to borrow keeps a GPU job pending forever.

Pure; no I/O.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import fits, pool_from_facts
from trainform.specs.quantity import parse_quantity

MAX_NODE_LABELS = 8
MAX_TOLERATIONS = 8
MAX_TOPOLOGY_LEVELS = 16
MAX_FLAVOR_RESOURCES = 512
MAX_USER_PRIORITY = 1_000_000_000
INT32 = (-(2**31), 2**31 - 1)
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
Found = list[tuple[str, str]]


def qualified_name(text: str) -> bool:
    """A Kubernetes qualified name: `[prefix/]name`, prefix a DNS subdomain."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def _int32(value: Any) -> bool:
    return isinstance(value, int) and INT32[0] <= value <= INT32[1]


def _pool_limits(spec: dict[str, Any]) -> Found:
    found: Found = []
    if len(spec.get("nodeSelector") or {}) > MAX_NODE_LABELS:
        found.append(
            ("spec.nodeSelector", f"a ResourceFlavor holds at most {MAX_NODE_LABELS} nodeLabels")
        )
    tolerations = spec.get("tolerations") or []
    if len(tolerations) > MAX_TOLERATIONS:
        found.append(
            ("spec.tolerations", f"a ResourceFlavor holds at most {MAX_TOLERATIONS} tolerations")
        )
    for index, toleration in enumerate(tolerations):
        key = toleration.get("key") or ""
        if key and not qualified_name(key):
            found.append(
                (
                    f"spec.tolerations[{index}].key",
                    f"{key!r} is not a qualified name ([prefix/]name, name at most 63 "
                    "characters of letters, digits, '-', '_' and '.')",
                )
            )
    if len(spec.get("topology") or []) > MAX_TOPOLOGY_LEVELS:
        found.append(
            ("spec.topology", f"a Kueue Topology holds at most {MAX_TOPOLOGY_LEVELS} levels")
        )
    return found


def _queue_limits(resource: DesiredResource, naming: Naming) -> Found:
    spec = resource.spec
    found: Found = []
    priority = spec.get("defaultPriority", 0)
    if isinstance(priority, int) and priority > MAX_USER_PRIORITY:
        found.append(
            (
                "spec.defaultPriority",
                f"{priority} is above {MAX_USER_PRIORITY:,}, the highest priority Kubernetes "
                "allows a PriorityClass outside the system- classes",
            )
        )
    name = naming.cluster_name(resource.name)
    if name.startswith("system-"):
        found.append(
            (
                "metadata.name",
                f"PriorityClass {name!r}: names starting with system- are reserved by Kubernetes",
            )
        )
    threshold = ((spec.get("preemption") or {}).get("borrowWithinCohort") or {}).get(
        "maxPriorityThreshold"
    )
    if threshold is not None and not _int32(threshold):
        found.append(
            (
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                f"{threshold} does not fit a 32-bit integer",
            )
        )
    return found


def limit_problems(resource: DesiredResource, naming: Naming) -> Found:
    if resource.kind == "ResourcePool":
        return _pool_limits(resource.spec)
    if resource.kind == "Queue":
        return _queue_limits(resource, naming)
    if resource.kind == "TrainingJob":
        priority = resource.spec.get("priority")
        if priority is not None and not _int32(priority):
            return [
                (
                    "spec.priority",
                    f"{priority} does not fit a 32-bit integer (a WorkloadPriorityClass value)",
                )
            ]
    return []


def _accelerator(pool: dict[str, Any]) -> str | None:
    accelerator = pool.get("accelerator") or {}
    return (accelerator.get("resourceName") or "nvidia.com/gpu") if accelerator else None


def queue_size_problems(
    queue: DesiredResource, pools: dict[str, dict[str, Any]]
) -> list[ValidationProblem]:
    entries = queue.spec.get("pools", [])
    accelerators = {_accelerator(pools.get(e.get("pool"), {})) for e in entries} - {None}
    pairs = len(entries) * (2 + len(accelerators))
    if pairs <= MAX_FLAVOR_RESOURCES:
        return []
    return [
        ValidationProblem(
            queue.address,
            "spec.pools",
            f"{len(entries)} pools x {2 + len(accelerators)} resources = {pairs} flavor "
            f"resource pairs; Kueue accepts at most {MAX_FLAVOR_RESOURCES} in a ClusterQueue",
        )
    ]


def _amount(entry: dict[str, Any] | None, field: str) -> Decimal | None:
    value = ((entry or {}).get(field) or {}).get("gpu")
    if value is None:
        return None
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None


def _capacity(
    queue: dict[str, Any], entry: dict[str, Any], queues: list[dict[str, Any]]
) -> Decimal:
    """The most accelerators the queue can ever admit on the entry's pool."""
    nominal = _amount(entry, "nominalQuota") or Decimal(0)
    if not queue.get("cohort"):
        return nominal
    lent = Decimal(0)
    for other in queues:
        if other is queue or other.get("cohort") != queue["cohort"]:
            continue
        for theirs in other.get("pools", []):
            if theirs.get("pool") == entry.get("pool"):
                lending = _amount(theirs, "lendingLimit")
                lent += lending if lending is not None else _amount(theirs, "nominalQuota") or 0
    borrowing = _amount(entry, "borrowingLimit")
    return nominal + (lent if borrowing is None else min(borrowing, lent))


def job_fit_problems(
    job: DesiredResource,
    queue: dict[str, Any],
    pools: dict[str, dict[str, Any]],
    queues: list[dict[str, Any]],
) -> list[ValidationProblem]:
    wanted = job.spec.get("resources") or {}
    per_node = int(wanted.get("acceleratorsPerNode", 0))
    total = per_node * int(wanted.get("nodes", 1))
    cpu, memory = wanted.get("cpu"), wanted.get("memory")
    entries = [e for e in queue.get("pools", []) if e.get("pool") in pools]
    if not entries:
        return []
    name = job.spec.get("queue", "")
    fitting = [
        e for e in entries if fits(pool_from_facts(e["pool"], pools[e["pool"]]), 0, cpu, memory)
    ]
    if not fitting:
        return [
            ValidationProblem(
                job.address,
                "spec.resources",
                f"cpu {cpu} and memory {memory} per node: no pool of queue {name} has nodes "
                "that large, so Kueue would find no flavor for its pods",
            )
        ]
    fitting = [
        e
        for e in fitting
        if fits(pool_from_facts(e["pool"], pools[e["pool"]]), per_node, cpu, memory)
    ]
    if not fitting:
        return [
            ValidationProblem(
                job.address,
                "spec.resources.acceleratorsPerNode",
                f"{per_node} accelerators per node: no pool of queue {name} has nodes that "
                "large, so its pods would never be scheduled",
            )
        ]
    if not total:
        return []
    limits = [_capacity(queue, entry, queues) for entry in fitting]
    if all(total > limit for limit in limits):
        cohort = f" or borrow from cohort {queue['cohort']}" if queue.get("cohort") else ""
        return [
            ValidationProblem(
                job.address,
                "spec.resources",
                f"{total} accelerators in all: more than queue {name} can ever admit on the "
                f"pools its pods fit (at most {max(limits)} of its own quota{cohort}); Kueue "
                "would keep it pending forever",
            )
        ]
    return []
