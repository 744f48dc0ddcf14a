"""The Slurm model's platform from the specs: the settings the Slurm provider writes.

`slurm_platform_from_specs(specs, cluster)` reads each Slurm Queue, Quota and Project the
way the provider maps them (providers/slurm/settings.py, docs/slurm.md), generic fields and
`spec.slurm.*` alike, a verbatim setting winning over the generic field:

- a Queue is a partition on its first pool: `PriorityTier` and `PriorityJobFactor` as
  `spec.slurm.partition` states them (Slurm's default 1 otherwise; nothing is derived from
  defaultPriority), its QOS `spec.slurm.partition.QOS` (default: the queue's name);
- that QOS's settings are those of the Queue that declares it (the queue itself, or the
  one its `spec.slurm.qosFrom` names): `Priority` = defaultPriority, `GrpTRES` (verbatim,
  else nominal + borrowing limit when any is declared), `GrpJobs`, `MaxTRESPerUser`,
  `MaxJobsPerUser`, `Preempt`, `PreemptMode` (`cluster`: the cluster's PreemptMode);
- a Project is its account's association (`spec.slurm.limits`: GrpTRES, GrpJobs, MaxJobs)
  under `spec.slurm.parent`, with its users' associations (`spec.slurm.users`);
- a Quota's generic `limits` (gpu, runningJobs) are its project's account association's
  GrpTRES and GrpJobs, its `spec.slurm.users` the users' associations on the partition.

Names are lowercased, as Slurm keeps them. Only GPUs (`gres/gpu`) and running-job counts
are modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainform.policies.queueing.slurm_model import (
    SlurmAssociation,
    SlurmPartition,
    SlurmPlatform,
    SlurmQos,
    SlurmWeights,
)
from trainform.providers.slurm import settings as slurm_settings

if TYPE_CHECKING:
    from trainform.specs import Resource, SpecSet

UNSET = ("", "-1", "UNLIMITED", "INFINITE", "NONE")
PREEMPT_MODES = ("requeue", "cancel", "off")


@dataclass(frozen=True, slots=True)
class ClusterPreemption:
    """The cluster's PreemptType and PreemptMode (`scontrol show config`). Unknown (no
    settings read): `preempt/qos` with REQUEUE, what a site stating Preempt lists runs."""

    preempt_type: str = "preempt/qos"
    preempt_mode: str = "requeue"


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


def tres_gpus(text: str | None) -> int | None:
    """The `gres/gpu` count of a TRES list (`cpu=8,gres/gpu=4` -> 4); None when unset."""
    for part in (text or "").split(","):
        name, _, value = part.strip().partition("=")
        if name.lower() == "gres/gpu":
            return _count(value)
    return None


def _count(text: str | None) -> int | None:
    value = (text or "").strip()
    if value.upper() in UNSET:
        return None
    try:
        return max(0, int(value))
    except ValueError:
        return None


def _spec(resource: Resource) -> dict[str, Any]:
    return resource.document.spec.model_dump(by_alias=True, exclude_none=True)  # type: ignore[attr-defined,no-any-return]


def _qos(name: str, spec: dict[str, Any], cluster: ClusterPreemption) -> SlurmQos:
    """The QOS a declaring Queue's spec writes (providers/slurm/settings.queue_qos)."""
    declared = slurm_settings.queue_qos(spec, True, "")
    mode = declared.get("PreemptMode", "cluster").strip().lower().split(",")[0]
    if mode in ("", "cluster"):
        mode = cluster.preempt_mode.lower().split(",")[0]
    preempt = tuple(p.lower() for p in declared.get("Preempt", "").split(",") if p.strip())
    if cluster.preempt_type.lower() != "preempt/qos":
        preempt = ()
    return SlurmQos(
        name,
        priority=_count(declared.get("Priority")) or 0,
        gpu_limit=tres_gpus(declared.get("GrpTRES")),
        max_jobs=_count(declared.get("GrpJobs")),
        user_gpu_limit=tres_gpus(declared.get("MaxTRESPerUser")),
        user_max_jobs=_count(declared.get("MaxJobsPerUser")),
        preempt=preempt,
        preempt_mode=mode if mode in PREEMPT_MODES else "off",  # type: ignore[arg-type]
    )


def _association(account: str, limits: dict[str, str], **where: str) -> SlurmAssociation:
    return SlurmAssociation(
        account,
        gpu_limit=tres_gpus(limits.get("GrpTRES")),
        max_jobs=_count(limits.get("GrpJobs")),
        user_max_jobs=_count(limits.get("MaxJobs")),
        **where,
    )


def _queues(platform: SlurmPlatform, specs: SpecSet, cluster: ClusterPreemption) -> None:
    queues = {
        r.name: _spec(r)
        for r in specs.resources.values()
        if r.kind == "Queue" and r.name in slurm_queue_names(specs)
    }
    for name, spec in sorted(queues.items()):
        partition = (spec.get("slurm") or {}).get("partition") or {}
        qos = slurm_settings.qos_name(name, spec)
        tier = _count(partition.get("PriorityTier"))
        platform.partitions[name] = SlurmPartition(
            name,
            spec["pools"][0]["pool"],
            tier=1 if tier is None else tier,
            qos=qos,
            job_factor=_count(partition.get("PriorityJobFactor")) or 1,
        )
        owner = slurm_settings.qos_from(spec) or name
        if owner in queues and qos not in platform.qos:
            platform.qos[qos] = _qos(qos, queues[owner], cluster)


def _accounts(platform: SlurmPlatform, specs: SpecSet) -> None:
    queues = set(platform.partitions)
    account_limits: dict[str, dict[str, str]] = {}
    for resource in sorted(specs.resources.values(), key=lambda r: r.address):
        spec = _spec(resource)
        slurm = spec.get("slurm") or {}
        if resource.kind == "Project":
            account = resource.name.lower()
            if slurm.get("parent"):
                platform.parents[account] = str(slurm["parent"]).lower()
            account_limits.setdefault(account, {}).update(slurm.get("limits") or {})
            for user, limits in (slurm.get("users") or {}).items():
                key = (account, user.lower(), "")
                platform.user_associations[key] = _association(account, limits, user=key[1])
        elif resource.kind == "Quota" and resource.project and spec["queue"] in queues:
            account = resource.project.lower()
            generic = slurm_settings.quota_account_limits(spec.get("limits") or {})
            mine = account_limits.setdefault(account, {})
            for key, value in generic.items():
                mine.setdefault(key, value)
            for user, limits in (slurm.get("users") or {}).items():
                key = (account, user.lower(), spec["queue"])
                platform.user_associations[key] = _association(
                    account, limits, user=key[1], partition=key[2]
                )
    for account, limits in account_limits.items():
        association = _association(account, limits)
        if association != SlurmAssociation(account):
            platform.associations[(account, "")] = association


def slurm_platform_from_specs(
    specs: SpecSet,
    weights: SlurmWeights | None = None,
    cluster: ClusterPreemption | None = None,
) -> SlurmPlatform:
    """The Slurm view of the specs' Slurm queues, as the provider writes them (module doc)."""
    platform = SlurmPlatform(weights=weights or SlurmWeights())
    for resource in specs.resources.values():
        if resource.kind == "ResourcePool":
            spec = resource.document.spec  # type: ignore[attr-defined]
            platform.pools[resource.name] = spec.gpus()
            if spec.accelerator is not None and spec.accelerator.count:
                platform.node_gpus[resource.name] = spec.accelerator.count
    _queues(platform, specs, cluster or ClusterPreemption())
    _accounts(platform, specs)
    return platform
