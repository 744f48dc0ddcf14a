"""Projection: live Kubernetes objects -> the trainform document they stand for.

The engine diffs `Observation.live` against the document in state, so `live` is the
requested document with every field the provider manages replaced by what the cluster
holds, and nothing else: defaults, status, managedFields and fields trainform does not
manage never show up as drift. The inverse of manifests.py:

- metadata.labels / annotations: the keys the document sets, read from the primary object
  (a label added by hand is not ours; one changed or removed is drift);
- Project: spec.displayName and spec.owners from the namespace's annotations;
- ResourcePool: nodeSelector, tolerations from the ResourceFlavor, topology from the
  Topology, nodes/cpu/memory/accelerator from the trainform.dev/pool annotation;
- Queue: cohort (parentName), pools with their quotas, fairShareWeight and maxRuntime
  (an annotation) from the Cohort; preemption, queueingStrategy, stopPolicy from one of
  its projects' ClusterQueues (as desired when it has none; preemption as the Cohort's
  trainform.dev/preemption annotation declares it while the ClusterQueue holds what that
  renders to, project_queues.cluster_queue_preemption); defaultPriority from the
  WorkloadPriorityClass (0 without one, as Kueue reads it);
- Quota: limits from the project's ClusterQueue (borrowingLimits, the pod count,
  maxWallTime as an annotation), spec.queue from its Cohort when the LocalQueue points
  at it (null when the LocalQueue is gone, so the Quota shows as drifted).

Quantities in any Kubernetes spelling (64, "2k", "21600Gi") come back in trainform's
canonical form. Pure; no I/O.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from trainform.providers.kubernetes.manifests import (
    AMOUNT_FIELDS,
    DISPLAY_NAME_ANNOTATION,
    MAX_RUNTIME_ANNOTATION,
    MAX_WALL_TIME_ANNOTATION,
    OWNERS_ANNOTATION,
    POOL_ANNOTATION,
)
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.project_queues import (
    PODS,
    PREEMPTION_ANNOTATION,
    cluster_queue_preemption,
    declared_preemption,
)
from trainform.specs.quantity import Quantity, parse_quantity

Objects = dict[str, dict[str, Any] | None]


def roles(manifests: list[dict[str, Any]]) -> list[str]:
    """The key of each rendered object in `Objects`: its kind, `Kind#2` for a second one."""
    keys: list[str] = []
    for manifest in manifests:
        count = sum(1 for key in keys if key.split("#")[0] == manifest["kind"])
        keys.append(manifest["kind"] if count == 0 else f"{manifest['kind']}#{count + 1}")
    return keys


def by_role(manifests: list[dict[str, Any]]) -> Objects:
    return dict(zip(roles(manifests), manifests, strict=True))


def canonical(value: Any) -> Any:
    """A Kubernetes quantity as trainform writes it; anything else unchanged."""
    try:
        return Quantity(str(value)).canonical
    except ValueError:
        return value


def _meta(obj: dict[str, Any], field: str) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get(field) or {})


def _project_metadata(live: dict[str, Any], primary: dict[str, Any]) -> None:
    metadata = live.setdefault("metadata", {})
    for field in ("labels", "annotations"):
        wanted = metadata.get(field) or {}
        present = _meta(primary, field)
        metadata[field] = {key: present[key] for key in wanted if key in present}


def _set(spec: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        spec.pop(key, None)
    else:
        spec[key] = value


def project_document(
    kind: str, document: dict[str, Any], objects: Objects, naming: Naming
) -> dict[str, Any] | None:
    """The live form of `document`, or None when its primary object does not exist."""
    project = _PROJECTIONS[kind]
    primary = objects.get(_PRIMARY[kind])
    if primary is None:
        return None
    live = copy.deepcopy(document)
    _project_metadata(live, primary)
    project(live["spec"], objects, naming)
    return live


def _project(spec: dict[str, Any], objects: Objects, naming: Naming) -> None:
    namespace = objects["Namespace"] or {}
    annotations = _meta(namespace, "annotations")
    if DISPLAY_NAME_ANNOTATION not in annotations and OWNERS_ANNOTATION not in annotations:
        return  # a namespace trainform never wrote (imported): no owners recorded on it
    spec["displayName"] = annotations.get(DISPLAY_NAME_ANNOTATION)
    owners = annotations.get(OWNERS_ANNOTATION)
    try:
        spec["owners"] = json.loads(owners) if owners is not None else None
    except ValueError:
        spec["owners"] = owners


def _toleration(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": entry.get("key", ""),
        "operator": entry.get("operator", "Equal"),
        "value": entry.get("value", ""),
        "effect": entry.get("effect", ""),
    }


def _pool(spec: dict[str, Any], objects: Objects, naming: Naming) -> None:
    flavor = objects["ResourceFlavor"] or {}
    flavor_spec = flavor.get("spec") or {}
    spec["nodeSelector"] = dict(flavor_spec.get("nodeLabels") or {})
    spec["tolerations"] = [_toleration(t) for t in flavor_spec.get("tolerations") or []]
    topology = objects.get("Topology")
    levels = ((topology or {}).get("spec") or {}).get("levels") or []
    spec["topology"] = [level.get("nodeLabel") for level in levels]
    recorded = _meta(flavor, "annotations").get(POOL_ANNOTATION)
    if recorded is None:
        return  # a flavor trainform never wrote (imported): the pool's size is not on it
    try:
        facts = json.loads(recorded)
    except ValueError:
        facts = {}
    for key in ("nodes", "cpu", "memory", "accelerator"):
        _set(spec, key, facts.get(key) if isinstance(facts, dict) else None)


def resource_key(name: str) -> str | None:
    """cpu, memory, or gpu for an extended resource (vendor/name: nvidia.com/gpu,
    amd.com/gpu, google.com/tpu); None for what trainform has no amount for (pods...)."""
    if name in ("cpu", "memory"):
        return name
    return "gpu" if "/" in name else None


def _amounts(resources: list[dict[str, Any]], field: str, wanted: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for resource in resources:
        if field not in resource:
            continue
        key = resource_key(resource.get("name", ""))
        if key is None:
            continue
        value = canonical(resource[field])
        if key in found and key == "gpu" and found[key] != "0" and value == "0":
            continue  # the zero quota of another accelerator the group covers
        found[key] = value
    if field == "nominalQuota":
        found = {k: v for k, v in found.items() if k in wanted or v != "0"}
    return found


def _queue_pools(
    cluster_queue: dict[str, Any], desired: list[dict[str, Any]], naming: Naming
) -> list[dict[str, Any]]:
    by_pool = {entry.get("pool"): entry for entry in desired}
    pools = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            name = naming.spec_name(flavor.get("name", "")) or flavor.get("name", "")
            wanted = by_pool.get(name, {})
            entry: dict[str, Any] = {"pool": name}
            for field in AMOUNT_FIELDS:
                amounts = _amounts(flavor.get("resources") or [], field, wanted.get(field) or {})
                if amounts or field in wanted or field == "nominalQuota":
                    entry[field] = amounts
            pools.append(entry)
    return pools


def _queue(spec: dict[str, Any], objects: Objects, naming: Naming) -> None:
    cohort = objects["Cohort"] or {}
    cohort_spec = cohort.get("spec") or {}
    parent = cohort_spec.get("parentName")
    _set(spec, "cohort", (naming.spec_name(parent) or parent) if parent else None)
    spec["pools"] = _queue_pools(cohort, spec.get("pools", []), naming)
    weight = (cohort_spec.get("fairSharing") or {}).get("weight", 1)
    try:
        spec["fairShareWeight"] = float(parse_quantity(str(weight)))
    except ValueError:
        spec["fairShareWeight"] = weight
    _set(spec, "maxRuntime", _meta(cohort, "annotations").get(MAX_RUNTIME_ANNOTATION))
    priority_class = objects.get("WorkloadPriorityClass")
    # Kueue gives a workload without a WorkloadPriorityClass priority 0
    spec["defaultPriority"] = priority_class.get("value") if priority_class else 0
    project_queue = objects.get("ClusterQueue")
    if project_queue is not None:  # the policy lives on the projects' ClusterQueues
        declared = _meta(cohort, "annotations").get(PREEMPTION_ANNOTATION)
        read_queue_policy(spec, project_queue.get("spec") or {}, declared)


def read_queue_policy(
    spec: dict[str, Any], queue_spec: dict[str, Any], declared: str | None = None
) -> None:
    """The Queue's policy from a project ClusterQueue. Its preemption fields are what
    project_queues.cluster_queue_preemption renders, which is not one to one, so the
    preemption reported is the one the Cohort's annotation `declared` records, else the
    one `spec` asks for, when it renders to what the ClusterQueue holds; otherwise the
    ClusterQueue's fields as they are (drift)."""
    preemption = queue_spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    borrowing: dict[str, Any] = {"policy": borrow.get("policy", "Never")}
    if borrow.get("maxPriorityThreshold") is not None:
        borrowing["maxPriorityThreshold"] = borrow["maxPriorityThreshold"]
    live = {
        "withinClusterQueue": preemption.get("withinClusterQueue", "Never"),
        "reclaimWithinCohort": preemption.get("reclaimWithinCohort", "Never"),
        "borrowWithinCohort": borrowing,
    }
    candidates = [declared_preemption(spec)]
    try:
        recorded = json.loads(declared) if declared else None
        if isinstance(recorded, dict):
            candidates.insert(0, declared_preemption({"preemption": recorded}))
    except ValueError:
        pass
    spec["preemption"] = next(
        (c for c in candidates if cluster_queue_preemption(c) == live),
        {
            "withinQueue": live["withinClusterQueue"],
            "reclaimWithinCohort": live["reclaimWithinCohort"],
            "borrowWithinCohort": borrowing,
        },
    )
    spec["queueingStrategy"] = queue_spec.get("queueingStrategy", "BestEffortFIFO")
    spec["stopPolicy"] = queue_spec.get("stopPolicy", "None")


def quota_limits(cluster_queue: dict[str, Any]) -> dict[str, Any]:
    """The project's limits from its ClusterQueue: cpu and memory borrowingLimits of the
    first flavor (they are the same on every flavor) and the pod count (in any resource
    group). The gpu limit is read across the flavors, since a flavor holds a 0 for each
    accelerator its pool does not have (a CPU pool listed first has only 0s): an
    accelerator without a borrowingLimit means no gpu limit; otherwise the largest is it."""
    limits: dict[str, Any] = {}
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    for group in groups:
        for flavor in (group.get("flavors") or [])[:1]:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == PODS:
                    count = parse_quantity(str(resource.get("nominalQuota", 0)))
                    whole = count == count.to_integral()
                    limits["runningJobs"] = int(count) if whole else str(count)
    flavors = (groups[0].get("flavors") or []) if groups else []
    accelerators: list[Any] = []
    unlimited = False
    for index, resource in enumerate(r for f in flavors for r in f.get("resources") or []):
        name = resource.get("name", "")
        if name == PODS:
            continue
        if name in ("cpu", "memory"):
            first = index < len(flavors[0].get("resources") or [])
            if first and "borrowingLimit" in resource:
                limits[name] = canonical(resource["borrowingLimit"])
        elif "borrowingLimit" in resource:
            accelerators.append(resource["borrowingLimit"])
        else:
            unlimited = True
    if accelerators and not unlimited:
        limits["gpu"] = canonical(max(accelerators, key=lambda v: parse_quantity(str(v))))
    return limits


def _quota(spec: dict[str, Any], objects: Objects, naming: Naming) -> None:
    cluster_queue = objects["ClusterQueue"] or {}
    limits = quota_limits(cluster_queue)
    wall = _meta(cluster_queue, "annotations").get(MAX_WALL_TIME_ANNOTATION)
    if wall:
        limits["maxWallTime"] = wall
    spec["limits"] = limits
    local_queue = objects.get("LocalQueue")
    target = ((local_queue or {}).get("spec") or {}).get("clusterQueue")
    cohort = (cluster_queue.get("spec") or {}).get("cohortName")
    queue = (naming.spec_name(cohort) or cohort) if cohort else None
    spec["queue"] = queue if target == (cluster_queue.get("metadata") or {}).get("name") else None


_PRIMARY = {
    "Project": "Namespace",
    "ResourcePool": "ResourceFlavor",
    "Queue": "Cohort",
    "Quota": "ClusterQueue",
}
_PROJECTIONS = {"Project": _project, "ResourcePool": _pool, "Queue": _queue, "Quota": _quota}
