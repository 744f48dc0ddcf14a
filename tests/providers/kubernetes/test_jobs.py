"""Runs on Kubernetes: an attempt is a suspended Job that Kueue admits; status and why-pending
come from the Job and its Workload, whose status the tests set as Kueue would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.jobs import JobLaunch, RunPhase
from trainform.providers.kubernetes.jobs import DELETED, job_name
from trainform.providers.kubernetes.kinds import JOB, WORKLOAD, WORKLOAD_PRIORITY_CLASS
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, platform_folder, unique_prefix
from tests.providers.kubernetes.schemas import check_manifest
from tests.services.kube_api import KubeAPI

ADDRESS = "TrainingJob/vision/resnet"


@pytest.fixture
def setup(tmp_path: Path, kube_api: KubeAPI) -> Iterator[tuple[KubernetesProvider, str]]:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, prefix))
    folder.converge()
    provider = folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    yield provider, prefix
    folder.close()


def launch(attempt: int = 1, **changes: Any) -> JobLaunch:
    fields: dict[str, Any] = dict(
        address=ADDRESS,
        run_id="r-0123456789ab",
        attempt=attempt,
        kind="train",
        project="vision",
        queue="train",
        priority=100,
        command=["python", "train.py"],
        code_dir=None,
        parameters={},
        env={},
        datasets=[],
        cpu="8",
        memory=str(32 * 2**30),
        gpus=16,
        nodes=2,
        image="registry.example.com/ml/train@sha256:" + "1" * 64,
    )
    fields.update(changes)
    return JobLaunch(**fields)


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def kueue_workload(
    provider: KubernetesProvider, namespace: str, job: str, conditions: list[dict[str, str]]
) -> None:
    """The Workload Kueue creates for a Job, with the conditions Kueue would set."""
    owner = provider.client.get(JOB, job, namespace)
    assert owner is not None
    name = f"job-{job}"[:63]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "queueName": "train",
            "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": []}}}],
        },
    }
    check_manifest({**workload, "status": {"conditions": conditions}})
    provider.client.apply(workload, "kueue", True)
    provider.client.merge_patch(
        WORKLOAD, name, namespace, {"status": {"conditions": conditions}}, "kueue", "status"
    )


def latest(provider: KubernetesProvider) -> Any:
    [run] = provider.runs(ADDRESS)
    return run.attempts[-1]


def test_an_attempt_is_a_suspended_job_and_submitting_it_again_changes_nothing(
    setup: tuple[KubernetesProvider, str], kube_api: KubeAPI
) -> None:
    provider, prefix = setup

    assert provider.submit(launch()) == {"runId": "r-0123456789ab", "attempt": 1}
    kube_api.reset_requests()
    provider.submit(launch())

    assert [r.method for r in kube_api.requests] == ["GET"]
    job = provider.client.get(JOB, job_name(launch()), f"{prefix}vision")
    assert job is not None and job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "train"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == f"{prefix}train"
    resources = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "8"
    assert (ADDRESS, "TrainingJob") in provider.list_owned()


def test_why_pending_comes_from_kueue_and_admission_runs_the_job(
    setup: tuple[KubernetesProvider, str],
) -> None:
    provider, prefix = setup
    namespace, name = f"{prefix}vision", job_name(launch())
    provider.submit(launch())
    assert latest(provider).reason == "waiting for Kueue to create the Workload"

    insufficient = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"
    kueue_workload(
        provider, namespace, name, [_condition("QuotaReserved", "False", "Pending", insufficient)]
    )
    queued = latest(provider)
    assert (queued.phase, queued.reason) == (
        RunPhase.QUEUED,
        f"no quota reserved: Pending: {insufficient}",
    )

    kueue_workload(
        provider,
        namespace,
        name,
        [
            _condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in train"),
            _condition("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
    )
    provider.client.merge_patch(JOB, name, namespace, {"spec": {"suspend": False}}, "kueue")
    assert latest(provider).phase is RunPhase.RUNNING

    kueue_workload(
        provider,
        namespace,
        name,
        [_condition("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority")],
    )
    provider.client.merge_patch(JOB, name, namespace, {"spec": {"suspend": True}}, "kueue")
    evicted = latest(provider)
    assert evicted.phase is RunPhase.QUEUED
    assert evicted.reason.startswith("evicted by Kueue (Preempted: Preempted to accommodate")

    provider.client.merge_patch(
        JOB,
        name,
        namespace,
        {"status": {"conditions": [_condition("Complete", "True", "Completed", "")]}},
        "kube-controller-manager",
        "status",
    )
    assert latest(provider).phase is RunPhase.SUCCEEDED


def test_a_job_deleted_by_hand_is_a_failed_attempt_and_cancel_keeps_it_cancelled(
    setup: tuple[KubernetesProvider, str],
) -> None:
    provider, prefix = setup
    provider.submit(launch())
    provider.client.delete(JOB, job_name(launch()), f"{prefix}vision")

    gone = latest(provider)

    assert (gone.phase, gone.reason) == (RunPhase.FAILED, DELETED)
    provider.submit(launch(2, resume_from="step-100"))
    provider.cancel(ADDRESS, "r-0123456789ab")
    [run] = provider.runs(ADDRESS)
    assert [(a.attempt, a.phase) for a in run.attempts] == [
        (1, RunPhase.FAILED),
        (2, RunPhase.CANCELLED),
    ]
    assert provider.client.get(JOB, job_name(launch(2)), f"{prefix}vision") is None


def test_a_job_at_another_priority_gets_a_priority_class_of_that_value(
    setup: tuple[KubernetesProvider, str],
) -> None:
    provider, prefix = setup

    provider.submit(launch(priority=-5))

    job = provider.client.get(JOB, job_name(launch()), f"{prefix}vision")
    assert job is not None
    label = job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert label == f"{prefix}trainform-priority-m5"
    shared = provider.client.get(WORKLOAD_PRIORITY_CLASS, label)
    assert shared is not None and shared["value"] == -5
    check_manifest({k: v for k, v in shared.items() if k != "metadata"} | {"metadata": {}})
    assert all(kind != "Priority" for _, kind in provider.list_owned())
