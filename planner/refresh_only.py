"""Refresh-only: accept what the platform has into state, touching no provider.

`plan_refresh_only` reads drift (planner.drift) and turns what can be accepted into state
updates: a `modified` resource records its live values for the changed fields (every
other recorded field stays), a `missing` one is forgotten. Orphans, mutated data, failed
jobs and pending applies are not state: they are listed as left alone, with their remedy.
`apply_refresh_only` writes exactly those updates, under the state lock, and only when the
state is still the one the refresh-only plan read (lineage and serial), as `apply FILE`
refuses a stale plan. No provider is called by either; the specs are not changed, so the
next `plan` proposes to put declared values back unless the specs are edited to match.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.diff import FieldChange, with_value_at
from trainform.planner.drift import detect_drift
from trainform.planner.drift_model import DriftFinding
from trainform.planner.errors import PlannerError
from trainform.planner.normalize import spec_hash
from trainform.planner.state import ResourceState, State
from trainform.planner.workspace import Workspace

ACCEPTED_KINDS = ("modified", "missing")


@dataclass(frozen=True)
class StateUpdate:
    """One change to a state entry: `accept` records live values, `forget` drops it."""

    address: str
    kind: str
    action: str
    provider: str
    changes: tuple[FieldChange, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "kind": self.kind,
            "action": self.action,
            "provider": self.provider,
            "changes": [change.to_json() for change in self.changes],
        }


@dataclass
class RefreshOnlyPlan:
    lineage: str | None
    serial: int
    updates: list[StateUpdate] = field(default_factory=list)
    left_alone: list[DriftFinding] = field(default_factory=list)

    @property
    def has_changes(self) -> bool:
        return bool(self.updates)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": 1,
            "refreshOnly": True,
            "lineage": self.lineage,
            "serial": self.serial,
            "updates": [update.to_json() for update in self.updates],
            "leftAlone": [finding.to_json() for finding in self.left_alone],
        }


def plan_refresh_only(workspace: Workspace) -> RefreshOnlyPlan:
    """The state updates that make state match the live platform (read-only)."""
    state = workspace.backend.read()
    report = detect_drift(state, workspace.providers)
    plan = RefreshOnlyPlan(report.lineage, report.serial)
    forgotten: set[str] = set()
    for finding in report.findings:
        if finding.drift == "modified" and finding.changes:
            plan.updates.append(
                StateUpdate(
                    finding.address,
                    finding.kind,
                    "accept",
                    finding.provider,
                    tuple(finding.changes),
                )
            )
        elif finding.drift == "missing" and finding.address not in forgotten:
            forgotten.add(finding.address)
            plan.updates.append(
                StateUpdate(finding.address, finding.kind, "forget", finding.provider)
            )
        elif finding.drift not in ACCEPTED_KINDS:
            plan.left_alone.append(finding)
    return plan


class RefreshOnlyError(PlannerError):
    """The refresh-only plan no longer matches state."""


def apply_refresh_only(workspace: Workspace, plan: RefreshOnlyPlan) -> State:
    """Write `plan`'s updates into state (the caller holds the state lock)."""
    state = workspace.backend.read()
    if state is None or (state.lineage, state.serial) != (plan.lineage, plan.serial):
        found = "no state" if state is None else f"lineage {state.lineage} serial {state.serial}"
        raise RefreshOnlyError(
            f"cannot apply the refresh-only plan: it read lineage {plan.lineage} serial "
            f"{plan.serial}, state now has {found}; nothing was written, run it again"
        )
    for update in plan.updates:
        current = state.resources.get(update.address)
        if current is None:
            continue
        if update.action == "forget":
            entry: dict[str, Any] = {"type": "outcome", "address": update.address}
            entry["resource"] = None
        else:
            entry = {
                "type": "outcome",
                "address": update.address,
                "resource": _accepted(current, update.changes).to_json(),
            }
        workspace.backend.record(state, entry)
    workspace.backend.compact(state)
    return state


def _accepted(current: ResourceState, changes: tuple[FieldChange, ...]) -> ResourceState:
    spec = copy.deepcopy(current.spec)
    for change in changes:
        spec = with_value_at(spec, change.path, change.after)
    accepted = copy.copy(current)
    accepted.spec = spec
    accepted.spec_hash = spec_hash(spec)
    return accepted
