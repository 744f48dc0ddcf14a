"""What held jobs back: each binding constraint alone, with the exact job-seconds it cost."""

from __future__ import annotations

import pytest
from trainform.policies.queueing import (
    PlatformModel,
    PoolQuota,
    ProjectQuota,
    QueueModel,
    TraceJob,
    simulate,
)
from trainform.policies.queueing.holds import (
    BORROWING,
    GPU_QUOTA,
    LENDING,
    NOMINAL,
    ORDER,
    POOL,
    RUNNING_CAP,
)


def four_small_jobs(project: str = "a", queue: str = "q") -> list[TraceJob]:
    """Four 1-GPU jobs of 100 s at t=0: with room for two at a time they wait 0, 0, 100, 100."""
    return [TraceJob(f"{project}{i}", 0, project, queue, 1, 100) for i in range(4)]


def alone(nominal: int, pool: int = 16, **quota: int | None) -> PlatformModel:
    caps = {("a", "q"): ProjectQuota("a", "q", **quota)} if quota else {}
    queue = QueueModel("q", (PoolQuota("h100", nominal),))
    return PlatformModel({"h100": pool}, {"q": queue}, caps)


def cohort(q: PoolQuota, other: PoolQuota) -> PlatformModel:
    queues = {
        "q": QueueModel("q", (q,), cohort="c"),
        "r": QueueModel("r", (other,), cohort="c"),
    }
    return PlatformModel({"h100": 16}, queues)


@pytest.mark.parametrize(
    ("platform", "reason"),
    [
        pytest.param(alone(16, running_jobs=2), RUNNING_CAP, id="running-jobs-cap"),
        pytest.param(alone(16, gpus=2), GPU_QUOTA, id="gpu-quota"),
        pytest.param(alone(2), NOMINAL, id="nominal"),
        pytest.param(
            cohort(PoolQuota("h100", 2, borrowing_limit=0), PoolQuota("h100", 14)),
            BORROWING,
            id="borrowing-limit",
        ),
        pytest.param(
            cohort(PoolQuota("h100", 2), PoolQuota("h100", 14, lending_limit=0)),
            LENDING,
            id="cohort-lends-nothing",
        ),
        pytest.param(alone(16, pool=2), POOL, id="pool-capacity"),
    ],
)
def test_each_constraint_is_named_with_the_time_it_held(
    platform: PlatformModel, reason: str
) -> None:
    result = simulate(platform, four_small_jobs())
    assert result.held == {("a", "q"): {reason: 200.0}}
    assert result.held_per_job("a", "q") == {reason: 50.0}


def test_jobs_behind_a_strict_fifo_head_wait_for_queue_order() -> None:
    model = QueueModel("q", (PoolQuota("h100", 4),), queueing_strategy="StrictFIFO")
    platform = PlatformModel({"h100": 16}, {"q": model})
    jobs = [
        TraceJob("x", 0, "a", "q", 3, 100),
        TraceJob("y", 1, "a", "q", 2, 100),  # the head: 1 GPU left of the nominal 4
        TraceJob("z", 2, "b", "q", 1, 100),  # would fit, but StrictFIFO keeps it behind y
    ]
    result = simulate(platform, jobs)
    assert result.held == {("a", "q"): {NOMINAL: 99.0}, ("b", "q"): {ORDER: 98.0}}


def test_no_wait_no_hold() -> None:
    assert simulate(alone(16), four_small_jobs()).held == {}
