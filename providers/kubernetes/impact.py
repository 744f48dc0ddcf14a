"""What a lower queue quota does to admitted work: the plan lists the workloads it affects.

`admitted_usage` reads Kueue Workloads (listed once per observe) into, per ClusterQueue,
each admitted workload's usage per flavor and resource (from status.admission: the
flavor of every resource of each pod set, times the pod set's resourceUsage).
`quota_impact` compares the total with the queue's new capacity per pool and resource:
nominalQuota plus borrowingLimit (unbounded when a cohort lets it borrow without a limit).
Where the admitted total exceeds it, every admitted workload using that resource of that
pool gets one line: namespace/name, its usage, the total and the new quota. Pure.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.projection import resource_key
from trainform.specs.quantity import parse_quantity


def _amount(value: Any) -> Decimal:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return Decimal(0)


def _admitted(workload: dict[str, Any]) -> bool:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Admitted":
            return condition.get("status") == "True"
    return False


def admitted_usage(workloads: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for workload in workloads:
        admission = (workload.get("status") or {}).get("admission") or {}
        if not admission or not _admitted(workload):
            continue
        usage: dict[str, dict[str, str]] = {}
        for assignment in admission.get("podSetAssignments") or []:
            flavors = assignment.get("flavors") or {}
            for resource, amount in (assignment.get("resourceUsage") or {}).items():
                flavor = flavors.get(resource)
                if flavor is None:
                    continue
                total = _amount(usage.get(flavor, {}).get(resource, 0)) + _amount(amount)
                usage.setdefault(flavor, {})[resource] = str(total)
        metadata = workload.get("metadata") or {}
        by_queue.setdefault(str(admission.get("clusterQueue", "")), []).append(
            {
                "namespace": metadata.get("namespace", ""),
                "name": metadata.get("name", ""),
                "usage": usage,
            }
        )
    return by_queue


def quota_impact(spec: dict[str, Any], admitted: list[dict[str, Any]], naming: Naming) -> list[str]:
    lines: list[str] = []
    for entry in spec.get("pools", []):
        flavor = naming.cluster_name(entry["pool"])
        users = [w for w in admitted if flavor in w.get("usage", {})]
        resources = sorted({r for w in users for r in w["usage"][flavor]})
        for resource in resources:
            key = resource_key(resource)
            if key is None:
                continue
            nominal = _amount((entry.get("nominalQuota") or {}).get(key, 0))
            borrowing = (entry.get("borrowingLimit") or {}).get(key)
            if borrowing is None and spec.get("cohort"):
                continue  # may borrow without limit: no admitted workload is over quota
            cap = nominal + (_amount(borrowing) if borrowing is not None else 0)
            using = [(w, _amount(w["usage"][flavor].get(resource, 0))) for w in users]
            total = sum((amount for _, amount in using), Decimal(0))
            if total <= cap:
                continue
            for workload, amount in using:
                if amount:
                    lines.append(
                        f"{workload['namespace']}/{workload['name']}: uses {key} {amount} of "
                        f"pool {entry['pool']}; admitted total {total} exceeds the new quota "
                        f"{cap} (Kueue may evict it)"
                    )
    return lines
