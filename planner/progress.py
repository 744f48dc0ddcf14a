"""How far a job's run is, for `status`: its total steps and an ETA from observed throughput.

The total is what the job's own parameters declare (`steps`, `maxSteps`, `total_steps`...:
the first whole number among STEP_PARAMETERS); trainform has no other source for it. The
ETA is only given for a running attempt that has made progress: the steps it made since it
started (or resumed) divided by the seconds it ran (the timeline's `ranSeconds`, so time
held by requeues does not count), applied to the steps left. Called by planner.status.
"""

from __future__ import annotations

from typing import Any

STEP_PARAMETERS = (
    "steps",
    "totalSteps",
    "total_steps",
    "maxSteps",
    "max_steps",
    "numSteps",
    "num_steps",
    "trainSteps",
    "train_steps",
)


def total_steps(document: dict[str, Any]) -> int | None:
    """The number of steps the job's parameters declare, or None."""
    parameters = (document.get("spec") or {}).get("parameters") or {}
    for name in STEP_PARAMETERS:
        value = parameters.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            return int(value)
    return None


def eta_seconds(attempt: dict[str, Any], current: int | None, total: int | None) -> float | None:
    """Seconds left at the throughput the running `attempt` has shown; None when unknown."""
    if attempt.get("phase") != "running" or current is None or total is None:
        return None
    ran = attempt.get("ranSeconds")
    made = current - int(attempt.get("resumedStep") or 0)
    if not ran or ran <= 0 or made <= 0:
        return None
    return max(0.0, (total - current) * ran / made)
