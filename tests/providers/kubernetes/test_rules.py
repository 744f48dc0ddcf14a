"""Kueue's admission rules, checked offline: each bad queue is named with the field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.kueue_rules import instance_problems, resource_problems
from trainform.providers.kubernetes.naming import Naming

QUEUE: dict[str, Any] = {
    "metadata": {"labels": {}, "annotations": {}},
    "spec": {
        "cohort": "research",
        "pools": [
            {
                "pool": "h100",
                "nominalQuota": {"gpu": "32", "cpu": "800"},
                "lendingLimit": {"gpu": "16"},
                "borrowingLimit": {"gpu": "8"},
            }
        ],
        "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Never"}},
    },
}


def _queue(**edits: Any) -> DesiredResource:
    document = copy.deepcopy(QUEUE)
    for path, value in edits.items():
        node = document["spec"]
        *parents, last = path.split("__")
        for step in parents:
            node = node[int(step)] if step.isdigit() else node[step]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    return DesiredResource("Queue/train", "Queue", "train", None, document)


@pytest.mark.parametrize(
    ("edits", "field", "words"),
    [
        pytest.param(
            {"pools__0__lendingLimit": {"gpu": "64"}},
            "spec.pools[0].lendingLimit.gpu",
            "above nominalQuota",
            id="lending-above-nominal",
        ),
        pytest.param(
            {"cohort": None},
            "spec.pools[0].borrowingLimit spec.pools[0].lendingLimit",
            "needs a cohort",
            id="borrowing-without-cohort",
        ),
        pytest.param(
            {"pools__0__nominalQuota": {"gpu": "-4", "cpu": "800"}},
            "spec.pools[0].nominalQuota.gpu",
            "not a non-negative quantity",
            id="negative-quota",
        ),
        pytest.param(
            {"pools__0__nominalQuota": {"gpu": "lots", "cpu": "800"}},
            "spec.pools[0].nominalQuota.gpu",
            "not a non-negative quantity",
            id="non-numeric-quota",
        ),
        pytest.param(
            {"pools": [QUEUE["spec"]["pools"][0], {"pool": "h100", "nominalQuota": {}}]},
            "spec.pools[1].pool",
            "already listed",
            id="duplicate-flavor",
        ),
        pytest.param(
            {
                "preemption": {
                    "reclaimWithinCohort": "Never",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            },
            "spec.preemption.borrowWithinCohort.policy",
            "reclaimWithinCohort",
            id="borrow-preemption-without-reclaim",
        ),
    ],
)
def test_a_queue_kueue_would_reject_is_a_problem_at_its_field(
    edits: dict[str, Any], field: str, words: str
) -> None:
    problems = resource_problems(_queue(**edits), Naming())

    assert [p.field for p in problems if words in p.message] == field.split()


def test_a_queue_kueue_accepts_has_no_problem() -> None:
    assert resource_problems(_queue(), Naming()) == []


def test_a_namespace_too_long_with_its_prefix_is_a_problem() -> None:
    project = DesiredResource(
        "Project/p", "Project", "a" * 60, None, {"metadata": {}, "spec": {"owners": ["x"]}}
    )

    problems = resource_problems(project, Naming(namespace_prefix="team-"))

    assert [p.field for p in problems] == ["metadata.name"]


def _quota(project: str, name: str, queue: str) -> DesiredResource:
    return DesiredResource(
        f"Quota/{project}/{name}",
        "Quota",
        name,
        project,
        {"metadata": {}, "spec": {"queue": queue, "limits": {}}},
    )


def test_cross_resource_problems_name_the_missing_pool_the_duplicate_quota_and_the_job() -> None:
    job = DesiredResource(
        "TrainingJob/vision/resnet",
        "TrainingJob",
        "resnet",
        "vision",
        {"metadata": {}, "spec": {"queue": "eval"}},
    )
    resources = [_queue(), _quota("vision", "a", "train"), _quota("vision", "b", "train"), job]

    problems = instance_problems(resources)

    assert [(p.address, p.field) for p in problems] == [
        ("Queue/train", "spec.pools[0].pool"),
        ("Quota/vision/b", "spec.queue"),
        ("TrainingJob/vision/resnet", "spec.queue"),
    ]


@pytest.mark.parametrize(
    ("spec", "fields"),
    [
        pytest.param(
            {"topology": ["block", "kubernetes.io/hostname"]},
            ["spec.nodeSelector"],
            id="topology-without-node-selector",
        ),
        pytest.param(
            {"nodeSelector": {"a": "b"}, "topology": ["kubernetes.io/hostname", "rack", "rack"]},
            ["spec.topology[0]", "spec.topology[2]"],
            id="hostname-not-lowest-and-duplicate-level",
        ),
        pytest.param(
            {
                "tolerations": [
                    {"key": "", "operator": "Equal"},
                    {"key": "k", "operator": "Exists", "value": "v"},
                ]
            },
            ["spec.tolerations[0].operator", "spec.tolerations[1].value"],
            id="tolerations-kueue-refuses",
        ),
    ],
)
def test_a_pool_kueue_would_reject_is_a_problem_at_its_field(
    spec: dict[str, Any], fields: list[str]
) -> None:
    pool = DesiredResource("ResourcePool/h100", "ResourcePool", "h100", None, {"spec": spec})

    assert [p.field for p in resource_problems(pool, Naming())] == fields


def _job(nodes: int, per_node: int) -> DesiredResource:
    resources = {"nodes": nodes, "acceleratorsPerNode": per_node, "cpu": "8", "memory": "1"}
    return DesiredResource(
        "TrainingJob/vision/big",
        "TrainingJob",
        "big",
        "vision",
        {"metadata": {}, "spec": {"queue": "train", "resources": resources}},
    )


def _pool(count: int) -> DesiredResource:
    spec = {"nodes": 4, "accelerator": {"type": "h100", "count": count}}
    return DesiredResource("ResourcePool/h100", "ResourcePool", "h100", None, {"spec": spec})


@pytest.mark.parametrize(
    ("job", "fields"),
    [
        pytest.param(_job(4, 8), [], id="fits-within-nominal-plus-borrowing"),
        pytest.param(
            _job(6, 8), ["spec.resources.acceleratorsPerNode"], id="more-than-the-queue-can-admit"
        ),
        pytest.param(
            _job(1, 16), ["spec.resources.acceleratorsPerNode"], id="node-larger-than-any-pool"
        ),
    ],
)
def test_a_job_that_can_never_be_admitted_is_a_problem(
    job: DesiredResource, fields: list[str]
) -> None:
    quota = {"gpu": "32", "cpu": "800", "memory": "4096"}  # the job's 1 byte per node fits
    resources = [
        _queue(pools__0__nominalQuota=quota),
        _pool(8),
        _quota("vision", "a", "train"),
        job,
    ]

    problems = instance_problems(resources)

    assert [p.field for p in problems if p.address == job.address] == fields


def test_an_evaluation_on_a_queue_without_the_projects_quota_is_a_problem_of_its_suite() -> None:
    job = _job(1, 1)
    job.document["spec"]["evaluations"] = [{"suite": "heldout"}]
    suite = DesiredResource(
        "EvalSuite/vision/heldout",
        "EvalSuite",
        "heldout",
        "vision",
        {"metadata": {}, "spec": {"queue": "eval", "priority": 2**31}},
    )
    other = DesiredResource("Queue/eval", "Queue", "eval", None, copy.deepcopy(QUEUE))
    resources = [_queue(), other, _pool(8), _quota("vision", "a", "train"), job, suite]

    problems = instance_problems(resources) + resource_problems(suite, Naming())

    assert [(p.field, p.message.split(":")[0]) for p in problems if p.address == suite.address] == [
        (
            "spec.queue",
            "TrainingJob/vision/big runs this suite's evaluations on queue eval, where project "
            "vision has no Quota (so no LocalQueue)",
        ),
        (
            "spec.priority",
            "2147483648 does not fit a 32-bit integer (a WorkloadPriorityClass value)",
        ),
    ]
