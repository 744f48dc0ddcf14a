"""Where a drilled run's time went, per attempt and for the whole run, as a report shows it.

Called by planner/drill_evidence.py, one function (`run_breakdown_of`). The figures are
planner/run_breakdown.py's (the job's run events where it emits them, else what the
provider knows); this module only names them as a platform evaluation asks: wait, set-up,
data wait, compute, checkpoint, recovery recompute, evaluation, and what nothing accounts
for. An item nobody measured is `null` with its source saying so, never a guess.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from trainform.planner.run_breakdown import Breakdown, breakdown_of
from trainform.planner.timeline import AttemptTimeline

ITEMS = (
    "wait",
    "setup",
    "dataWait",
    "compute",
    "checkpoint",
    "recoveryRecompute",
    "evaluation",
    "unaccounted",
)
"""The breakdown's items, in the order a report shows them."""

NOT_RECORDED = "not recorded: the job emits no run events"
_CATEGORY = {"recoveryRecompute": "recovery"}
_PROVIDER_KNOWS = {"wait", "recoveryRecompute", "unaccounted"}


def _source(item: str, part: Breakdown) -> str:
    if item == "wait":
        return "provider"
    if part.source == "provider" and item not in _PROVIDER_KNOWS:
        return NOT_RECORDED
    return "run events" if part.source == "events" else part.source


def _items(part: Breakdown) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in ITEMS:
        if item == "wait":
            seconds = part.wait
        else:
            seconds = part.seconds.get(_CATEGORY.get(item, item))
        share = None if item == "wait" else part.share(_CATEGORY.get(item, item))
        found[item] = {
            "seconds": None if seconds is None else round(seconds, 3),
            "share": None if share is None else round(share, 4),
            "source": _source(item, part),
        }
    return found


def run_breakdown_of(timelines: list[AttemptTimeline], now: datetime) -> dict[str, Any]:
    """The run's items (sums over its attempts), each attempt's, and the full breakdown."""
    del now  # the timelines are already measured up to now
    breakdown = breakdown_of("", timelines)
    return {
        "items": list(ITEMS),
        "source": breakdown.total.source,
        "run": _items(breakdown.total),
        "attempts": [{"attempt": a.attempt, **_items(a)} for a in breakdown.attempts],
        "checkpointBytes": breakdown.total.checkpoint_bytes,
    }
