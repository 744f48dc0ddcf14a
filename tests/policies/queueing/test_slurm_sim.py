"""The Slurm model: PriorityTier first with the main scheduler's blocking, backfill within
time limits, QOS limits replacing association limits, QOS preemption losing work."""

from __future__ import annotations

import dataclasses

import pytest
from trainform.policies.queueing import TraceJob
from trainform.policies.queueing.holds import GPU_QUOTA, REQUEUE_DELAY
from trainform.policies.queueing.slurm_model import (
    SlurmAssociation,
    SlurmPartition,
    SlurmPlatform,
    SlurmQos,
)
from trainform.policies.queueing.slurm_sim import simulate_slurm


def two_tiers(**platform: object) -> SlurmPlatform:
    """One pool of 4 GPUs; partition `hi` (PriorityTier 10) and `lo` (1), QOS of each."""
    return SlurmPlatform(
        pools={"node": 4},
        partitions={
            "hi": SlurmPartition("hi", "node", tier=10, qos="hiq"),
            "lo": SlurmPartition("lo", "node", tier=1, qos="loq"),
        },
        qos={"hiq": SlurmQos("hiq"), "loq": SlurmQos("loq")},
        **{"backfill_interval": 0.0, "backfill_resolution": 0.0, **platform},  # type: ignore[arg-type]
    )


def starts(platform: SlurmPlatform, jobs: list[TraceJob]) -> dict[str, float | None]:
    return {job.id: job.start for job in simulate_slurm(platform, jobs).jobs}


@pytest.mark.parametrize(
    ("limit", "start"),
    [
        pytest.param(5.0, 2.0, id="ends-before-the-reservation-backfills"),
        pytest.param(10.0, 20.0, id="would-delay-the-reservation-waits"),
    ],
)
def test_a_small_low_tier_job_backfills_only_where_it_delays_no_higher_one(
    limit: float, start: float
) -> None:
    jobs = [
        TraceJob("a", 0, "p", "lo", 2, 10),
        TraceJob("big", 1, "p", "hi", 4, 10),  # blocked: 2 GPUs free, reserves [10, 20)
        TraceJob("small", 2, "p", "lo", 1, 5, limit=limit),
    ]
    assert starts(two_tiers(), jobs) == {"a": 0.0, "big": 10.0, "small": start}


def test_without_backfill_nothing_passes_a_blocked_higher_tier_job() -> None:
    jobs = [
        TraceJob("a", 0, "p", "lo", 2, 10),
        TraceJob("big", 1, "p", "hi", 4, 10),
        TraceJob("small", 2, "p", "lo", 1, 5),
    ]
    assert starts(two_tiers(backfill=False), jobs)["small"] == 20.0


def test_a_qos_gpu_limit_replaces_the_association_limit() -> None:
    jobs = [TraceJob(f"j{i}", 0, "acct", "lo", 1, 10) for i in range(3)]
    association = {("acct", "lo"): SlurmAssociation("acct", "lo", gpu_limit=1)}
    limited = two_tiers(associations=association)
    assert list(starts(limited, jobs).values()) == [0.0, 10.0, 20.0]
    assert simulate_slurm(limited, jobs).held == {("acct", "lo"): {GPU_QUOTA: 30.0}}
    limited.qos["loq"] = SlurmQos("loq", gpu_limit=3)
    assert list(starts(limited, jobs).values()) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("checkpoint", "end"),
    [pytest.param(None, 10 + 121 + 100, id="no-checkpoint"), pytest.param(4.0, 223, id="every-4s")],
)
def test_qos_preemption_requeues_and_loses_work_since_the_checkpoint(
    checkpoint: float | None, end: float
) -> None:
    platform = two_tiers(checkpoint_interval=checkpoint)
    platform.qos["hiq"] = SlurmQos("hiq", preempt=("loq",))
    jobs = [TraceJob("low", 0, "p", "lo", 4, 100), TraceJob("high", 10, "p", "hi", 2, 10)]
    result = simulate_slurm(platform, jobs)
    low, high = result.jobs
    assert (high.start, low.preempted, low.end) == (10.0, 1, end)
    assert [(run.start, run.end) for run in low.runs] == [(0.0, 10.0), (131.0, end)]
    assert result.held[("p", "lo")] == {REQUEUE_DELAY: 121.0}


def test_cancel_mode_ends_the_victim() -> None:
    platform = two_tiers()
    platform.qos["hiq"] = SlurmQos("hiq", preempt=("loq",))
    platform.qos["loq"] = dataclasses.replace(platform.qos["loq"], preempt_mode="cancel")
    jobs = [TraceJob("low", 0, "p", "lo", 4, 100), TraceJob("high", 10, "p", "hi", 2, 10)]
    result = simulate_slurm(platform, jobs)
    assert result.jobs[0].end is None and "cancelled by preemption" in result.reasons["low"]
