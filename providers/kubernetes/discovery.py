"""discover(): the Kueue objects of a cluster written as trainform specs (import --from).

- ResourceFlavor -> ResourcePool: nodeSelector from nodeLabels, tolerations, topology from
  its Topology's levels. nodes, cpu, memory and accelerator (required by trainform) come
  from trainform's own annotation when the flavor was written by trainform; else from the
  Nodes whose labels match nodeLabels (count, allocatable cpu and memory, accelerator
  count and resource name); else, with no Node to read, from the largest quota a
  ClusterQueue grants on the flavor, as one node holding it all (the comment says so).
- Cohort -> Queue (trainform's layout, project_queues.py): parent cohort, pools and
  quotas, fair-sharing weight from the Cohort; preemption, queueing strategy and stop
  policy from a ClusterQueue in it; defaultPriority from the WorkloadPriorityClass of the
  same name (0 without one). A Cohort with no quota that is only another's parent is a
  trainform `spec.cohort`, not a Queue.
- LocalQueue -> Quota `<local queue>` of the Project its namespace stands for (namespace
  minus namespacePrefix), when its ClusterQueue is in a queue's Cohort; limits from that
  ClusterQueue (borrowingLimits, pod count). Each such namespace -> Project (owners from
  trainform's annotation, else the namespace itself as a placeholder owner to edit).
  A ClusterQueue laid out otherwise (holding quota of its own, as many clusters set up
  by hand are) has no trainform equivalent and is not imported.

Identifiers name the primary object: `ResourceFlavor/<name>`, `Cohort/<name>`,
`LocalQueue/<namespace>/<name>`, `Namespace/<name>`. Read-only.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from trainform.providers.base import Discovered
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.kinds import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    NAMESPACE,
    NODE,
    RESOURCE_FLAVOR,
    TOPOLOGY,
    WORKLOAD_PRIORITY_CLASS,
)
from trainform.providers.kubernetes.manifests import OWNERS_ANNOTATION, POOL_ANNOTATION
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import flavor_pool
from trainform.providers.kubernetes.project_queues import PODS, queue_policy
from trainform.providers.kubernetes.projection import (
    canonical,
    project_document,
    read_queue_policy,
    resource_key,
)
from trainform.specs.quantity import parse_quantity

_EMPTY_QUEUE = {"pools": []}


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _namespace(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


def _document(
    kind: str, name: str, spec: dict[str, Any], project: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if project:
        metadata["project"] = project
    return {"apiVersion": "trainform/v1", "kind": kind, "metadata": metadata, "spec": spec}


def _nodes(client: KubeClient) -> list[dict[str, Any]]:
    try:
        return client.list(NODE)
    except PermanentProviderError:
        return []  # nodes not listable with these credentials


def _pool_facts(
    flavor: dict[str, Any], nodes: list[dict[str, Any]], quotas: dict[str, dict[str, str]]
) -> tuple[dict[str, Any], str]:
    annotation = ((flavor.get("metadata") or {}).get("annotations") or {}).get(POOL_ANNOTATION)
    if annotation:
        try:
            return json.loads(annotation), "from trainform's annotation"
        except ValueError:
            pass
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    matching = [
        n
        for n in nodes
        if all(
            ((n.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in wanted.items()
        )
    ]
    if matching:
        allocatable = (matching[0].get("status") or {}).get("allocatable") or {}
        facts: dict[str, Any] = {
            "nodes": len(matching),
            "cpu": canonical(allocatable.get("cpu", "1")),
            "memory": canonical(allocatable.get("memory", "1")),
        }
        for resource, amount in allocatable.items():
            if resource.endswith("/gpu") and 0 < _number(amount) <= 64:
                facts["accelerator"] = {
                    "type": wanted.get("cloud.google.com/gke-accelerator", resource.split("/")[0]),
                    "count": int(_number(amount)),
                    "resourceName": resource,
                }
        return facts, f"from {len(matching)} matching nodes"
    quota = quotas.get(_name(flavor), {})
    facts = {"nodes": 1, "cpu": quota.get("cpu", "1"), "memory": quota.get("memory", "1")}
    if _number(quota.get("gpu", "0")) >= 1:
        facts["accelerator"] = {
            "type": "gpu",
            "count": min(int(_number(quota["gpu"])), 64),
            "resourceName": quota.get("gpuName", "nvidia.com/gpu"),
        }
    return facts, "nodes, cpu, memory: no node readable, sized from the largest queue quota"


def _number(value: Any) -> Decimal:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return Decimal(0)


def _left_out(queue: dict[str, Any]) -> str:
    names = sorted(
        {
            name
            for group in (queue.get("spec") or {}).get("resourceGroups") or []
            for name in group.get("coveredResources") or []
            if resource_key(name) is None and name != PODS
        }
    )
    return (
        f"left out covered resources trainform has no amount for: {', '.join(names)}"
        if names
        else ""
    )


def _largest_quotas(queues: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    largest: dict[str, dict[str, str]] = {}
    for queue in queues:
        for group in (queue.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                entry = largest.setdefault(flavor.get("name", ""), {})
                for resource in flavor.get("resources") or []:
                    name = resource.get("name", "")
                    key = resource_key(name)
                    if key is None:
                        continue
                    value = canonical(resource.get("nominalQuota", "0"))
                    if _number(value) >= _number(entry.get(key, "0")):
                        entry[key] = value
                        if key == "gpu":
                            entry["gpuName"] = name
    return largest


def live_queue_facts(
    client: KubeClient, naming: Naming, queue: str, cluster_queue: dict[str, Any] | None
) -> dict[str, Any]:
    """A Queue's facts (project_queues.QueueFacts) read from the cluster, for adopting a
    Quota whose Queue has no outputs yet: the pools of its Cohort, each pool's
    accelerator from its ResourceFlavor, the policy of the ClusterQueue adopted."""
    cohort = client.get(COHORT, naming.cluster_name(queue)) or {}
    flavors = {_name(f): f for f in client.list(RESOURCE_FLAVOR)}
    pools: list[str] = []
    names: dict[str, str] = {}
    for group in (cohort.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            pool = naming.spec_name(str(flavor.get("name", ""))) or str(flavor.get("name", ""))
            pools.append(pool)
            found = flavors.get(str(flavor.get("name", "")))
            resource = flavor_pool(found, {}).resource_name if found else None
            if resource:
                names[pool] = resource
    spec: dict[str, Any] = {}
    if cluster_queue is not None:
        read_queue_policy(spec, cluster_queue.get("spec") or {})
    return {"flavors": pools, "resourceNames": names, "policy": queue_policy(spec)}


def discover_documents(client: KubeClient, naming: Naming, instance: str) -> list[Discovered]:
    flavors = client.list(RESOURCE_FLAVOR)
    topologies = {_name(t): t for t in client.list(TOPOLOGY)}
    cohorts = client.list(COHORT)
    queues = {_name(q): q for q in client.list(CLUSTER_QUEUE)}
    priorities = {_name(p): p for p in client.list(WORKLOAD_PRIORITY_CLASS)}
    local_queues = client.list(LOCAL_QUEUE)
    namespaces = {_name(n): n for n in client.list(NAMESPACE)}
    nodes = _nodes(client) if flavors else []
    largest = _largest_quotas([*cohorts, *queues.values()])
    members: dict[str, list[dict[str, Any]]] = {}
    for queue in queues.values():
        members.setdefault(str((queue.get("spec") or {}).get("cohortName", "")), []).append(queue)
    parents = {str((c.get("spec") or {}).get("parentName", "")) for c in cohorts}
    found: list[Discovered] = []
    for flavor in flavors:
        name = naming.spec_name(_name(flavor))
        if name is None:
            continue
        facts, source = _pool_facts(flavor, nodes, largest)
        spec = {"provider": instance, **facts}
        objects = {"ResourceFlavor": flavor, "Topology": topologies.get(_name(flavor))}
        document = _document("ResourcePool", name, spec)
        projected = project_document(
            "ResourcePool", {"metadata": {}, "spec": dict(spec)}, objects, naming
        )
        document["spec"] = {**(projected or {}).get("spec", {}), **spec}
        if not document["spec"].get("topology"):
            document["spec"].pop("topology", None)
        found.append(Discovered(document, f"ResourceFlavor/{_name(flavor)}", source))
    for cohort in cohorts:
        name = naming.spec_name(_name(cohort))
        groups = (cohort.get("spec") or {}).get("resourceGroups")
        if name is None or (not groups and _name(cohort) in parents):
            continue  # only the parent of other queues: a trainform `spec.cohort`
        objects = {
            "Cohort": cohort,
            "WorkloadPriorityClass": priorities.get(_name(cohort)),
            "ClusterQueue": (members.get(_name(cohort)) or [None])[0],
        }
        projected = project_document(
            "Queue", {"metadata": {}, "spec": {**_EMPTY_QUEUE, **queue_policy({})}}, objects, naming
        )
        spec = (projected or {}).get("spec", {})
        if spec.get("defaultPriority") is None:
            spec["defaultPriority"] = 0
        found.append(
            Discovered(_document("Queue", name, spec), f"Cohort/{_name(cohort)}", _left_out(cohort))
        )
    projects: set[str] = set()
    for local_queue in local_queues:
        namespace = _namespace(local_queue)
        project = naming.project_of(namespace)
        target = queues.get(str((local_queue.get("spec") or {}).get("clusterQueue", "")))
        cohort = str(((target or {}).get("spec") or {}).get("cohortName", ""))
        if project is None or target is None or naming.spec_name(cohort) is None:
            continue  # not a project's queue in a trainform queue's Cohort
        if project not in projects:
            projects.add(project)
            found.append(_project(namespaces.get(namespace), project))
        objects = {"ClusterQueue": target, "LocalQueue": local_queue}
        projected = project_document("Quota", {"metadata": {}, "spec": {}}, objects, naming) or {
            "spec": {}
        }
        found.append(
            Discovered(
                _document("Quota", _name(local_queue), projected["spec"], project),
                f"LocalQueue/{namespace}/{_name(local_queue)}",
                _left_out(target),
            )
        )
    return found


def _project(namespace: dict[str, Any] | None, project: str) -> Discovered:
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    try:
        owners = json.loads(annotations.get(OWNERS_ANNOTATION, "[]")) or []
    except ValueError:
        owners = []
    comment = "" if owners else "owners: the namespace's name stands in; set the real owners"
    spec = {
        "displayName": annotations.get("trainform.dev/display-name", ""),
        "owners": owners or [project],
    }
    name = _name(namespace or {}) or project
    return Discovered(_document("Project", project, spec), f"Namespace/{name}", comment)
