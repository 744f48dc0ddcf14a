"""The semantic diff of queue policy between two spec sets (not a line diff).

`diff_queue_policy(base, head)` compares the kinds that decide who gets which GPUs:
ResourcePool (nodes, accelerators, capacity), Queue (cohort, per-pool nominal quota,
borrowing and lending limits per resource, priority, preemption, fair share, queueing
strategy), Quota (a project's limits) and Project (added or removed), and on Slurm the
settings stated verbatim under `spec.slurm` (a Queue's `partition.*`, `qos.*` and `qosFrom`,
a Project's `parent`, `limits.*` and `users`, a Quota's `users`), which the Slurm provider
writes and the Slurm model simulates. Values are compared by meaning (`1Ti` equals `1024Gi`,
a reordered mapping is no change; a Slurm value as Slurm reads it: `1440` equals
`1-00:00:00`, `gres/gpu=4,cpu=8` equals `cpu=8,gres/gpu=4`); queue pools are keyed by pool
name, and their order (Kueue tries flavors in order) is a field of its own. Returns changes
sorted by kind, then address; each names where it is declared.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainform.providers.slurm.settings import canonical
from trainform.specs import Resource, SpecSet
from trainform.specs.models.platform import (
    ProjectSpec,
    QueuePool,
    QueueSpec,
    QuotaSpec,
    ResourceAmounts,
    ResourcePoolSpec,
)

KIND_ORDER = ("ResourcePool", "Queue", "Quota", "Project")
RESOURCES = ("gpu", "cpu", "memory")
NO_LIMIT = "unset (no limit)"
LENDS_ALL = "unset (all of nominal)"


class ChangeAction(enum.StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field path whose value differs; `None` means absent on that side."""

    field: str
    old: str | None
    new: str | None

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class SemanticChange:
    kind: str
    address: str
    action: ChangeAction
    location: str
    fields: tuple[FieldChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "address": self.address,
            "action": self.action.value,
            "location": self.location,
            "fields": [change.to_json() for change in self.fields],
        }


# A flattened resource: field path -> (value compared, value shown).
Flat = dict[str, tuple[Any, str]]


def _put(flat: Flat, path: str, value: Any, shown: str | None = None) -> None:
    flat[path] = (value, str(value) if shown is None else shown)


def _amounts(flat: Flat, path: str, amounts: ResourceAmounts | None, unset: str) -> None:
    for resource in RESOURCES:
        value = getattr(amounts, resource) if amounts is not None else None
        if value is None:
            _put(flat, f"{path}.{resource}", None, unset)
        else:
            _put(flat, f"{path}.{resource}", value)


def _flat_pool(spec: ResourcePoolSpec) -> Flat:
    flat: Flat = {}
    _put(flat, "provider", spec.provider)
    _put(flat, "nodes", spec.nodes)
    accelerator = spec.accelerator
    _put(flat, "accelerator.type", accelerator.type if accelerator else None, "none")
    _put(flat, "accelerator.count", accelerator.count if accelerator else 0)
    _put(flat, "capacity.gpu", spec.gpus())
    _put(flat, "cpu", spec.cpu)
    _put(flat, "memory", spec.memory)
    return flat


def _flat_queue_pool(flat: Flat, entry: QueuePool) -> None:
    base = f"pools[{entry.pool}]"
    _amounts(flat, f"{base}.nominalQuota", entry.nominal_quota, "unset (0)")
    _amounts(flat, f"{base}.borrowingLimit", entry.borrowing_limit, NO_LIMIT)
    _amounts(flat, f"{base}.lendingLimit", entry.lending_limit, LENDS_ALL)


def _flat_queue(spec: QueueSpec) -> Flat:
    flat: Flat = {}
    _put(flat, "cohort", spec.cohort, spec.cohort or "none")
    order = tuple(entry.pool for entry in spec.pools)
    _put(flat, "pools (order)", order, ", ".join(order))
    for entry in spec.pools:
        _flat_queue_pool(flat, entry)
    _put(flat, "defaultPriority", spec.default_priority)
    preemption = spec.preemption
    _put(flat, "preemption.withinQueue", preemption.within_queue)
    _put(flat, "preemption.reclaimWithinCohort", preemption.reclaim_within_cohort)
    borrow = preemption.borrow_within_cohort
    _put(flat, "preemption.borrowWithinCohort.policy", borrow.policy)
    threshold = borrow.max_priority_threshold
    _put(flat, "preemption.borrowWithinCohort.maxPriorityThreshold", threshold, str(threshold))
    _put(flat, "fairShareWeight", spec.fair_share_weight, f"{spec.fair_share_weight:g}")
    _put(flat, "queueingStrategy", spec.queueing_strategy)
    _put(flat, "maxRuntime", spec.max_runtime, str(spec.max_runtime or "unset"))
    _put(flat, "stopPolicy", spec.stop_policy)
    slurm = spec.slurm
    if slurm is not None:
        if slurm.qos_from:
            _put(flat, "slurm.qosFrom", slurm.qos_from)
        _settings(flat, "slurm.partition", slurm.partition)
        _settings(flat, "slurm.qos", slurm.qos)
    return flat


def _settings(flat: Flat, path: str, settings: dict[str, str]) -> None:
    """Slurm settings stated verbatim, compared as Slurm reads them (`''` clears one)."""
    for key, value in settings.items():
        _put(flat, f"{path}.{key}", (key, canonical(key, value)), value or "'' (cleared)")


def _users(flat: Flat, path: str, users: dict[str, dict[str, str]]) -> None:
    for user, limits in users.items():
        _put(flat, f"{path}[{user}]", True, "association")
        _settings(flat, f"{path}[{user}]", limits)


def _flat_project(spec: ProjectSpec) -> Flat:
    flat: Flat = {}
    slurm = spec.slurm
    if slurm is not None:
        _put(flat, "slurm.parent", slurm.parent, slurm.parent or "unset (root)")
        _settings(flat, "slurm.limits", slurm.limits)
        _users(flat, "slurm.users", slurm.users)
    return flat


def _flat_quota(spec: QuotaSpec) -> Flat:
    flat: Flat = {}
    _put(flat, "queue", spec.queue)
    limits = spec.limits
    for name, label in (
        ("gpu", "gpu"),
        ("cpu", "cpu"),
        ("memory", "memory"),
        ("running_jobs", "runningJobs"),
        ("max_wall_time", "maxWallTime"),
    ):
        value = getattr(limits, name)
        _put(flat, f"limits.{label}", value, NO_LIMIT if value is None else str(value))
    if spec.slurm is not None:
        _users(flat, "slurm.users", spec.slurm.users)
    return flat


FLATTENERS: dict[str, Callable[[Any], Flat]] = {
    "ResourcePool": _flat_pool,
    "Queue": _flat_queue,
    "Quota": _flat_quota,
    "Project": _flat_project,
}


def flatten(resource: Resource) -> Flat:
    return FLATTENERS[resource.kind](resource.document.spec)  # type: ignore[attr-defined]


def _policy_resources(specs: SpecSet) -> dict[str, Resource]:
    return {a: r for a, r in specs.resources.items() if r.kind in FLATTENERS}


def _field_changes(old: Flat, new: Flat) -> tuple[FieldChange, ...]:
    """Differing fields; for a resource on one side only, the fields that are set."""
    one_sided = not old or not new
    changes = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before is not None and after is not None and before[0] == after[0]:
            continue
        if one_sided and (before or after or (None, ""))[0] is None:
            continue
        changes.append(
            FieldChange(path, before[1] if before else None, after[1] if after else None)
        )
    return tuple(changes)


def diff_queue_policy(
    base: SpecSet,
    head: SpecSet,
    name_base: Callable[[str], str] = str,
    name_head: Callable[[str], str] = str,
) -> list[SemanticChange]:
    """What changed in queue policy from `base` to `head`. `name_*` map a location string
    to the name shown (see gitrefs.SpecSide.relabel)."""
    old, new = _policy_resources(base), _policy_resources(head)
    changes: list[SemanticChange] = []
    for address in old.keys() | new.keys():
        before, after = old.get(address), new.get(address)
        if before is None and after is not None:
            fields = _field_changes({}, flatten(after))
            location = name_head(str(after.location))
            changes.append(
                SemanticChange(after.kind, address, ChangeAction.ADDED, location, fields)
            )
        elif after is None and before is not None:
            fields = _field_changes(flatten(before), {})
            location = name_base(str(before.location))
            changes.append(
                SemanticChange(before.kind, address, ChangeAction.REMOVED, location, fields)
            )
        elif before is not None and after is not None:
            fields = _field_changes(flatten(before), flatten(after))
            if fields:
                location = name_head(str(after.location))
                changes.append(
                    SemanticChange(after.kind, address, ChangeAction.CHANGED, location, fields)
                )
    changes.sort(key=lambda c: (KIND_ORDER.index(c.kind), c.address))
    return changes
