"""Scheduler settings read from `scontrol show config` output for the Slurm model."""

from __future__ import annotations

from trainform.policies.queueing.slurm_model import SlurmWeights
from trainform.policies.review.slurm_settings import SchedulerSettings, parse_scheduler_settings

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
SchedulerParameters     = sched_interval=2,bf_interval=2,bf_resolution=30,bf_max_job_test=50
"""


def test_weights_and_backfill_parameters_are_read() -> None:
    assert parse_scheduler_settings(CONFIG) == SchedulerSettings(
        SlurmWeights(age=1000, partition=500, qos=2000, job_size=0, max_age=14 * 86400.0),
        backfill_interval=2.0,
        backfill_resolution=30.0,
        backfill_depth=50,
    )


def test_unset_values_are_slurms_defaults() -> None:
    assert parse_scheduler_settings("SchedulerParameters     = (null)\n") == SchedulerSettings()
