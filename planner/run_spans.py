"""The runs of one attempt the platform requeued: run time, holds and what each requeue cost.

Called by planner/timeline.py (status, lineage) and planner/usage.py. An attempt that the
platform stopped and requeued (preempted, its node failed, an administrator's requeue)
keeps its identity and runs again; its provider reports each run as a `RunSpan`. From
those this module derives, never from the clock except for a run still going (`now`):

- run time: the sum of the runs, each measured as the platform accounts it (its own
  elapsed time where it reports one, else end minus start), so a requeue hold is never
  counted as running;
- held: the time between one run's end and the next one's start (the platform's requeue
  hold, then any wait for resources);
- per requeue, the steps and run time thrown away: the steps the stopped run reached
  past the checkpoint the next run resumed from, and the stopped run's time after that
  checkpoint was written (all of it when the next run started over).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainform.providers.jobs import CheckpointStatus, RunSpan, parse_utc, utc_text


def _between(start: str, end: str) -> float | None:
    first, last = parse_utc(start), parse_utc(end)
    if first is None or last is None:
        return None
    return max(0.0, (last - first).total_seconds())


def span_seconds(span: RunSpan, now: datetime) -> float:
    """How long one run ran: the platform's elapsed time once it ended, else its times."""
    if span.ended_at and span.elapsed is not None:
        return float(span.elapsed)
    return _between(span.started_at, span.ended_at or utc_text(now)) or 0.0


@dataclass
class Requeue:
    """One requeue of an attempt: the run it stopped and what it cost the next run."""

    stopped: RunSpan
    ran: float
    held: float | None
    """From the stopped run's end to the next run's start (None while still held)."""
    lost_steps: int | None = None
    lost_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "stoppedBy": self.stopped.stopped_by,
            "startedAt": self.stopped.started_at or None,
            "endedAt": self.stopped.ended_at or None,
            "ranSeconds": round(self.ran, 3),
            "heldSeconds": None if self.held is None else round(self.held, 3),
            "lastStep": self.stopped.last_step,
            "lostSteps": self.lost_steps,
            "lostSeconds": None if self.lost_seconds is None else round(self.lost_seconds, 3),
        }


def requeues(
    runs: list[RunSpan], checkpoints: list[CheckpointStatus], now: datetime
) -> list[Requeue]:
    """Each run that was stopped and requeued, with its hold and losses (see above)."""
    found = []
    for index, span in enumerate(runs):
        if not span.stopped_by:
            continue
        following = runs[index + 1] if index + 1 < len(runs) else None
        ran = span_seconds(span, now)
        held = _between(span.ended_at, following.started_at) if following else None
        if following is None:  # still held: up to now
            held = _between(span.ended_at, utc_text(now))
        requeue = Requeue(span, ran, held)
        if following is not None:
            resumed = following.resumed_step
            if span.last_step is not None:
                requeue.lost_steps = max(0, span.last_step - (resumed or 0))
            requeue.lost_seconds = _lost_seconds(span, ran, resumed, checkpoints)
        found.append(requeue)
    return found


def _lost_seconds(
    span: RunSpan, ran: float, resumed: int | None, checkpoints: list[CheckpointStatus]
) -> float | None:
    if resumed is None:
        return ran  # started over: the whole run is run again
    checkpoint = next((c for c in checkpoints if c.step == resumed), None)
    if checkpoint is None or not checkpoint.written_at or not span.ended_at:
        return None
    after = _between(checkpoint.written_at, span.ended_at)
    return None if after is None else min(after, ran)


def usage_spans(runs: list[RunSpan]) -> list[tuple[str, str, int, float]]:
    """(start, end, gpus, cpus) of each run, for usage inside a window."""
    return [(r.started_at, r.ended_at, r.gpus, r.cpus) for r in runs if r.started_at]
