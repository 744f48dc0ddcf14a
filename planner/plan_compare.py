"""Comparing a reviewed plan with a plan made later for the same target.

Two questions, asked on merge when a pull request's saved plan no longer binds what holds
now (another merge applied first, so the state serial and the spec digest moved):

- why is it stale: every binding that differs (lineage, serial, spec digest, lock digest,
  environment, state location, pins, tool version), each with both values;
- does the fresh plan make the same changes: the same resources, with the same actions
  and the same field values.

`compare_plans(reviewed, fresh)` answers both as a `PlanComparison`. A fresh plan whose
changes are the same may be applied in place of the reviewed one
(`apply --replan-if-same-changes`, cli.replanning), unless the two plans are for different
targets (environment, state location or lineage differ: `replannable` is False).

What "the same change" means, per action (the fields are compared as plans show them, secret
values masked on both sides, so equal secrets compare equal):

- create: the same document (`after`) and field changes;
- update, replace: the same field changes, each path with the same value before and after;
  the rest of the document may differ (another merge changed other fields of it, which
  commutes with this change);
- delete: the same resource deleted, keeping data (or not) as reviewed;
- resume, evaluate: the same field changes.

`touched_resources` and `overlaps` serve the per-pull-request lock: which resources an open
pull request's plan changes that another's (holding them) changes too. They read saved plans
or `plan --format json` output without verifying them: the answer is advice to a person,
never an authorisation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainform.planner.diff import diff_documents
from trainform.planner.errors import PlannerError
from trainform.planner.plan_model import Action, Plan, ResourceChange

COMPARISON_FORMAT_VERSION = 1

TARGET_BINDINGS = frozenset({"environment", "state location", "lineage", "destroy", "targets"})
"""Bindings that name what a plan is for: when one differs, the fresh plan is for another
target and is never applied in place of the reviewed one."""


class PlanReadError(PlannerError):
    """A plan given for comparison cannot be read."""


@dataclass(frozen=True)
class BindingDifference:
    """One thing a plan binds that differs between the reviewed plan and now."""

    name: str
    reviewed: Any
    now: Any

    def to_json(self) -> dict[str, Any]:
        return {"binding": self.name, "reviewed": self.reviewed, "now": self.now}


@dataclass(frozen=True)
class ChangeDifference:
    """One way the fresh plan's changes differ from the reviewed plan's.

    `what` is `only-reviewed` (the fresh plan does not change the resource), `only-fresh`
    (the reviewed plan did not), `action`, or `field` (at `path`; `reviewed` and `now` are
    each `{"before": ..., "after": ...}`, or None where that plan does not change the path).
    """

    address: str
    what: str
    reviewed: Any = None
    now: Any = None
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        data = {"address": self.address, "what": self.what}
        if self.path:
            data["path"] = self.path
        return data | {"reviewed": self.reviewed, "now": self.now}


@dataclass(frozen=True)
class PlanComparison:
    stale: list[BindingDifference] = field(default_factory=list)
    differences: list[ChangeDifference] = field(default_factory=list)

    @property
    def replannable(self) -> bool:
        """Whether the two plans are for the same target (environment, state, scope)."""
        return not any(binding.name in TARGET_BINDINGS for binding in self.stale)

    @property
    def same_changes(self) -> bool:
        """Whether the fresh plan may be applied in place of the reviewed one."""
        return self.replannable and not self.differences

    @property
    def outcome(self) -> str:
        """`fresh` (nothing differs), `same-changes` (stale, same changes) or `different`."""
        if not self.same_changes:
            return "different"
        return "same-changes" if self.stale else "fresh"

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": COMPARISON_FORMAT_VERSION,
            "outcome": self.outcome,
            "sameChanges": self.same_changes,
            "stale": [binding.to_json() for binding in self.stale],
            "differences": [difference.to_json() for difference in self.differences],
        }


def _binding_values(plan: Plan) -> dict[str, Any]:
    return {
        "environment": plan.environment,
        "state location": plan.state_location,
        "lineage": plan.lineage,
        "serial": plan.serial,
        "specs": plan.spec_digest,
        "trainform.lock": plan.lock_digest or None,
        "destroy": plan.destroy,
        "targets": sorted(plan.targets),
        "tool version": plan.tool_version,
    }


def _pin_differences(reviewed: Plan, fresh: Plan) -> list[BindingDifference]:
    found = []
    for group in sorted({*reviewed.pins, *fresh.pins}):
        before = reviewed.pins.get(group) or {}
        after = fresh.pins.get(group) or {}
        for key in sorted({*before, *after}):
            if before.get(key) != after.get(key):
                found.append(
                    BindingDifference(f"pin {group} {key}", before.get(key), after.get(key))
                )
    return found


def stale_bindings(reviewed: Plan, fresh: Plan) -> list[BindingDifference]:
    """Every binding of `reviewed` that `fresh` (made now) does not share, both values each.

    A reviewed plan made before any state existed (no lineage) is stale, not for another
    target, once state exists: only its serial is reported then."""
    old, new = _binding_values(reviewed), _binding_values(fresh)
    found = []
    for name, value in old.items():
        if value == new[name]:
            continue
        if name == "lineage" and value is None:
            continue
        if name == "state location" and not (value and new[name]):
            continue  # a plan not saved to a file records no location
        found.append(BindingDifference(name, value, new[name]))
    return found + _pin_differences(reviewed, fresh)


def _fields(change: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        item["path"]: {"before": item["before"], "after": item["after"]}
        for item in change["changes"]
    }


def _field_differences(
    address: str, reviewed: dict[str, Any], fresh: dict[str, Any]
) -> list[ChangeDifference]:
    old, new = _fields(reviewed), _fields(fresh)
    return [
        ChangeDifference(address, "field", old.get(path), new.get(path), path)
        for path in sorted({*old, *new})
        if old.get(path) != new.get(path)
    ]


def _document_differences(
    address: str, reviewed: dict[str, Any] | None, fresh: dict[str, Any] | None
) -> list[ChangeDifference]:
    return [
        ChangeDifference(
            address,
            "field",
            {"before": None, "after": item.to_json()["before"]},
            {"before": None, "after": item.to_json()["after"]},
            item.path,
        )
        for item in diff_documents(reviewed, fresh)
    ]


def change_differences(
    address: str, reviewed: ResourceChange, fresh: ResourceChange
) -> list[ChangeDifference]:
    """How one resource's change in the fresh plan differs from the reviewed one."""
    if reviewed.action is not fresh.action:
        return [ChangeDifference(address, "action", reviewed.action.value, fresh.action.value)]
    old, new = reviewed.to_json(), fresh.to_json()
    if reviewed.action is Action.DELETE:
        if old["dataKept"] != new["dataKept"]:
            return [
                ChangeDifference(address, "field", old["dataKept"], new["dataKept"], "dataKept")
            ]
        return []
    if reviewed.action is Action.CREATE:
        found = _document_differences(address, old["after"], new["after"])
        return found or _field_differences(address, old, new)
    return _field_differences(address, old, new)


def compare_plans(reviewed: Plan, fresh: Plan) -> PlanComparison:
    """Why `reviewed` is stale next to `fresh`, and how their changes differ (if at all)."""
    old = {change.address: change for change in reviewed.actionable}
    new = {change.address: change for change in fresh.actionable}
    differences: list[ChangeDifference] = []
    for address in sorted({*old, *new}):
        if address not in new:
            differences.append(
                ChangeDifference(address, "only-reviewed", old[address].action.value, None)
            )
        elif address not in old:
            differences.append(
                ChangeDifference(address, "only-fresh", None, new[address].action.value)
            )
        else:
            differences += change_differences(address, old[address], new[address])
    return PlanComparison(stale_bindings(reviewed, fresh), differences)


def touched_resources(data: Any, location: str) -> dict[str, str]:
    """`{address: action}` of what a plan changes, read from a saved plan's or a
    `plan --format json` document's `changes` (no-ops left out)."""
    changes = data.get("changes") if isinstance(data, dict) else None
    if not isinstance(changes, list):
        raise PlanReadError(
            f"cannot read plan {location}: not a saved plan or `plan --format json` output "
            "(no `changes` list)"
        )
    touched = {}
    for item in changes:
        if not isinstance(item, dict) or not isinstance(item.get("address"), str):
            raise PlanReadError(f"cannot read plan {location}: a change without an address")
        action = str(item.get("action", ""))
        if action != Action.NOOP.value:
            touched[item["address"]] = action
    return touched


def read_touched(path: str) -> dict[str, str]:
    """`touched_resources` of the plan file or plan JSON at `path`."""
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise PlanReadError(f"cannot read plan {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanReadError(f"cannot read plan {path}: not JSON ({exc})") from None
    return touched_resources(data, path)


@dataclass(frozen=True)
class Overlap:
    """Resources a plan changes that a plan holding them (another pull request's) changes."""

    holder: str
    resources: dict[str, tuple[str, str]]
    """`{address: (this plan's action, the holder's action)}`."""

    def to_json(self) -> dict[str, Any]:
        return {
            "heldBy": self.holder,
            "resources": [
                {"address": address, "action": mine, "holderAction": theirs}
                for address, (mine, theirs) in sorted(self.resources.items())
            ],
        }


def overlaps(mine: dict[str, str], holders: Iterable[tuple[str, dict[str, str]]]) -> list[Overlap]:
    """For each holder (in the order given), the resources of `mine` its plan changes too."""
    found = []
    for label, theirs in holders:
        shared = {
            address: (mine[address], theirs[address]) for address in mine if address in theirs
        }
        if shared:
            found.append(Overlap(label, shared))
    return found
