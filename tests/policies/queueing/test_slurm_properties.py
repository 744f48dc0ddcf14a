"""Invariants of the Slurm model on random platforms and traces (hypothesis)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainform.policies.queueing import TraceJob
from trainform.policies.queueing.result import SimulationResult
from trainform.policies.queueing.slurm_model import (
    SlurmAssociation,
    SlurmPartition,
    SlurmPlatform,
    SlurmQos,
    SlurmWeights,
)
from trainform.policies.queueing.slurm_sim import simulate_slurm

PROJECTS = ("p", "r")


@st.composite
def cases(draw: st.DrawFn) -> tuple[SlurmPlatform, list[TraceJob]]:
    pools = {name: draw(st.integers(1, 12)) for name in ("a", "b")}
    names = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    platform = SlurmPlatform(
        pools=pools,
        node_gpus={name: draw(st.sampled_from([1, 2, 4])) for name in pools},
        weights=SlurmWeights(
            age=draw(st.sampled_from([0, 1000])), qos=draw(st.sampled_from([0, 1000]))
        ),
        requeue_delay=draw(st.sampled_from([0.0, 5.0])),
        checkpoint_interval=draw(st.none() | st.sampled_from([1.0, 3.0])),
        release_delay=draw(st.sampled_from([0.0, 1.0])),
        backfill=draw(st.booleans()),
        backfill_interval=draw(st.sampled_from([0.0, 2.0])),
        backfill_resolution=draw(st.sampled_from([0.0, 5.0])),
    )
    for name in names:
        platform.partitions[name] = SlurmPartition(
            name, draw(st.sampled_from(sorted(pools))), tier=draw(st.integers(0, 2)), qos=name
        )
        platform.qos[name] = SlurmQos(
            name,
            priority=draw(st.integers(0, 3)),
            gpu_limit=draw(st.none() | st.integers(1, 10)),
            max_jobs=draw(st.none() | st.integers(1, 3)),
            preempt=tuple(draw(st.lists(st.sampled_from(names), unique=True, max_size=2))),
            preempt_mode=draw(st.sampled_from(["requeue", "requeue", "cancel"])),
        )
        for project in PROJECTS:
            if draw(st.booleans()):
                platform.associations[(project, name)] = SlurmAssociation(
                    project,
                    name,
                    gpu_limit=draw(st.none() | st.integers(1, 8)),
                    max_jobs=draw(st.none() | st.integers(1, 3)),
                )
    jobs = [
        TraceJob(
            f"j{index}",
            draw(st.integers(0, 30)) + draw(st.sampled_from([0.0, 0.5])),
            draw(st.sampled_from(PROJECTS)),
            draw(st.sampled_from([*names, "missing"])),
            draw(st.integers(1, 8)),
            float(draw(st.integers(1, 12))),
            limit=draw(st.none() | st.sampled_from([6.0, 20.0])),
        )
        for index in range(draw(st.integers(0, 25)))
    ]
    return platform, jobs


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def peak_usage(platform: SlurmPlatform, result: SimulationResult) -> list[tuple[str, int, int]]:
    """(what, usage, limit) at every start; a finished run holds its GPUs until its release
    (end + release delay), a preempted one until its end."""
    events = []
    for job in result.jobs:
        for run in job.runs:
            finished = job.end is not None and run is job.runs[-1]
            events.append((run.start, 1, job))
            events.append((run.end + (platform.release_delay if finished else 0.0), -1, job))
    events.sort(key=lambda event: (event[0], event[1]))
    usage: dict[str, int] = defaultdict(int)
    seen = []
    for _, sign, job in events:
        partition = platform.partitions[job.queue]
        qos = platform.qos[job.queue]
        association = platform.association(job.project, job.queue)
        keys = [f"pool {partition.pool}", f"qos {qos.name}"]
        if association is not None:
            keys.append(f"association {job.project}/{job.queue}")
        for key in keys:
            usage[key] += sign * job.gpus
        if sign > 0:
            seen.append((keys[0], usage[keys[0]], platform.pools[partition.pool]))
            if qos.gpu_limit is not None:
                seen.append((keys[1], usage[keys[1]], qos.gpu_limit))
            elif association is not None and association.gpu_limit is not None:
                seen.append((keys[2], usage[keys[2]], association.gpu_limit))
    return seen


@SETTINGS
@given(cases())
def test_usage_stays_within_pool_capacity_and_the_binding_gpu_limit(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    for what, used, limit in peak_usage(platform, simulate_slurm(platform, jobs)):
        assert used <= limit, what


@SETTINGS
@given(cases())
def test_every_job_finishes_or_says_why_and_work_is_done_once(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    result = simulate_slurm(platform, jobs)
    by_id = {job.id: job for job in jobs}
    for outcome in result.jobs:
        assert "still pending" not in result.reasons.get(outcome.id, "")
        if outcome.end is None:
            assert outcome.id in result.reasons
            continue
        assert outcome.start is not None and outcome.start >= outcome.submit
        last = outcome.runs[-1]
        assert last.end - last.start <= by_id[outcome.id].duration + 1e-9
        if not outcome.preempted:
            assert len(outcome.runs) == 1
            assert last.end - last.start == by_id[outcome.id].duration


@SETTINGS
@given(cases())
def test_the_same_input_gives_the_same_output(case) -> None:  # type: ignore[no-untyped-def]
    platform, jobs = case
    first = simulate_slurm(platform, jobs).to_json()
    assert simulate_slurm(platform, list(jobs)).to_json() == first
