"""The Kueue stand-in's classical preemption (kube_api/kueue_preemption.py) against Kueue's
rules, each policy value on its own: which running Workloads a pending one may evict
(pkg/scheduler/preemption: classicalPreemptions, the candidate classes and ordering,
candidateIsValid, fillBackWorkloads) and when the flavor assigner tries preemption at all
(flavorassigner.go fitsResourceQuota), on quota trees built from ClusterQueue and Cohort
specs; then through the server, what an eviction does to the Workload and its Job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.kueue_preemption import (
    RECLAIM,
    RECLAIM_WHILE_BORROWING,
    WITHIN_QUEUE,
    Preemptor,
    admitted,
)
from tests.services.kube_api.kueue_quota import Tree
from tests.services.test_kube_api_kueue import KUEUE, Cluster, V, unique

GPU = "nvidia.com/gpu"
KEY = ("f", GPU)


def queue(name: str, nominal: int, cohort: str | None = None, **policy: Any) -> dict[str, Any]:
    """A ClusterQueue of one flavor `f` and one resource; `policy`: its preemption."""
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": "f", "resources": [{"name": GPU, "nominalQuota": nominal}]}],
            }
        ],
        "preemption": policy,
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


def cohort(name: str, nominal: int = 0, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if nominal:
        spec["resourceGroups"] = queue(name, nominal)["spec"]["resourceGroups"]
    if parent:
        spec["parentName"] = parent
    return {"metadata": {"name": name}, "spec": spec}


def workload(
    name: str,
    gpus: int,
    priority: int,
    queue_name: str = "",
    created: str = "00",
    held: str = "",
    flavor: str = "f",
) -> dict[str, Any]:
    """A Workload (holding quota in `queue_name` since `held` when it is given)."""
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{created}Z",
        },
        "spec": {"priority": priority},
        "status": {},
    }
    if queue_name:
        obj["status"] = {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "lastTransitionTime": f"2026-01-01T00:01:{held or '00'}Z",
                }
            ],
            "admission": {
                "clusterQueue": queue_name,
                "podSetAssignments": [
                    {"name": "main", "flavors": {GPU: flavor}, "resourceUsage": {GPU: str(gpus)}}
                ],
            },
        }
    return obj


def moment(
    queues: list[dict[str, Any]], running: list[dict[str, Any]], cohorts: tuple = ()
) -> Preemptor:
    tree = Tree(queues, list(cohorts))
    holding = [admitted(w) for w in running]
    for each in holding:
        for key, value in each.usage.items():
            tree.add_usage(each.queue, key, value)
    return Preemptor({q["metadata"]["name"]: q for q in queues}, tree, holding)


def victims(preemptor: Preemptor, incoming: dict[str, Any], queue_name: str, gpus: int) -> list:
    found = preemptor.targets(incoming, queue_name, {KEY: gpus}, {KEY})
    return sorted((t.workload.obj["metadata"]["name"], t.reason) for t in found)


@pytest.mark.parametrize(
    ("policy", "running_priority", "expected"),
    [
        pytest.param("Never", 0, [], id="Never-preempts-nothing"),
        pytest.param("LowerPriority", 0, [("low", WITHIN_QUEUE)], id="LowerPriority-lower"),
        pytest.param("LowerPriority", 10, [], id="LowerPriority-not-equal"),
        pytest.param("LowerOrNewerEqualPriority", 0, [("low", WITHIN_QUEUE)], id="LONEP-lower"),
    ],
)
def test_within_cluster_queue_preempts_by_its_policy(
    policy: str, running_priority: int, expected: list
) -> None:
    preemptor = moment(
        [queue("cq", 8, withinClusterQueue=policy)], [workload("low", 8, running_priority, "cq")]
    )
    assert victims(preemptor, workload("high", 4, 10), "cq", 4) == expected


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        pytest.param("30", [("same", WITHIN_QUEUE)], id="a-newer-equal-one-is-preempted"),
        pytest.param("01", [], id="an-older-equal-one-is-not"),
    ],
)
def test_lower_or_newer_equal_priority_compares_creation_times(
    created: str, expected: list
) -> None:
    preemptor = moment(
        [queue("cq", 8, withinClusterQueue="LowerOrNewerEqualPriority")],
        [workload("same", 8, 5, "cq", created=created)],
    )
    assert victims(preemptor, workload("incoming", 8, 5, created="10"), "cq", 8) == expected


def test_the_fewest_lowest_priority_most_recently_admitted_workloads_are_preempted() -> None:
    preemptor = moment(
        [queue("cq", 12, withinClusterQueue="LowerPriority")],
        [
            workload("older", 4, 1, "cq", held="01"),
            workload("newer", 4, 1, "cq", held="30"),
            workload("higher", 4, 3, "cq", held="40"),
        ],
    )
    # one 4-GPU victim is enough; of the lowest priority, the most recently admitted
    assert victims(preemptor, workload("high", 4, 9), "cq", 4) == [("newer", WITHIN_QUEUE)]
    # 8 GPUs: both of priority 1 go, the priority-3 one stays (fill-back gives none back)
    assert victims(preemptor, workload("high", 8, 9), "cq", 8) == [
        ("newer", WITHIN_QUEUE),
        ("older", WITHIN_QUEUE),
    ]


def lender_and_borrower(**policy: Any) -> list[dict[str, Any]]:
    """cq-a lends its 8 GPUs to cq-b (nominal 0) in the cohort `c`."""
    return [queue("cq-a", 8, "c", **policy), queue("cq-b", 0, "c")]


@pytest.mark.parametrize(
    ("policy", "borrower_priority", "expected"),
    [
        pytest.param("Never", 0, [], id="Never"),
        pytest.param("LowerPriority", 0, [("lent", RECLAIM)], id="LowerPriority-lower"),
        pytest.param("LowerPriority", 20, [], id="LowerPriority-higher-kept"),
        pytest.param("Any", 20, [("lent", RECLAIM)], id="Any-whatever-priority"),
    ],
)
def test_reclaim_within_cohort_takes_back_nominal_quota_by_its_policy(
    policy: str, borrower_priority: int, expected: list
) -> None:
    preemptor = moment(
        lender_and_borrower(reclaimWithinCohort=policy),
        [workload("lent", 8, borrower_priority, "cq-b")],
    )
    assert victims(preemptor, workload("mine", 8, 10), "cq-a", 8) == expected


def test_reclaim_stops_once_the_borrower_is_back_within_its_nominal_quota() -> None:
    queues = [queue("cq-a", 4, "c", reclaimWithinCohort="Any"), queue("cq-b", 4, "c")]
    running = [workload("b1", 4, 0, "cq-b", held="01"), workload("b2", 4, 0, "cq-b", held="02")]
    preemptor = moment(queues, running)
    # cq-b borrows 4: one of its workloads (the newer) is reclaimable, never both
    assert victims(preemptor, workload("mine", 4, 10), "cq-a", 4) == [("b2", RECLAIM)]
    assert victims(preemptor, workload("mine", 8, 10), "cq-a", 8) == []


def borrowers(**policy: Any) -> list[dict[str, Any]]:
    """cq-a and cq-b own nothing (nominal 0) and borrow the 8 GPUs of cq-lender."""
    return [queue("cq-a", 0, "c", **policy), queue("cq-b", 0, "c"), queue("cq-lender", 8, "c")]


@pytest.mark.parametrize(
    ("borrow", "running_priority", "expected"),
    [
        pytest.param({"policy": "Never"}, 0, [], id="Never"),
        pytest.param(
            {"policy": "LowerPriority"},
            0,
            [("other", RECLAIM_WHILE_BORROWING)],
            id="LowerPriority",
        ),
        pytest.param({"policy": "LowerPriority"}, 10, [], id="LowerPriority-not-equal"),
        pytest.param(
            {"policy": "LowerPriority", "maxPriorityThreshold": 5},
            5,
            [("other", RECLAIM_WHILE_BORROWING)],
            id="threshold-at",
        ),
        pytest.param(
            {"policy": "LowerPriority", "maxPriorityThreshold": 5}, 6, [], id="threshold-above"
        ),
    ],
)
def test_borrow_within_cohort_preempts_for_a_borrowing_workload_by_its_policy(
    borrow: dict[str, Any], running_priority: int, expected: list
) -> None:
    preemptor = moment(
        borrowers(reclaimWithinCohort="LowerPriority", borrowWithinCohort=borrow),
        [workload("other", 8, running_priority, "cq-b")],
    )
    assert victims(preemptor, workload("mine", 8, 10), "cq-a", 8) == expected


def project_queues(parent: str | None, **policy: Any) -> tuple[list, list]:
    """trainform's layout: a Cohort `q` holding 8 GPUs, two ClusterQueues of nominal 0."""
    queues = [queue("p1", 0, "q", **policy), queue("p2", 0, "q")]
    cohorts = [cohort("q", 8, parent)] + ([cohort(parent)] if parent else [])
    return queues, cohorts


def test_no_preemption_is_tried_for_a_borrowing_queue_in_a_parentless_cohort() -> None:
    """fitsResourceQuota: above nominal (0), no subtree with a parent holds it, and
    borrowWithinCohort Never: noFit, though a lower-priority Workload of the same
    ClusterQueue holds the quota."""
    queues, cohorts = project_queues(None, withinClusterQueue="LowerPriority")
    preemptor = moment(queues, [workload("low", 8, 0, "p1")], tuple(cohorts))
    assert victims(preemptor, workload("high", 8, 10), "p1", 8) == [("low", WITHIN_QUEUE)]
    assert not preemptor.may_preempt(workload("high", 8, 10), "p1", KEY, 8)


def test_borrow_within_cohort_lets_a_project_queue_try_preemption() -> None:
    queues, cohorts = project_queues(
        None,
        withinClusterQueue="LowerPriority",
        reclaimWithinCohort="LowerPriority",
        borrowWithinCohort={"policy": "LowerPriority"},
    )
    preemptor = moment(queues, [workload("low", 8, 0, "p1")], tuple(cohorts))
    assert preemptor.may_preempt(workload("high", 8, 10), "p1", KEY, 8)


@pytest.mark.parametrize(
    ("parent", "used", "expected"),
    [
        pytest.param("top", 8, False, id="parent-but-the-queue-cohort-is-full"),
        pytest.param("top", 4, True, id="parent-and-room-in-the-queue-cohort"),
        pytest.param(None, 4, False, id="room-but-no-parent"),
    ],
)
def test_a_parent_cohort_lets_preemption_be_tried_only_where_a_subtree_has_room(
    parent: str | None, used: int, expected: bool
) -> None:
    """FindHeightOfLowestSubtreeThatFits counts usage now: the lowest Cohort that holds the
    request without borrowing must have a parent. `p1` may use 4 GPUs (borrowingLimit)."""
    queues, cohorts = project_queues(parent, withinClusterQueue="LowerPriority")
    limit = queues[0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    limit["borrowingLimit"] = 4
    running = [workload("low", 4, 0, "p1")] + ([workload("other", 4, 0, "p2")] if used > 4 else [])
    preemptor = moment(queues, running, tuple(cohorts))
    assert preemptor.may_preempt(workload("high", 4, 10), "p1", KEY, 4) is expected


def test_a_sibling_project_is_preempted_only_while_borrowing_is_allowed() -> None:
    """Another ClusterQueue of the same Cohort is a priority candidate: with nominal 0 the
    preemptor always borrows, so only borrowWithinCohort makes it preemptible."""
    queues, cohorts = project_queues(None, reclaimWithinCohort="LowerPriority")
    running = [workload("theirs", 8, 0, "p2")]
    assert victims(moment(queues, running, tuple(cohorts)), workload("h", 8, 10), "p1", 8) == []
    queues, cohorts = project_queues(
        None, reclaimWithinCohort="LowerPriority", borrowWithinCohort={"policy": "LowerPriority"}
    )
    preemptor = moment(queues, running, tuple(cohorts))
    assert victims(preemptor, workload("h", 8, 10), "p1", 8) == [
        ("theirs", RECLAIM_WHILE_BORROWING)
    ]


def test_a_queue_within_its_cohort_quota_reclaims_from_another_cohort_by_hierarchy() -> None:
    """Cohort q1 holds 8 GPUs, lent to q2's ClusterQueue through the parent: q1's queue
    has the hierarchical advantage, reclaims whatever the priority (InCohortReclamation)."""
    queues = [queue("mine", 0, "q1", reclaimWithinCohort="Any"), queue("theirs", 0, "q2")]
    cohorts = (cohort("q1", 8, "top"), cohort("q2", 0, "top"), cohort("top"))
    preemptor = moment(queues, [workload("borrowed", 8, 50, "theirs")], cohorts)
    assert victims(preemptor, workload("h", 8, 10), "mine", 8) == [("borrowed", RECLAIM)]
    assert preemptor.may_preempt(workload("h", 8, 10), "mine", KEY, 8)


# -- through the server: eviction, requeue and re-admission ------------------------------


@pytest.fixture
def cluster(kueue: KubeAPI) -> Iterator[Cluster]:
    before = kueue.snapshot()
    made = Cluster(kueue)
    yield made
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def priority_class(cluster: Cluster, name: str, value: int) -> str:
    body = {"apiVersion": f"{KUEUE}/{V}", "kind": "WorkloadPriorityClass"}
    body |= {"metadata": {"name": name}, "value": value}
    cluster.custom.create_cluster_custom_object(KUEUE, V, "workloadpriorityclasses", body)
    return name


def conditions(cluster: Cluster, job: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in cluster.workload(job)["status"]["conditions"]}


def test_a_preempted_job_is_suspended_requeued_and_restarted_with_its_own_template(
    cluster: Cluster,
) -> None:
    flavor = cluster.flavor(unique("a100"), nodeLabels={"pool": "a100"})
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(
        cq, {flavor: {"cpu": 8, GPU: 8}}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    cluster.local_queue(lq, cq)
    low = priority_class(cluster, unique("low"), 1)
    high = priority_class(cluster, unique("high"), 100)
    label = "kueue.x-k8s.io/priority-class"
    cluster.job("low", lq, gpus=8, **{label: low})
    assert not cluster.suspended("low")
    template = cluster.batch.read_namespaced_job("low", cluster.namespace).spec.template.spec
    assert template.node_selector == {"pool": "a100"}

    cluster.job("high", lq, gpus=8, **{label: high})

    evicted = conditions(cluster, "low")
    assert (evicted["Evicted"]["status"], evicted["Evicted"]["reason"]) == ("True", "Preempted")
    assert evicted["Preempted"]["reason"] == "InClusterQueue"
    assert evicted["Evicted"]["message"].startswith("Preempted to accommodate a workload")
    assert f"preemptor path: /{cq}; preemptee path: /{cq}" in evicted["Evicted"]["message"]
    assert (evicted["Requeued"]["status"], evicted["Requeued"]["reason"]) == ("True", "Preempted")
    assert (evicted["QuotaReserved"]["status"], evicted["QuotaReserved"]["reason"]) == (
        "False",
        "Pending",
    )
    assert "admission" not in cluster.workload("low")["status"]
    assert cluster.suspended("low")
    restored = cluster.batch.read_namespaced_job("low", cluster.namespace).spec.template.spec
    assert restored.node_selector is None  # the Job's own template again
    core = client.CoreV1Api(cluster.client)
    pods = core.list_namespaced_pod(
        cluster.namespace, label_selector="batch.kubernetes.io/job-name=low"
    )
    assert pods.items == []
    assert cluster.state("high")[0] == "True/QuotaReserved"
    assert not cluster.suspended("high")

    cluster.finish("high")

    again = conditions(cluster, "low")
    assert again["QuotaReserved"]["status"] == "True"
    assert (again["Evicted"]["status"], again["Evicted"]["reason"]) == ("False", "QuotaReserved")
    assert again["Evicted"]["message"].startswith("Previously: Preempted to accommodate")
    stats = cluster.workload("low")["status"]["schedulingStats"]["evictions"]
    assert stats == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    assert not cluster.suspended("low")
    template = cluster.batch.read_namespaced_job("low", cluster.namespace).spec.template.spec
    assert template.node_selector == {"pool": "a100"}


def test_a_pending_preemptor_says_it_waits_for_the_preemption(cluster: Cluster) -> None:
    """A victim whose pods do not go (a Job stuck active) keeps its quota: the preemptor
    stays pending with Kueue's message, and nothing is preempted twice."""
    flavor = cluster.flavor(unique("a100"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(
        cq, {flavor: {"cpu": 8, GPU: 8}}, preemption={"withinClusterQueue": "Never"}
    )
    cluster.local_queue(lq, cq)
    label = "kueue.x-k8s.io/priority-class"
    cluster.job("low", lq, gpus=8, **{label: priority_class(cluster, unique("low"), 1)})
    cluster.job("high", lq, gpus=8, **{label: priority_class(cluster, unique("high"), 100)})
    state, said = cluster.state("high")
    assert state == "False/Pending"
    assert said == (
        f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in "
        f"flavor {flavor}, 8 more needed"
    )
    assert "Evicted" not in conditions(cluster, "low")
