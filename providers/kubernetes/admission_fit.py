"""TrainingJobs Kueue would never admit, found at plan time: a workload larger than what
its ClusterQueue and Cohorts could ever provide stays pending for ever (the flavor
assigner's "insufficient quota for <r> in flavor <f>, ... > maximum capacity (<n>)",
pkg/scheduler/flavorassigner, potentialAvailable in pkg/cache/scheduler). Called by
kueue_rules.instance_problems; each problem names the job's field.

A job's pods go to the pools of its queue whose nodes can hold one of them (accelerators,
cpu and memory per node, placement.fits); none fitting is refused first. On each such pool
the job needs `nodes` times its per-node accelerators, cpu and memory, and gets at most:

- from its queue (the queue's Cohort): the pool's nominalQuota plus, with `spec.cohort`,
  what the other queues of that cohort lend on the pool (their lendingLimit, else their
  nominalQuota), capped by the queue's borrowingLimit;
- from its project (the project's ClusterQueue, nominalQuota 0, the Quota's limits as its
  borrowingLimits, project_queues.py): the Quota's gpu, cpu or memory limit, and one pod
  per job under `runningJobs` (0 admits nothing).

A job is refused when every pool it fits lacks one of them; the problem names the
resource that lacks on all of them (its field: `spec.resources.acceleratorsPerNode`,
`.cpu`, `.memory`, or `spec.queue` for `runningJobs: 0`), else `spec.resources`.
`evaluation_fit_problems` applies the same to the evaluations of a job's EvalSuites.
Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.kubernetes.placement import fits, pool_from_facts
from trainform.specs.quantity import parse_quantity

RESOURCES = ("gpu", "cpu", "memory")
FIELDS = {
    "gpu": "spec.resources.acceleratorsPerNode",
    "cpu": "spec.resources.cpu",
    "memory": "spec.resources.memory",
}
WORDS = {"gpu": "accelerators", "cpu": "cpu", "memory": "memory"}


@dataclass(frozen=True)
class Shortfall:
    """One resource a pool cannot ever give the job: by the queue or by the Quota."""

    resource: str
    needed: Decimal
    most: Decimal
    by_quota: bool


def _quantity(value: Any) -> Decimal | None:
    if value is None:
        return None
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None


def _amount(entry: dict[str, Any] | None, field: str, resource: str) -> Decimal | None:
    return _quantity(((entry or {}).get(field) or {}).get(resource))


def queue_capacity(
    queue: dict[str, Any], entry: dict[str, Any], queues: list[dict[str, Any]], resource: str
) -> Decimal:
    """The most of `resource` the queue can ever admit on the entry's pool."""
    nominal = _amount(entry, "nominalQuota", resource) or Decimal(0)
    if not queue.get("cohort"):
        return nominal
    lent = Decimal(0)
    for other in queues:
        if other is queue or other.get("cohort") != queue["cohort"]:
            continue
        for theirs in other.get("pools", []):
            if theirs.get("pool") == entry.get("pool"):
                lending = _amount(theirs, "lendingLimit", resource)
                mine = _amount(theirs, "nominalQuota", resource) or Decimal(0)
                lent += lending if lending is not None else mine
    borrowing = _amount(entry, "borrowingLimit", resource)
    return nominal + (lent if borrowing is None else min(borrowing, lent))


def _needs(wanted: dict[str, Any]) -> dict[str, Decimal]:
    nodes = int(wanted.get("nodes", 1))
    needs = {"gpu": Decimal(int(wanted.get("acceleratorsPerNode", 0)) * nodes)}
    for resource in ("cpu", "memory"):
        per_node = _quantity(wanted.get(resource))
        if per_node is not None:
            needs[resource] = per_node * nodes
    return {resource: amount for resource, amount in needs.items() if amount > 0}


def _shortfalls(
    needs: dict[str, Decimal],
    queue: dict[str, Any],
    entry: dict[str, Any],
    queues: list[dict[str, Any]],
    limits: dict[str, Any] | None,
) -> list[Shortfall]:
    found = []
    for resource, needed in needs.items():
        own = queue_capacity(queue, entry, queues, resource)
        limit = _quantity((limits or {}).get(resource))
        if limit is not None and limit < own and needed > limit:
            found.append(Shortfall(resource, needed, limit, True))
        elif needed > own:
            found.append(Shortfall(resource, needed, own, False))
    return found


def _shown(resource: str, amount: Decimal) -> str:
    """An amount as a user writes it: memory in the largest exact binary unit."""
    if resource == "memory":
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount and amount % size == 0:
                return f"{amount / size:f}{unit}"
    return f"{amount.normalize():f}"


def _described(shortfall: Shortfall, queue: str, quota: str) -> str:
    resource = shortfall.resource
    needed = f"{_shown(resource, shortfall.needed)} {WORDS[resource]} in all"
    if shortfall.by_quota and shortfall.resource == "gpu" and shortfall.most == 0:
        return (
            f"{needed}, but {quota} sets gpu: 0 (no accelerators for this project on queue "
            f"{queue}); Kueue would keep the job pending forever"
        )
    if shortfall.by_quota:
        return (
            f"{needed}: more than {quota} allows ({resource}: "
            f"{_shown(resource, shortfall.most)}, the borrowingLimit of the project's "
            "ClusterQueue); Kueue would keep it pending forever"
        )
    return (
        f"{needed}: more than queue {queue} can ever admit on the pools its pods fit (at "
        f"most {_shown(resource, shortfall.most)}, its quota and what its cohort lends); "
        "Kueue would keep it pending forever"
    )


def job_fit_problems(
    job: DesiredResource,
    queue: dict[str, Any],
    pools: dict[str, dict[str, Any]],
    queues: list[dict[str, Any]],
    quota: DesiredResource | None = None,
) -> list[ValidationProblem]:
    """Why Kueue would never admit `job` on `queue` (the spec of its Queue), given the
    pools and queues of the instance and the project's Quota on the queue (if any)."""
    wanted = job.spec.get("resources") or {}
    per_node = int(wanted.get("acceleratorsPerNode", 0))
    cpu, memory = wanted.get("cpu"), wanted.get("memory")
    entries = [e for e in queue.get("pools", []) if e.get("pool") in pools]
    if not entries:
        return []
    name = job.spec.get("queue", "")

    def problem(field: str, message: str) -> list[ValidationProblem]:
        return [ValidationProblem(job.address, field, message)]

    def holds(entry: dict[str, Any], accelerators: int) -> bool:
        return fits(pool_from_facts(entry["pool"], pools[entry["pool"]]), accelerators, cpu, memory)

    fitting = [e for e in entries if holds(e, 0)]
    if not fitting:
        return problem(
            "spec.resources",
            f"cpu {cpu} and memory {memory} per node: no pool of queue {name} has nodes "
            "that large, so Kueue would find no flavor for its pods",
        )
    fitting = [e for e in fitting if holds(e, per_node)]
    if not fitting:
        return problem(
            "spec.resources.acceleratorsPerNode",
            f"{per_node} accelerators per node: no pool of queue {name} has nodes that "
            "large, so its pods would never be scheduled",
        )
    limits = (quota.spec.get("limits") or {}) if quota is not None else {}
    quota_name = quota.address if quota is not None else ""
    if limits.get("runningJobs") == 0:
        return problem(
            "spec.queue",
            f"{quota_name} sets runningJobs: 0, so Kueue admits no job of project "
            f"{job.project} on queue {name} (its pods quota is 0)",
        )
    needs = _needs(wanted)
    per_pool = [_shortfalls(needs, queue, entry, queues, limits) for entry in fitting]
    if all(per_pool):
        for resource in RESOURCES:
            if all(any(s.resource == resource for s in found) for found in per_pool):
                lacking = [s for found in per_pool for s in found if s.resource == resource]
                shortfall = max(lacking, key=lambda s: s.most)
                return problem(FIELDS[resource], _described(shortfall, name, quota_name))
        return problem(
            "spec.resources",
            f"every pool of queue {name} its pods fit lacks quota for one of its resources "
            "(accelerators, cpu or memory in all); Kueue would keep it pending forever",
        )
    return []


EVALUATION_RESOURCES = {"cpu": "1", "memory": str(512 * 2**20), "nodes": 1}
"""An evaluation's resources when its suite declares none (planner/jobs.py)."""


def evaluation_fit_problems(
    resources: list[DesiredResource], quotas: dict[tuple[str | None, str], DesiredResource]
) -> list[ValidationProblem]:
    """The checks above for evaluations: each runs as a job of its training job's project,
    on its suite's queue (else the job's) with its suite's resources (planner/jobs.py
    evaluation_launch); problems name the EvalSuite. A suite queue where the project has
    no Quota has no LocalQueue, so Kueue would never admit the evaluations either."""
    suites = {(r.project, r.name): r for r in resources if r.kind == "EvalSuite"}
    queues = {r.name: r.spec for r in resources if r.kind == "Queue"}
    pools = {r.name: r.spec for r in resources if r.kind == "ResourcePool"}
    problems: list[ValidationProblem] = []
    seen: set[tuple[str, str | None, str]] = set()
    for job in (r for r in resources if r.kind == "TrainingJob"):
        for binding in job.spec.get("evaluations") or []:
            name = binding.get("suite", "")
            suite = suites.get((job.project, name)) or suites.get((None, name))
            queue = (suite.spec.get("queue") or job.spec.get("queue")) if suite else None
            if suite is None or queue not in queues or (suite.address, job.project, queue) in seen:
                continue
            seen.add((suite.address, job.project, queue))
            quota = quotas.get((job.project, queue))
            if quota is None:
                if suite.spec.get("queue"):  # the job's own queue is checked on the job
                    problems.append(
                        ValidationProblem(
                            suite.address,
                            "spec.queue",
                            f"{job.address} runs this suite's evaluations on queue {queue}, "
                            f"where project {job.project} has no Quota (so no LocalQueue): "
                            "Kueue would never admit them",
                        )
                    )
                continue
            wanted = suite.spec.get("resources") or EVALUATION_RESOURCES
            evaluation = DesiredResource(
                suite.address,
                "EvalSuite",
                suite.name,
                job.project,
                {"spec": {"queue": queue, "resources": wanted}},
            )
            problems += job_fit_problems(
                evaluation, queues[queue], pools, list(queues.values()), quota
            )
    return problems
