"""The platform as Slurm schedules it: partitions on GPU pools, QOS, associations, weights.

Plain data for `slurm_sim.simulate_slurm`, built from the specs by
`slurm_specs.slurm_platform_from_specs` (the settings the Slurm provider writes, generic
fields and `spec.slurm.*` alike) or by hand in tests. Only GPUs are modelled
(docs/simulation.md).
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
    user_gpu_limit: int | None = None
    """MaxTRESPerUser gres/gpu: GPUs one user's jobs of this QOS hold at once."""
    user_max_jobs: int | None = None
    """MaxJobsPerUser: one user's running jobs of this QOS (it hides associations' MaxJobs)."""
    preempt: tuple[str, ...] = ()
    preempt_mode: PreemptMode = "requeue"
    """What happens to this QOS's jobs when preempted."""


@dataclass(frozen=True, slots=True)
class SlurmAssociation:
    """An account's limits (`user` ""), or one user's in the account; on one partition
    ("" for all of them)."""

    account: str
    partition: str = ""
    gpu_limit: int | None = None
    """GrpTRES gres/gpu: GPUs of the association and those below it at once."""
    max_jobs: int | None = None
    """GrpJobs: running jobs of the association and those below it."""
    user: str = ""
    user_max_jobs: int | None = None
    """MaxJobs: running jobs of one user's association; set on an account, it holds for
    each user association below that sets none."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.account, self.partition, self.user)


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
    user_associations: dict[tuple[str, str, str], SlurmAssociation] = field(default_factory=dict)
    """By (account, user, partition); partition "" for the user's association on all."""
    parents: dict[str, str] = field(default_factory=dict)
    """Account -> its parent account: group limits of every ancestor hold too."""
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

    def chain(self, account: str, user: str | None, partition: str) -> list[SlurmAssociation]:
        """The associations whose limits a job of `user` in `account` on `partition` counts
        against: the user's (on the partition, else on all), the account's, its parents'."""
        found = []
        if user:
            mine = self.user_associations.get((account, user, partition))
            mine = mine or self.user_associations.get((account, user, ""))
            if mine is not None:
                found.append(mine)
        seen = set()
        current: str | None = account
        while current and current not in seen:
            seen.add(current)
            own = self.association(current, partition) if current == account else None
            own = own or self.associations.get((current, ""))
            if own is not None:
                found.append(own)
            current = self.parents.get(current)
        return found
