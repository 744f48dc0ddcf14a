"""The plan honours `retries.backoff`: a failed attempt is resumed only once its backoff
(doubling per failure, `providers.jobs.retry_delay`) has passed, and a retry the provider
queued itself is shown as waiting for its backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem
from trainform.planner.jobs import JobContext, identity_inputs, plan_job, run_id_of
from trainform.planner.lockfile import LockFile
from trainform.planner.plan_model import Action
from trainform.planner.state import ResourceState
from trainform.planner.timeline import iso
from trainform.providers.jobs import MAX_RETRY_DELAY, retry_delay

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
JOB = "TrainingJob/research/train"


def _items(backoff: str = "1m", limit: int = 3) -> dict[str, DesiredItem]:
    queue = DesiredItem(
        "Queue/q", "Queue", "q", None, ["local"], {"spec": {"defaultPriority": 0}}, "h", [],
        False, "q.yaml:1",
    )  # fmt: skip
    spec = {
        "queue": "q",
        "command": ["python", "train.py"],
        "parameters": {},
        "env": {},
        "resources": {"nodes": 1, "acceleratorsPerNode": 0, "cpu": "1", "memory": "1024"},
        "retries": {"limit": limit, "backoff": backoff},
        "resume": {"policy": "latest"},
    }
    job = DesiredItem(
        JOB, "TrainingJob", "train", "research", ["local"], {"spec": spec}, "s", ["Queue/q"],
        False, "job.yaml:1", references=[("spec.queue", "Queue/q", None)],
    )  # fmt: skip
    return {"Queue/q": queue, JOB: job}


def _plan(attempts: list[dict[str, Any]], **items: Any) -> tuple[Any, list[Any], str]:
    desired = _items(**items)
    job = desired[JOB]
    runs: list[dict[str, Any]] = []
    context = JobContext(desired, LockFile(), Path("."), lambda _: runs, now=NOW)
    run_id = run_id_of(identity_inputs(job, context))
    runs.append({"run_id": run_id, "attempts": attempts, "checkpoints": [], "evaluations": []})
    previous = ResourceState(
        JOB, "TrainingJob", ["local"], job.document, "s", {"local": {"runId": run_id}}
    )
    change, findings = plan_job(job, previous, context, refreshed=True)
    return change, findings, run_id


def _failed(number: int, seconds_ago: float, phase: str = "failed") -> dict[str, Any]:
    return {
        "attempt": number,
        "phase": phase,
        "reason": "exit code 1",
        "ended_at": iso(NOW - timedelta(seconds=seconds_ago)),
    }


def test_a_failure_inside_its_backoff_is_held_and_the_plan_says_until_when() -> None:
    change, findings, _ = _plan([_failed(1, 10)])
    assert change.action is Action.NOOP
    [finding] = [f for f in findings if f.kind == "retry-backoff"]
    assert iso(NOW + timedelta(seconds=50)) in finding.message
    assert "attempt 2 resumes after its retry backoff" in finding.message


def test_after_its_backoff_a_failure_is_resumed() -> None:
    change, findings, _ = _plan([_failed(1, 61)])
    assert change.action is Action.RESUME
    assert change.job["launch"]["eligible_at"] == iso(NOW - timedelta(seconds=1))
    assert not [f for f in findings if f.kind == "retry-backoff"]


def test_the_backoff_doubles_with_every_failure() -> None:
    attempts = [_failed(1, 400), _failed(2, 90)]  # second failure: 2 x 60 s
    change, _, _ = _plan(attempts)
    assert change.action is Action.NOOP
    change, _, _ = _plan([_failed(1, 400), _failed(2, 121)])
    assert change.action is Action.RESUME


def test_a_cancelled_attempt_resumes_at_once() -> None:
    change, _, _ = _plan([_failed(1, 1, phase="cancelled")])
    assert change.action is Action.RESUME


def test_a_retry_the_provider_queued_shows_as_waiting_for_its_backoff() -> None:
    waiting = {
        "attempt": 2,
        "phase": "queued",
        "reason": "waiting for retry backoff",
        "eligible_at": iso(NOW + timedelta(seconds=30)),
    }
    change, findings, run_id = _plan([_failed(1, 30), waiting])
    assert change.action is Action.NOOP
    [finding] = [f for f in findings if f.kind == "retry-backoff"]
    assert finding.message == (
        f"run {run_id}: attempt 2 waits for its retry backoff until "
        f"{iso(NOW + timedelta(seconds=30))}; the provider starts it then"
    )


@pytest.mark.parametrize(
    ("backoff", "failures", "expected"),
    [(60, 1, 60), (60, 2, 120), (60, 3, 240), (60, 10, MAX_RETRY_DELAY), (0, 3, 0),
     (7200, 5, 7200)],
)  # fmt: skip
def test_retry_delay_doubles_and_is_capped(backoff: int, failures: int, expected: int) -> None:
    assert retry_delay(backoff, failures) == expected
