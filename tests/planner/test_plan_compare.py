"""planner.plan_compare: why a reviewed plan is stale and whether a fresh one makes the same
changes, on plans made by the real planner of a copy of the quickstart (no jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.plan_compare import (
    PlanReadError,
    compare_plans,
    overlaps,
    touched_resources,
)
from trainform.planner.plan_model import Plan

from tests.engine.support import QUICKSTART, SpecFolder, copy_example

PLATFORM = "specs/platform.yaml"
QUOTA = "Quota/research/research-default"
QUEUE = "Queue/default-queue"


@pytest.fixture
def applied(tmp_path: Path):  # type: ignore[no-untyped-def]
    folder = SpecFolder(copy_example(QUICKSTART, tmp_path / "quickstart"))
    folder.converge()
    yield folder
    folder.close()


def planned_with(folder: SpecFolder, old: str, new: str) -> Plan:
    """The plan of the folder with one edit, the edit undone afterwards (a branch's plan)."""
    folder.edit(PLATFORM, old, new)
    try:
        return folder.plan()
    finally:
        folder.edit(PLATFORM, new, old)


def test_a_plan_compared_with_itself_again_is_fresh(applied: SpecFolder) -> None:
    reviewed = planned_with(applied, "runningJobs: 2", "runningJobs: 3")
    applied.edit(PLATFORM, "runningJobs: 2", "runningJobs: 3")

    comparison = compare_plans(reviewed, applied.plan())

    assert comparison.outcome == "fresh"
    assert comparison.stale == [] and comparison.differences == []


def test_commuting_changes_are_stale_with_both_values_and_the_same_changes(
    applied: SpecFolder,
) -> None:
    first = planned_with(applied, "defaultPriority: 100", "defaultPriority: 200")
    second = planned_with(applied, "runningJobs: 2", "runningJobs: 3")
    applied.edit(PLATFORM, "defaultPriority: 100", "defaultPriority: 200")
    applied.converge()
    applied.edit(PLATFORM, "runningJobs: 2", "runningJobs: 3")

    fresh = applied.plan()
    comparison = compare_plans(second, fresh)

    assert comparison.outcome == "same-changes", comparison.differences
    stale = {binding.name: (binding.reviewed, binding.now) for binding in comparison.stale}
    assert set(stale) == {"serial", "specs"}
    assert stale["serial"] == (first.serial, fresh.serial) and fresh.serial > first.serial
    assert stale["specs"] == (second.spec_digest, fresh.spec_digest)


def test_two_changes_of_one_field_differ_by_the_value_before(applied: SpecFolder) -> None:
    planned_with(applied, "runningJobs: 2", "runningJobs: 3")
    second = planned_with(applied, "runningJobs: 2", "runningJobs: 5")
    applied.edit(PLATFORM, "runningJobs: 2", "runningJobs: 3")
    applied.converge()
    applied.edit(PLATFORM, "runningJobs: 3", "runningJobs: 5")

    comparison = compare_plans(second, applied.plan())

    assert comparison.outcome == "different"
    [difference] = comparison.differences
    assert (difference.address, difference.what, difference.path) == (
        QUOTA,
        "field",
        "spec.limits.runningJobs",
    )
    assert difference.reviewed == {"before": 2, "after": 5}
    assert difference.now == {"before": 3, "after": 5}


def test_a_resource_only_one_plan_changes_and_another_action_are_differences(
    applied: SpecFolder,
) -> None:
    reviewed = planned_with(applied, "runningJobs: 2", "runningJobs: 3")
    applied.drop_document(PLATFORM, "Quota", "research-default")
    applied.edit(PLATFORM, "defaultPriority: 100", "defaultPriority: 200")

    comparison = compare_plans(reviewed, applied.plan())

    found = {(d.address, d.what, d.reviewed, d.now) for d in comparison.differences}
    assert found == {(QUOTA, "action", "update", "delete"), (QUEUE, "only-fresh", None, "update")}


def test_a_plan_for_another_environment_is_never_the_same(applied: SpecFolder) -> None:
    reviewed = planned_with(applied, "runningJobs: 2", "runningJobs: 3")
    applied.edit(PLATFORM, "runningJobs: 2", "runningJobs: 3")
    fresh = applied.plan()
    fresh.environment = "prod"

    comparison = compare_plans(reviewed, fresh)

    assert not comparison.replannable and not comparison.same_changes
    assert comparison.outcome == "different" and comparison.differences == []


def test_overlaps_name_each_holder_and_the_shared_resources() -> None:
    mine = {QUOTA: "update", QUEUE: "update"}
    holders = [
        ("#3", {QUOTA: "delete"}),
        ("#4", {"Project/other": "create"}),
        ("#5", {QUEUE: "update"}),
    ]

    found = overlaps(mine, holders)

    assert [(o.holder, o.resources) for o in found] == [
        ("#3", {QUOTA: ("update", "delete")}),
        ("#5", {QUEUE: ("update", "update")}),
    ]


def test_touched_resources_leave_out_no_ops_and_refuse_what_is_no_plan() -> None:
    data = {
        "changes": [{"address": QUOTA, "action": "update"}, {"address": QUEUE, "action": "no-op"}]
    }
    assert touched_resources(data, "p.json") == {QUOTA: "update"}
    with pytest.raises(PlanReadError, match="no `changes` list"):
        touched_resources({"summary": {}}, "p.json")
    with pytest.raises(PlanReadError, match="without an address"):
        touched_resources({"changes": [{"action": "create"}]}, "p.json")
