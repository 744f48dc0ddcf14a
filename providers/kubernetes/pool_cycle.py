"""Deleting and re-creating a pool's ResourceFlavor and Topology the way Kueue lets them go.

Kueue puts the finalizer `kueue.x-k8s.io/resource-in-use` on every ResourceFlavor and
Topology and removes it from a deleted one only when nothing uses it any more
(pkg/controller/core/resourceflavor_controller.go: no ClusterQueue lists the flavor;
pkg/controller/tas/topology_controller.go: no ResourceFlavor names the Topology). A
flavor's `topologyName` and (before Kueue v0.17) a Topology's levels are immutable (CEL
rules of their CRDs), so a pool whose topology changes is deleted and created again under
the same names, and that only finishes when the flavor is first taken out of every
ClusterQueue that lists it. The steps, each shown in the plan (`steps`):

1. detach: take the flavor out of each project ClusterQueue listing it, recording what
   was taken out in the annotation `trainform.dev/detached-flavors` of that ClusterQueue
   (so a re-run after a crash still knows what to put back);
2. delete the ResourceFlavor, then its Topology, and wait until both are gone;
3. create them as the spec says (the provider's server-side apply);
4. re-attach: put the recorded entries back into each ClusterQueue whose queue (its
   Cohort) still lists the flavor, and drop the record.

A ClusterQueue listing the flavor that is not this trainform's is never changed: the
replacement stops before anything is deleted and says which. Writes to a ClusterQueue are
the same write the Quota makes (a server-side apply of all trainform applied to it, by
its field manager: one write mechanism per field, so trainform never conflicts with
itself) and carry its resourceVersion, so two pools replaced at once on one queue never
lose each other's change (a conflict is read again and retried). Called by provider.py.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.providers.base import Observation
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.applied import applied_configuration
from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.kinds import BY_KIND, CLUSTER_QUEUE, COHORT
from trainform.providers.kubernetes.naming import DOMAIN, Naming
from trainform.providers.kubernetes.project_queues import QUEUE_LABEL
from trainform.providers.kubernetes.terminating import (
    IN_USE_FINALIZER,
    is_terminating,
    listed_flavors,
    wait_gone,
)

DETACHED_ANNOTATION = f"{DOMAIN}/detached-flavors"
RETRIES = 5


def steps(flavor: str, topology: str | None, holders: list[str] | None) -> list[str]:
    """The plan's lines for deleting and re-creating a pool's objects; `holders`: the
    ClusterQueues that list the flavor (None: not read, plan without refresh)."""
    objects = f"ResourceFlavor {flavor}" + (f" and Topology {topology}" if topology else "")
    queues = (
        "every ClusterQueue that lists it"
        if holders is None
        else "ClusterQueue " + ", ".join(holders)
    )
    found = [
        f"detach flavor {flavor} from {queues} (Kueue keeps a flavor while a ClusterQueue "
        f"lists it: finalizer {IN_USE_FINALIZER})",
        f"delete {objects} and wait until Kueue has let them go",
        f"create {objects} as the spec says",
        f"re-attach flavor {flavor} to {queues}, as they were",
    ]
    if holders == []:
        found = found[1:3]
    return [f"step {i}/{len(found)}: {line}" for i, line in enumerate(found, 1)]


def planned_steps(
    rendered: list[dict[str, Any]], action: str, observation: Observation | None
) -> list[str]:
    """`steps` for a pool's planned change: a replace, or any change while one of its
    objects is Terminating (as observed)."""
    terminating = observation is not None and any(
        f.kind == "object-terminating" for f in observation.findings
    )
    if action != "replace" and not terminating:
        return []
    topology = rendered[1]["metadata"]["name"] if len(rendered) > 1 else None
    holders = observation.status.get("listedBy") if observation is not None else None
    return steps(rendered[0]["metadata"]["name"], topology, holders)


def _record(queue: dict[str, Any]) -> dict[str, Any]:
    text = ((queue.get("metadata") or {}).get("annotations") or {}).get(DETACHED_ANNOTATION)
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        found = {}
    return found if isinstance(found, dict) else {}


def _patch(
    client: KubeClient, manager: str, queue: dict[str, Any], groups: list, record: dict
) -> None:
    """The write the Quota and the Queue make too (queue_sync.py): a server-side apply of
    everything this manager applied to the ClusterQueue, with the new resource groups and
    record, pinned to the resourceVersion read."""
    config = applied_configuration(queue, manager)
    metadata = config["metadata"]
    metadata["resourceVersion"] = queue["metadata"].get("resourceVersion")
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(DETACHED_ANNOTATION, None)
    if record:
        annotations[DETACHED_ANNOTATION] = json.dumps(record, sort_keys=True)
    metadata["annotations"] = annotations
    config["spec"] = {**(config.get("spec") or {}), "resourceGroups": groups}
    client.apply(config, manager, False)


def _retrying(client: KubeClient, name: str, change: Any) -> None:
    """Run `change(queue)` on the live ClusterQueue, again on a fresh read when another
    write came in between (a 409 on the resourceVersion it carried)."""
    for attempt in range(RETRIES):
        queue = client.get(CLUSTER_QUEUE, name)
        if queue is None:
            return
        try:
            change(queue)
            return
        except PermanentProviderError:
            fresh = client.get(CLUSTER_QUEUE, name)
            same = (fresh or {}).get("metadata", {}).get("resourceVersion")
            if attempt == RETRIES - 1 or same == queue["metadata"].get("resourceVersion"):
                raise


def _take_out(client: KubeClient, manager: str, flavor: str, queue: dict[str, Any]) -> None:
    record = _record(queue)
    groups: list[dict[str, Any]] = []
    taken: list[dict[str, Any]] = []
    for index, group in enumerate((queue.get("spec") or {}).get("resourceGroups") or []):
        flavors = group.get("flavors") or []
        for position, entry in enumerate(flavors):
            if entry.get("name") == flavor:
                taken.append(
                    {
                        "group": index,
                        "coveredResources": group.get("coveredResources") or [],
                        "position": position,
                        "entry": entry,
                    }
                )
        kept = [entry for entry in flavors if entry.get("name") != flavor]
        if kept:
            groups.append({**group, "flavors": kept})
    if not taken:
        return
    record.setdefault(flavor, taken)
    _patch(client, manager, queue, groups, record)


def detach(client: KubeClient, naming: Naming, manager: str, flavor: str) -> list[str]:
    """Take `flavor` out of every ClusterQueue listing it (step 1); the names."""
    queues = client.list(CLUSTER_QUEUE)
    holders = [q for q in queues if flavor in listed_flavors(q)]
    foreign = sorted(q["metadata"]["name"] for q in holders if not naming.owns(q))
    if foreign:
        raise PermanentProviderError(
            f"cannot delete ResourceFlavor {flavor}: ClusterQueue {', '.join(foreign)} "
            "lists it and is not this trainform's; Kueue keeps a flavor while a ClusterQueue "
            f"lists it (finalizer {IN_USE_FINALIZER}): take it out of those queues first"
        )
    for queue in holders:
        _retrying(
            client,
            queue["metadata"]["name"],
            lambda live: _take_out(client, manager, flavor, live),
        )
    return sorted(q["metadata"]["name"] for q in holders)


def _put_back(
    client: KubeClient, manager: str, flavor: str, queue: dict[str, Any], keep: bool
) -> None:
    """Put the recorded entries of `flavor` back (when `keep`), and drop the record."""
    record = _record(queue)
    taken = record.pop(flavor, None)
    if taken is None:
        return
    groups = [dict(g) for g in (queue.get("spec") or {}).get("resourceGroups") or []]
    for item in sorted(taken, key=lambda t: (t["group"], t["position"])) if keep else []:
        group = next(
            (g for g in groups if g.get("coveredResources") == item["coveredResources"]), None
        )
        if group is None:
            group = {"coveredResources": item["coveredResources"], "flavors": []}
            groups.insert(min(item["group"], len(groups)), group)
        flavors = list(group.get("flavors") or [])
        if all(entry.get("name") != flavor for entry in flavors):
            flavors.insert(min(item["position"], len(flavors)), item["entry"])
        group["flavors"] = flavors
    _patch(client, manager, queue, groups, record)


def reattach(client: KubeClient, naming: Naming, manager: str, flavor: str) -> None:
    """Put `flavor` back into the ClusterQueues it was detached from (step 4), where their
    queue's Cohort still lists it; drop the record either way."""
    cohorts = {
        c["metadata"]["name"]: listed_flavors(c) for c in client.list(COHORT, naming.selector)
    }
    for queue in client.list(CLUSTER_QUEUE, naming.selector):
        if flavor not in _record(queue):
            continue
        cohort = ((queue.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL, "")
        keep = flavor in cohorts.get(cohort, [flavor])

        _retrying(
            client,
            queue["metadata"]["name"],
            lambda live, keep=keep: _put_back(client, manager, flavor, live, keep),
        )


def retire(
    client: KubeClient, naming: Naming, manager: str, objects: list[dict[str, Any]], seconds: float
) -> None:
    """Steps 1 and 2 for a pool's live objects (flavor first, then its Topology)."""
    ordered = sorted(objects, key=lambda o: o["kind"] != "ResourceFlavor")
    for obj in ordered:
        if obj["kind"] == "ResourceFlavor":
            detach(client, naming, manager, obj["metadata"]["name"])
    for obj in ordered:
        if not is_terminating(obj):
            client.delete(BY_KIND[obj["kind"]], obj["metadata"]["name"])
    wait_gone(client, ordered, seconds)
