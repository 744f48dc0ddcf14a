"""The simulator against small traces whose waits are computed by hand."""

from __future__ import annotations

import pytest
from trainform.policies.queueing import (
    PlatformModel,
    PoolQuota,
    ProjectQuota,
    QueueModel,
    Run,
    SimulationResult,
    TraceJob,
    simulate,
)


def job(
    id: str,
    submit: float,
    gpus: int,
    duration: float,
    queue: str = "q",
    project: str = "p",
    priority: int | None = None,
) -> TraceJob:
    return TraceJob(id, submit, project, queue, gpus, duration, priority)


def one_queue(gpus: int = 8, **policy: object) -> PlatformModel:
    queue = QueueModel("q", (PoolQuota("pool", gpus),), **policy)  # type: ignore[arg-type]
    return PlatformModel(pools={"pool": gpus}, queues={"q": queue})


def cohort_of_two(
    pool: int = 16,
    first: PoolQuota | None = None,
    second: PoolQuota | None = None,
    **second_policy: object,
) -> PlatformModel:
    return PlatformModel(
        pools={"pool": pool},
        queues={
            "q1": QueueModel("q1", (first or PoolQuota("pool", 8),), cohort="c"),
            "q2": QueueModel(
                "q2",
                (second or PoolQuota("pool", 8),),
                cohort="c",
                **second_policy,  # type: ignore[arg-type]
            ),
        },
    )


def waits(result: SimulationResult) -> dict[str, float | None]:
    return {outcome.id: outcome.wait for outcome in result.jobs}


def by_id(result: SimulationResult, job_id: str):  # type: ignore[no-untyped-def]
    return next(outcome for outcome in result.jobs if outcome.id == job_id)


def test_fifo_in_one_queue_waits_for_capacity() -> None:
    result = simulate(one_queue(), [job("a", 0, 8, 10), job("b", 1, 4, 10), job("c", 2, 4, 5)])
    assert waits(result) == {"a": 0, "b": 9, "c": 8}
    assert [(o.start, o.end) for o in result.jobs] == [(0, 10), (10, 20), (10, 15)]
    assert result.preemptions == 0 and result.never_admitted == []
    # 8x10 + 4x10 + 4x5 GPU-seconds over 8 GPUs x 20 s
    assert result.utilisation == pytest.approx(140 / 160)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        pytest.param("BestEffortFIFO", {"a": 0, "b": 9, "c": 0}, id="best-effort-skips-ahead"),
        pytest.param("StrictFIFO", {"a": 0, "b": 9, "c": 8}, id="strict-head-blocks"),
    ],
)
def test_queueing_strategy_decides_whether_a_big_head_blocks(
    strategy: str, expected: dict[str, float]
) -> None:
    trace = [job("a", 0, 6, 10), job("b", 1, 4, 10), job("c", 2, 2, 10)]
    assert waits(simulate(one_queue(queueing_strategy=strategy), trace)) == expected


def test_a_queue_borrows_the_idle_quota_of_its_cohort() -> None:
    result = simulate(cohort_of_two(), [job("a", 0, 12, 10, "q1"), job("b", 1, 8, 10, "q1")])
    assert waits(result) == {"a": 0, "b": 9}
    assert by_id(result, "a").borrowed and not by_id(result, "b").borrowed


def test_without_a_cohort_a_queue_never_exceeds_its_nominal_quota() -> None:
    platform = PlatformModel(
        pools={"pool": 16},
        queues={
            "q1": QueueModel("q1", (PoolQuota("pool", 8),)),
            "q2": QueueModel("q2", (PoolQuota("pool", 8),)),
        },
    )
    result = simulate(platform, [job("a", 0, 8, 10, "q1"), job("b", 1, 4, 10, "q1")])
    assert waits(result) == {"a": 0, "b": 9}


def test_lending_limit_caps_what_the_cohort_can_borrow() -> None:
    # q2 lends at most 2 of its 8: q1 reaches 10 at most, though the pool has 16.
    platform = cohort_of_two(second=PoolQuota("pool", 8, lending_limit=2))
    trace = [
        job("a", 0, 10, 10, "q1"),
        job("b", 1, 2, 10, "q1"),  # the cohort lends nothing more: waits for a
        job("c", 2, 6, 10, "q2"),  # q2's unlendable 6 are always there for it
        job("too-big", 3, 11, 10, "q1"),
    ]
    result = simulate(platform, trace)
    assert waits(result) == {"a": 0, "b": 9, "c": 0, "too-big": None}
    assert result.never_admitted == ["too-big"]
    assert "at most 10" in result.reasons["too-big"]


def test_borrowing_limit_caps_a_queue_above_its_nominal_quota() -> None:
    platform = cohort_of_two(first=PoolQuota("pool", 8, borrowing_limit=2))
    trace = [job("a", 0, 10, 10, "q1"), job("b", 1, 1, 10, "q1"), job("c", 2, 11, 1, "q1")]
    result = simulate(platform, trace)
    assert waits(result) == {"a": 0, "b": 9, "c": None}
    assert result.never_admitted == ["c"]


@pytest.mark.parametrize(
    ("reclaim", "a_end", "b_wait", "preemptions"),
    [
        pytest.param("Any", 110, 0, 1, id="reclaim-any-preempts-the-borrower"),
        pytest.param("LowerPriority", 100, 90, 0, id="reclaim-lower-priority-spares-equal"),
        pytest.param("Never", 100, 90, 0, id="reclaim-never-waits"),
    ],
)
def test_reclaim_within_cohort_preempts_a_borrower(
    reclaim: str, a_end: float, b_wait: float, preemptions: int
) -> None:
    platform = cohort_of_two(reclaim_within_cohort=reclaim)
    result = simulate(platform, [job("a", 0, 16, 100, "q1"), job("b", 10, 8, 10, "q2")])
    a, b = by_id(result, "a"), by_id(result, "b")
    assert (a.end, b.wait, result.preemptions) == (a_end, b_wait, preemptions)
    if preemptions:
        # checkpointed: a ran 10 s, waited for b, then ran its remaining 90 s
        assert a.runs == [Run(0, 10, "pool"), Run(20, 110, "pool")]
        assert (a.wait, a.preempted) == (0, 1)


def test_reclaim_lower_priority_preempts_a_lower_priority_borrower() -> None:
    platform = cohort_of_two(reclaim_within_cohort="LowerPriority")
    trace = [job("a", 0, 16, 100, "q1", priority=1), job("b", 10, 8, 10, "q2", priority=2)]
    result = simulate(platform, trace)
    assert (by_id(result, "a").end, by_id(result, "b").wait) == (110, 0)


def test_reclaim_takes_only_what_is_needed() -> None:
    platform = cohort_of_two(reclaim_within_cohort="Any")
    trace = [
        job("small", 0, 4, 100, "q1"),
        job("large", 1, 12, 100, "q1"),  # q1 now borrows 8
        job("b", 10, 4, 10, "q2"),  # frees 4 by preempting the newest borrower only
    ]
    result = simulate(platform, trace)
    assert [o.preempted for o in result.jobs] == [0, 1, 0]
    assert by_id(result, "b").wait == 0


def test_higher_priority_jumps_the_queue() -> None:
    trace = [job("a", 0, 4, 10), job("b", 1, 4, 10), job("c", 2, 4, 10, priority=5)]
    assert waits(simulate(one_queue(4), trace)) == {"a": 0, "b": 19, "c": 8}


def test_queue_default_priority_applies_to_jobs_without_one() -> None:
    trace = [job("a", 0, 4, 10), job("b", 1, 4, 10, priority=2), job("c", 2, 4, 10)]
    result = simulate(one_queue(4, default_priority=3), trace)
    assert waits(result) == {"a": 0, "b": 19, "c": 8}
    assert [o.priority for o in result.jobs] == [3, 2, 3]


def test_within_queue_lower_priority_preempts_and_the_victim_resumes() -> None:
    trace = [job("a", 0, 4, 10), job("b", 1, 4, 10), job("c", 2, 4, 10, priority=5)]
    result = simulate(one_queue(4, within_queue="LowerPriority"), trace)
    a = by_id(result, "a")
    assert waits(result) == {"a": 0, "b": 19, "c": 0}
    assert a.runs == [Run(0, 2, "pool"), Run(12, 20, "pool")] and a.preempted == 1
    assert result.preemptions == 1


def test_within_queue_never_preempts_equal_priority() -> None:
    trace = [job("a", 0, 4, 10), job("b", 1, 4, 10)]
    result = simulate(one_queue(4, within_queue="LowerPriority"), trace)
    assert waits(result) == {"a": 0, "b": 9} and result.preemptions == 0


def test_jobs_that_can_never_be_admitted_are_reported_with_a_reason() -> None:
    trace = [job("ok", 0, 8, 1), job("huge", 0, 9, 1), job("lost", 0, 1, 1, queue="nowhere")]
    result = simulate(one_queue(), trace)
    assert result.never_admitted == ["huge", "lost"]
    assert "asks 9 GPUs" in result.reasons["huge"]
    assert result.reasons["lost"] == "queue 'nowhere' is not defined"
    assert result.per_queue["q"].never_admitted == 1
    assert result.per_queue["nowhere"].never_admitted == 1
    assert by_id(result, "huge").start is None


def test_project_quota_caps_a_project_but_not_the_others() -> None:
    platform = one_queue()
    platform.quotas[("p", "q")] = ProjectQuota("p", "q", gpus=4)
    trace = [
        job("a", 0, 4, 10),
        job("b", 1, 4, 10),  # p is at its 4 GPUs
        job("c", 2, 4, 10, project="r"),
        job("d", 3, 5, 10),  # more than p may ever use here
    ]
    result = simulate(platform, trace)
    assert waits(result) == {"a": 0, "b": 9, "c": 0, "d": None}
    assert "project 'p' may use at most 4" in result.reasons["d"]
    assert result.per_project["p"].count == 2 and result.per_project["r"].p50 == 0


def test_project_running_jobs_cap() -> None:
    platform = one_queue()
    platform.quotas[("p", "q")] = ProjectQuota("p", "q", running_jobs=1)
    result = simulate(platform, [job("a", 0, 1, 10), job("b", 0, 1, 10)])
    assert waits(result) == {"a": 0, "b": 10}


def test_jobs_try_the_queue_pools_in_order() -> None:
    platform = PlatformModel(
        pools={"a100": 8, "h100": 8},
        queues={"q": QueueModel("q", (PoolQuota("a100", 8), PoolQuota("h100", 8)))},
    )
    result = simulate(platform, [job("a", 0, 8, 10), job("b", 1, 8, 10), job("c", 2, 8, 10)])
    assert [o.runs[0].pool for o in result.jobs] == ["a100", "h100", "a100"]
    assert waits(result) == {"a": 0, "b": 0, "c": 8}


def test_non_borrowing_admissions_go_before_borrowing_ones() -> None:
    # At 10 both queues have a job waiting for the 8 GPUs a frees: q2's fits in its
    # nominal quota, q1's would borrow. q2 goes first though q1's was submitted earlier.
    platform = cohort_of_two()
    trace = [
        job("a", 0, 8, 10, "q2"),
        job("hold", 0, 8, 100, "q1"),
        job("q1-borrow", 1, 8, 10, "q1"),
        job("q2-own", 2, 8, 10, "q2"),
    ]
    assert waits(simulate(platform, trace)) == {"a": 0, "hold": 0, "q1-borrow": 19, "q2-own": 8}


def test_wait_statistics_are_nearest_rank() -> None:
    trace = [job(f"j{i}", i, 8, 10) for i in range(4)]
    # waits 0, 9, 18, 27
    stats = simulate(one_queue(), trace).per_queue["q"]
    assert (stats.count, stats.p50, stats.p95, stats.mean, stats.max) == (4, 9, 27, 13.5, 27)


def test_json_is_stable_and_complete() -> None:
    result = simulate(one_queue(), [job("a", 0, 8, 10), job("b", 1, 9, 1)])
    document = result.to_json()
    assert document["summary"]["admitted"] == 1 and document["summary"]["never_admitted"] == 1
    assert document["jobs"][0]["runs"] == [[0, 10, "pool"]]
    assert document["never_admitted"][0]["id"] == "b"
    assert "jobs" not in result.to_json(include_jobs=False)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        pytest.param((1.0, 1.0), {"a2": 0, "b2": 10}, id="equal-weights-submit-order"),
        pytest.param((1.0, 3.0), {"a2": 10, "b2": 0}, id="heavier-queue-borrows-first"),
    ],
)
def test_borrowers_are_admitted_by_weighted_share(
    weights: tuple[float, float], expected: dict[str, float]
) -> None:
    # q3 lends its 4 idle GPUs; q1 and q2, both at their nominal 4, each want to borrow 4.
    platform = PlatformModel(
        pools={"pool": 12},
        queues={
            name: QueueModel(name, (PoolQuota("pool", 4),), cohort="c", fair_share_weight=weight)
            for name, weight in (("q1", weights[0]), ("q2", weights[1]), ("q3", 1.0))
        },
    )
    trace = [
        job("a1", 0, 4, 100, "q1"),
        job("b1", 0, 4, 100, "q2"),
        job("a2", 1, 4, 10, "q1"),
        job("b2", 1, 4, 10, "q2"),
    ]
    result = waits(simulate(platform, trace))
    assert {name: result[name] for name in expected} == expected


@pytest.mark.parametrize(
    ("threshold", "b_wait", "a_end"),
    [
        pytest.param(None, 0, 110, id="borrower-preempts-lower-priority-borrower"),
        pytest.param(0, 90, 100, id="threshold-protects-priority-above-it"),
    ],
)
def test_borrow_within_cohort_preempts_lower_priority_borrowers(
    threshold: int | None, b_wait: float, a_end: float
) -> None:
    platform = cohort_of_two(borrow_within_cohort="LowerPriority", borrow_max_priority=threshold)
    trace = [job("a", 0, 16, 100, "q1", priority=1), job("b", 10, 12, 10, "q2", priority=5)]
    result = simulate(platform, trace)
    assert (by_id(result, "b").wait, by_id(result, "a").end) == (b_wait, a_end)
