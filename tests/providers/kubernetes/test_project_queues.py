"""A project's Quota is its own ClusterQueue in the queue's Cohort: its limits are what
Kueue lends it, the queue's policy reaches it when the Queue changes, a multi-node attempt
gets its headless Service, and a finished attempt's Job goes once the ledger holds its facts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trainform.planner.plan_model import Action
from trainform.providers.base import DesiredResource
from trainform.providers.jobs import RunPhase
from trainform.providers.kubernetes.jobs import job_name
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, COHORT, JOB, LOCAL_QUEUE, SERVICE
from trainform.providers.kubernetes.kueue_rules import instance_problems
from trainform.providers.kubernetes.manifests import object_metadata
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.project_queues import render_quota
from trainform.providers.kubernetes.projection import quota_limits
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, platform_folder, unique_prefix
from tests.providers.kubernetes.schemas import check_manifest
from tests.providers.kubernetes.test_jobs import ADDRESS, launch
from tests.services.kube_api import KubeAPI


@pytest.fixture
def applied(
    tmp_path: Path, kube_api: KubeAPI
) -> Iterator[tuple[SpecFolder, KubernetesProvider, str]]:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, prefix))
    folder.converge()
    provider = folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    yield folder, provider, prefix
    folder.close()


def test_the_project_borrows_at_most_its_limits_from_the_queues_cohort(
    applied: tuple[SpecFolder, KubernetesProvider, str],
) -> None:
    _, provider, prefix = applied

    cohort = provider.client.get(COHORT, f"{prefix}train")
    project_queue = provider.client.get(CLUSTER_QUEUE, f"{prefix}train-vision")
    local_queue = provider.client.get(LOCAL_QUEUE, "train", f"{prefix}vision")

    assert cohort is not None and project_queue is not None and local_queue is not None
    assert cohort["spec"]["parentName"] == f"{prefix}research"
    assert local_queue["spec"]["clusterQueue"] == f"{prefix}train-vision"
    spec = project_queue["spec"]
    assert spec["cohortName"] == f"{prefix}train"
    [flavor] = spec["resourceGroups"][0]["flavors"]
    amounts = {
        r["name"]: (str(r["nominalQuota"]), r.get("borrowingLimit")) for r in flavor["resources"]
    }
    assert amounts == {
        "cpu": ("0", "400"),
        "memory": ("0", str(3600 * 2**30)),
        "nvidia.com/gpu": ("0", "16"),
        "pods": ("4", "0"),  # runningJobs: 4 pods of its own, none borrowed or lent
    }


def test_a_queue_policy_change_reaches_its_projects_queues_and_then_plans_empty(
    applied: tuple[SpecFolder, KubernetesProvider, str],
) -> None:
    folder, provider, prefix = applied
    folder.edit("platform.yaml", "withinQueue: LowerPriority", "withinQueue: Never")

    folder.converge()

    project_queue = provider.client.get(CLUSTER_QUEUE, f"{prefix}train-vision")
    assert project_queue is not None
    assert project_queue["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert project_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "0",
        "borrowingLimit": "16",
    }
    assert not folder.plan(refresh=True).has_changes


def test_a_multi_node_attempt_has_a_headless_service_and_a_finished_one_is_cleaned(
    applied: tuple[SpecFolder, KubernetesProvider, str],
) -> None:
    _, provider, prefix = applied
    namespace = f"{prefix}vision"
    first = job_name(launch(1))
    provider.submit(launch(1))
    service = provider.client.get(SERVICE, first, namespace)
    assert service is not None and service["spec"]["clusterIP"] == "None"
    provider.client.merge_patch(
        JOB,
        first,
        namespace,
        {
            "status": {
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            }
        },
        "job-controller",
        "status",
    )

    provider.submit(launch(2, resume_from="step-100"))

    assert provider.client.get(JOB, first, namespace) is None
    assert provider.client.get(SERVICE, first, namespace) is None
    assert provider.client.get(JOB, job_name(launch(2)), namespace) is not None
    [run] = provider.runs(ADDRESS)
    assert [a.phase for a in run.attempts] == [RunPhase.FAILED, RunPhase.QUEUED]


def test_running_jobs_with_a_multi_node_job_on_its_queue_is_refused_at_plan() -> None:
    quota = DesiredResource(
        "Quota/vision/train",
        "Quota",
        "train",
        "vision",
        {"spec": {"queue": "train", "limits": {"runningJobs": 2}}},
    )
    job = {"spec": {"queue": "train", "resources": {"nodes": 2, "cpu": "1", "memory": "1"}}}
    multi = DesiredResource("TrainingJob/vision/big", "TrainingJob", "big", "vision", job)
    single_document = copy.deepcopy(job)
    single_document["spec"]["resources"]["nodes"] = 1
    single = DesiredResource(
        "TrainingJob/vision/one", "TrainingJob", "one", "vision", single_document
    )

    [problem] = [p for p in instance_problems([quota, multi]) if p.field.endswith("runningJobs")]
    assert problem.address == "Quota/vision/train"
    assert "TrainingJob/vision/big runs on 2 nodes" in problem.message
    assert not [p for p in instance_problems([quota, single]) if p.field.endswith("runningJobs")]


def test_on_a_queue_of_several_pools_the_pod_count_is_one_group_across_them() -> None:

    facts = {
        "flavors": ["h100", "mi300"],
        "resourceNames": {"h100": "nvidia.com/gpu", "mi300": "amd.com/gpu"},
    }
    document = {"metadata": {}, "spec": {"queue": "mixed", "limits": {"runningJobs": 2}}}

    cluster_queue, _, flavor = render_quota(
        Naming("trainform", "ml-", "p-"),
        "Quota/vision/mixed",
        "mixed",
        "vision",
        document,
        facts,
        object_metadata,
    )

    check_manifest(cluster_queue)
    check_manifest(flavor)
    main, jobs = cluster_queue["spec"]["resourceGroups"]
    assert main["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "amd.com/gpu"]
    assert jobs == {
        "coveredResources": ["pods"],
        "flavors": [
            {
                "name": "p-mixed-vision-jobs",
                "resources": [
                    {
                        "name": "pods",
                        "nominalQuota": "2",
                        "borrowingLimit": "0",
                        "lendingLimit": "0",
                    }
                ],
            }
        ],
    }
    assert (flavor["kind"], flavor["metadata"]["name"], flavor["spec"]) == (
        "ResourceFlavor",
        "p-mixed-vision-jobs",
        {},
    )


def test_removing_a_pools_topology_plans_a_replacement_with_its_reason(
    applied: tuple[SpecFolder, KubernetesProvider, str],
) -> None:
    folder, _, _ = applied
    folder.edit(
        "platform.yaml",
        "  topology: [cloud.google.com/gce-topology-block, kubernetes.io/hostname]\n",
        "",
    )

    plan = folder.plan()

    [change] = [c for c in plan.actionable if c.address == "ResourcePool/h100"]
    assert change.action is Action.REPLACE
    assert any("spec.topology" in reason for reason in change.reasons), change.reasons


@settings(max_examples=60, deadline=None)
@given(
    gpu=st.one_of(st.none(), st.integers(0, 512)),
    cpu=st.one_of(st.none(), st.integers(0, 4096)),
    running=st.one_of(st.none(), st.integers(0, 100)),
    pools=st.integers(1, 4),
)
def test_a_project_queue_reads_back_as_the_limits_it_was_rendered_from(
    gpu: int | None, cpu: int | None, running: int | None, pools: int
) -> None:
    names = [f"p{i}" for i in range(pools)]
    facts = {
        "flavors": names,
        "resourceNames": {
            n: ("amd.com/gpu" if i % 2 else "nvidia.com/gpu") for i, n in enumerate(names)
        },
    }
    limits = {
        key: value
        for key, value in (("gpu", gpu), ("cpu", cpu), ("runningJobs", running))
        if value is not None
    }
    document = {"metadata": {}, "spec": {"queue": "q", "limits": limits}}

    cluster_queue = render_quota(Naming(), "Quota/a/q", "q", "a", document, facts, object_metadata)[
        0
    ]

    expected = {k: (v if k == "runningJobs" else str(v)) for k, v in limits.items()}
    assert quota_limits(cluster_queue) == expected
