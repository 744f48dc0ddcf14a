"""Kueue's visibility API (VisibilityOnDemand) for the Kueue stand-in: pending Workloads of a
ClusterQueue or LocalQueue in queue order, with their positions.

Served, while the stand-in runs (`api.kueue.start()`), at
`/apis/visibility.kueue.x-k8s.io/{v1beta1,v1beta2}/clusterqueues/<cq>/pendingworkloads` and
`.../namespaces/<ns>/localqueues/<lq>/pendingworkloads`; with Kueue off the group is not
registered and every path answers 404, as an API server without the APIService does.

Follows kubernetes-sigs/kueue: apis/visibility/v1beta2/types.go (`PendingWorkloadsSummary`,
`PendingWorkload` with `priority`, `localQueueName`, `positionInClusterQueue`,
`positionInLocalQueue`; query `offset` from 0 and `limit` 1000 by default, from
`PendingWorkloadOptions` and its defaults) and pkg/visibility/storage
(pending_workloads_cq.go, pending_workloads_lq.go): the ClusterQueue's pending Workloads
(pkg/queue ClusterQueue `Snapshot`: heap and inadmissible together) sorted by the queue's
ordering (priority first, then `Ordering.GetQueueOrderTimestamp`), positions counted over
the whole queue before offset and limit cut the page; a LocalQueue's answer keeps the
ClusterQueue's order and counts `positionInLocalQueue` among its own Workloads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.kueue_workloads import find_condition, is_true

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
DEFAULT_LIMIT = 1000


def is_visibility_path(parts: list[str]) -> bool:
    return len(parts) >= 2 and parts[0] == "apis" and parts[1] == GROUP


def order_key(workload: dict[str, Any]) -> tuple[int, str, str]:
    """Kueue's queue order: higher priority first, then the queue-ordering timestamp (the
    Evicted condition's time after a PodsReadyTimeout or admission-check eviction, else the
    creation time; pkg/workload `GetQueueOrderTimestamp`), then the name."""
    evicted = find_condition(workload, "Evicted")
    stamp = workload["metadata"]["creationTimestamp"]
    if evicted and evicted.get("status") == "True":
        if evicted.get("reason") in ("PodsReadyTimeout", "AdmissionCheck"):
            stamp = evicted.get("lastTransitionTime") or stamp
    return (
        -int((workload.get("spec") or {}).get("priority", 0)),
        str(stamp),
        workload["metadata"]["name"],
    )


def _pending(workload: dict[str, Any]) -> bool:
    return (
        not is_true(workload, "QuotaReserved")
        and not is_true(workload, "Finished")
        and (workload.get("spec") or {}).get("active", True) is not False
        and not workload["metadata"].get("deletionTimestamp")
    )


def _not_found(parts: list[str]) -> ApiError:
    return ApiError(
        404, "NotFound", f"the server could not find the requested resource ({'/'.join(parts)})"
    )


def _bounds(query: dict[str, str]) -> tuple[int, int]:
    try:
        offset = int(query.get("offset", "0") or 0)
        limit = int(query.get("limit", str(DEFAULT_LIMIT)) or DEFAULT_LIMIT)
    except ValueError:
        raise ApiError(400, "BadRequest", "offset and limit must be integers") from None
    if offset < 0 or limit < 0:
        raise ApiError(400, "BadRequest", "offset and limit must not be negative")
    return offset, limit


def pending_workloads(api: KubeAPI, parts: list[str], query: dict[str, str]) -> dict[str, Any]:
    """The `PendingWorkloadsSummary` a GET on `parts` answers (raises ApiError)."""
    if not api.kueue.running or len(parts) < 3 or parts[2] not in VERSIONS:
        raise _not_found(parts)
    rest = parts[3:]
    store = api.store
    with store.lock:
        local_queues = store.items("kueue.x-k8s.io", "localqueues", None)
        cq_of = {
            (q["metadata"]["namespace"], q["metadata"]["name"]): (q.get("spec") or {}).get(
                "clusterQueue"
            )
            for q in local_queues
        }
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            cluster_queue, only = rest[1], None
            if store.get("kueue.x-k8s.io", "clusterqueues", "", cluster_queue) is None:
                raise ApiError(
                    404, "NotFound", f'clusterqueues.kueue.x-k8s.io "{cluster_queue}" not found'
                )
        elif (
            len(rest) == 5
            and rest[0] == "namespaces"
            and rest[2] == "localqueues"
            and rest[4] == "pendingworkloads"
        ):
            only = (rest[1], rest[3])
            if only not in cq_of:
                raise ApiError(404, "NotFound", f'localqueues.kueue.x-k8s.io "{rest[3]}" not found')
            cluster_queue = cq_of[only]
        else:
            raise _not_found(parts)
        workloads = [
            w
            for w in store.items("kueue.x-k8s.io", "workloads", None)
            if _pending(w)
            and cq_of.get((w["metadata"]["namespace"], (w.get("spec") or {}).get("queueName")))
            == cluster_queue
        ]
    workloads.sort(key=order_key)
    offset, limit = _bounds(query)
    in_local: dict[tuple[str, str], int] = {}
    items = []
    for index, workload in enumerate(workloads):
        metadata = workload["metadata"]
        queue = (metadata["namespace"], (workload.get("spec") or {}).get("queueName"))
        local_position = in_local.get(queue, 0)
        in_local[queue] = local_position + 1
        if only is not None and queue != only:
            continue
        items.append(
            {
                "metadata": {
                    "name": metadata["name"],
                    "namespace": metadata["namespace"],
                    "creationTimestamp": metadata["creationTimestamp"],
                    "ownerReferences": metadata.get("ownerReferences") or [],
                },
                "priority": int((workload.get("spec") or {}).get("priority", 0)),
                "localQueueName": queue[1],
                "positionInClusterQueue": index,
                "positionInLocalQueue": local_position,
            }
        )
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{GROUP}/{parts[2]}",
        "metadata": {"creationTimestamp": None},
        "items": items[offset : offset + limit],
    }
