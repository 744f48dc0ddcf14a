"""Where a waiting attempt stands in Kueue's queue: its position among the pending
Workloads of its LocalQueue, as Kueue's visibility API reports it where the cluster serves
it, else from the Workloads themselves in the order Kueue's queue manager keeps.

Kueue's visibility API (apis/visibility/v1beta2 of kubernetes-sigs/kueue, served by the
Kueue controller through an APIService, feature VisibilityOnDemand) answers
`GET /apis/visibility.kueue.x-k8s.io/<version>/namespaces/<ns>/localqueues/<lq>/pendingworkloads`
with `PendingWorkloadsSummary.items[]`: each pending Workload's name, priority,
`positionInClusterQueue` and `positionInLocalQueue` (both counted from 0). Where it is not
served (404, 503 from an unavailable APIService, 403 without RBAC), positions come from the
Workloads listed anyway: every pending one (no quota reserved, not finished, active) of the
LocalQueue, ordered as pkg/queue's ClusterQueue `Snapshot` orders its heap and inadmissible
Workloads together: higher `spec.priority` first, then the earlier queue-ordering
timestamp (pkg/workload `Ordering.GetQueueOrderTimestamp`: the Evicted condition's time
when evicted for PodsReadyTimeout or by an admission check, else the creation time), then
the name. In trainform's mapping a project's ClusterQueue serves exactly one LocalQueue, so
the position in the LocalQueue is also the one in the ClusterQueue.

Requests: at most one GET per LocalQueue holding a waiting attempt of the observed
addresses, none once a read found the API not served (the answer is kept per client).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainform.providers.errors import ProviderError
from trainform.providers.kubernetes.client import KubeClient

VISIBILITY = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
EVICTED_FOR_ORDER = ("PodsReadyTimeout", "AdmissionCheck")


@dataclass(frozen=True)
class Position:
    position: int
    """0-based, as Kueue counts."""
    pending: int
    """How many Workloads are pending in the LocalQueue (0 when not known)."""
    source: str
    """"visibility API" or "Workload order"."""


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (workload.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind and found.get("status") == "True":
            return dict(found)
    return None


def is_pending(workload: dict[str, Any]) -> bool:
    """Waiting for admission: active, no quota reserved, not finished, not being deleted."""
    return (
        (workload.get("spec") or {}).get("active", True) is not False
        and _condition(workload, "QuotaReserved") is None
        and _condition(workload, "Finished") is None
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
    )


def order_timestamp(workload: dict[str, Any]) -> str:
    """Kueue's queue-ordering timestamp (RFC 3339, so it sorts as text)."""
    evicted = _condition(workload, "Evicted")
    if evicted and str(evicted.get("reason", "")) in EVICTED_FOR_ORDER:
        return str(evicted.get("lastTransitionTime") or "")
    return str((workload.get("metadata") or {}).get("creationTimestamp") or "")


def queue_order(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pending Workloads in the order Kueue's queue holds them."""
    pending = [w for w in workloads if is_pending(w)]
    return sorted(
        pending,
        key=lambda w: (
            -int((w.get("spec") or {}).get("priority") or 0),
            order_timestamp(w),
            str((w.get("metadata") or {}).get("name", "")),
        ),
    )


def ordered_positions(workloads: list[dict[str, Any]]) -> dict[tuple[str, str], Position]:
    """(namespace, Workload name) -> position, for each LocalQueue's pending Workloads."""
    by_queue: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for workload in workloads:
        namespace = str((workload.get("metadata") or {}).get("namespace", ""))
        queue = str((workload.get("spec") or {}).get("queueName") or "")
        by_queue.setdefault((namespace, queue), []).append(workload)
    found: dict[tuple[str, str], Position] = {}
    for (namespace, _), members in by_queue.items():
        ordered = queue_order(members)
        for index, workload in enumerate(ordered):
            name = str(workload["metadata"].get("name", ""))
            found[(namespace, name)] = Position(index, len(ordered), "Workload order")
    return found


class QueuePositions:
    """Positions of waiting Workloads, one visibility read per LocalQueue asked."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.served: str | None = ""  # "" not yet known, None not served, else the version

    def _summary(self, namespace: str, queue: str) -> list[dict[str, Any]] | None:
        versions = VERSIONS if self.served == "" else (self.served,) if self.served else ()
        for version in versions:
            path = (
                f"/apis/{VISIBILITY}/{version}/namespaces/{namespace}/localqueues/{queue}"
                "/pendingworkloads"
            )
            try:
                text = self.client.text(path, [], f"read the pending workloads of {queue}")
            except ProviderError:
                text = None  # 503 from an unavailable APIService, 403 without RBAC
            if text is None:
                continue
            try:
                items = json.loads(text).get("items") or []
            except (ValueError, AttributeError):
                continue
            self.served = version
            return [item for item in items if isinstance(item, dict)]
        self.served = None
        return None

    def of(
        self, workloads: list[dict[str, Any]], wanted: set[tuple[str, str]]
    ) -> dict[tuple[str, str], Position]:
        """Positions of the `wanted` (namespace, Workload name) pairs among `workloads`
        (the listed Workloads of those namespaces)."""
        if not wanted:
            return {}
        ordered = ordered_positions(workloads)
        queues = {
            (ns, str((w.get("spec") or {}).get("queueName") or ""))
            for w in workloads
            for ns in [str((w.get("metadata") or {}).get("namespace", ""))]
            if (ns, str(w["metadata"].get("name", ""))) in wanted
        }
        found: dict[tuple[str, str], Position] = {}
        for namespace, queue in sorted(queues):
            items = self._summary(namespace, queue) if queue else None
            if items is None:
                continue
            for item in items:
                name = str((item.get("metadata") or {}).get("name", ""))
                position = item.get("positionInLocalQueue")
                if isinstance(position, int):
                    found[(namespace, name)] = Position(position, len(items), "visibility API")
        return {
            key: found.get(key) or ordered[key] for key in wanted if key in found or key in ordered
        }
