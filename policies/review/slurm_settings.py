"""The scheduler settings of a live Slurm cluster, for the Slurm model of the review.

`read_scheduler_settings(instance)` runs `scontrol show config` as the slurm provider
instance runs Slurm commands (its bin_dir and SLURM_CONF) and keeps what the model uses:
the multifactor weights (`PriorityWeightAge`, `PriorityWeightPartition`,
`PriorityWeightQOS`, `PriorityWeightJobSize`, `PriorityMaxAge`), `PreemptType` and
`PreemptMode` (what a QOS's `PreemptMode=cluster` means), and of `SchedulerParameters`
the backfill settings (`bf_interval`, `bf_resolution`, `bf_max_job_test`),
and `default_queue_depth`. `measured_release_delay(jobs)` is the
cluster's release delay as its accounting shows it: the median gap between the end of a
job and the start of a job that was waiting then. The review reads them with
`--trace-from slurm`, when it talks to the cluster anyway; otherwise the model uses
Slurm's defaults (docs/simulation.md).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from trainform.policies.queueing.slurm_model import SlurmPlatform, SlurmWeights
from trainform.policies.queueing.slurm_specs import ClusterPreemption
from trainform.policies.review.errors import TraceError

if TYPE_CHECKING:
    from trainform.policies.queueing import TraceJob

RELEASE_GAP_MAX = 10.0
"""Gaps longer than this are not a release (the job waited for something else)."""


@dataclass(frozen=True)
class SchedulerSettings:
    weights: SlurmWeights = field(default_factory=SlurmWeights)
    backfill_interval: float = 30.0
    backfill_resolution: float = 60.0
    backfill_depth: int = 100
    preemption: ClusterPreemption = field(default_factory=ClusterPreemption)
    queue_depth: int | None = None
    """default_queue_depth when the site sets it (else the model's scan depth stays)."""
    release_delay: float = 0.0

    def apply(self, model: SlurmPlatform) -> None:
        """Set the cluster's scheduler parameters on a model built from the specs."""
        model.backfill_interval = self.backfill_interval
        model.backfill_resolution = self.backfill_resolution
        model.backfill_depth = self.backfill_depth
        if self.queue_depth is not None:
            model.scan_depth = self.queue_depth
        model.release_delay = self.release_delay

    def to_json(self) -> dict[str, Any]:
        w = self.weights
        return {
            "priorityWeights": {
                "age": w.age, "partition": w.partition, "qos": w.qos, "jobSize": w.job_size,
            },
            "priorityMaxAge": w.max_age,
            "preemptType": self.preemption.preempt_type,
            "preemptMode": self.preemption.preempt_mode,
            "bfInterval": self.backfill_interval,
            "bfResolution": self.backfill_resolution,
            "bfMaxJobTest": self.backfill_depth,
            "defaultQueueDepth": self.queue_depth,
            "releaseDelay": self.release_delay,
        }  # fmt: skip


def measured_release_delay(jobs: Sequence[TraceJob]) -> float:
    """The median gap from a job's end to the next start of a job that was waiting at that
    end (it had been submitted before it), at most RELEASE_GAP_MAX; 0 without such a pair."""
    ends = sorted(
        job.submit + job.actual_wait + job.duration for job in jobs if job.actual_wait is not None
    )
    gaps = []
    for job in jobs:
        if job.actual_wait is None or job.actual_wait <= 0:
            continue
        start = job.submit + job.actual_wait
        before = bisect.bisect_right(ends, start) - 1
        if before >= 0 and ends[before] > job.submit and start - ends[before] <= RELEASE_GAP_MAX:
            gaps.append(start - ends[before])
    return float(statistics.median(gaps)) if gaps else 0.0


def with_release_delay(settings: SchedulerSettings, jobs: Sequence[TraceJob]) -> SchedulerSettings:
    return replace(settings, release_delay=measured_release_delay(jobs))


def _seconds(text: str) -> float:
    """`7-00:00:00`, `01:30:00`, `45:00` or `90` (minutes, as Slurm reads a bare number)."""
    days, _, clock = text.strip().rpartition("-")
    parts = [float(p) for p in clock.split(":")]
    if len(parts) == 1:
        return float(days or 0) * 86400 + parts[0] * 60
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return float(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def parse_scheduler_settings(text: str) -> SchedulerSettings:
    """The settings of `scontrol show config` output (unknown or unset values: defaults)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()

    def weight(name: str) -> int:
        try:
            return int(values.get(name, "0"))
        except ValueError:
            return 0

    try:
        max_age = _seconds(values.get("PriorityMaxAge", "7-00:00:00"))
    except ValueError:
        max_age = 7 * 86400.0
    options = dict(
        item.partition("=")[::2]
        for item in values.get("SchedulerParameters", "").split(",")
        if "=" in item
    )

    def option(name: str, default: float) -> float:
        try:
            return float(options.get(name, default))
        except ValueError:
            return default

    depth = options.get("default_queue_depth", "")
    return SchedulerSettings(
        SlurmWeights(
            age=weight("PriorityWeightAge"),
            partition=weight("PriorityWeightPartition"),
            qos=weight("PriorityWeightQOS"),
            job_size=weight("PriorityWeightJobSize"),
            max_age=max_age,
        ),
        backfill_interval=option("bf_interval", 30.0),
        backfill_resolution=option("bf_resolution", 60.0),
        backfill_depth=int(option("bf_max_job_test", 100.0)),
        preemption=ClusterPreemption(
            values.get("PreemptType", "preempt/none").lower(),
            values.get("PreemptMode", "OFF").lower(),
        ),
        queue_depth=int(options["default_queue_depth"]) if depth.isdigit() else None,
    )


def read_scheduler_settings(instance: Any) -> SchedulerSettings:
    """`scontrol show config` of the cluster the slurm provider `instance` names."""
    from trainform.providers.errors import ProviderError
    from trainform.providers.slurm.commands import SlurmCommands

    connection = instance.connection
    commands = SlurmCommands(connection.bin_dir, connection.conf, timeout=60)
    try:
        result = commands.run(["scontrol", "show", "config"], check=False, retry=False)
    except ProviderError as exc:
        raise TraceError(f"cannot read the Slurm scheduler settings: {exc}") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise TraceError(
            f"cannot read the Slurm scheduler settings ({instance.name}): scontrol exited "
            f"{result.returncode}" + (f": {detail[-1]}" if detail else "")
        )
    return parse_scheduler_settings(result.stdout)
