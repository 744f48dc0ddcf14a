"""The semantic diff of queue policy: what changed, by meaning, with old and new values."""

from __future__ import annotations

from pathlib import Path

from trainform.policies.review.semantic import ChangeAction, diff_queue_policy
from trainform.specs import SpecSet, load_specs

from tests.helpers import write_tree
from tests.policies.review.fixture import BASE, queue, queues, quota


def load(root: Path, files: dict[str, str]) -> SpecSet:
    write_tree(root, files)
    return load_specs(root)


def fields(changes: list, address: str) -> dict[str, tuple[str | None, str | None]]:
    change = next(c for c in changes if c.address == address)
    return {f.field: (f.old, f.new) for f in change.fields}


def test_same_specs_have_no_changes(tmp_path: Path) -> None:
    assert diff_queue_policy(load(tmp_path / "a", BASE), load(tmp_path / "b", BASE)) == []


def test_equal_values_spelled_differently_are_no_change(tmp_path: Path) -> None:
    respelled = BASE["platform/queues.yaml"].replace("{gpu: 32}", '{gpu: "32"}')
    head = load(tmp_path / "b", {**BASE, "platform/queues.yaml": respelled})
    assert diff_queue_policy(load(tmp_path / "a", BASE), head) == []


def test_moved_quota_shows_old_and_new_values_per_queue(tmp_path: Path) -> None:
    head = load(tmp_path / "b", {**BASE, "platform/queues.yaml": queues(24, 40)})
    changes = diff_queue_policy(load(tmp_path / "a", BASE), head)
    assert [(c.address, c.action) for c in changes] == [
        ("Queue/team-a", ChangeAction.CHANGED),
        ("Queue/team-b", ChangeAction.CHANGED),
    ]
    assert fields(changes, "Queue/team-a") == {"pools[gpu].nominalQuota.gpu": ("32", "24")}
    assert fields(changes, "Queue/team-b") == {"pools[gpu].nominalQuota.gpu": ("32", "40")}
    assert changes[0].location.endswith("queues.yaml:1:1")


def test_policy_fields_are_compared(tmp_path: Path) -> None:
    changed = (
        queue("team-a", 32, 500)
        .replace("reclaimWithinCohort: Any", "withinQueue: LowerPriority")
        .replace("cohort: research", "cohort: other")
        .replace("      borrowingLimit: {gpu: 16}\n", "")
        + "  fairShareWeight: 2\n"
    )
    head = load(
        tmp_path / "b",
        {**BASE, "platform/queues.yaml": changed + "---\n" + queue("team-b", 32, 100)},
    )
    assert fields(diff_queue_policy(load(tmp_path / "a", BASE), head), "Queue/team-a") == {
        "cohort": ("research", "other"),
        "defaultPriority": ("100", "500"),
        "fairShareWeight": ("1", "2"),
        "pools[gpu].borrowingLimit.gpu": ("16", "unset (no limit)"),
        "preemption.reclaimWithinCohort": ("Any", "Never"),
        "preemption.withinQueue": ("Never", "LowerPriority"),
    }


def test_added_and_removed_resources_and_pool_changes(tmp_path: Path) -> None:
    head_files = {
        **BASE,
        "platform/pools.yaml": BASE["platform/pools.yaml"].replace("nodes: 8", "nodes: 10"),
        "teams/team-a/quota.yaml": quota("team-a", 48),
    }
    del head_files["teams/team-b/quota.yaml"]
    changes = diff_queue_policy(load(tmp_path / "a", BASE), load(tmp_path / "b", head_files))
    assert [(c.address, c.action.value) for c in changes] == [
        ("ResourcePool/gpu", "changed"),
        ("Quota/team-a/team-a", "changed"),
        ("Quota/team-b/team-b", "removed"),
    ]
    assert fields(changes, "ResourcePool/gpu") == {
        "capacity.gpu": ("64", "80"),
        "nodes": ("8", "10"),
    }
    assert fields(changes, "Quota/team-a/team-a") == {"limits.gpu": ("64", "48")}
    removed = fields(changes, "Quota/team-b/team-b")
    assert removed["limits.gpu"] == ("64", None) and "limits.cpu" not in removed
