"""Borrowing and lending per cohort, for the platform view (`status --platform`).

A cohort's queues lend each other quota they leave unused (Kueue's Cohort, Slurm's shared
QOS pools): per cohort, what its queues hold as nominal quota, what their running attempts
use, which queues borrow beyond their own nominal quota and how much, and how much unused
quota they could still lend (each queue's unused nominal quota, capped by its lending
limit). Within a cohort what its queues borrow is what the others lend, so the borrowed
total is also the lent total. Pure; planner/platform_view.py builds the queues. Amounts are
keyed as planner/amounts.py says (accelerator types apart).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from trainform.planner.amounts import add, amounts_json, zero


class QueueFigures(Protocol):
    name: str
    cohort: str | None
    nominal: dict[str, Decimal]
    in_use: dict[str, Decimal]
    lendable: dict[str, Decimal]


@dataclass
class CohortView:
    name: str
    queues: list[str] = field(default_factory=list)
    nominal: dict[str, Decimal] = field(default_factory=zero)
    in_use: dict[str, Decimal] = field(default_factory=zero)
    borrowed_by: dict[str, dict[str, Decimal]] = field(default_factory=dict)
    unused_lendable: dict[str, Decimal] = field(default_factory=zero)

    @property
    def borrowed(self) -> dict[str, Decimal]:
        return {
            r: sum((b.get(r, Decimal(0)) for b in self.borrowed_by.values()), Decimal(0))
            for r in self.nominal
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cohort": self.name,
            "queues": self.queues,
            "nominal": amounts_json(self.nominal),
            "inUse": amounts_json(self.in_use),
            "borrowed": amounts_json(self.borrowed),
            "borrowedBy": {q: amounts_json(b) for q, b in sorted(self.borrowed_by.items())},
            "unusedLendable": amounts_json(self.unused_lendable),
        }


def cohort_views(queues: Iterable[QueueFigures]) -> list[CohortView]:
    cohorts: dict[str, CohortView] = {}
    for queue in queues:
        if not queue.cohort:
            continue
        view = cohorts.setdefault(queue.cohort, CohortView(queue.cohort))
        view.queues.append(queue.name)
        borrowed = {}
        for resource in sorted(set(queue.nominal) | set(queue.in_use)):
            nominal = queue.nominal.get(resource, Decimal(0))
            used = queue.in_use.get(resource, Decimal(0))
            add(view.nominal, resource, nominal)
            add(view.in_use, resource, used)
            if used > nominal:
                borrowed[resource] = used - nominal
            unused = max(Decimal(0), nominal - used)
            lendable = min(unused, queue.lendable.get(resource, nominal))
            add(view.unused_lendable, resource, lendable)
        if borrowed:
            view.borrowed_by[queue.name] = borrowed
    for view in cohorts.values():
        view.queues.sort()
    return sorted(cohorts.values(), key=lambda c: c.name)
