"""Where the time of a run went: per attempt and per run, wait, set-up, data wait, compute,
checkpoint writes, recovery recompute, evaluation, and what nothing accounts for.

Two sources, per attempt:
- `events`: the job reported its phases (trainform.runtime; providers summarize the file
  into AttemptStatus.events, providers/run_events.py). Set-up is the job's own `setup`
  phase plus the time from the provider's start to the job's first event (interpreter
  start, imports); a phase still open when the attempt ended counts until its end. With
  several ranks each phase is the mean over the ranks (each is wall time of the attempt).
- `provider`: the job reported nothing: what the provider knows (queued, started,
  checkpoints with their bytes, ended); the time inside the attempt is `unaccounted`
  except the recovery recompute.

Recovery recompute is the run time the previous attempt threw away (planner/timeline.py
`lostSeconds`: steps after the checkpoint this attempt resumed from), which this attempt
ran again; with events it is taken out of compute and data wait in their proportion.
Shares are fractions of the attempt's (or run's) time running. Pure: from RunStatus
values and `now`, never from the clock otherwise. Called by `status` and `timeline`
(planner/status.py) and by drills.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainform.planner.timeline import AttemptTimeline, attempt_timelines, parse_time
from trainform.providers.jobs import RunStatus
from trainform.runtime.protocol import CHECKPOINT, COMPUTE, DATA_WAIT, EVAL, SETUP

CATEGORIES = (
    "setup",
    "dataWait",
    "compute",
    "checkpoint",
    "recovery",
    "evaluation",
    "other",
    "unaccounted",
)
"""The parts of the time running, in the order reports show them."""
_PHASE_CATEGORY = {
    SETUP: "setup",
    DATA_WAIT: "dataWait",
    COMPUTE: "compute",
    CHECKPOINT: "checkpoint",
    EVAL: "evaluation",
}


@dataclass
class Breakdown:
    """Seconds per category (None: not known) of one attempt or of a whole run."""

    source: str
    """`events` (the job reported phases), `provider` (it did not), `mixed` (a run of both)."""
    wait: float | None = None
    backoff: float | None = None
    ran: float | None = None
    seconds: dict[str, float | None] = field(default_factory=dict)
    checkpoint_bytes: int = 0
    checkpoints: int = 0
    ranks: int = 0
    ignored: int = 0
    truncated: bool = False
    open_phases: list[str] = field(default_factory=list)
    attempt: int | None = None

    def share(self, category: str) -> float | None:
        """`category`'s fraction of the time running (None when either is unknown)."""
        value = self.seconds.get(category)
        if value is None or not self.ran:
            return None
        return value / self.ran

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {} if self.attempt is None else {"attempt": self.attempt}
        data.update(
            source=self.source,
            waitSeconds=_rounded(self.wait),
            backoffSeconds=_rounded(self.backoff),
            ranSeconds=_rounded(self.ran),
        )
        for category in CATEGORIES:
            data[f"{category}Seconds"] = _rounded(self.seconds.get(category))
        data["checkpointBytes"] = self.checkpoint_bytes
        data["checkpoints"] = self.checkpoints
        data["shares"] = {
            category: None if (s := self.share(category)) is None else round(s, 4)
            for category in CATEGORIES
        }
        data["events"] = {
            "ranks": self.ranks,
            "ignoredLines": self.ignored,
            "truncated": self.truncated,
            "openPhases": list(self.open_phases),
        }
        return data


@dataclass
class RunBreakdown:
    """A run's breakdown: each training attempt's, and their sum."""

    run_id: str
    attempts: list[Breakdown]
    total: Breakdown

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "total": self.total.to_json(),
            "attempts": [a.to_json() for a in self.attempts],
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _end_of(timeline: AttemptTimeline) -> float | None:
    """The attempt's start plus its time running, unix seconds (None: not started)."""
    started = parse_time(timeline.status.started_at)
    if started is None or timeline.ran is None:
        return None
    return started.timestamp() + timeline.ran


def _from_events(timeline: AttemptTimeline, events: dict[str, Any]) -> dict[str, float]:
    """Seconds per category from the job's events, scaled down to the time running where
    the ranks' clocks or overlapping phases claim more."""
    ran = timeline.ran or 0.0
    started = parse_time(timeline.status.started_at)
    found = dict.fromkeys(CATEGORIES, 0.0)
    first = events.get("firstAt")
    if started is not None and isinstance(first, int | float):
        found["setup"] = min(ran, max(0.0, first - started.timestamp()))
    ranks = max(1, int(events.get("ranks") or 1))
    end = _end_of(timeline)
    phases, open_phases = events.get("phases") or {}, events.get("open") or {}
    for name in sorted(set(phases) | set(open_phases)):
        seconds = float((phases.get(name) or {}).get("seconds") or 0.0)
        opened = open_phases.get(name)
        if opened and end is not None:
            share = min(1.0, int(opened.get("ranks") or 0) / ranks)
            seconds += max(0.0, end - float(opened.get("since") or end)) * share
        found[_PHASE_CATEGORY.get(name, "other")] += seconds
    accounted = sum(found.values())
    if accounted > ran > 0:
        found = {name: value * ran / accounted for name, value in found.items()}
    found["unaccounted"] = max(0.0, ran - sum(found.values()))
    return found


def _recovery(found: dict[str, float | None], lost: float | None) -> None:
    """Move the recompute of lost steps out of compute and data wait (or, without events,
    out of the unaccounted time) into `recovery`."""
    if not lost:
        found["recovery"] = 0.0
        return
    working = [name for name in ("compute", "dataWait") if found.get(name)]
    if not working:
        taken = min(lost, found.get("unaccounted") or 0.0)
        found["unaccounted"] = (found.get("unaccounted") or 0.0) - taken
        found["recovery"] = taken
        return
    pool = sum(found[name] or 0.0 for name in working)
    taken = min(lost, pool)
    for name in working:
        found[name] = (found[name] or 0.0) * (1 - taken / pool)
    found["recovery"] = taken


def _lost_seconds(timeline: AttemptTimeline, events: dict[str, Any] | None) -> float | None:
    """The recompute of the steps the previous attempt lost: its run time after the
    checkpoint resumed from, or, where that checkpoint is gone (kept only the last N), the
    lost steps at this attempt's own mean time per step (data wait and compute)."""
    if timeline.lost_seconds is not None or not timeline.lost_steps or not events:
        return timeline.lost_seconds
    phases = events.get("phases") or {}
    compute = phases.get(COMPUTE) or {}
    steps = int(compute.get("count") or 0)
    if not steps:
        return None
    working = float(compute.get("seconds") or 0.0)
    working += float((phases.get(DATA_WAIT) or {}).get("seconds") or 0.0)
    ranks = max(1, int(events.get("ranks") or 1))
    return timeline.lost_steps * working / (steps / ranks)


def attempt_breakdown(timeline: AttemptTimeline) -> Breakdown:
    """One attempt's breakdown from its timeline (and the events its status carries)."""
    status = timeline.status
    events = status.events if isinstance(status.events, dict) else None
    written = timeline.checkpoints
    result = Breakdown(
        source="events" if events and events.get("ranks") else "provider",
        attempt=status.attempt,
        wait=timeline.waited,
        backoff=timeline.backoff,
        ran=timeline.ran,
        checkpoints=len(written),
        checkpoint_bytes=sum(c.size for c in written),
    )
    seconds: dict[str, float | None] = dict.fromkeys(CATEGORIES)
    if timeline.ran is not None:
        if result.source == "events" and events is not None:
            seconds.update(_from_events(timeline, events))
            checkpoint = (events.get("phases") or {}).get(CHECKPOINT) or {}
            result.checkpoint_bytes = int(checkpoint.get("bytes") or 0) or result.checkpoint_bytes
            result.checkpoints = max(result.checkpoints, int(checkpoint.get("count") or 0))
        else:
            seconds["unaccounted"] = timeline.ran
        _recovery(seconds, _lost_seconds(timeline, events if result.source == "events" else None))
    result.seconds = seconds
    if events:
        result.ranks = int(events.get("ranks") or 0)
        result.ignored = int(events.get("ignored") or 0)
        result.truncated = bool(events.get("truncated"))
        result.open_phases = sorted(events.get("open") or {})
    return result


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def total_breakdown(attempts: list[Breakdown]) -> Breakdown:
    """The run's breakdown: each category summed over its attempts."""
    sources = {a.source for a in attempts if a.ran is not None}
    total = Breakdown(
        source=sources.pop() if len(sources) == 1 else ("mixed" if sources else "provider"),
        wait=_sum([a.wait for a in attempts]),
        backoff=_sum([a.backoff for a in attempts]),
        ran=_sum([a.ran for a in attempts]),
        checkpoint_bytes=sum(a.checkpoint_bytes for a in attempts),
        checkpoints=sum(a.checkpoints for a in attempts),
        ranks=max((a.ranks for a in attempts), default=0),
        ignored=sum(a.ignored for a in attempts),
        truncated=any(a.truncated for a in attempts),
    )
    total.seconds = {c: _sum([a.seconds.get(c) for a in attempts]) for c in CATEGORIES}
    return total


def run_breakdown(run: RunStatus, now: datetime | None = None) -> RunBreakdown:
    """Where the time of `run`'s training attempts went, per attempt and in total."""
    return breakdown_of(run.run_id, attempt_timelines(run, now))


def breakdown_of(run_id: str, timelines: list[AttemptTimeline]) -> RunBreakdown:
    """The breakdown from timelines already derived (planner/timeline.py)."""
    attempts = [attempt_breakdown(t) for t in timelines]
    return RunBreakdown(run_id, attempts, total_breakdown(attempts))
