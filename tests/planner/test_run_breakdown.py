"""Where an attempt's time went (planner/run_breakdown.py): from the job's events when it
reported them, from what the provider knows when it did not, with the recompute of lost
steps apart and shares that add up to the time running."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from trainform.planner.run_breakdown import CATEGORIES, run_breakdown
from trainform.providers.jobs import AttemptStatus, CheckpointStatus, RunPhase, RunStatus

BASE = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def at(seconds: float) -> str:
    moment = datetime.fromtimestamp(BASE + seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def events(first: float, phases: dict[str, float], **more: Any) -> dict[str, Any]:
    return {
        "formatVersion": 1,
        "records": 10,
        "ignored": more.pop("ignored", 0),
        "truncated": False,
        "ranks": more.pop("ranks", 1),
        "firstAt": BASE + first,
        "lastAt": BASE + first + sum(phases.values()),
        "lastStep": None,
        "phases": {
            name: {"seconds": seconds, "count": 1, "bytes": 300 if name == "checkpoint" else 0}
            for name, seconds in phases.items()
        },
        "open": more.pop("open", {}),
    }


def attempt(
    number: int, submitted: float, started: float, ended: float, **more: Any
) -> AttemptStatus:
    return AttemptStatus(
        attempt=number,
        phase=more.pop("phase", RunPhase.SUCCEEDED),
        submitted_at=at(submitted),
        started_at=at(started),
        ended_at=at(ended),
        **more,
    )


def checkpoint(step: int, written: float) -> CheckpointStatus:
    return CheckpointStatus(f"step-{step:06d}", step, True, written_at=at(written), size=1000)


def test_events_split_the_time_running_and_the_gap_before_them_is_setup() -> None:
    phases = {"setup": 3.0, "data_wait": 10.0, "compute": 20.0, "checkpoint": 1.0, "eval": 2.0}
    run = RunStatus("r", [attempt(1, 0, 10, 50, events=events(12.0, phases))])
    result = run_breakdown(run)
    [only] = result.attempts
    assert (only.source, only.wait, only.ran) == ("events", 10.0, 40.0)
    assert only.seconds == {
        "setup": 5.0,
        "dataWait": 10.0,
        "compute": 20.0,
        "checkpoint": 1.0,
        "recovery": 0.0,
        "evaluation": 2.0,
        "other": 0.0,
        "unaccounted": 2.0,
    }
    assert only.checkpoint_bytes == 300
    assert sum(only.share(c) or 0 for c in CATEGORIES) == pytest.approx(1.0)
    assert result.to_json()["total"]["shares"]["dataWait"] == 0.25


def test_a_job_that_reported_nothing_gets_what_the_provider_knows() -> None:
    run = RunStatus(
        "r", [attempt(1, 0, 4, 24)], checkpoints=[checkpoint(5, 10), checkpoint(10, 20)]
    )
    [only] = run_breakdown(run).attempts
    assert (only.source, only.wait, only.ran) == ("provider", 4.0, 20.0)
    assert only.seconds["unaccounted"] == 20.0
    assert only.seconds["compute"] is None and only.seconds["dataWait"] is None
    assert (only.checkpoints, only.checkpoint_bytes) == (2, 2000)
    assert only.to_json()["shares"]["compute"] is None


def test_recompute_of_lost_steps_comes_out_of_compute_and_data_wait() -> None:
    first = attempt(1, 0, 0, 30, phase=RunPhase.FAILED, last_step=14)
    second = attempt(
        2,
        30,
        30,
        60,
        resumed_from="step-000010",
        events=events(0.0, {"data_wait": 10.0, "compute": 20.0}),
    )
    run = RunStatus("r", [first, second], checkpoints=[checkpoint(10, 24)])
    result = run_breakdown(run)
    lost = result.attempts[1]
    assert lost.seconds["recovery"] == pytest.approx(6.0)  # attempt 1 ran 6 s past step 10
    assert lost.seconds["dataWait"] == pytest.approx(8.0)
    assert lost.seconds["compute"] == pytest.approx(16.0)
    assert result.total.source == "mixed"
    assert result.total.seconds["recovery"] == pytest.approx(6.0)
    assert result.total.ran == 60.0


def test_without_events_the_recompute_comes_out_of_the_unaccounted_time() -> None:
    first = attempt(1, 0, 0, 30, phase=RunPhase.FAILED, last_step=14)
    second = attempt(2, 30, 30, 60, resumed_from="step-000010")
    run = RunStatus("r", [first, second], checkpoints=[checkpoint(10, 24)])
    lost = run_breakdown(run).attempts[1]
    assert (lost.seconds["recovery"], lost.seconds["unaccounted"]) == (6.0, 24.0)


def test_a_phase_open_when_the_attempt_ended_counts_until_the_end() -> None:
    reported = events(
        0.0, {"compute": 10.0}, ranks=2, open={"checkpoint": {"since": BASE + 10.0, "ranks": 1}}
    )
    run = RunStatus("r", [attempt(1, 0, 0, 20, phase=RunPhase.FAILED, events=reported)])
    [only] = run_breakdown(run).attempts
    assert only.seconds["checkpoint"] == pytest.approx(5.0)  # one of two ranks, 10 s
    assert only.open_phases == ["checkpoint"]


def test_claims_beyond_the_time_running_are_scaled_down() -> None:
    reported = events(0.0, {"compute": 30.0, "data_wait": 10.0})
    [only] = run_breakdown(RunStatus("r", [attempt(1, 0, 0, 20, events=reported)])).attempts
    assert only.seconds["compute"] == pytest.approx(15.0)
    assert only.seconds["dataWait"] == pytest.approx(5.0)
    assert only.seconds["unaccounted"] == pytest.approx(0.0)


def test_an_attempt_still_queued_has_a_wait_and_nothing_inside() -> None:
    queued = AttemptStatus(attempt=1, phase=RunPhase.QUEUED, submitted_at=at(0))
    now = datetime.fromtimestamp(BASE + 30, UTC)
    [only] = run_breakdown(RunStatus("r", [queued]), now).attempts
    assert (only.wait, only.ran) == (30.0, None)
    assert set(only.seconds.values()) == {None}


def test_lost_steps_whose_checkpoint_is_gone_are_costed_at_the_attempts_time_per_step() -> None:
    first = attempt(1, 0, 0, 30, phase=RunPhase.FAILED, last_step=14)
    reported = events(0.0, {"data_wait": 10.0, "compute": 20.0}, ranks=2)
    reported["phases"]["compute"]["count"] = 60  # 30 steps on each of 2 ranks: 1 s a step
    second = attempt(2, 30, 30, 70, resumed_from="step-000010", events=reported)
    lost = run_breakdown(RunStatus("r", [first, second])).attempts[1]  # step-000010 pruned
    assert lost.seconds["recovery"] == pytest.approx(4.0)  # steps 11 to 14 again
