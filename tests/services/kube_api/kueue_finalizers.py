"""Kueue's `resource-in-use` finalizers, for the Kueue stand-in (kueue.py).

Kueue keeps a ClusterQueue, a ResourceFlavor and a Topology while something still uses
it, with one finalizer name, `kueue.x-k8s.io/resource-in-use`
(apis/kueue/v1beta2/constants.go, ResourceInUseFinalizerName):

- ClusterQueue (pkg/controller/core/clusterqueue_controller.go, Reconcile): added to every
  ClusterQueue (pkg/webhooks/clusterqueue_webhook.go adds it on create too); removed from a
  deleted one only once no Workload reserves quota in it (the cache's ClusterQueueEmpty).
- ResourceFlavor (pkg/controller/core/resourceflavor_controller.go, Reconcile): added to
  every flavor (pkg/webhooks/resourceflavor_webhook.go on create too); removed from a
  deleted one only once no ClusterQueue lists it in `spec.resourceGroups[].flavors`
  (cache.ClusterQueuesUsingFlavor, which keeps a Terminating ClusterQueue until it is
  gone). A Cohort listing the flavor does not hold it.
- Topology (pkg/controller/tas/topology_controller.go, Reconcile): added to every
  Topology; removed from a deleted one only once no ResourceFlavor names it in
  `spec.topologyName` (the TAS cache, which keeps a Terminating flavor until it is gone).

So a flavor still listed by a ClusterQueue stays Terminating, and so does its Topology;
deleting the ClusterQueue's listing (or the ClusterQueue) lets both go, in that order.
`settle` runs them in that order in one pass: ClusterQueues, then flavors, then
topologies, each reading the store as the previous step left it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

IN_USE = "kueue.x-k8s.io/resource-in-use"
KUEUE = "kueue.x-k8s.io"

Items = Callable[[str], list[dict[str, Any]]]
"""The objects of a Kueue plural, as the store holds them now."""
Write = Callable[[str, dict[str, Any]], None]
"""Update an object of a Kueue plural through the server's verbs."""


def _finalizers(obj: dict[str, Any]) -> list[str]:
    return list(obj["metadata"].get("finalizers") or [])


def _reconcile(obj: dict[str, Any], plural: str, in_use: bool, write: Write) -> None:
    """Add the finalizer to a live object; drop it from a deleted one no longer in use."""
    finalizers = _finalizers(obj)
    if obj["metadata"].get("deletionTimestamp"):
        if IN_USE in finalizers and not in_use:
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != IN_USE]
            write(plural, obj)
    elif IN_USE not in finalizers:
        obj["metadata"]["finalizers"] = [*finalizers, IN_USE]
        write(plural, obj)


def listed_flavors(queue: dict[str, Any]) -> set[str]:
    """Every flavor a ClusterQueue lists, in any resource group."""
    return {
        flavor.get("name", "")
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
    }


def settle(items: Items, write: Write, holding: Callable[[str], bool]) -> None:
    """One pass of the three controllers; `holding(name)`: a Workload reserves quota in
    the ClusterQueue `name`."""
    for queue in items("clusterqueues"):
        _reconcile(queue, "clusterqueues", holding(queue["metadata"]["name"]), write)
    listed = {name for queue in items("clusterqueues") for name in listed_flavors(queue)}
    for flavor in items("resourceflavors"):
        _reconcile(flavor, "resourceflavors", flavor["metadata"]["name"] in listed, write)
    named = {(flavor.get("spec") or {}).get("topologyName") for flavor in items("resourceflavors")}
    for topology in items("topologies"):
        _reconcile(topology, "topologies", topology["metadata"]["name"] in named, write)
