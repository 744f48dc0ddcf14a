"""Platform-configuration kinds: Project, ResourcePool, Queue, Quota.

These describe capacity and admission: which nodes exist (pools), how they are shared
(queues in cohorts with borrowing and lending limits, preemption, fair share) and what
each tenant (project) may use on each queue (quotas).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from trainform.specs.models.base import DocumentBase, Metadata, Reference, Scope, SpecModel
from trainform.specs.models.slurm import SlurmAccount, SlurmQueue, SlurmQuota
from trainform.specs.names import SLURM_RESERVED, LabelKey, LabelValue, ResourceName
from trainform.specs.quantity import Duration, Quantity


class SlurmNamed(DocumentBase):
    """A kind whose name becomes a Slurm account or partition: Slurm's keywords are out."""

    @field_validator("metadata")
    @classmethod
    def _name_not_reserved(cls, metadata: Metadata) -> Metadata:
        if metadata.name in SLURM_RESERVED:
            raise ValueError(f"{metadata.name!r} is reserved by Slurm; choose another name")
        return metadata


class ProjectSpec(SpecModel):
    display_name: str = Field(default="", description="Human-readable project name.")
    owners: list[str] = Field(
        min_length=1, description="People or groups accountable for the project."
    )
    users: list[ResourceName] = Field(
        default_factory=list,
        description="Accounts allowed to submit jobs (Slurm users of the project's account).",
    )
    spec_paths: list[str] = Field(
        default_factory=list,
        description="Glob patterns, relative to the spec folder, that this project's "
        "resources may be declared from (project isolation). Empty: anywhere.",
    )
    storage_prefix: str = Field(
        default="",
        description="Object-storage prefix for the project's checkpoints and results "
        "(defaults to projects/<name>/).",
    )
    slurm: SlurmAccount | None = Field(
        default=None, description="Slurm account settings beyond users (hierarchy, limits)."
    )


class Project(SlurmNamed):
    """A tenant: a Kubernetes namespace, a Slurm account and a storage prefix."""

    kind: Literal["Project"] = Field(description="Project")
    spec: ProjectSpec = Field(description="Owners, users and allowed spec paths.")
    scope: ClassVar[Scope] = Scope.GLOBAL


class Accelerator(SpecModel):
    type: str = Field(
        min_length=1, max_length=63, description="Accelerator model, e.g. nvidia-h100-80gb."
    )
    count: int = Field(ge=1, le=64, description="Accelerators per node.")
    resource_name: str = Field(
        default="nvidia.com/gpu",
        description="Extended resource name on Kubernetes / GRES name on Slurm (gpu).",
    )


class Toleration(SpecModel):
    key: str = Field(description="Taint key the toleration matches.")
    operator: Literal["Exists", "Equal"] = Field(default="Equal", description="Match operator.")
    value: str = Field(default="", description="Taint value (for Equal).")
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="", description="Taint effect matched; empty matches all."
    )


class ResourcePoolSpec(SpecModel):
    provider: ResourceName = Field(
        description="Provider instance (from trainform.yaml) the nodes belong to."
    )
    nodes: int = Field(ge=1, le=100_000, description="Number of nodes in the pool.")
    accelerator: Accelerator | None = Field(
        default=None, description="Accelerators on each node; omit for CPU-only pools."
    )
    cpu: Quantity = Field(description="CPUs per node.")
    memory: Quantity = Field(description="Memory per node, e.g. 2Ti.")
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Kubernetes node labels selecting the pool's nodes."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Taints the pool's workloads tolerate (Kubernetes)."
    )
    node_list: str = Field(
        default="",
        description="Slurm hostlist expression of the pool's nodes, e.g. gpu[001-016].",
    )
    features: list[str] = Field(
        default_factory=list, description="Slurm node features that select the pool's nodes."
    )
    topology: list[LabelKey] = Field(
        default_factory=list,
        description="Topology levels from widest to narrowest, as node label keys "
        "(e.g. block, rack, hostname) for topology-aware placement.",
    )

    def gpus(self) -> int:
        return self.nodes * (self.accelerator.count if self.accelerator else 0)


class ResourcePool(DocumentBase):
    """A set of nodes of one flavor on one provider instance."""

    kind: Literal["ResourcePool"] = Field(description="ResourcePool")
    spec: ResourcePoolSpec = Field(description="Nodes, accelerators and placement.")
    scope: ClassVar[Scope] = Scope.GLOBAL


class ResourceAmounts(SpecModel):
    gpu: Quantity | None = Field(default=None, description="Accelerators.")
    cpu: Quantity | None = Field(default=None, description="CPUs.")
    memory: Quantity | None = Field(default=None, description="Memory, e.g. 512Gi.")


class QueuePool(SpecModel):
    pool: ResourceName = Field(description="ResourcePool this quota applies to.")
    nominal_quota: ResourceAmounts = Field(
        description="Resources the queue is guaranteed from the pool (Kueue nominalQuota)."
    )
    borrowing_limit: ResourceAmounts | None = Field(
        default=None,
        description="Most the queue may borrow above nominal from its cohort; unset means "
        "no limit. Requires a cohort.",
    )
    lending_limit: ResourceAmounts | None = Field(
        default=None,
        description="Most of its nominal quota the queue lends to its cohort; unset means all.",
    )


class BorrowWithinCohort(SpecModel):
    policy: Literal["Never", "LowerPriority"] = Field(
        default="Never", description="Whether a borrowing job may preempt in the cohort."
    )
    max_priority_threshold: int | None = Field(
        default=None, description="Only jobs at or below this priority may be preempted."
    )


class Preemption(SpecModel):
    within_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        default="Never", description="Preempt jobs of the same queue to admit a job."
    )
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        default="Never", description="Preempt borrowers in the cohort to reclaim nominal quota."
    )
    borrow_within_cohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort, description="Preemption while borrowing."
    )


class QueueSpec(SpecModel):
    pools: list[QueuePool] = Field(
        min_length=1, description="Pools the queue admits onto, each with its quota."
    )
    cohort: ResourceName | None = Field(
        default=None, description="Cohort whose queues borrow unused quota from each other."
    )
    default_priority: int = Field(
        default=0, ge=-(2**31), le=2**31 - 1, description="Priority of jobs that set none."
    )
    preemption: Preemption = Field(
        default_factory=Preemption, description="Preemption policy (Kueue semantics)."
    )
    fair_share_weight: float = Field(
        default=1.0, ge=0, description="Weight of the queue in fair sharing of the cohort."
    )
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        default="BestEffortFIFO", description="Order of admission within the queue."
    )
    max_runtime: Duration | None = Field(
        default=None, description="Longest a job on this queue may run."
    )
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = Field(
        default="None", description="Stop admitting (Hold) or also evict running jobs."
    )
    slurm: SlurmQueue | None = Field(
        default=None, description="Partition and QOS settings stated in Slurm's terms."
    )

    @model_validator(mode="after")
    def _borrowing_needs_cohort(self) -> QueueSpec:
        if self.cohort is None:
            for pool in self.pools:
                if pool.borrowing_limit is not None:
                    raise ValueError("borrowingLimit requires a cohort")
        return self


class Queue(SlurmNamed):
    """Admission for one or more pools: quota, cohort, borrowing, priority, preemption."""

    kind: Literal["Queue"] = Field(description="Queue")
    spec: QueueSpec = Field(description="Quotas per pool and admission policy.")
    scope: ClassVar[Scope] = Scope.GLOBAL

    def spec_references(self) -> list[Reference]:
        refs = [
            Reference("ResourcePool", entry.pool, ("spec", "pools", index, "pool"))
            for index, entry in enumerate(self.spec.pools)
        ]
        if self.spec.slurm is not None and self.spec.slurm.qos_from is not None:
            refs.append(Reference("Queue", self.spec.slurm.qos_from, ("spec", "slurm", "qosFrom")))
        return refs


class QuotaLimits(SpecModel):
    gpu: Quantity | None = Field(default=None, description="Accelerators in use at once.")
    cpu: Quantity | None = Field(default=None, description="CPUs in use at once.")
    memory: Quantity | None = Field(default=None, description="Memory in use at once.")
    running_jobs: int | None = Field(default=None, ge=0, description="Jobs running at once.")
    max_wall_time: Duration | None = Field(default=None, description="Longest single job.")


class QuotaSpec(SpecModel):
    queue: ResourceName = Field(description="Queue the limits apply to.")
    limits: QuotaLimits = Field(description="The project's limits on that queue.")
    slurm: SlurmQuota | None = Field(
        default=None, description="The user associations on the queue's Slurm partition."
    )


class Quota(DocumentBase):
    """A project's limits on one queue."""

    kind: Literal["Quota"] = Field(description="Quota")
    spec: QuotaSpec = Field(description="Queue and limits.")
    scope: ClassVar[Scope] = Scope.PROJECT

    def spec_references(self) -> list[Reference]:
        return [Reference("Queue", self.spec.queue, ("spec", "queue"))]
