"""The status the Kueue stand-in writes on ClusterQueues and LocalQueues (kueue.py).

As Kueue's ClusterQueue and LocalQueue controllers report it: `pendingWorkloads`,
`reservingWorkloads` (quota reserved, not finished), `admittedWorkloads`,
`flavorsReservation`/`flavorsUsage` (per flavor and resource: total and the part borrowed
beyond the nominal quota) and the `Active` condition: True/Ready "Can admit new
workloads", or False with Terminating, Stopped or FlavorNotFound and Kueue's message
("Can't admit new workloads: references missing ResourceFlavor(s): a,b.").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from tests.services.kube_api import quantities
from tests.services.kube_api.kueue_quota import read_quotas
from tests.services.kube_api.kueue_workloads import condition, find_condition, is_true
from tests.services.kube_api.store import Store

KUEUE = "kueue.x-k8s.io"


def _active(queue: dict[str, Any], missing: list[str]) -> tuple[str, str, str]:
    if queue["metadata"].get("deletionTimestamp"):
        return "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating"
    reasons, messages = [], []
    if (queue.get("spec") or {}).get("stopPolicy", "None") != "None":
        reasons.append("Stopped")
        messages.append("is stopped")
    if missing:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing)}")
    if reasons:
        return "False", reasons[0], "Can't admit new workloads: " + ", ".join(messages) + "."
    return "True", "Ready", "Can admit new workloads"


def _flavors_usage(
    queue: dict[str, Any], holding: list[dict[str, Any]], admitted_only: bool
) -> list[dict[str, Any]]:
    spec = queue.get("spec") or {}
    quotas = read_quotas(spec)
    totals: dict[tuple[str, str], int] = {}
    for workload in holding:
        if admitted_only and not is_true(workload, "Admitted"):
            continue
        for pod_set in workload["status"]["admission"].get("podSetAssignments") or []:
            for resource, flavor in (pod_set.get("flavors") or {}).items():
                value = quantities.amount(resource, pod_set["resourceUsage"].get(resource, 0))
                totals[(flavor, resource)] = totals.get((flavor, resource), 0) + value
    listed = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            resources = []
            for resource in group.get("coveredResources") or []:
                key = (flavor["name"], resource)
                total = totals.get(key, 0)
                nominal = quotas[key].nominal if key in quotas else 0
                resources.append(
                    {
                        "name": resource,
                        "total": quantities.render(resource, total),
                        "borrowed": quantities.render(resource, max(0, total - nominal)),
                    }
                )
            listed.append({"name": flavor["name"], "resources": resources})
    return listed


def _counts(workloads: list[dict[str, Any]]) -> dict[str, int]:
    holding = [w for w in workloads if is_true(w, "QuotaReserved")]
    return {
        "pendingWorkloads": len(workloads) - len(holding),
        "reservingWorkloads": len(holding),
        "admittedWorkloads": sum(1 for w in holding if is_true(w, "Admitted")),
    }


def queue_statuses(
    store: Store,
    missing_flavors: Callable[[dict[str, Any]], list[str]],
    workloads: list[dict[str, Any]],
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(plural, object, wanted status) for every ClusterQueue and LocalQueue."""
    live = [  # Kueue's queues and cache drop finished and inactive Workloads alike
        w
        for w in workloads
        if not is_true(w, "Finished") and (w.get("spec") or {}).get("active", True) is not False
    ]
    local_to_cluster: dict[tuple[str, str], str] = {}
    for local in store.items(KUEUE, "localqueues", None):
        key = (local["metadata"]["namespace"], local["metadata"]["name"])
        local_to_cluster[key] = (local.get("spec") or {}).get("clusterQueue", "")

    def queue_of(workload: dict[str, Any]) -> str:
        admission = (workload.get("status") or {}).get("admission") or {}
        if is_true(workload, "QuotaReserved") and admission.get("clusterQueue"):
            return str(admission["clusterQueue"])
        key = (workload["metadata"]["namespace"], (workload.get("spec") or {}).get("queueName"))
        return local_to_cluster.get(key, "")  # type: ignore[arg-type]

    for queue in store.items(KUEUE, "clusterqueues", None):
        name = queue["metadata"]["name"]
        mine = [w for w in live if queue_of(w) == name]
        holding = [w for w in mine if is_true(w, "QuotaReserved")]
        status = copy.deepcopy(queue.get("status") or {})
        status.update(_counts(mine))
        status["flavorsReservation"] = _flavors_usage(queue, holding, False)
        status["flavorsUsage"] = _flavors_usage(queue, holding, True)
        shown = {"metadata": queue["metadata"], "status": status}
        condition(shown, "Active", *_active(queue, missing_flavors(queue)))
        yield "clusterqueues", queue, status
    for local in store.items(KUEUE, "localqueues", None):
        namespace, name = local["metadata"]["namespace"], local["metadata"]["name"]
        mine = [
            w
            for w in live
            if w["metadata"]["namespace"] == namespace
            and (w.get("spec") or {}).get("queueName") == name
        ]
        status = copy.deepcopy(local.get("status") or {})
        status.update(_counts(mine))
        cluster = local_to_cluster[(namespace, name)]
        found = store.get(KUEUE, "clusterqueues", "", cluster)
        active = found is not None and find_condition(found, "Active") is not None
        shown = {"metadata": local["metadata"], "status": status}
        if found is None:
            condition(
                shown,
                "Active",
                "False",
                "ClusterQueueDoesNotExist",
                "Can't submit new workloads to clusterQueue",
            )
        elif active and is_true(found, "Active"):
            condition(shown, "Active", "True", "Ready", "Can submit new workloads to localQueue")
        else:
            condition(
                shown,
                "Active",
                "False",
                "ClusterQueueIsInactive",
                "Can't submit new workloads to clusterQueue",
            )
        yield "localqueues", local, status
