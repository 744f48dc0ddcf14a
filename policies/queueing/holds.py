"""Why pending jobs wait: the binding constraint of each project's jobs in each queue.

The simulator asks `hold_reasons` whenever a queue's scheduling pass admits nothing more
(the only moments its answer can change: every arrival, admission, completion and eviction
that concerns the queue makes it look again), and `HoldLedger` credits each pending job
with the time until the next such moment, under the reason of that moment. The result is,
per (project, queue), job-seconds spent pending for each reason, so an extreme wait comes
with its cause ("p50 8d21h: its Quota's running-jobs cap").

Reasons, checked in this order for the smallest pending job of the project in the queue
(StrictFIFO: the head; the jobs behind it wait for it, `queue-order`):
`running-jobs-cap` and `project-gpu-quota` (its Quota), then on the queue's roomiest pool
the tightest of `queue-nominal-quota` (no cohort) or `queue-borrowing-limit` (nominal plus
borrowing limit reached), `cohort-lending` (what the cohort lends is taken) and
`pool-capacity` (the GPUs are busy); a job that would fit by all of these waits behind
jobs of higher priority or admitted first in fair order: `queue-order`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainform.policies.queueing.state import QueueState, SimJob, Slot

RUNNING_CAP = "running-jobs-cap"
GPU_QUOTA = "project-gpu-quota"
NOMINAL = "queue-nominal-quota"
BORROWING = "queue-borrowing-limit"
LENDING = "cohort-lending"
POOL = "pool-capacity"
ORDER = "queue-order"
QOS_LIMIT = "queue-qos-limit"
REQUEUE_DELAY = "requeue-delay"
REASONS = (
    RUNNING_CAP, GPU_QUOTA, NOMINAL, BORROWING, LENDING, POOL, ORDER, QOS_LIMIT, REQUEUE_DELAY
)  # fmt: skip
SHOWN = {
    RUNNING_CAP: "its Quota's running-jobs cap",
    GPU_QUOTA: "its Quota's GPU limit",
    NOMINAL: "the queue's nominal quota",
    BORROWING: "the queue's borrowing limit",
    LENDING: "cohort lending (nothing left to borrow)",
    POOL: "pool capacity (GPUs busy)",
    ORDER: "priority and queue order (jobs ahead of it)",
    QOS_LIMIT: "the queue's QOS GPU or job limit (Slurm)",
    REQUEUE_DELAY: "preempted, waiting out Slurm's requeue delay",
}


def _cap_reason(queue: QueueState, project: str, gpus: int) -> str | None:
    cap = queue.caps.get(project)
    if cap is None:
        return None
    if queue.project_running[project] >= cap[1]:
        return RUNNING_CAP
    if queue.project_usage[project] + gpus > cap[0]:
        return GPU_QUOTA
    return None


def _room_reason(slots: list[Slot], gpus: int) -> str:
    """The tightest of queue limit, cohort and pool on the roomiest slot, if it binds."""
    best = max(slots, key=lambda slot: slot.headroom())
    candidates = [(best.limit - best.usage, NOMINAL if best.cohort is None else BORROWING)]
    cohort = best.cohort
    if cohort is not None:
        shared = cohort.cap - cohort.used + max(0, best.guaranteed - best.usage)
        candidates.append((shared, LENDING))
    candidates.append((best.pool.free, POOL))
    room, reason = min(candidates, key=lambda item: item[0])
    return reason if room < gpus else ORDER


def hold_reasons(queue: QueueState, head: SimJob) -> dict[str, str]:
    """project -> why its pending jobs in `queue` wait now (the queue admits nothing)."""
    held: dict[str, str] = {}
    slots = queue.slots
    if not slots:
        return {project: POOL for project in queue.project_pending}
    for project, count in queue.project_pending.items():
        if not count:
            continue
        if queue.strict:
            if project != head.project:
                held[project] = _cap_reason(queue, project, head.gpus) or ORDER
                continue
            gpus = head.gpus
        else:
            gpus = queue.buckets[project][0][0]
        held[project] = _cap_reason(queue, project, gpus) or _room_reason(slots, gpus)
    return held


class HoldLedger:
    """Job-seconds pending per (project, queue) and reason."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], dict[str, float]] = defaultdict(
            lambda: defaultdict(float)
        )

    def credit(self, queue: QueueState, now: float) -> None:
        """Credit the queue's last snapshot up to `now`, and restart it from `now`."""
        elapsed = now - queue.held_since
        if elapsed > 0 and queue.held:
            name = queue.model.name
            for project, (reason, count) in queue.held.items():
                self.seconds[(project, name)][reason] += elapsed * count
        queue.held_since = now

    def snapshot(self, queue: QueueState, reasons: dict[str, str]) -> None:
        pending = queue.project_pending
        queue.held = {project: (reason, pending[project]) for project, reason in reasons.items()}

    def result(self) -> dict[tuple[str, str], dict[str, float]]:
        return {
            key: {reason: value for reason, value in sorted(reasons.items()) if value > 0}
            for key, reasons in sorted(self.seconds.items())
            if any(value > 0 for value in reasons.values())
        }
