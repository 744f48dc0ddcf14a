"""Capacity arithmetic for admission: what an attempt needs, what a queue or quota allows.

Amounts are exact `Decimal`s read from normalized documents (decimal strings, memory in
bytes). An attempt needs what all its nodes need together: nodes x its cpu and memory
(declared per node), and its GPUs (recorded for the whole attempt), so a group is admitted
whole or waits whole. `check` says, in words a user reads in `trainform status`, why an attempt does
not fit: "queue default-queue: cpu 2/2 in use by 1 job (needs 1)".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from trainform.providers.local.runs import Attempt

RESOURCES = ("cpu", "memory", "gpu")
_BINARY_UNITS = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]


@dataclass(frozen=True)
class Usage:
    cpu: Decimal
    memory: Decimal
    gpu: Decimal

    @classmethod
    def of(cls, attempt: Attempt) -> Usage:
        nodes = Decimal(attempt.nodes)
        return cls(
            nodes * Decimal(attempt.cpu), nodes * Decimal(attempt.memory), Decimal(attempt.gpus)
        )

    @classmethod
    def total(cls, attempts: Iterable[Attempt]) -> Usage:
        usages = [cls.of(attempt) for attempt in attempts]
        return cls(
            sum((u.cpu for u in usages), Decimal(0)),
            sum((u.memory for u in usages), Decimal(0)),
            sum((u.gpu for u in usages), Decimal(0)),
        )

    def get(self, resource: str) -> Decimal:
        return getattr(self, resource)  # type: ignore[no-any-return]


def _amount(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def nominal_quota(queue_spec: dict[str, Any]) -> dict[str, Decimal | None]:
    """The queue's nominalQuota summed over its pools; a resource no pool provides is 0."""
    totals = dict.fromkeys(RESOURCES, Decimal(0))
    for pool in queue_spec.get("pools", []):
        for resource in RESOURCES:
            amount = _amount((pool.get("nominalQuota") or {}).get(resource))
            if amount is not None:
                totals[resource] += amount
    return dict(totals)


def quota_limits(limits: dict[str, Any]) -> dict[str, Decimal | None]:
    """A Quota's limits on cpu, memory and gpu; None means unlimited."""
    return {resource: _amount(limits.get(resource)) for resource in RESOURCES}


def show(resource: str, amount: Decimal) -> str:
    """An amount as a person writes it: `2`, `0.5`, `512Mi`."""
    if resource == "memory" and amount == amount.to_integral_value() and amount > 0:
        whole = int(amount)
        for unit, power in _BINARY_UNITS:
            if whole % 2**power == 0:
                return f"{whole // 2**power}{unit}"
    return format(amount.normalize(), "f")


def check(
    owner: str,
    limit_name: str,
    limits: dict[str, Decimal | None],
    running: list[Attempt],
    need: Usage,
) -> str:
    """Why `need` does not fit beside `running` under `limits`, or "" when it fits."""
    used = Usage.total(running)
    jobs = len(running)
    for resource in RESOURCES:
        limit = limits.get(resource)
        wanted = need.get(resource)
        if limit is None or wanted == 0:
            continue
        if wanted > limit:
            return (
                f"{owner}: needs {resource} {show(resource, wanted)}, more than its "
                f"{limit_name} of {show(resource, limit)} (it cannot start until that changes)"
            )
        if used.get(resource) + wanted > limit:
            return (
                f"{owner}: {resource} {show(resource, used.get(resource))}/"
                f"{show(resource, limit)} in use by {jobs} job{'' if jobs == 1 else 's'} "
                f"(needs {show(resource, wanted)})"
            )
    return ""


def free_devices(running: list[Attempt], count: int) -> str:
    """The lowest GPU indices no running attempt holds, as CUDA_VISIBLE_DEVICES text."""
    taken = {int(d) for attempt in running for d in attempt.devices.split(",") if d}
    chosen: list[int] = []
    index = 0
    while len(chosen) < count:
        if index not in taken:
            chosen.append(index)
        index += 1
    return ",".join(str(index) for index in chosen)
