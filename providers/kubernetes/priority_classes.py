"""The shared WorkloadPriorityClasses of job priorities, and when they go.

A job that runs at its queue's default priority names the queue's own class (a Queue's
object, manifests.py). Any other priority needs a class of that value: one shared by
every job of the instance at that value, `<namePrefix>trainform-priority-<n>` (`m<n>` for
a negative n), labelled with the manager and the kind `Priority` and no address, applied
again at each submission that needs it (runs.py).

Kueue reads a class when it creates a job's Workload and copies its value into the
Workload, so a class is in use while a Job of this instance names it (the label
`kueue.x-k8s.io/priority-class`): a suspended or requeued Job gets its Workload made
again from it. One no Job names is garbage, re-created by the next submission that needs
it. Deleting a TrainingJob or a Queue deletes the shared classes that no Job of the
instance names once that delete is done (a TrainingJob's own Jobs go with it); the plan
lists them in the delete's reasons (`unused_shared_classes` with the leaving address), and
the apply deletes those no Job names at that moment, so a class used again since the plan
is kept. Called by provider.py and runs.py; reads and deletes through KubeClient.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.client import KubeClient
from trainform.providers.kubernetes.kinds import JOB, KUEUE, WORKLOAD_PRIORITY_CLASS
from trainform.providers.kubernetes.naming import (
    ADDRESS_HASH_LABEL,
    KIND_LABEL,
    PRIORITY_CLASS_LABEL,
    Naming,
    short_hash,
)

PRIORITY_KIND = "Priority"
SHARED_OWNER = "trainform-priorities"
"""The address the labels of a shared class are made from (no resource has it)."""


def shared_class_name(naming: Naming, priority: int) -> str:
    value = f"m{-priority}" if priority < 0 else str(priority)
    return naming.cluster_name(f"trainform-priority-{value}")


def shared_class(naming: Naming, priority: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {
            "name": shared_class_name(naming, priority),
            "labels": naming.labels(SHARED_OWNER, PRIORITY_KIND),
        },
        "value": priority,
        "description": f"trainform job priority {priority}",
    }


def unused_shared_classes(
    client: KubeClient, naming: Naming, leaving: str | None = None
) -> list[dict[str, Any]]:
    """The shared classes of this instance that no Job of the instance names, counting
    the Jobs of the address `leaving` as gone. Two lists, whatever their number."""
    selector = f"{naming.selector},{KIND_LABEL}={PRIORITY_KIND}"
    classes = client.list(WORKLOAD_PRIORITY_CLASS, selector)
    gone = short_hash(leaving) if leaving else None
    used = set()
    for job in client.list(JOB, naming.selector):
        labels = (job.get("metadata") or {}).get("labels") or {}
        if gone is None or labels.get(ADDRESS_HASH_LABEL) != gone:
            used.add(labels.get(PRIORITY_CLASS_LABEL))
    return sorted(
        (
            found
            for found in classes
            if found["metadata"]["name"] not in used
            and naming.spec_name(found["metadata"]["name"]) is not None
        ),
        key=lambda found: str(found["metadata"]["name"]),
    )


def describe_unused(classes: list[dict[str, Any]]) -> list[str]:
    """Plan reasons: one line per class the delete also removes."""
    return [
        f"also deletes WorkloadPriorityClass {found['metadata']['name']} (job priority "
        f"{found.get('value')}): no Job of this trainform names it any more"
        for found in classes
    ]


def delete_unused_shared_classes(client: KubeClient, naming: Naming) -> None:
    """Delete the shared classes no Job of the instance names now."""
    for found in unused_shared_classes(client, naming):
        client.delete(WORKLOAD_PRIORITY_CLASS, found["metadata"]["name"])
