"""Capacity policies: nominal quotas within pool capacity, borrowing and lending in cohorts.

Rules (docs/policies.md has the reasoning):
- pool-capacity: per pool and resource (gpu, cpu, memory), the sum of the nominal quotas
  of every queue on the pool is at most the pool's capacity: nodes x accelerator.count for
  gpu, nodes x cpu, nodes x memory. Each queue contributing to an overcommitted sum gets a
  finding at its own nominalQuota field.
- cohort-lending: a queue lends at most what it owns: lendingLimit <= nominalQuota.
- cohort-borrowing: a borrowingLimit is reachable: the queue is not alone in its cohort on
  that pool, and it does not exceed what the other queues of the cohort can lend there
  (their lendingLimit, else their nominal quota).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import PolicyContext, Subject, amount, show_amount
from trainform.policies.findings import Severity

RESOURCES = ("gpu", "cpu", "memory")


def pool_capacity(pool: Subject) -> dict[str, Decimal]:
    spec = pool.spec
    nodes = Decimal(int(spec.get("nodes", 0)))
    accelerator = spec.get("accelerator") or {}
    return {
        "gpu": nodes * int(accelerator.get("count", 0)),
        "cpu": nodes * amount(spec.get("cpu")),
        "memory": nodes * amount(spec.get("memory")),
    }


def queue_entries(context: PolicyContext) -> Iterator[tuple[Subject, int, dict[str, Any]]]:
    """(queue, index, pool entry) for every pool entry of every queue."""
    for queue in context.of_kind("Queue"):
        for index, entry in enumerate(queue.spec.get("pools", [])):
            yield queue, index, entry


def check_capacity(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    pools = {pool.name: pool for pool in context.of_kind("ResourcePool")}
    users: dict[tuple[str, str], list[tuple[Subject, int, Decimal]]] = {}
    for queue, index, entry in queue_entries(context):
        for resource in RESOURCES:
            value = amount(entry.get("nominalQuota", {}).get(resource))
            if value:
                users.setdefault((entry["pool"], resource), []).append((queue, index, value))
    for (pool_name, resource), contributors in users.items():
        pool = pools.get(pool_name)
        if pool is None:
            continue
        capacity = pool_capacity(pool)[resource]
        total = sum((value for _, _, value in contributors), Decimal(0))
        if total <= capacity:
            continue
        shares = ", ".join(f"{q.name} {show_amount(v)}" for q, _, v in contributors)
        for queue, index, _ in contributors:
            yield Violation(
                queue.address,
                ("spec", "pools", index, "nominalQuota", resource),
                f"nominal {resource} quotas on pool {pool_name} sum to {show_amount(total)}, "
                f"more than its capacity {show_amount(capacity)} ({shares})",
                key=f"{pool_name}/{resource}",
            )


def check_lending(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    for queue, index, entry in queue_entries(context):
        lending = entry.get("lendingLimit") or {}
        nominal = entry.get("nominalQuota") or {}
        for resource in RESOURCES:
            if resource in lending and amount(lending[resource]) > amount(nominal.get(resource)):
                yield Violation(
                    queue.address,
                    ("spec", "pools", index, "lendingLimit", resource),
                    f"lendingLimit {resource} {show_amount(amount(lending[resource]))} on pool "
                    f"{entry['pool']} exceeds the nominal quota "
                    f"{show_amount(amount(nominal.get(resource)))}: a queue lends only what it "
                    "owns",
                    key=f"{entry['pool']}/{resource}",
                )


def _lendable(entry: dict[str, Any], resource: str) -> Decimal:
    lending = entry.get("lendingLimit") or {}
    if resource in lending:
        return min(amount(lending[resource]), amount(entry["nominalQuota"].get(resource)))
    return amount(entry.get("nominalQuota", {}).get(resource))


def check_borrowing(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    members: dict[tuple[str, str], list[tuple[Subject, dict[str, Any]]]] = {}
    for queue, _, entry in queue_entries(context):
        cohort = queue.spec.get("cohort")
        if cohort:
            members.setdefault((cohort, entry["pool"]), []).append((queue, entry))
    for queue, index, entry in queue_entries(context):
        borrowing = entry.get("borrowingLimit")
        cohort = queue.spec.get("cohort")
        if not borrowing or not cohort:
            continue
        others = [e for q, e in members[(cohort, entry["pool"])] if q.address != queue.address]
        for resource in RESOURCES:
            wanted = amount(borrowing.get(resource))
            if not wanted:
                continue
            path = ("spec", "pools", index, "borrowingLimit", resource)
            key = f"{entry['pool']}/{resource}"
            if not others:
                yield Violation(
                    queue.address,
                    path,
                    f"borrowingLimit {resource} on pool {entry['pool']}: no other queue of "
                    f"cohort {cohort} has quota on that pool, so there is nothing to borrow",
                    key=key + "/alone",
                )
                continue
            lendable = sum((_lendable(e, resource) for e in others), Decimal(0))
            if wanted > lendable:
                yield Violation(
                    queue.address,
                    path,
                    f"borrowingLimit {resource} {show_amount(wanted)} on pool {entry['pool']} "
                    f"exceeds what the rest of cohort {cohort} can lend there "
                    f"({show_amount(lendable)})",
                    key=key,
                )


POOL_CAPACITY = BuiltinPolicy(
    id="pool-capacity",
    name="Nominal quotas within pool capacity",
    severity=Severity.DENY,
    kinds=("Queue", "ResourcePool"),
    check=check_capacity,
    description="Per pool and resource, the queues' nominal quotas sum to at most the pool's "
    "capacity (nodes x accelerator.count GPUs, nodes x cpu, nodes x memory).",
)

COHORT_LENDING = BuiltinPolicy(
    id="cohort-lending",
    name="Lending limits within nominal quota",
    severity=Severity.DENY,
    kinds=("Queue",),
    check=check_lending,
    description="lendingLimit <= nominalQuota for every pool entry and resource.",
)

COHORT_BORROWING = BuiltinPolicy(
    id="cohort-borrowing",
    name="Borrowing limits reachable within the cohort",
    severity=Severity.WARN,
    kinds=("Queue",),
    check=check_borrowing,
    description="A borrowingLimit needs other queues of the cohort on the same pool, and is "
    "at most what they can lend there (lendingLimit, else nominal quota).",
)
