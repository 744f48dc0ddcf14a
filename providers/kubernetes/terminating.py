"""Objects being deleted (a `deletionTimestamp`): how observe reports them, and waiting
for them to go.

Kubernetes keeps a deleted object with finalizers until the controllers that put them
there remove them; until then it is Terminating and counts as on its way out, not as up
to date. Kueue's `kueue.x-k8s.io/resource-in-use` finalizer keeps a ClusterQueue while
Workloads reserve quota in it, a ResourceFlavor while a ClusterQueue lists it and a
Topology while a flavor names it (pkg/controller/core/clusterqueue_controller.go,
resourceflavor_controller.go, pkg/controller/tas/topology_controller.go). `finding`
makes an observed Terminating object an unsettled finding (the plan converges the
resource; drift shows it), naming who holds it; `wait_gone` waits, bounded, until objects
are gone. Called by provider.py and pool_cycle.py.
"""

from __future__ import annotations

import time
from typing import Any

from trainform.providers.base import Finding
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.client import KubeClient, describe
from trainform.providers.kubernetes.kinds import BY_KIND, CLUSTER_QUEUE, RESOURCE_FLAVOR

IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
WAIT_SECONDS = 60.0


def is_terminating(obj: dict[str, Any] | None) -> bool:
    return bool(obj and (obj.get("metadata") or {}).get("deletionTimestamp"))


def listed_flavors(queue: dict[str, Any]) -> list[str]:
    """The flavors a ClusterQueue (or Cohort) lists, in any resource group."""
    return [
        str(flavor.get("name", ""))
        for group in (queue.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
    ]


def listing(queues: list[dict[str, Any]], flavor: str) -> list[str]:
    """Names of the ClusterQueues that list `flavor`, sorted."""
    return sorted(q["metadata"]["name"] for q in queues if flavor in listed_flavors(q))


def holders(live: dict[str, Any], queues: list[dict[str, Any]], flavors: list[dict]) -> str:
    """Who keeps a Terminating object, as Kueue decides it."""
    name = live["metadata"]["name"]
    if live.get("kind") == "ResourceFlavor":
        listed = ", ".join(listing(queues, name)) or "(none)"
        return f"Kueue keeps it while ClusterQueue {listed} lists it"
    if live.get("kind") == "Topology":
        naming_it = sorted(
            f["metadata"]["name"]
            for f in flavors
            if (f.get("spec") or {}).get("topologyName") == name
        )
        return f"Kueue keeps it while ResourceFlavor {', '.join(naming_it) or '(none)'} names it"
    finalizers = ", ".join(live["metadata"].get("finalizers") or []) or "none"
    return f"held by its finalizers ({finalizers})"


def finding(
    live: dict[str, Any], queues: list[dict[str, Any]], flavors: list[dict[str, Any]]
) -> Finding:
    """An observed Terminating object, as an unsettled finding."""
    metadata = live["metadata"]
    return Finding(
        "object-terminating",
        f"{describe(live)} is Terminating (deleted at {metadata.get('deletionTimestamp')}; "
        f"{holders(live, queues, flavors)}): apply waits until it is gone and creates it "
        "again",
        {"object": describe(live), "deletionTimestamp": metadata.get("deletionTimestamp")},
        unsettled=True,
    )


def wait_gone(client: KubeClient, objects: list[dict[str, Any]], seconds: float) -> None:
    """Wait until every object is gone (its finalizers released); PermanentProviderError
    naming what still holds one after `seconds`."""
    deadline = time.monotonic() + seconds
    pause = 0.05
    for obj in objects:
        metadata = obj["metadata"]
        api = BY_KIND[obj["kind"]]
        while True:
            live = client.get(api, metadata["name"], metadata.get("namespace"))
            if live is None:
                break
            if time.monotonic() >= deadline:
                live.setdefault("kind", obj["kind"])
                queues = client.list(CLUSTER_QUEUE) if obj["kind"] == "ResourceFlavor" else []
                flavors = client.list(RESOURCE_FLAVOR) if obj["kind"] == "Topology" else []
                raise PermanentProviderError(
                    f"{describe(obj)} is still Terminating after {seconds:.0f}s "
                    f"({holders(live, queues, flavors)}); apply again once it is gone"
                )
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
