"""Render: the Kubernetes objects a trainform resource becomes. Pure; no I/O.

    Project      -> Namespace `<namespacePrefix><name>` (labels; display name and owners
                    as annotations; label trainform.dev/project that ClusterQueues select)
    ResourcePool -> ResourceFlavor (nodeLabels, tolerations, topologyName) and, when the
                    pool lists topology levels, a Topology of the same name; nodes, cpu,
                    memory and the accelerator as the annotation trainform.dev/pool
    Queue        -> Cohort `<namePrefix><name>` holding the queue's quota (one resource
                    group whose flavors are the pools, nominalQuota, borrowingLimit and
                    lendingLimit against the parent Cohort `spec.cohort`, fairSharing)
                    and a WorkloadPriorityClass of the queue's defaultPriority; the
                    declared preemption as the annotation trainform.dev/preemption
    Quota        -> a ClusterQueue in that Cohort for the project, and the LocalQueue
                    (named as the queue) through which the project's jobs reach it
                    (project_queues.py: the project's limits are its borrowingLimits)

Quantities are written in trainform's canonical form (plain numbers: "2400", memory in
bytes); the API server and projection.py read any Kubernetes spelling back. Each manifest
carries the ownership marks of naming.py. Callers pass `gpu_names`: the extended resource
name of each pool's accelerator (default nvidia.com/gpu), from the pools' outputs.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.providers.kubernetes import project_queues
from trainform.providers.kubernetes.kinds import KUEUE
from trainform.providers.kubernetes.naming import PROJECT_LABEL, Naming
from trainform.providers.kubernetes.project_queues import (
    PREEMPTION_ANNOTATION,
    declared_preemption,
    queue_policy,
)

DEFAULT_GPU = "nvidia.com/gpu"
DISPLAY_NAME_ANNOTATION = "trainform.dev/display-name"
OWNERS_ANNOTATION = "trainform.dev/owners"
POOL_ANNOTATION = "trainform.dev/pool"
MAX_RUNTIME_ANNOTATION = "trainform.dev/max-runtime"
MAX_WALL_TIME_ANNOTATION = project_queues.MAX_WALL_TIME_ANNOTATION
AMOUNT_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")
Manifests = list[dict[str, Any]]


def object_metadata(
    naming: Naming,
    address: str,
    kind: str,
    name: str,
    document: dict[str, Any],
    namespace: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    user = document.get("metadata") or {}
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {**user.get("labels", {}), **naming.labels(address, kind)},
        "annotations": {
            **user.get("annotations", {}),
            **(annotations or {}),
            **naming.annotations(address),
        },
    }
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def render_project(naming: Naming, address: str, name: str, document: dict[str, Any]) -> Manifests:
    spec = document["spec"]
    metadata = object_metadata(
        naming,
        address,
        "Project",
        naming.namespace(name),
        document,
        annotations={
            DISPLAY_NAME_ANNOTATION: spec.get("displayName", ""),
            OWNERS_ANNOTATION: json.dumps(spec.get("owners", [])),
        },
    )
    metadata["labels"][PROJECT_LABEL] = name
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}]


def pool_facts(spec: dict[str, Any]) -> dict[str, Any]:
    """What a ResourceFlavor cannot say about a pool, kept as an annotation."""
    facts = {key: spec[key] for key in ("nodes", "cpu", "memory") if key in spec}
    if spec.get("accelerator"):
        facts["accelerator"] = spec["accelerator"]
    return facts


def toleration(entry: dict[str, Any]) -> dict[str, Any]:
    out = {"key": entry["key"], "operator": entry.get("operator", "Equal")}
    if entry.get("value"):
        out["value"] = entry["value"]
    if entry.get("effect"):
        out["effect"] = entry["effect"]
    return out


def render_pool(naming: Naming, address: str, name: str, document: dict[str, Any]) -> Manifests:
    spec = document["spec"]
    flavor_name = naming.cluster_name(name)
    metadata = object_metadata(
        naming,
        address,
        "ResourcePool",
        flavor_name,
        document,
        annotations={POOL_ANNOTATION: json.dumps(pool_facts(spec), sort_keys=True)},
    )
    flavor_spec: dict[str, Any] = {}
    if spec.get("nodeSelector"):
        flavor_spec["nodeLabels"] = dict(spec["nodeSelector"])
    if spec.get("tolerations"):
        flavor_spec["tolerations"] = [toleration(t) for t in spec["tolerations"]]
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": metadata, "spec": flavor_spec}
    ]
    if spec.get("topology"):
        flavor_spec["topologyName"] = flavor_name
        objects.append(
            {
                "apiVersion": KUEUE,
                "kind": "Topology",
                "metadata": object_metadata(naming, address, "ResourcePool", flavor_name, document),
                "spec": {"levels": [{"nodeLabel": level} for level in spec["topology"]]},
            }
        )
    return objects


def is_accelerator(resource: str) -> bool:
    """An extended resource (vendor/name: nvidia.com/gpu, amd.com/gpu,
    nvidia.com/mig-1g.10gb), as opposed to cpu, memory or pods."""
    return "/" in resource


def covered_resources(spec: dict[str, Any], gpu_names: dict[str, str]) -> list[str]:
    """cpu, memory, then the accelerator resource of every pool that has an accelerator
    (or whose entry sets a GPU amount), in the order the pools are listed."""
    accelerators: list[str] = []
    for entry in spec["pools"]:
        resource = gpu_names.get(entry["pool"])
        if resource is None and any("gpu" in (entry.get(f) or {}) for f in AMOUNT_FIELDS):
            resource = DEFAULT_GPU
        if resource is not None and resource not in accelerators:
            accelerators.append(resource)
    return ["cpu", "memory", *accelerators]


def _flavor_quotas(
    entry: dict[str, Any], covered: list[str], gpu_name: str
) -> list[dict[str, Any]]:
    resources = []
    for resource in covered:
        key = resource if resource in ("cpu", "memory") else "gpu"
        if key == "gpu" and resource != gpu_name:
            amounts: dict[str, Any] = {"nominalQuota": "0"}
        else:
            amounts = {"nominalQuota": str(entry["nominalQuota"].get(key, "0"))}
            for field in ("borrowingLimit", "lendingLimit"):
                value = (entry.get(field) or {}).get(key)
                if value is not None:
                    amounts[field] = str(value)
        resources.append({"name": resource, **amounts})
    return resources


def queue_facts(
    naming: Naming, spec: dict[str, Any], gpu_names: dict[str, str] | None = None
) -> dict[str, Any]:
    """What a Queue's projects' ClusterQueues need of it (project_queues.QueueFacts)."""
    names = gpu_names or {}
    covered = covered_resources(spec, names)
    accelerators = [r for r in covered if is_accelerator(r)]
    return {
        "flavors": [entry["pool"] for entry in spec["pools"]],
        "resourceNames": {
            entry["pool"]: names.get(entry["pool"], DEFAULT_GPU)
            for entry in spec["pools"]
            if names.get(entry["pool"], DEFAULT_GPU) in accelerators
        },
        "policy": queue_policy(spec),
    }


def render_queue(
    naming: Naming,
    address: str,
    name: str,
    document: dict[str, Any],
    gpu_names: dict[str, str] | None = None,
) -> Manifests:
    """The queue's Cohort (its quota, shared by its projects' ClusterQueues) and its
    WorkloadPriorityClass."""
    spec = document["spec"]
    names = gpu_names or {}
    covered = covered_resources(spec, names)
    cohort_spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [
                    {
                        "name": naming.cluster_name(entry["pool"]),
                        "resources": _flavor_quotas(
                            entry, covered, names.get(entry["pool"], DEFAULT_GPU)
                        ),
                    }
                    for entry in spec["pools"]
                ],
            }
        ],
        "fairSharing": {"weight": format_weight(spec.get("fairShareWeight", 1.0))},
    }
    if spec.get("cohort"):
        cohort_spec["parentName"] = naming.cluster_name(spec["cohort"])
    extra = {MAX_RUNTIME_ANNOTATION: spec["maxRuntime"]} if spec.get("maxRuntime") else {}
    extra[PREEMPTION_ANNOTATION] = json.dumps(declared_preemption(spec), sort_keys=True)
    cluster_name = naming.cluster_name(name)
    return [
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": object_metadata(
                naming, address, "Queue", cluster_name, document, None, extra
            ),
            "spec": cohort_spec,
        },
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": object_metadata(naming, address, "Queue", cluster_name, document),
            "value": spec.get("defaultPriority", 0),
            "description": f"default priority of trainform queue {name}",
        },
    ]


def format_weight(weight: float) -> str:
    text = repr(float(weight))
    return text[:-2] if text.endswith(".0") else text


def render_quota(
    naming: Naming,
    address: str,
    name: str,
    project: str,
    document: dict[str, Any],
    facts: dict[str, Any] | None = None,
) -> Manifests:
    return project_queues.render_quota(
        naming, address, name, project, document, facts or {}, object_metadata
    )
