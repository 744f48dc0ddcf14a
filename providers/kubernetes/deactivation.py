"""A Kueue deactivation read as the end of an attempt (timeline.py calls `deactivation`).

Kueue deactivates a Workload (`spec.active: false`) when it has been admitted longer than
its maximum execution time, when waitForPodsReady has requeued it as often as its
`requeuingStrategy.backoffLimitCount` allows, when an admission check rejects it, or when
a person or another controller sets `spec.active: false`. It then evicts the Workload
(condition Evicted, reason `Deactivated` or `DeactivatedDueTo<cause>`), suspends the Job
and never queues the Workload again (kueue pkg/controller/core/workload_controller.go,
pkg/workload/evict). The Job is never Complete nor Failed: read as a suspended Job, the
attempt would wait forever. So an inactive Workload ends its attempt, at the eviction's
time, in Kueue's own words, with a cause by the reason's underlying cause:

- MaximumExecutionTimeExceeded -> failed, `time-limit`;
- RequeuingLimitExceeded (its pods never all became ready in time, as often as Kueue
  retries), AdmissionCheck (an admission check, e.g. a ProvisioningRequest, rejected it)
  and any other cause Kueue names -> failed, `node-failure` (the platform could not run it);
- no cause (`Deactivated`: set inactive by hand) -> cancelled, as a job someone else
  cancels on Slurm is.

The plan then retries the attempt per the job's `retries`, as any other ending. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainform.providers.jobs import Cause, RunPhase

DEACTIVATED = "Deactivated"
CAUSES = {"MaximumExecutionTimeExceeded": Cause.TIME_LIMIT}


@dataclass(frozen=True)
class Deactivation:
    """How a deactivated Workload ended its attempt."""

    phase: RunPhase
    cause: Cause
    reason: str
    ended_at: str


def _evicted(workload: dict[str, Any]) -> dict[str, Any]:
    for found in (workload.get("status") or {}).get("conditions") or []:
        if found.get("type") == "Evicted" and found.get("status") == "True":
            return dict(found)
    return {}


def deactivation(workload: dict[str, Any] | None) -> Deactivation | None:
    """The ending of the attempt whose Workload Kueue deactivated (None if it is active)."""
    if workload is None or (workload.get("spec") or {}).get("active", True) is not False:
        return None
    evicted = _evicted(workload)
    reason = str(evicted.get("reason") or DEACTIVATED)
    message = str(evicted.get("message") or "The workload is deactivated")
    words = f"deactivated by Kueue ({reason}: {message})"
    when = str(evicted.get("lastTransitionTime") or "")
    cause = reason.removeprefix(DEACTIVATED).removeprefix("DueTo")
    if not cause:
        return Deactivation(RunPhase.CANCELLED, Cause.CANCELLED, words, when)
    return Deactivation(RunPhase.FAILED, CAUSES.get(cause, Cause.NODE_FAILURE), words, when)
