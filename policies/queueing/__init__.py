"""Queueing simulation: replay a job trace on a platform's queue policy.

Public API: `TraceJob`, `read_trace`, `read_sacct` (job traces); `PlatformModel`,
`QueueModel`, `PoolQuota`, `ProjectQuota`, `platform_from_specs` (the GPU view of pools,
queues and quotas); `simulate`, `SimulationResult`, `JobOutcome`, `Run`, `WaitStats`
(the simulation and its results); `QueueingError`, `TraceError` (errors).

The review command simulates the same trace under the base and the head policy; the
semantics and their simplifications of Kueue are written down in docs/simulation.md.
"""

from trainform.policies.queueing.errors import QueueingError, TraceError
from trainform.policies.queueing.platform import (
    PlatformModel,
    PoolQuota,
    ProjectQuota,
    QueueModel,
    platform_from_specs,
)
from trainform.policies.queueing.result import JobOutcome, Run, SimulationResult, WaitStats
from trainform.policies.queueing.sacct import read_sacct
from trainform.policies.queueing.simulator import simulate
from trainform.policies.queueing.trace import TraceJob, read_trace

__all__ = [
    "JobOutcome",
    "PlatformModel",
    "PoolQuota",
    "ProjectQuota",
    "QueueModel",
    "QueueingError",
    "Run",
    "SimulationResult",
    "TraceError",
    "TraceJob",
    "WaitStats",
    "platform_from_specs",
    "read_sacct",
    "read_trace",
    "simulate",
]
