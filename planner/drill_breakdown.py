"""Where a drilled run's time went, per attempt and for the whole run.

Called by planner/drill_evidence.py, one function (`run_breakdown_of`), so the report reads
the breakdown from one place. The items are the ones a platform evaluation asks for: wait,
set-up, data wait, compute, checkpoint, recovery recompute and evaluation. What the
providers know (planner/timeline.py: waits, run time, lost steps and seconds) fills wait,
compute and recovery recompute; set-up, data wait, checkpoint writes and evaluation time
are only known from the job's own run events, so without them they are `null` with the
source saying so, never a guess.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trainform.planner.timeline import AttemptTimeline, delivery

ITEMS = ("wait", "setup", "dataWait", "compute", "checkpoint", "recoveryRecompute", "evaluation")
"""The breakdown's items, in the order a report shows them."""

NOT_RECORDED = "not recorded: the job emits no run events"


def _item(seconds: float | None, source: str) -> dict[str, Any]:
    return {"seconds": None if seconds is None else round(seconds, 3), "source": source}


def attempt_breakdown(timeline: AttemptTimeline) -> dict[str, Any]:
    """One attempt's items; its compute is its run time less what it re-ran."""
    ran = timeline.ran
    rerun = timeline.lost_seconds or 0.0
    compute = None if ran is None else max(0.0, ran - rerun)
    return {
        "attempt": timeline.status.attempt,
        "wait": _item(timeline.waited, "provider"),
        "setup": _item(None, NOT_RECORDED),
        "dataWait": _item(None, NOT_RECORDED),
        "compute": _item(compute, "provider"),
        "checkpoint": _item(None, NOT_RECORDED),
        "recoveryRecompute": _item(timeline.lost_seconds if ran is not None else None, "provider"),
        "evaluation": _item(None, NOT_RECORDED),
    }


def run_breakdown_of(timelines: list[AttemptTimeline], now: datetime) -> dict[str, Any]:
    """The run's items (sums over its attempts) and each attempt's."""
    del now  # the timelines are already measured up to now
    cycle = delivery(timelines)
    per_attempt = [attempt_breakdown(t) for t in timelines]
    return {
        "items": list(ITEMS),
        "run": {
            "wait": _item(cycle.waited, "provider"),
            "setup": _item(None, NOT_RECORDED),
            "dataWait": _item(None, NOT_RECORDED),
            "compute": _item(cycle.effective, "provider"),
            "checkpoint": _item(None, NOT_RECORDED),
            "recoveryRecompute": _item(cycle.rerun, "provider"),
            "evaluation": _item(None, NOT_RECORDED),
        },
        "attempts": per_attempt,
    }
