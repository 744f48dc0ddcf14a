"""Who changed a resource's objects last, from the API server's own records.

Every write to a Kubernetes object leaves a `metadata.managedFields` entry naming the field
manager (`kubectl-edit`, `kubectl-client-side-apply`, a controller...), the operation
(Apply or Update) and when it last wrote. Drift shows the newest entry of a manager other
than trainform's as the evidence of a `modified` finding; status subresource writes (a
controller reporting usage) are not changes of the spec and are left out.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.client import describe


def last_change(objects: list[dict[str, Any]], own_manager: str) -> dict[str, Any]:
    """`changedBy`, `operation`, `changedAt` and `object` of the newest write by another
    manager to any of `objects`; empty when trainform wrote last (or nothing is recorded)."""
    newest: tuple[str, dict[str, Any], dict[str, Any]] | None = None
    for obj in objects:
        for entry in (obj.get("metadata") or {}).get("managedFields") or []:
            if entry.get("manager") == own_manager or entry.get("subresource"):
                continue
            moment = str(entry.get("time") or "")
            if newest is None or moment > newest[0]:
                newest = (moment, entry, obj)
    if newest is None:
        return {}
    moment, entry, obj = newest
    evidence = {
        "changedBy": str(entry.get("manager", "")),
        "operation": str(entry.get("operation", "")),
        "object": describe(obj),
    }
    if moment:
        evidence["changedAt"] = moment
    return evidence
