"""An attempt Kueue preempted, read from its Workload as Kueue leaves it (requeues.py):
its runs while it waits and once it is admitted again, and what its restart resumed from."""

from __future__ import annotations

from typing import Any

from trainform.providers.jobs import AttemptStatus, CheckpointStatus, RunPhase, WaitSpan
from trainform.providers.kubernetes.requeues import (
    preemption_of,
    requeued_waits,
    resolve_runs,
    starts_from_latest,
    with_runs,
)
from trainform.providers.kubernetes.resume_entry import resume_command

READMITTED = "2026-12-01T10:30:00Z"
SAID = "Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization"


def condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def workload(
    *conditions: dict[str, str], evictions: int = 1, elapsed: int | None = None
) -> dict[str, Any]:
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": evictions}]}
    status: dict[str, Any] = {"conditions": list(conditions), "schedulingStats": stats}
    if elapsed is not None:
        status["accumulatedPastExecutionTimeSeconds"] = elapsed
    return {"status": status}


ENTRY_JOB = {
    "spec": {"template": {"spec": {"containers": [{"command": resume_command(["python"])}]}}}
}


def checkpoint(step: int, at: str, valid: bool = True) -> CheckpointStatus:
    found = CheckpointStatus(f"step-{step}", step, valid, "", f"s3://b/r/step-{step}")
    found.written_at = at
    return found


def attempt(**fields: Any) -> AttemptStatus:
    return AttemptStatus(attempt=1, phase=RunPhase.RUNNING, gpus=8, cpus=8.0, **fields)


def test_a_preempted_attempt_waiting_to_be_admitted_again() -> None:
    waiting = workload(
        condition("Evicted", "True", "Preempted", SAID, "2026-12-01T10:10:00Z"),
        condition("Preempted", "True", "InClusterQueue", SAID, "2026-12-01T10:10:00Z"),
        condition("Requeued", "True", "Preempted", SAID, "2026-12-01T10:10:01Z"),
        elapsed=600,
    )
    found = preemption_of(waiting)
    assert found is not None
    assert (found.at, found.readmitted_at) == ("2026-12-01T10:10:00Z", "")
    assert found.reason == f"preempted by Kueue (InClusterQueue: {SAID})"
    status = attempt()
    with_runs(status, found)
    [stopped] = status.runs
    assert (stopped.started_at, stopped.ended_at, stopped.stopped_by, stopped.elapsed) == (
        "2026-12-01T10:00:00.000Z",
        "2026-12-01T10:10:00Z",
        "preempted",
        600.0,
    )
    assert status.started_at == status.admitted_at == "2026-12-01T10:00:00.000Z"


def test_a_re_admitted_attempt_resumed_from_the_latest_valid_checkpoint() -> None:
    again = workload(
        condition("Evicted", "False", "QuotaReserved", f"Previously: {SAID}", READMITTED),
        condition("Preempted", "False", "QuotaReserved", f"Previously: {SAID}", READMITTED),
        condition("Requeued", "True", "Preempted", SAID, "2026-12-01T10:10:01Z"),
        evictions=2,
        elapsed=600,
    )
    found = preemption_of(again)
    assert found is not None
    assert (found.at, found.readmitted_at, found.count) == ("2026-12-01T10:10:01Z", READMITTED, 2)
    status = attempt(started_at="2026-12-01T10:30:02Z", resumed_step=100)
    with_runs(status, found)
    checkpoints = [
        checkpoint(100, "2026-12-01T09:00:00Z"),
        checkpoint(200, "2026-12-01T10:05:00Z"),
        checkpoint(300, "2026-12-01T10:09:00Z", valid=False),  # being written when preempted
        checkpoint(400, "2026-12-01T10:50:00Z"),  # written after the restart
    ]
    resolve_runs(status.runs, checkpoints, latest=True)
    stopped, current = status.runs
    assert (stopped.last_step, stopped.resumed_step) == (300, 100)
    assert (current.started_at, current.resumed_step) == ("2026-12-01T10:30:02Z", 200)
    waits = [WaitSpan("waited for quota (Kueue keeps no earlier reason)", "t0", READMITTED)]
    [told] = requeued_waits(waits, found)
    assert (told.since, told.until) == (found.at, READMITTED)
    assert told.reason.startswith("preempted by Kueue (Preempted to accommodate a workload")


def test_a_job_without_the_entry_restarts_from_the_checkpoint_it_was_submitted_with() -> None:
    again = workload(
        condition("Evicted", "False", "QuotaReserved", f"Previously: {SAID}", READMITTED),
        condition("Requeued", "True", "Preempted", SAID, "2026-12-01T10:10:01Z"),
    )
    status = attempt(started_at="2026-12-01T10:30:02Z", resumed_step=100)
    with_runs(status, preemption_of(again))
    checkpoints = [checkpoint(100, "2026-12-01T09:00:00Z"), checkpoint(200, "2026-12-01T10:05:00Z")]
    resolve_runs(status.runs, checkpoints, latest=False)
    assert [(r.last_step, r.resumed_step) for r in status.runs] == [(200, 100), (None, 100)]


def test_other_evictions_are_not_preemptions() -> None:
    deactivated = workload(condition("Evicted", "True", "Deactivated", "x", READMITTED))
    assert preemption_of(deactivated) is None
    assert preemption_of(None) is None
    assert starts_from_latest(ENTRY_JOB) and not starts_from_latest(None)
