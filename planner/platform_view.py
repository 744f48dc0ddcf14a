"""The platform view (`status --platform`): capacity, quota and use per pool and queue.

Per pool: its capacity (nodes times the per-node accelerators, CPUs and memory), the
nominal quota queues hold on it and what running attempts use. Per queue: nominal quota,
use, what it borrows beyond nominal, and its running and waiting attempts with their
reasons (and place in the queue, where the provider knows it). Per cohort: borrowing and
lending (planner/cohort_view.py). Per accelerator type: capacity, nominal and use across
the pools of that type, so A100s and H100s are never added into one GPU number.

Amounts are exact `Decimal`s keyed `gpu` (all accelerators), `cpu`, `memory` (bytes) and
`gpu:<type>` (the accelerators of one type, `ResourcePool.spec.accelerator.type`). A
running attempt is charged to the pool its provider reports, else to its queue's only pool;
its accelerators to that pool's type, else to the type all its queue's pools share, else
to `unattributed`. Its memory is what its spec requests (nodes x memory per node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from trainform.planner.amounts import (
    BASE_RESOURCES,
    TYPED,
    add,
    amount,
    amounts_json,
    number,
    zero,
)
from trainform.planner.cohort_view import cohort_views
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.timeline import iso, queue_position
from trainform.planner.usage import accounted_runs
from trainform.planner.workspace import Workspace
from trainform.providers.jobs import AccountedRun, AttemptStatus

FORMAT_VERSION = 1
UNATTRIBUTED = "unattributed"


@dataclass
class QueueView:
    name: str
    provider: str
    pools: list[str]
    nominal: dict[str, Decimal]
    in_use: dict[str, Decimal] = field(default_factory=zero)
    running: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[dict[str, Any]] = field(default_factory=list)
    cohort: str | None = None
    lendable: dict[str, Decimal] = field(default_factory=dict)
    """What it may lend of its nominal quota (its lending limits; nominal where unset)."""

    @property
    def borrowed(self) -> dict[str, Decimal]:
        return {
            k: max(Decimal(0), self.in_use[k] - self.nominal.get(k, Decimal(0)))
            for k in self.in_use
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.name,
            "provider": self.provider,
            "cohort": self.cohort,
            "pools": self.pools,
            "nominal": amounts_json(self.nominal),
            "inUse": amounts_json(self.in_use),
            "borrowed": amounts_json(self.borrowed),
            "running": self.running,
            "waiting": self.waiting,
        }


@dataclass
class PoolView:
    name: str
    provider: str
    nodes: int
    capacity: dict[str, Decimal]
    accelerator: str = ""
    """The accelerator type of its nodes ("" for a CPU-only pool)."""
    nominal: dict[str, Decimal] = field(default_factory=zero)
    in_use: dict[str, Decimal] = field(default_factory=zero)

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.name,
            "provider": self.provider,
            "nodes": self.nodes,
            "accelerator": self.accelerator or None,
            "capacity": amounts_json(self.capacity),
            "nominal": amounts_json(self.nominal),
            "inUse": amounts_json(self.in_use),
        }


def accelerator_rows(pools: list[PoolView], queues: list[QueueView]) -> list[dict[str, Any]]:
    """Per accelerator type: its pools, capacity, nominal quota and accelerators in use."""
    rows: dict[str, dict[str, Any]] = {}
    for pool in pools:
        if not pool.accelerator:
            continue
        row = rows.setdefault(
            pool.accelerator,
            {"type": pool.accelerator, "pools": [], "capacity": 0, "nominal": 0, "inUse": 0},
        )
        row["pools"].append(pool.name)
        row["capacity"] += number(pool.capacity["gpu"])
        row["nominal"] += number(pool.nominal.get(TYPED + pool.accelerator, Decimal(0)))
    for queue in queues:
        for key, used in queue.in_use.items():
            if key.startswith(TYPED) and used:
                kind = key[len(TYPED) :]
                row = rows.setdefault(
                    kind, {"type": kind, "pools": [], "capacity": 0, "nominal": 0, "inUse": 0}
                )
                row["inUse"] += number(used)
    return [rows[k] for k in sorted(rows)]


@dataclass
class PlatformView:
    pools: list[PoolView]
    queues: list[QueueView]
    problems: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "accelerators": accelerator_rows(self.pools, self.queues),
            "pools": [p.to_json() for p in self.pools],
            "queues": [q.to_json() for q in self.queues],
            "cohorts": [c.to_json() for c in cohort_views(self.queues)],
            "problems": self.problems,
        }


def pool_views(desired: dict[str, DesiredItem]) -> dict[str, PoolView]:
    pools: dict[str, PoolView] = {}
    for item in desired.values():
        if item.kind != "ResourcePool":
            continue
        spec = item.document["spec"]
        accelerator = spec.get("accelerator") or {}
        nodes = int(spec["nodes"])
        gpus = Decimal(nodes * int(accelerator.get("count") or 0))
        capacity = {
            "gpu": gpus,
            "cpu": Decimal(nodes) * amount(spec.get("cpu")),
            "memory": Decimal(nodes) * amount(spec.get("memory")),
        }
        kind = str(accelerator.get("type") or "")
        if kind:
            capacity[TYPED + kind] = gpus
        pools[item.name] = PoolView(item.name, item.providers[0], nodes, capacity, kind)
    return pools


def queue_views(
    desired: dict[str, DesiredItem], pools: dict[str, PoolView]
) -> dict[str, QueueView]:
    """Each Queue's nominal and lendable quota (adding its nominal quota to its pools')."""
    queues: dict[str, QueueView] = {}
    for item in desired.values():
        if item.kind != "Queue":
            continue
        spec = item.document["spec"]
        nominal, lendable = zero(), zero()
        names = []
        for entry in spec.get("pools", []):
            names.append(entry["pool"])
            quota = entry.get("nominalQuota") or {}
            limits = entry.get("lendingLimit") or {}
            pool = pools.get(entry["pool"])
            keys = list(BASE_RESOURCES)
            for resource in keys:
                value = amount(quota.get(resource))
                nominal[resource] += value
                lendable[resource] += amount(limits.get(resource, quota.get(resource)))
                if pool is not None:
                    pool.nominal[resource] += value
            if pool is not None and pool.accelerator:
                typed, value = TYPED + pool.accelerator, amount(quota.get("gpu"))
                add(nominal, typed, value)
                add(lendable, typed, amount(limits.get("gpu", quota.get("gpu"))))
                add(pool.nominal, typed, value)
        queues[item.name] = QueueView(
            item.name,
            item.providers[0],
            names,
            nominal,
            cohort=spec.get("cohort"),
            lendable=lendable,
        )
    return queues


def charge_running(
    accounted: AccountedRun,
    attempt: AttemptStatus,
    queue: QueueView,
    pools: dict[str, PoolView],
    memory: Decimal,
) -> None:
    """Add a running attempt's accelerators, CPUs and memory to its queue and pool."""
    pool = pools.get(accounted.pool) if accounted.pool in queue.pools else None
    if pool is None and len(queue.pools) == 1:
        pool = pools.get(queue.pools[0])
    kinds = {pools[p].accelerator for p in queue.pools if p in pools}
    kind = pool.accelerator if pool is not None else (kinds.pop() if len(kinds) == 1 else "")
    used = {"gpu": Decimal(attempt.gpus), "cpu": Decimal(str(attempt.cpus)), "memory": memory}
    if attempt.gpus:
        used[TYPED + (kind or UNATTRIBUTED)] = Decimal(attempt.gpus)
    for key, value in used.items():
        add(queue.in_use, key, value)
        if pool is not None:
            add(pool.in_use, key, value)


def _requested_memory(desired: dict[str, DesiredItem], address: str, nodes: int) -> Decimal:
    item = desired.get(address)
    resources = (item.document["spec"].get("resources") or {}) if item is not None else {}
    return Decimal(max(nodes, 1)) * amount(resources.get("memory"))


def platform_view(workspace: Workspace, now: datetime | None = None) -> PlatformView:
    now = now or datetime.now(UTC)
    desired = build_desired(workspace.specs)
    pools = pool_views(desired)
    queues = queue_views(desired, pools)
    runs, _, problems = accounted_runs(workspace, iso(now))
    for accounted in runs:
        for attempt in accounted.run.attempts:
            view = queues.get(attempt.queue or accounted.queue)
            if attempt.phase.finished or view is None:
                continue
            entry = {
                "address": accounted.address,
                "runId": accounted.run.run_id,
                "attempt": attempt.attempt,
                "project": accounted.project,
                "gpus": attempt.gpus,
                "cpus": attempt.cpus,
            }
            if attempt.phase == "running":
                view.running.append(entry | {"startedAt": attempt.started_at or None})
                memory = _requested_memory(desired, accounted.address, attempt.nodes)
                charge_running(accounted, attempt, view, pools, memory)
                continue
            view.waiting.append(
                entry
                | {
                    "submittedAt": attempt.submitted_at or None,
                    "eligibleAt": attempt.eligible_at or None,
                    "reason": attempt.reason,
                    "queuePosition": queue_position(attempt),
                }
            )
    return PlatformView(
        sorted(pools.values(), key=lambda p: p.name),
        sorted(queues.values(), key=lambda q: q.name),
        problems,
    )
