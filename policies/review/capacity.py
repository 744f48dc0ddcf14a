"""Capacity and fair-share figures of a platform, in GPUs, for the review tables.

`compute_capacity(specs)` derives, from pools, queues and quotas alone (docs/review.md
defines each figure):

- per pool P: capacity = nodes x accelerators per node; nominal = sum of the queues'
  nominalQuota.gpu on P; unallocated = capacity - nominal (negative: overcommitted);
  lendable = sum over queues in a cohort of min(nominal, lendingLimit) (unset: all);
  borrowable = sum over cohorts of what their queues can borrow on P at once.
- per cohort and pool (C, P): nominal and lendable summed over the member queues;
  borrowable = min(lendable, sum over members q of borrow(q)), where
  borrow(q) = min(borrowingLimit of q (unset: no limit), lendable - lend(q)).
- per queue q: nominal (sum over pools) and reach = sum over pools of
  min(capacity, nominal + borrow(q)) (nominal alone outside a cohort); fair share = sum
  over pools of the cohort's nominal on P x fairShareWeight(q) / sum of the member
  queues' weights on P (its nominal outside a cohort): what weighted fair sharing gives q
  when every member queue is busy.
- per project X, over the queues X holds a Quota on: guaranteed = sum of
  min(quota.gpu, nominal(q)); reachable = sum of min(quota.gpu, reach(q)) (quota.gpu unset:
  no cap). A queue shared by several projects counts fully for each of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from trainform.specs import SpecSet
from trainform.specs.models.platform import Queue, Quota, ResourceAmounts, ResourcePool

ZERO = Decimal(0)


def _gpu(amounts: ResourceAmounts | None) -> Decimal | None:
    if amounts is None or amounts.gpu is None:
        return None
    return amounts.gpu.value


def number(value: Decimal) -> int | float:
    """A figure as JSON shows it: an integer when it is one."""
    return int(value) if value == value.to_integral_value() else float(value)


@dataclass(frozen=True, slots=True)
class PoolFigures:
    capacity: Decimal
    nominal: Decimal
    unallocated: Decimal
    lendable: Decimal
    borrowable: Decimal


@dataclass(frozen=True, slots=True)
class CohortFigures:
    cohort: str
    pool: str
    queues: int
    nominal: Decimal
    lendable: Decimal
    borrowable: Decimal


@dataclass(frozen=True, slots=True)
class QueueFigures:
    nominal: Decimal
    reach: Decimal
    fair_share: Decimal = ZERO


@dataclass(frozen=True, slots=True)
class ProjectFigures:
    guaranteed: Decimal
    reachable: Decimal
    queues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Capacity:
    pools: dict[str, PoolFigures]
    cohorts: dict[str, CohortFigures]
    queues: dict[str, QueueFigures]
    projects: dict[str, ProjectFigures]


@dataclass(frozen=True, slots=True)
class _Entry:
    queue: str
    cohort: str | None
    pool: str
    nominal: Decimal
    lend: Decimal
    borrowing_limit: Decimal | None
    weight: Decimal = ZERO


def _entries(specs: SpecSet) -> list[_Entry]:
    entries = []
    for resource in specs.resources.values():
        if resource.kind != "Queue":
            continue
        queue: Queue = resource.document  # type: ignore[assignment]
        cohort = queue.spec.cohort
        for entry in queue.spec.pools:
            nominal = _gpu(entry.nominal_quota) or ZERO
            lending = _gpu(entry.lending_limit)
            lend = ZERO if cohort is None else min(nominal, nominal if lending is None else lending)
            borrowing = _gpu(entry.borrowing_limit)
            weight = Decimal(str(queue.spec.fair_share_weight))
            entries.append(
                _Entry(resource.name, cohort, entry.pool, nominal, lend, borrowing, weight)
            )
    return entries


def _pool_capacities(specs: SpecSet) -> dict[str, Decimal]:
    capacities = {}
    for resource in specs.resources.values():
        if resource.kind == "ResourcePool":
            pool: ResourcePool = resource.document  # type: ignore[assignment]
            capacities[resource.name] = Decimal(pool.spec.gpus())
    return capacities


def compute_capacity(specs: SpecSet) -> Capacity:
    """Every figure of the module docstring for one spec set."""
    capacities = _pool_capacities(specs)
    entries = _entries(specs)
    members: dict[tuple[str, str], list[_Entry]] = defaultdict(list)
    for entry in entries:
        if entry.cohort is not None:
            members[(entry.cohort, entry.pool)].append(entry)

    borrow: dict[tuple[str, str], Decimal] = {}
    cohorts: dict[str, CohortFigures] = {}
    for (cohort, pool), group in sorted(members.items()):
        lendable = sum((e.lend for e in group), ZERO)
        total = ZERO
        for e in group:
            others = lendable - e.lend
            amount = others if e.borrowing_limit is None else min(e.borrowing_limit, others)
            borrow[(e.queue, pool)] = amount
            total += amount
        nominal = sum((e.nominal for e in group), ZERO)
        cohorts[f"{cohort}/{pool}"] = CohortFigures(
            cohort, pool, len(group), nominal, lendable, min(lendable, total)
        )

    pools: dict[str, PoolFigures] = {}
    for pool, capacity in sorted(capacities.items()):
        nominal = sum((e.nominal for e in entries if e.pool == pool), ZERO)
        lendable = sum((e.lend for e in entries if e.pool == pool), ZERO)
        borrowable = sum((c.borrowable for c in cohorts.values() if c.pool == pool), ZERO)
        pools[pool] = PoolFigures(capacity, nominal, capacity - nominal, lendable, borrowable)

    queue_nominal: dict[str, Decimal] = defaultdict(Decimal)
    queue_reach: dict[str, Decimal] = defaultdict(Decimal)
    queue_share: dict[str, Decimal] = defaultdict(Decimal)
    for e in entries:
        capacity = capacities.get(e.pool, ZERO)
        queue_nominal[e.queue] += e.nominal
        queue_reach[e.queue] += min(capacity, e.nominal + borrow.get((e.queue, e.pool), ZERO))
        queue_share[e.queue] += _fair_share(e, members.get((e.cohort or "", e.pool), []))
    queues = {
        name: QueueFigures(queue_nominal[name], queue_reach[name], queue_share[name])
        for name in sorted(queue_nominal)
    }
    return Capacity(pools, cohorts, queues, _projects(specs, queues))


def _fair_share(entry: _Entry, group: list[_Entry]) -> Decimal:
    """Weighted share of the cohort's nominal quota on the entry's pool (two decimals)."""
    if entry.cohort is None:
        return entry.nominal
    weights = sum((e.weight for e in group), ZERO)
    if weights == 0:
        return ZERO
    nominal = sum((e.nominal for e in group), ZERO)
    return (nominal * entry.weight / weights).quantize(Decimal("0.01")).normalize()


def _projects(specs: SpecSet, queues: dict[str, QueueFigures]) -> dict[str, ProjectFigures]:
    held: dict[str, list[Quota]] = defaultdict(list)
    for resource in specs.resources.values():
        if resource.kind == "Project":
            held.setdefault(resource.name, [])
        elif resource.kind == "Quota" and resource.project is not None:
            held[resource.project].append(resource.document)  # type: ignore[arg-type]
    projects = {}
    for project, quotas in sorted(held.items()):
        guaranteed = reachable = ZERO
        for quota in quotas:
            figures = queues.get(quota.spec.queue, QueueFigures(ZERO, ZERO))
            cap = quota.spec.limits.gpu.value if quota.spec.limits.gpu is not None else None
            guaranteed += figures.nominal if cap is None else min(cap, figures.nominal)
            reachable += figures.reach if cap is None else min(cap, figures.reach)
        names = tuple(sorted(quota.spec.queue for quota in quotas))
        projects[project] = ProjectFigures(guaranteed, reachable, names)
    return projects


def capacity_json(capacity: Capacity) -> dict[str, Any]:
    def figures(item: Any, names: tuple[str, ...]) -> dict[str, Any]:
        return {name: number(getattr(item, name)) for name in names}

    return {
        "pools": {
            name: figures(p, ("capacity", "nominal", "unallocated", "lendable", "borrowable"))
            for name, p in capacity.pools.items()
        },
        "cohorts": {
            key: {"cohort": c.cohort, "pool": c.pool, "queues": c.queues}
            | figures(c, ("nominal", "lendable", "borrowable"))
            for key, c in capacity.cohorts.items()
        },
        "queues": {
            name: figures(q, ("nominal", "reach", "fair_share"))
            for name, q in capacity.queues.items()
        },
        "projects": {
            name: figures(p, ("guaranteed", "reachable")) | {"queues": list(p.queues)}
            for name, p in capacity.projects.items()
        },
    }
