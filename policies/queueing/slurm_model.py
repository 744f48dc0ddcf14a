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
from typing import Literal

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
    partitions: dict[str, SlurmPartition] = field(default_factory=dict)
    qos: dict[str, SlurmQos] = field(default_factory=dict)
    associations: dict[tuple[str, str], SlurmAssociation] = field(default_factory=dict)
    weights: SlurmWeights = field(default_factory=SlurmWeights)
    requeue_delay: float = REQUEUE_DELAY
    checkpoint_interval: float | None = None
    """A requeued job restarts from its last checkpoint (every this many seconds of run);
    None: from the start, all its work lost."""
    backfill: bool = True
    backfill_depth: int = 100
    """Pending jobs the backfill pass plans for (Slurm: bf_max_job_test)."""

    def association(self, account: str, partition: str) -> SlurmAssociation | None:
        return self.associations.get((account, partition)) or self.associations.get(
            (account, "")
        )
