"""Borrowing and lending per cohort, for the platform view (`status --platform`).

A cohort's queues lend each other quota they leave unused (Kueue's Cohort, Slurm's shared
QOS pools): per cohort, what its queues hold as nominal quota, what their running attempts
use, which queues borrow beyond their own nominal quota and how much, and how much unused
quota they could still lend (each queue's unused nominal quota, capped by its lending
limit). Within a cohort what its queues borrow is what the others lend, so the borrowed
total is also the lent total. Pure; planner/usage.py builds the queues.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

RESOURCES = ("gpu", "cpu")


class QueueFigures(Protocol):
    name: str
    cohort: str | None
    nominal: dict[str, Decimal]
    in_use: dict[str, Decimal]
    lendable: dict[str, Decimal]


def _numbers(values: dict[str, Decimal]) -> dict[str, float | int]:
    return {k: int(v) if v == v.to_integral_value() else float(v) for k, v in values.items()}


@dataclass
class CohortView:
    name: str
    queues: list[str] = field(default_factory=list)
    nominal: dict[str, Decimal] = field(
        default_factory=lambda: dict.fromkeys(RESOURCES, Decimal(0))
    )
    in_use: dict[str, Decimal] = field(default_factory=lambda: dict.fromkeys(RESOURCES, Decimal(0)))
    borrowed_by: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    unused_lendable: dict[str, Decimal] = field(
        default_factory=lambda: dict.fromkeys(RESOURCES, Decimal(0))
    )

    @property
    def borrowed(self) -> dict[str, Decimal]:
        return {
            r: sum((b.get(r, Decimal(0)) for b in self.borrowed_by.values()), Decimal(0))
            for r in RESOURCES
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cohort": self.name,
            "queues": self.queues,
            "nominal": _numbers(self.nominal),
            "inUse": _numbers(self.in_use),
            "borrowed": _numbers(self.borrowed),
            "borrowedBy": {q: _numbers(b) for q, b in sorted(self.borrowed_by.items())},
            "unusedLendable": _numbers(self.unused_lendable),
        }


def cohort_views(queues: Iterable[QueueFigures]) -> list[CohortView]:
    cohorts: dict[str, CohortView] = {}
    for queue in queues:
        if not queue.cohort:
            continue
        view = cohorts.setdefault(queue.cohort, CohortView(queue.cohort))
        view.queues.append(queue.name)
        borrowed = {}
        for resource in RESOURCES:
            nominal = queue.nominal.get(resource, Decimal(0))
            used = queue.in_use.get(resource, Decimal(0))
            view.nominal[resource] += nominal
            view.in_use[resource] += used
            if used > nominal:
                borrowed[resource] = used - nominal
            unused = max(Decimal(0), nominal - used)
            view.unused_lendable[resource] += min(unused, queue.lendable.get(resource, nominal))
        if borrowed:
            view.borrowed_by[queue.name] = borrowed
    for view in cohorts.values():
        view.queues.sort()
    return sorted(cohorts.values(), key=lambda c: c.name)
