"""Invariants of the simulator on random platforms and traces (hypothesis)."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.policies.queueing import (
    PlatformModel,
    PoolQuota,
    ProjectQuota,
    QueueModel,
    SimulationResult,
    TraceJob,
    simulate,
)

POOLS = ("a", "b")
PROJECTS = ("p", "r")


@st.composite
def platforms(draw: st.DrawFn) -> PlatformModel:
    pools = {name: draw(st.integers(0, 16)) for name in POOLS}
    queues = {}
    for index in range(draw(st.integers(1, 4))):
        name = f"q{index}"
        cohort = draw(st.sampled_from([None, "c", "c", "d"]))
        quotas = []
        for pool in draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=2, unique=True)):
            nominal = draw(st.integers(0, 12))
            quotas.append(
                PoolQuota(
                    pool,
                    nominal,
                    borrowing_limit=draw(st.none() | st.integers(0, 8)) if cohort else None,
                    lending_limit=draw(st.none() | st.integers(0, nominal)),
                )
            )
        queues[name] = QueueModel(
            name,
            tuple(quotas),
            cohort=cohort,
            default_priority=draw(st.integers(0, 2)),
            within_queue=draw(
                st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
            ),
            reclaim_within_cohort=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            borrow_within_cohort=draw(st.sampled_from(["Never", "LowerPriority"])),
            borrow_max_priority=draw(st.none() | st.integers(0, 2)),
            fair_share_weight=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
            queueing_strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
        )
    caps = {}
    for project in PROJECTS:
        for queue in queues:
            if draw(st.booleans()):
                caps[(project, queue)] = ProjectQuota(
                    project,
                    queue,
                    gpus=draw(st.none() | st.integers(0, 12)),
                    running_jobs=draw(st.none() | st.integers(0, 3)),
                )
    return PlatformModel(pools=pools, queues=queues, quotas=caps)


@st.composite
def cases(draw: st.DrawFn) -> tuple[PlatformModel, list[TraceJob]]:
    platform = draw(platforms())
    names = sorted(platform.queues) + ["missing"]
    jobs = [
        TraceJob(
            id=f"j{index}",
            submit=draw(st.integers(0, 40)) + draw(st.sampled_from([0.0, 0.25, 0.5])),
            project=draw(st.sampled_from(PROJECTS)),
            queue=draw(st.sampled_from(names)) if draw(st.integers(0, 20)) else "missing",
            gpus=draw(st.integers(1, 10)),
            duration=draw(st.integers(1, 20)) + draw(st.sampled_from([0.0, 0.5])),
            priority=draw(st.none() | st.integers(0, 3)),
        )
        for index in range(draw(st.integers(0, 30)))
    ]
    return platform, sorted(jobs, key=lambda job: job.submit)


def usage_over_time(result: SimulationResult):  # type: ignore[no-untyped-def]
    """Yield (time, pool usage, queue-pool usage, project-queue usage) after each start."""
    events = []
    for outcome in result.jobs:
        for run in outcome.runs:
            events.append((run.start, 1, outcome, run.pool))
            events.append((run.end, -1, outcome, run.pool))
    events.sort(key=lambda event: (event[0], event[1]))  # ends before starts at one instant
    pools: dict[str, int] = defaultdict(int)
    slots: dict[tuple[str, str], int] = defaultdict(int)
    projects: dict[tuple[str, str], int] = defaultdict(int)
    for time, sign, outcome, pool in events:
        pools[pool] += sign * outcome.gpus
        slots[(outcome.queue, pool)] += sign * outcome.gpus
        projects[(outcome.project, outcome.queue)] += sign * outcome.gpus
        if sign > 0:
            yield time, pools, slots, projects


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(cases())
def test_every_job_finishes_or_is_reported_never_admitted(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    result = simulate(platform, jobs)
    assert [outcome.id for outcome in result.jobs] == [job.id for job in jobs]
    for outcome in result.jobs:
        if outcome.start is None:
            assert outcome.id in result.never_admitted and not outcome.runs
            assert "still pending" not in result.reasons[outcome.id]
        else:
            assert outcome.end is not None and outcome.id not in result.never_admitted


@SETTINGS
@given(cases())
def test_no_job_starts_before_it_is_submitted(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    for outcome in simulate(platform, jobs).jobs:
        if outcome.start is not None:
            assert outcome.start >= outcome.submit
            assert outcome.wait == outcome.start - outcome.submit
            assert outcome.runs[0].start == outcome.start


@SETTINGS
@given(cases())
def test_work_is_conserved_each_job_runs_exactly_its_duration(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    for outcome in simulate(platform, jobs).jobs:
        if outcome.start is None:
            continue
        assert math.isclose(
            sum(run.end - run.start for run in outcome.runs), outcome.duration, abs_tol=1e-9
        )
        assert len(outcome.runs) == outcome.preempted + 1
        for earlier, later in zip(outcome.runs, outcome.runs[1:], strict=False):
            assert earlier.end <= later.start
        assert outcome.end == outcome.runs[-1].end


@SETTINGS
@given(cases())
def test_usage_never_exceeds_capacity_quota_or_project_caps(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    result = simulate(platform, jobs)
    for _, pools, slots, projects in usage_over_time(result):
        for pool, used in pools.items():
            assert used <= platform.pools[pool]
        for (queue, pool), used in slots.items():
            quota = next(q for q in platform.queues[queue].pools if q.pool == pool)
            if platform.queues[queue].cohort is None:
                assert used <= quota.nominal
            elif quota.borrowing_limit is not None:
                assert used <= quota.nominal + quota.borrowing_limit
        for key, used in projects.items():
            cap = platform.quotas.get(key)
            if cap is not None and cap.gpus is not None:
                assert used <= cap.gpus


@SETTINGS
@given(cases())
def test_a_cohort_lends_no_more_than_its_lending_limits(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    result = simulate(platform, jobs)
    for _, _, slots, _ in usage_over_time(result):
        lent: dict[tuple[str, str], int] = defaultdict(int)
        lendable: dict[tuple[str, str], int] = defaultdict(int)
        for queue in platform.queues.values():
            if queue.cohort is None:
                continue
            for quota in queue.pools:
                lend = quota.nominal if quota.lending_limit is None else quota.lending_limit
                guaranteed = quota.nominal - lend
                key = (queue.cohort, quota.pool)
                lendable[key] += lend
                lent[key] += max(0, slots.get((queue.name, quota.pool), 0) - guaranteed)
        for key, amount in lent.items():
            assert amount <= lendable[key]


@SETTINGS
@given(cases())
def test_the_same_input_gives_the_same_output(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    assert simulate(platform, jobs).to_json() == simulate(platform, list(jobs)).to_json()


@SETTINGS
@given(cases())
def test_held_time_accounts_for_every_second_of_waiting(case) -> None:  # type: ignore[no-untyped-def]
    """Per (project, queue): the job-seconds credited to reasons equal the time its jobs
    spent pending (first waits and waits after each preemption; a job no state admits is
    refused at arrival and never pends)."""
    platform, jobs = case
    result = simulate(platform, jobs)
    pending: dict[tuple[str, str], float] = {}
    for job in result.jobs:
        key = (job.project, job.queue)
        if job.start is None:
            continue
        gaps = zip(job.runs, job.runs[1:], strict=False)
        waited = (job.runs[0].start - job.submit) + sum(b.start - a.end for a, b in gaps)
        pending[key] = pending.get(key, 0.0) + waited
    for key, seconds in pending.items():
        held = sum(result.held.get(key, {}).values())
        assert held == pytest.approx(seconds, abs=1e-6 * max(1.0, seconds)), key
