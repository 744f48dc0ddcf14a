"""The stand-in's timers and deactivation (kube_api/clock.py, job_deadline.py,
kueue_deactivation.py), through the client: time passes with `elapse` (no sleeping); a Job
past its activeDeadlineSeconds fails with DeadlineExceeded and frees its quota; a Workload
past its maximum execution time, or one whose DeactivationTarget Kueue set, or one set
inactive by hand, is evicted with Kueue's reason, its Job suspended, its quota released,
and it is never admitted again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.services.kube_api import KubeAPI
from tests.services.kube_api.clock import elapse
from tests.services.test_kube_api_kueue import GPU, KUEUE, Cluster, V, unique


@pytest.fixture
def cluster(kueue: KubeAPI) -> Iterator[Cluster]:
    before = kueue.snapshot()
    made = Cluster(kueue)
    yield made
    kueue.kueue.stop()
    kueue.delete_created_since(before)
    made.client.close()


def _queue(cluster: Cluster, gpus: int = 8) -> str:
    flavor = cluster.flavor(unique("h100"))
    cq, lq = unique("cq"), unique("lq")
    cluster.cluster_queue(cq, {flavor: {"cpu": 8, GPU: gpus}})
    cluster.local_queue(lq, cq)
    return lq


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _job(cluster: Cluster, name: str) -> dict[str, Any]:
    job = cluster.batch.read_namespaced_job(name, cluster.namespace)
    return cluster.client.sanitize_for_serialization(job)  # type: ignore[no-any-return]


def _pods(cluster: Cluster, job: str) -> list[str]:
    from kubernetes import client

    listed = client.CoreV1Api(cluster.client).list_namespaced_pod(
        cluster.namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
    )
    return [pod.metadata.name for pod in listed.items]


def test_a_job_past_its_active_deadline_fails_and_frees_its_quota(cluster: Cluster) -> None:
    lq = _queue(cluster)
    cluster.job("deadline", lq, gpus=8)
    body = {"spec": {"activeDeadlineSeconds": 600}}
    cluster.batch.patch_namespaced_job("deadline", cluster.namespace, body)
    cluster.job("behind", lq, gpus=8)
    assert not cluster.suspended("deadline") and cluster.suspended("behind")
    started = _job(cluster, "deadline")["status"]["startTime"]
    assert _pods(cluster, "deadline")

    elapse(cluster.api, 540)  # the test's own seconds count too: stay well short
    assert "Failed" not in _conditions(_job(cluster, "deadline"))

    elapse(cluster.api, 60)
    job = _job(cluster, "deadline")
    failed = _conditions(job)["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", "DeadlineExceeded")
    assert failed["message"] == "Job was active longer than specified deadline"
    assert _conditions(job)["FailureTarget"]["reason"] == "DeadlineExceeded"
    assert job["status"]["startTime"] < started  # moved into the past with the clock
    assert _pods(cluster, "deadline") == []
    assert job["status"]["failed"] == 1
    assert _conditions(cluster.workload("deadline"))["Finished"]["status"] == "True"
    assert not cluster.suspended("behind")  # the quota it held went to the next job


def test_a_workload_past_its_maximum_execution_time_is_deactivated_and_never_requeued(
    cluster: Cluster,
) -> None:
    lq = _queue(cluster)
    cluster.job("capped", lq, gpus=8, **{"kueue.x-k8s.io/max-exec-time-seconds": "300"})
    workload = cluster.workload("capped")
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 300
    assert not cluster.suspended("capped")
    assert _job(cluster, "capped")["status"]["startTime"]
    cluster.job("next", lq, gpus=8)
    assert cluster.suspended("next")  # the queue's 8 GPUs are capped's

    elapse(cluster.api, 240)  # the test's own seconds count too: stay well short
    assert cluster.workload("capped")["spec"]["active"] is True
    elapse(cluster.api, 60)

    workload = cluster.workload("capped")
    conditions = _conditions(workload)
    assert workload["spec"]["active"] is False
    evicted = conditions["Evicted"]
    assert (evicted["status"], evicted["reason"]) == (
        "True",
        "DeactivatedDueToMaximumExecutionTimeExceeded",
    )
    assert evicted["message"] == (
        "The workload is deactivated due to exceeding the maximum execution time"
    )
    assert "DeactivationTarget" not in conditions
    assert (conditions["Requeued"]["status"], conditions["Requeued"]["reason"]) == (
        "False",
        "DeactivatedDueToMaximumExecutionTimeExceeded",
    )
    assert (conditions["QuotaReserved"]["status"], conditions["QuotaReserved"]["reason"]) == (
        "False",
        "Deactivated",
    )
    assert conditions["Admitted"]["status"] == "False"
    assert not cluster.suspended("next")  # an inactive Workload holds no quota
    assert "admission" not in workload["status"]
    assert workload["status"]["accumulatedPastExecutionTimeSeconds"] >= 300
    job = _job(cluster, "capped")
    assert job["spec"]["suspend"] is True  # stopped, not failed: the Job never ends itself
    assert "startTime" not in job["status"]
    assert "Failed" not in _conditions(job)
    assert _pods(cluster, "capped") == []

    cluster.api.kueue.reconcile()
    assert cluster.suspended("capped")  # inactive: Kueue never admits it again
    assert _conditions(cluster.workload("capped"))["QuotaReserved"]["status"] == "False"


def test_kueues_deactivation_target_and_a_deactivation_by_hand_evict_with_their_reasons(
    cluster: Cluster,
) -> None:
    lq = _queue(cluster, gpus=16)
    cluster.job("limited", lq, gpus=8)
    cluster.job("by-hand", lq, gpus=8)
    name = cluster.workload("limited")["metadata"]["name"]
    target = {
        "type": "DeactivationTarget",
        "status": "True",
        "reason": "RequeuingLimitExceeded",
        "message": "exceeding the maximum number of re-queuing retries",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = cluster.workload("limited")["status"]
    status["conditions"].append(target)
    cluster.custom.patch_namespaced_custom_object_status(
        KUEUE, V, cluster.namespace, "workloads", name, {"status": status}
    )
    other = cluster.workload("by-hand")["metadata"]["name"]
    cluster.custom.patch_namespaced_custom_object(
        KUEUE, V, cluster.namespace, "workloads", other, {"spec": {"active": False}}
    )

    limited = _conditions(cluster.workload("limited"))
    assert limited["Evicted"]["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert limited["Evicted"]["message"] == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    by_hand = _conditions(cluster.workload("by-hand"))
    assert (by_hand["Evicted"]["reason"], by_hand["Evicted"]["message"]) == (
        "Deactivated",
        "The workload is deactivated",
    )
    for job in ("limited", "by-hand"):
        assert cluster.suspended(job)
        assert _conditions(cluster.workload(job))["QuotaReserved"]["status"] == "False"
