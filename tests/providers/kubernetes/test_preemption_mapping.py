"""A Queue's preemption reaches Kueue as the spec says on every queue shape: the Cohort and
project ClusterQueues the provider renders (manifests.py, project_queues.py) are given to
the Kueue stand-in's flavor assigner gate and classical preemptor (tests/services/kube_api/
kueue_preemption.py), which say what Kueue would preempt for a pending job.

Every project ClusterQueue has nominal quota 0, so without borrowWithinCohort Kueue's flavor
assigner never tries preemption for it (noFit); `withinQueue` therefore brings
borrowWithinCohort LowerPriority (and reclaimWithinCohort LowerPriority when Never) with it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from trainform.providers.kubernetes.manifests import queue_facts, render_queue
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.project_queues import (
    PREEMPTION_ANNOTATION,
    declared_preemption,
    render_quota,
)
from trainform.providers.kubernetes.projection import read_queue_policy

from tests.services.kube_api.kueue_preemption import (
    RECLAIM,
    RECLAIM_WHILE_BORROWING,
    WITHIN_QUEUE,
    Preemptor,
    admitted,
)
from tests.services.kube_api.kueue_quota import Tree
from tests.services.test_kube_api_preemption import GPU, workload

NAMING = Naming()
KEY = ("h100", GPU)


def queue_doc(name: str, gpus: int, cohort: str | None = None, **spec: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"pool": "h100", "nominalQuota": {"gpu": gpus, "cpu": 64}}
    for field in ("lendingLimit", "borrowingLimit"):
        if field in spec:
            entry[field] = {"gpu": spec.pop(field)}
    body = {"pools": [entry], **spec}
    if cohort:
        body["cohort"] = cohort
    return {"metadata": {"name": name}, "spec": body}


class Platform:
    """Rendered Cohorts and project ClusterQueues, and the workloads holding quota."""

    def __init__(self, *queues: dict[str, Any]) -> None:
        self.specs = {q["metadata"]["name"]: q["spec"] for q in queues}
        self.cohorts = [
            render_queue(NAMING, f"Queue/{q['metadata']['name']}", q["metadata"]["name"], q)[0]
            for q in queues
        ]
        self.queues: dict[str, dict[str, Any]] = {}
        self.running: list[dict[str, Any]] = []

    def project(self, queue: str, project: str, **limits: Any) -> str:
        document = {
            "metadata": {"name": queue, "project": project},
            "spec": {"queue": queue, "limits": limits},
        }
        facts = queue_facts(NAMING, self.specs[queue])
        found = render_quota(
            NAMING, f"Quota/{project}/{queue}", queue, project, document, facts, _metadata
        )[0]
        self.queues[found["metadata"]["name"]] = found
        return str(found["metadata"]["name"])

    def run(self, name: str, queue: str, gpus: int, priority: int) -> None:
        held = f"{len(self.running):02}"
        self.running.append(workload(name, gpus, priority, queue, held=held, flavor="h100"))

    def preemptor(self) -> Preemptor:
        tree = Tree(list(self.queues.values()), self.cohorts)
        holding = [admitted(w) for w in self.running]
        for each in holding:
            for key, value in each.usage.items():
                tree.add_usage(each.queue, key, value)
        return Preemptor(self.queues, tree, holding)

    def victims(self, queue: str, gpus: int, priority: int) -> list[tuple[str, str]] | None:
        """What Kueue preempts for a pending job; None: the flavor assigner's noFit."""
        preemptor = self.preemptor()
        incoming = workload("incoming", gpus, priority, created="59")
        if not preemptor.tries(queue, KEY, gpus):
            return None
        found = preemptor.targets(incoming, queue, {KEY: gpus}, {KEY})
        return sorted((t.workload.obj["metadata"]["name"], t.reason) for t in found)


def _metadata(naming: Naming, address: str, kind: str, name: str, *rest: Any) -> dict[str, Any]:
    return {"name": name, "labels": {}, "annotations": {}}


def test_within_queue_preempts_on_a_queue_without_a_cohort() -> None:
    platform = Platform(queue_doc("train", 8, preemption={"withinQueue": "LowerPriority"}))
    mine, theirs = platform.project("train", "a"), platform.project("train", "b")
    platform.run("own-low", mine, 8, 0)
    assert platform.victims(mine, 4, 10) == [("own-low", WITHIN_QUEUE)]
    assert platform.victims(mine, 4, 0) == []  # equal priority: nothing
    platform.running = []
    platform.run("own-low", mine, 4, 0)
    platform.run("other-low", theirs, 4, 0)
    # Kueue takes other ClusterQueues' workloads first (CandidatesOrdering)
    assert platform.victims(mine, 4, 10) == [("other-low", RECLAIM_WHILE_BORROWING)]
    assert platform.victims(mine, 8, 10) == [
        ("other-low", RECLAIM_WHILE_BORROWING),
        ("own-low", WITHIN_QUEUE),
    ]
    assert platform.victims(theirs, 4, 10) == [("own-low", RECLAIM_WHILE_BORROWING)]


def test_the_policy_as_declared_would_never_preempt_on_a_queue_without_a_cohort() -> None:
    """The mapping of the last round (the Queue's preemption copied onto the project
    ClusterQueues): nominal 0 and borrowWithinCohort Never is the flavor assigner's noFit."""
    platform = Platform(queue_doc("train", 8, preemption={"withinQueue": "LowerPriority"}))
    mine = platform.project("train", "a")
    platform.queues[mine]["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    platform.run("own-low", mine, 8, 0)
    assert platform.victims(mine, 8, 10) is None


def test_never_preempts_on_a_queue_without_a_cohort() -> None:
    platform = Platform(queue_doc("train", 8))
    mine = platform.project("train", "a")
    platform.run("own-low", mine, 8, 0)
    assert platform.victims(mine, 8, 10) is None


def test_within_queue_preempts_while_the_queue_borrows_in_its_cohort() -> None:
    platform = Platform(
        queue_doc("train", 8, "research", preemption={"withinQueue": "LowerOrNewerEqualPriority"}),
        queue_doc("spare", 8, "research"),
    )
    mine = platform.project("train", "a")
    platform.project("spare", "c")
    platform.run("low-1", mine, 8, 0)
    platform.run("low-2", mine, 8, 1)  # 8 of the 16 borrowed from the spare queue
    assert platform.victims(mine, 8, 10) == [("low-1", WITHIN_QUEUE)]


@pytest.mark.parametrize(
    ("reclaim", "expected"),
    [
        pytest.param("Any", [("borrowed", RECLAIM)], id="Any"),
        pytest.param("LowerPriority", [], id="LowerPriority-keeps-a-higher-one"),
    ],
)
def test_reclaim_within_cohort_takes_back_the_queue_nominal_quota(
    reclaim: str, expected: list
) -> None:
    platform = Platform(
        queue_doc("train", 8, "research", preemption={"reclaimWithinCohort": reclaim}),
        queue_doc("other", 0, "research"),
    )
    mine, theirs = platform.project("train", "a"), platform.project("other", "b")
    platform.run("borrowed", theirs, 8, 50)
    assert platform.victims(mine, 8, 10) == expected


def test_a_lending_limit_keeps_quota_at_home_and_the_rest_is_reclaimed() -> None:
    platform = Platform(
        queue_doc(
            "train",
            8,
            "research",
            lendingLimit=4,
            preemption={"withinQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        ),
        queue_doc("other", 0, "research"),
    )
    mine, theirs = platform.project("train", "a"), platform.project("other", "b")
    platform.run("lent", theirs, 4, 0)  # the most the lending limit lets it borrow
    platform.run("own-low", mine, 4, 0)
    # 4 more fit the queue's nominal quota: reclaimed by hierarchy, whatever the priority
    assert platform.victims(mine, 4, 10) == [("lent", RECLAIM)]
    # 8 more do not (4 are in use): the borrower goes only as a lower-priority one
    assert platform.victims(mine, 8, 10) == [
        ("lent", RECLAIM_WHILE_BORROWING),
        ("own-low", WITHIN_QUEUE),
    ]


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        pytest.param(5, [("theirs", RECLAIM_WHILE_BORROWING)], id="at-or-below"),
        pytest.param(2, [], id="above"),
    ],
)
def test_borrow_within_cohort_preempts_up_to_its_threshold(threshold: int, expected: list) -> None:
    borrow = {"policy": "LowerPriority", "maxPriorityThreshold": threshold}
    platform = Platform(
        queue_doc(
            "train",
            0,
            "research",
            preemption={"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": borrow},
        ),
        queue_doc("other", 0, "research"),
        queue_doc("spare", 8, "research"),
    )
    mine, theirs = platform.project("train", "a"), platform.project("other", "b")
    platform.project("spare", "c")
    platform.run("theirs", theirs, 8, 3)
    assert platform.victims(mine, 8, 10) == expected


def test_the_declared_policy_reads_back_from_the_cohort_annotation() -> None:
    """Observe reports what the Queue declares while the ClusterQueue holds what that
    renders to, and the ClusterQueue's own fields once someone changed them."""
    document = queue_doc("train", 8, preemption={"withinQueue": "LowerPriority"})
    [cohort, _] = render_queue(NAMING, "Queue/train", "train", document)
    declared = cohort["metadata"]["annotations"][PREEMPTION_ANNOTATION]
    assert json.loads(declared) == declared_preemption(document["spec"])
    platform = Platform(document)
    cluster_queue = platform.queues[platform.project("train", "a")]
    read: dict[str, Any] = {}
    read_queue_policy(read, cluster_queue["spec"], declared)
    assert read["preemption"] == declared_preemption(document["spec"])
    cluster_queue["spec"]["preemption"]["borrowWithinCohort"] = {"policy": "Never"}
    read_queue_policy(read, cluster_queue["spec"], declared)
    assert read["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    assert read["preemption"]["reclaimWithinCohort"] == "LowerPriority"
