"""The platform as the simulator sees it: GPU pools, queues with quotas, project caps.

`PlatformModel` is plain data, built by `platform_from_specs` from a loaded SpecSet (the
review command does this for the base and the head ref) or by hand in tests. Only GPUs
are modelled: GPU capacity is what training queues contend for and what quotas and
borrowing are reviewed for; CPU and memory quotas are sized around the GPUs and rarely
bind, and modelling them would need per-job CPU and memory that job traces (and sacct's
GPU accounting) often lack. Capacity of a pool is nodes x accelerator.count (0 for
CPU-only pools, on which no GPU job is ever admitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from trainform.specs import Quantity, SpecSet
    from trainform.specs.models.platform import QueueSpec

WithinQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
Reclaim = Literal["Never", "LowerPriority", "Any"]
BorrowPreemption = Literal["Never", "LowerPriority"]
Strategy = Literal["BestEffortFIFO", "StrictFIFO"]


@dataclass(frozen=True, slots=True)
class PoolQuota:
    """A queue's GPUs on one pool (Kueue: one flavor of a ClusterQueue's resource group).

    `borrowing_limit` None: unlimited within the cohort (0 when the queue has no cohort).
    `lending_limit` None: the whole nominal quota may be lent."""

    pool: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class QueueModel:
    """Admission policy of one queue. `pools` are tried in order (Kueue's flavor order)."""

    name: str
    pools: tuple[PoolQuota, ...]
    cohort: str | None = None
    default_priority: int = 0
    within_queue: WithinQueue = "Never"
    reclaim_within_cohort: Reclaim = "Never"
    borrow_within_cohort: BorrowPreemption = "Never"
    borrow_max_priority: int | None = None
    fair_share_weight: float = 1.0
    queueing_strategy: Strategy = "BestEffortFIFO"
    requires_quota: bool = False
    """Whether a project without a Quota on the queue runs nothing on it: a Kubernetes queue
    (the project's namespace has no LocalQueue; the provider refuses its jobs at plan,
    providers/kubernetes/kueue_rules.py). A local queue admits such a project up to the
    queue's own quota (providers/local/admission.py)."""


@dataclass(frozen=True, slots=True)
class ProjectQuota:
    """A project's caps on one queue (from a Quota): GPUs in use and jobs running at once.
    None: no cap."""

    project: str
    queue: str
    gpus: int | None = None
    running_jobs: int | None = None


@dataclass
class PlatformModel:
    """GPU capacity per pool, queues by name, and project quotas by (project, queue)."""

    pools: dict[str, int] = field(default_factory=dict)
    queues: dict[str, QueueModel] = field(default_factory=dict)
    quotas: dict[tuple[str, str], ProjectQuota] = field(default_factory=dict)


def platform_from_specs(specs: SpecSet) -> PlatformModel:
    """The GPU view of the ResourcePool, Queue and Quota documents of `specs`."""
    model = PlatformModel()
    for resource in specs.resources.values():
        document = resource.document
        if resource.kind == "ResourcePool":
            model.pools[resource.name] = document.spec.gpus()  # type: ignore[attr-defined]
    providers = {
        resource.name: resource.document.spec.provider  # type: ignore[attr-defined]
        for resource in specs.resources.values()
        if resource.kind == "ResourcePool"
    }
    for resource in specs.resources.values():
        if resource.kind == "Queue":
            spec = resource.document.spec  # type: ignore[attr-defined]
            first = spec.pools[0].pool if spec.pools else ""
            instance = specs.config.provider(providers.get(first, ""))
            kubernetes = getattr(instance, "type", "") == "kubernetes"
            model.queues[resource.name] = _queue(resource.name, spec, kubernetes)
        elif resource.kind == "Quota" and resource.project:
            spec = resource.document.spec  # type: ignore[attr-defined]
            model.quotas[(resource.project, spec.queue)] = ProjectQuota(
                project=resource.project,
                queue=spec.queue,
                gpus=_gpus(spec.limits.gpu),
                running_jobs=spec.limits.running_jobs,
            )
    return model


def _queue(name: str, spec: QueueSpec, requires_quota: bool = False) -> QueueModel:
    pools = tuple(
        PoolQuota(
            pool=entry.pool,
            nominal=_gpus(entry.nominal_quota.gpu) or 0,
            borrowing_limit=_gpus(entry.borrowing_limit.gpu) if entry.borrowing_limit else None,
            lending_limit=_gpus(entry.lending_limit.gpu) if entry.lending_limit else None,
        )
        for entry in spec.pools
    )
    preemption = spec.preemption
    return QueueModel(
        name=name,
        pools=pools,
        cohort=spec.cohort,
        default_priority=spec.default_priority,
        within_queue=preemption.within_queue,
        reclaim_within_cohort=preemption.reclaim_within_cohort,
        borrow_within_cohort=preemption.borrow_within_cohort.policy,
        borrow_max_priority=preemption.borrow_within_cohort.max_priority_threshold,
        fair_share_weight=spec.fair_share_weight,
        queueing_strategy=spec.queueing_strategy,
        requires_quota=requires_quota,
    )


def _gpus(quantity: Quantity | None) -> int | None:
    """Whole GPUs of a quantity (rounded down: a fractional GPU cannot be admitted)."""
    if quantity is None:
        return None
    return int(quantity.value)
