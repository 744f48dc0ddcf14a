"""A Workload Kueue deactivated ends its attempt (providers/kubernetes/deactivation.py): its
Job is suspended, never Failed, yet the attempt is over, at the eviction's time, in Kueue's
words, with a cause by the eviction reason's underlying cause; waits Kueue reports from
the eviction on are not the attempt's. An active Workload's suspended Job still waits."""

from __future__ import annotations

from typing import Any

import pytest
from trainform.providers.jobs import Cause, RunPhase
from trainform.providers.kubernetes.timeline import attempt_status

EVICTED_AT = "2026-01-01T01:00:00Z"
JOB = {
    "metadata": {"name": "j", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"suspend": True, "completions": 1},
    "status": {},
}


def _condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def _workload(active: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "spec": {"active": active},
        "status": {
            "conditions": [
                _condition("QuotaReserved", "False", "Pending", message, EVICTED_AT),
                _condition("Admitted", "False", "NoReservation", "no reservation", EVICTED_AT),
                _condition("Evicted", "True", reason, message, EVICTED_AT),
                _condition("Requeued", "False", reason, message, EVICTED_AT),
            ],
            "accumulatedPastExecutionTimeSeconds": 3600,
        },
    }


@pytest.mark.parametrize(
    ("reason", "message", "phase", "cause"),
    [
        pytest.param(
            "DeactivatedDueToMaximumExecutionTimeExceeded",
            "The workload is deactivated due to exceeding the maximum execution time",
            RunPhase.FAILED,
            Cause.TIME_LIMIT,
            id="maximum-execution-time",
        ),
        pytest.param(
            "DeactivatedDueToRequeuingLimitExceeded",
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
            RunPhase.FAILED,
            Cause.NODE_FAILURE,
            id="pods-ready-requeuing-limit",
        ),
        pytest.param(
            "DeactivatedDueToAdmissionCheck",
            "The workload is deactivated due to the check prov was rejected",
            RunPhase.FAILED,
            Cause.NODE_FAILURE,
            id="admission-check",
        ),
        pytest.param(
            "Deactivated",
            "The workload is deactivated",
            RunPhase.CANCELLED,
            Cause.CANCELLED,
            id="by-hand",
        ),
    ],
)
def test_a_deactivated_workload_ends_its_attempt_with_kueues_reason(
    reason: str, message: str, phase: RunPhase, cause: Cause
) -> None:
    status = attempt_status({"attempt": 1, "job": "j"}, JOB, _workload(False, reason, message))

    assert (status.phase, status.cause, status.ended_at) == (phase, cause, EVICTED_AT)
    assert status.reason == f"deactivated by Kueue ({reason}: {message})"
    assert status.phase.finished
    assert status.waits == []  # the quota released at the eviction is no wait of the attempt


def test_an_inactive_workload_not_yet_evicted_ends_its_attempt_and_an_active_one_waits() -> None:
    inactive = {"spec": {"active": False}, "status": {"conditions": []}}
    ending = attempt_status({"attempt": 1, "job": "j"}, JOB, inactive)
    assert (ending.phase, ending.cause) == (RunPhase.CANCELLED, Cause.CANCELLED)

    message = "Preempted to accommodate a workload (UID: u) due to prioritization"
    evicted = _workload(True, "Preempted", message)
    waiting = attempt_status({"attempt": 1, "job": "j"}, JOB, evicted)
    assert waiting.phase is RunPhase.QUEUED
    assert waiting.reason == f"evicted by Kueue (Preempted: {message}); requeued"
