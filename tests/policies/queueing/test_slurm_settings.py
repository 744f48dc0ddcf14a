"""Scheduler settings read from `scontrol show config` output for the Slurm model."""

from __future__ import annotations

from trainform.policies.queueing import TraceJob
from trainform.policies.queueing.slurm_model import SlurmPlatform, SlurmWeights
from trainform.policies.queueing.slurm_specs import ClusterPreemption
from trainform.policies.review.slurm_settings import (
    SchedulerSettings,
    measured_release_delay,
    parse_scheduler_settings,
)

CONFIG = """\
Configuration data as of 2026-12-02T09:41:00
PriorityMaxAge          = 14-00:00:00
PriorityType            = priority/multifactor
PriorityWeightAge       = 1000
PriorityWeightAssoc     = 0
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 0
PriorityWeightPartition = 500
PriorityWeightQOS       = 2000
PreemptMode             = REQUEUE
PreemptType             = preempt/qos
SchedulerParameters     = sched_interval=2,bf_interval=2,bf_resolution=30,bf_max_job_test=50,\
default_queue_depth=40
"""


def test_weights_and_backfill_parameters_are_read() -> None:
    assert parse_scheduler_settings(CONFIG) == SchedulerSettings(
        SlurmWeights(age=1000, partition=500, qos=2000, job_size=0, max_age=14 * 86400.0),
        backfill_interval=2.0,
        backfill_resolution=30.0,
        backfill_depth=50,
        preemption=ClusterPreemption("preempt/qos", "requeue"),
        queue_depth=40,
    )
    model = SlurmPlatform()
    parse_scheduler_settings(CONFIG).apply(model)
    assert (model.backfill_interval, model.backfill_depth, model.scan_depth) == (2.0, 50, 40)


def test_unset_values_are_slurms_defaults() -> None:
    assert parse_scheduler_settings("SchedulerParameters     = (null)\n") == SchedulerSettings(
        preemption=ClusterPreemption("preempt/none", "off")
    )


def test_the_release_delay_is_the_median_gap_from_an_end_to_a_waiting_jobs_start() -> None:
    def job(key: str, submit: float, wait: float, duration: float) -> TraceJob:
        return TraceJob(key, submit, "p", "q", 1, duration, actual_wait=wait)

    jobs = [
        job("a", 0, 0, 10),  # ends at 10
        job("b", 1, 10, 5),  # starts 11 (1 s after a), ends 16
        job("c", 2, 16, 5),  # starts 18 (2 s after b), ends 23
        job("d", 3, 23, 5),  # starts 26 (3 s after c)
        job("e", 40, 0, 5),  # never waited: no gap
        job("f", 100, 30, 1),  # waited, but nothing ended during its wait
    ]
    assert measured_release_delay(jobs) == 2.0
    assert measured_release_delay(jobs[:1]) == 0.0
