"""Apply order through resources a plan leaves unchanged: a change waits for a replaced
or updated resource it depends on through an unchanged one (a Quota on an unchanged
Queue waits for the pool under that Queue being replaced)."""

from __future__ import annotations

from trainform.planner.plan import apply_graph, order_changes
from trainform.planner.plan_model import Action, ResourceChange


def _change(address: str, action: Action, *dependencies: str) -> ResourceChange:
    kind = address.split("/")[0]
    return ResourceChange(address, kind, action, ["k8s"], dependencies=list(dependencies))


def test_a_change_waits_for_a_replacement_under_an_unchanged_dependency() -> None:
    changes = [
        _change("Quota/a/train", Action.UPDATE, "Queue/train", "Project/a"),
        _change("Queue/train", Action.NOOP, "ResourcePool/h100"),
        _change("ResourcePool/h100", Action.REPLACE),
        _change("Project/a", Action.NOOP),
    ]

    graph = apply_graph(changes)

    assert list(graph.edges) == [("ResourcePool/h100", "Quota/a/train")]
    assert [c.address for c in order_changes(changes)] == [
        "ResourcePool/h100",
        "Quota/a/train",
        "Project/a",
        "Queue/train",
    ]


def test_unrelated_changes_stay_independent() -> None:
    changes = [
        _change("Quota/a/train", Action.UPDATE, "Queue/train"),
        _change("Queue/train", Action.NOOP, "ResourcePool/h100"),
        _change("ResourcePool/a100", Action.REPLACE),
    ]

    assert list(apply_graph(changes).edges) == []
