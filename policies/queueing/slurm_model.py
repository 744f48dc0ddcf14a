"""The platform as Slurm schedules it: partitions on GPU pools, QOS, associations, weights.

Plain data for `slurm_sim.simulate_slurm`, built from the specs by `slurm_platform_from_specs`
(the provider's mapping: a Queue is a partition with `PriorityTier = defaultPriority` and a
QOS of the same name with `Priority = defaultPriority`, `GrpTRES gres/gpu = nominal +
borrowing limit`, `PreemptMode requeue` when the queue preempts; a Quota is the project's
association on that partition: `GrpTRES gres/gpu`, `MaxJobs`) or by hand (the calibration
test configures a cluster and describes it here). Only GPUs are modelled (docs/simulation.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from trainform.specs import Quantity, SpecSet

PreemptMode = Literal["requeue", "cancel", "off"]
REQUEUE_DELAY = 121.0
"""Seconds a requeued job stays ineligible: slurmctld sets its begin time to now +
the credential lifetime (120 s) + 1, seen as `Reason=BeginTime` on the test cluster."""


@dataclass(frozen=True, slots=True)
class SlurmPartition:
    """A partition: its pool of nodes, its PriorityTier, the QOS its jobs run under."""

    name: str
    pool: str
    tier: int = 1
    qos: str | None = None
    job_factor: int = 1
    """PriorityJobFactor: the partition's share of the multifactor priority."""


@dataclass(frozen=True, slots=True)
class SlurmQos:
    """A QOS: priority, group limits, and which QOS its jobs may preempt (preempt/qos)."""

    name: str
    priority: int = 0
    gpu_limit: int | None = None
    """GrpTRES gres/gpu; when set it replaces the association's GPU limit (Slurm applies
    the first level of its limit hierarchy that defines a limit)."""
    max_jobs: int | None = None
    """GrpJobs: running jobs at once."""
    preempt: tuple[str, ...] = ()
    preempt_mode: PreemptMode = "requeue"
    """What happens to this QOS's jobs when preempted."""


@dataclass(frozen=True, slots=True)
class SlurmAssociation:
    """An account's limits, on one partition ("" for the account as a whole)."""

    account: str
    partition: str = ""
    gpu_limit: int | None = None
    max_jobs: int | None = None


@dataclass(frozen=True, slots=True)
class SlurmWeights:
    """PriorityWeight* of priority/multifactor (0: the factor does not count)."""

    age: int = 0
    partition: int = 0
    qos: int = 0
    job_size: int = 0
    max_age: float = 7 * 86400.0


@dataclass
class SlurmPlatform:
    """GPU pools, partitions by name, QOS by name, associations by (account, partition)."""

    pools: dict[str, int] = field(default_factory=dict)
    node_gpus: dict[str, int] = field(default_factory=dict)
    """GPUs per node of each pool (absent: the pool is one node). Backfill reservations
    hold whole nodes, as slurmctld's backfill map does."""
    partitions: dict[str, SlurmPartition] = field(default_factory=dict)
    qos: dict[str, SlurmQos] = field(default_factory=dict)
    associations: dict[tuple[str, str], SlurmAssociation] = field(default_factory=dict)
    weights: SlurmWeights = field(default_factory=SlurmWeights)
    requeue_delay: float = REQUEUE_DELAY
    checkpoint_interval: float | None = None
    """A requeued job restarts from its last checkpoint (every this many seconds of run);
    None: from the start, all its work lost."""
    release_delay: float = 0.0
    """Seconds from a job's end until its GPUs can be given to another job (the job's
    COMPLETING state: epilog, process clean-up, slurmd's report, the next scheduling
    pass). A property of the cluster; the calibration test measures the test cluster's."""
    sched_interval: float = 0.0
    """When > 0, a submitted job is first seen by the scheduling pass that runs at the
    next multiple of this many seconds (Slurm: sched_interval and batch_sched_delay defer
    the pass a submission triggers); releases still start a pass at once."""
    backfill: bool = True
    backfill_interval: float = 30.0
    """Seconds between backfill passes (Slurm: bf_interval, default 30); 0: at every
    pass. Between them only the main scheduler starts jobs."""
    backfill_resolution: float = 60.0
    """Seconds to which backfill rounds a job's planned end up (Slurm: bf_resolution)."""
    backfill_depth: int = 100
    scan_depth: int = 300
    """Jobs per pool the main scheduler looks at in one pass (Slurm: default_queue_depth
    for event-driven passes; deeper jobs wait with Reason=Priority)."""
    """Pending jobs the backfill pass plans for (Slurm: bf_max_job_test)."""

    def association(self, account: str, partition: str) -> SlurmAssociation | None:
        return self.associations.get((account, partition)) or self.associations.get((account, ""))


def slurm_queue_names(specs: SpecSet) -> set[str]:
    """Queues whose first pool is on a slurm provider instance (scheduled by Slurm)."""
    pools = {
        resource.name: resource.document.spec.provider  # type: ignore[attr-defined]
        for resource in specs.resources.values()
        if resource.kind == "ResourcePool"
    }
    names = set()
    for resource in specs.resources.values():
        if resource.kind != "Queue":
            continue
        entries = resource.document.spec.pools  # type: ignore[attr-defined]
        instance = specs.config.provider(pools.get(entries[0].pool, "")) if entries else None
        if instance is not None and instance.type == "slurm":
            names.add(resource.name)
    return names


def _gpus(quantity: Quantity | None) -> int | None:
    return None if quantity is None else int(quantity.value)


def slurm_platform_from_specs(specs: SpecSet, weights: SlurmWeights | None = None) -> SlurmPlatform:
    """The Slurm view of the specs' Slurm queues, as the provider maps them (module doc)."""
    platform = SlurmPlatform(weights=weights or SlurmWeights())
    queues = slurm_queue_names(specs)
    for resource in specs.resources.values():
        if resource.kind == "ResourcePool":
            spec = resource.document.spec  # type: ignore[attr-defined]
            platform.pools[resource.name] = spec.gpus()
            if spec.accelerator is not None and spec.accelerator.count:
                platform.node_gpus[resource.name] = spec.accelerator.count
    for resource in specs.resources.values():
        if resource.kind == "Queue" and resource.name in queues:
            spec = resource.document.spec  # type: ignore[attr-defined]
            total, unbounded = 0, False
            for entry in spec.pools:
                total += _gpus(entry.nominal_quota.gpu) or 0
                borrowing = _gpus(entry.borrowing_limit.gpu) if entry.borrowing_limit else None
                if spec.cohort and borrowing is None:
                    unbounded = True
                total += borrowing or 0
            priority = max(0, spec.default_priority)
            platform.partitions[resource.name] = SlurmPartition(
                resource.name, spec.pools[0].pool, tier=min(priority, 65533), qos=resource.name
            )
            platform.qos[resource.name] = SlurmQos(
                resource.name, priority=priority, gpu_limit=None if unbounded else total
            )
        elif resource.kind == "Quota" and resource.project:
            spec = resource.document.spec  # type: ignore[attr-defined]
            if spec.queue in queues:
                platform.associations[(resource.project, spec.queue)] = SlurmAssociation(
                    resource.project,
                    spec.queue,
                    gpu_limit=_gpus(spec.limits.gpu),
                    max_jobs=spec.limits.running_jobs,
                )
    return platform
