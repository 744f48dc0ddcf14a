"""Timelines of runs: what each attempt went through, and the delivery cycle of a job.

Provider-independent. Providers report facts (times, wait reasons, exit codes, the
checkpoint an attempt resumed from, the last step it reached, its cause class); this
module derives what a person asks about them: how long each attempt waited and ran, how
many steps and how much time a failure threw away, and per run the total wait, the
effective run time and the time spent re-running lost steps. Everything is computed from
the RunStatus values the provider returned, never from the clock, except the running
attempt's elapsed time (`now`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainform.planner.run_spans import Requeue, requeues, span_seconds
from trainform.providers.jobs import (
    AttemptStatus,
    CheckpointStatus,
    EvaluationStatus,
    LauncherStatus,
    RunPhase,
    RunSpan,
    RunStatus,
    WaitSpan,
    parse_utc,
    utc_text,
)

parse_time = parse_utc
iso = utc_text


def seconds_between(start: str, end: str) -> float | None:
    first, last = parse_time(start), parse_time(end)
    if first is None or last is None:
        return None
    return max(0.0, (last - first).total_seconds())


@dataclass
class AttemptTimeline:
    """One attempt with what is derived from it."""

    status: AttemptStatus
    waited: float | None
    ran: float | None
    lost_steps: int | None = None
    """Steps of the previous attempt this one had to run again."""
    lost_seconds: float | None = None
    """Run time of the previous attempt thrown away (after the checkpoint resumed from)."""
    checkpoints: list[CheckpointStatus] = field(default_factory=list)
    """Checkpoints written while it ran."""
    backoff: float | None = None
    """Seconds it waited for its retry backoff."""
    requeues: list[Requeue] = field(default_factory=list)
    """Runs the platform stopped and requeued (planner/run_spans.py)."""

    @property
    def held(self) -> float:
        """Seconds between its runs: requeue holds and the waits after them."""
        return sum(r.held or 0.0 for r in self.requeues)

    def to_json(self) -> dict[str, Any]:
        data = self._json()
        if self.requeues:  # only requeued attempts carry these
            data["heldSeconds"] = _rounded(self.held)
            data["requeues"] = [r.to_json() for r in self.requeues]
        return data

    def _json(self) -> dict[str, Any]:
        status = self.status
        return {
            "attempt": status.attempt,
            "phase": str(status.phase),
            "cause": status.cause or None,
            "reason": status.reason,
            "exitCode": status.exit_code,
            "submittedAt": status.submitted_at or None,
            "eligibleAt": status.eligible_at or None,
            "admittedAt": status.admitted_at or None,
            "startedAt": status.started_at or None,
            "endedAt": status.ended_at or None,
            "waitedSeconds": _rounded(self.waited),
            "backoffSeconds": _rounded(self.backoff),
            "ranSeconds": _rounded(self.ran),
            "waits": [
                {"reason": w.reason, "since": w.since, "until": w.until or None}
                for w in status.waits
            ],
            "checkpoints": [
                {"id": c.id, "step": c.step, "writtenAt": c.written_at or None, "size": c.size}
                for c in self.checkpoints
            ],
            "resumedFrom": status.resumed_from or None,
            "resumedStep": status.resumed_step,
            "lastStep": status.last_step,
            "lostSteps": self.lost_steps,
            "lostSeconds": _rounded(self.lost_seconds),
            "queue": status.queue or None,
            "queuePosition": queue_position(status),
            "nodes": status.nodes,
            "procsPerNode": status.procs_per_node,
            "worldSize": world_size(status.nodes, status.procs_per_node),
            "gpus": status.gpus,
            "cpus": status.cpus,
            "hosts": list(status.hosts),
            "launchers": [
                {
                    "node": launcher.node,
                    "host": launcher.host or None,
                    "log": launcher.log or None,
                    "startedAt": launcher.started_at or None,
                    "endedAt": launcher.ended_at or None,
                    "exitCode": launcher.exit_code,
                }
                for launcher in status.launchers
            ],
            "log": status.log or None,
        }


@dataclass
class Delivery:
    """A run from its first submission to now or its end."""

    attempts: int
    waited: float
    ran: float
    rerun: float
    effective: float
    lost_steps: int
    backoff: float = 0.0
    first_submitted: str = ""
    ended: str = ""
    held: float = 0.0
    """Requeue holds (between the runs of requeued attempts), apart from waits and runs."""

    def to_json(self) -> dict[str, Any]:
        held = {"heldSeconds": _rounded(self.held)} if self.held else {}
        return {
            **held,
            "attempts": self.attempts,
            "firstSubmittedAt": self.first_submitted or None,
            "endedAt": self.ended or None,
            "waitedSeconds": _rounded(self.waited),
            "backoffSeconds": _rounded(self.backoff),
            "ranSeconds": _rounded(self.ran),
            "effectiveSeconds": _rounded(self.effective),
            "rerunSeconds": _rounded(self.rerun),
            "lostSteps": self.lost_steps,
        }


def queue_position(status: AttemptStatus) -> dict[str, Any] | None:
    """Where a queued attempt stands: `position` counted from 0 as the scheduler counts,
    how many are `pending` in its queue, and the `source` of the figure."""
    if status.queue_position is None:
        return None
    return {
        "position": status.queue_position,
        "pending": status.queue_pending or None,
        "source": status.queue_position_source or None,
    }


def world_size(nodes: int | None, procs_per_node: int | None) -> int | None:
    """Ranks of one process group: nodes x processes per node (None when not known)."""
    return nodes * procs_per_node if nodes and procs_per_node else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _checkpoint(run: RunStatus, ident: str) -> CheckpointStatus | None:
    name = ident.rstrip("/").rsplit("/", 1)[-1]
    return next((c for c in run.checkpoints if c.id == name), None)


def _resumed_step(run: RunStatus, attempt: AttemptStatus) -> int | None:
    if attempt.resumed_step is not None:
        return attempt.resumed_step
    if not attempt.resumed_from:
        return None
    checkpoint = _checkpoint(run, attempt.resumed_from)
    if checkpoint is not None:
        return checkpoint.step
    digits = "".join(ch for ch in attempt.resumed_from.rsplit("-", 1)[-1] if ch.isdigit())
    return int(digits) if digits else None


def _written_during(run: RunStatus, attempt: AttemptStatus, end: str) -> list[CheckpointStatus]:
    start = parse_time(attempt.started_at)
    stop = parse_time(end)
    if start is None:
        return []
    found = []
    for checkpoint in run.checkpoints:
        written = parse_time(checkpoint.written_at)
        if written is None or written < start or (stop is not None and written > stop):
            continue
        found.append(checkpoint)
    return sorted(found, key=lambda c: c.step)


def attempt_timelines(run: RunStatus, now: datetime | None = None) -> list[AttemptTimeline]:
    """The run's training attempts in order, each with its waits, run time and losses."""
    now = now or datetime.now(UTC)
    timelines: list[AttemptTimeline] = []
    previous: AttemptTimeline | None = None
    ordered = sorted(run.attempts, key=lambda a: a.attempt)
    for index, status in enumerate(ordered):
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        end = status.ended_at or (following.submitted_at if following else "") or ""
        begin = status.started_at or status.admitted_at
        waited_until = begin or status.ended_at or ("" if status.phase.finished else iso(now))
        waited_from = status.eligible_at or status.submitted_at
        waited = seconds_between(waited_from, waited_until) if waited_from else None
        backoff = (
            seconds_between(status.submitted_at, status.eligible_at)
            if status.eligible_at and status.submitted_at
            else None
        )
        if status.runs:  # requeued: the runs, never the holds between them
            ran = sum(span_seconds(span, now) for span in status.runs)
        elif status.started_at:
            ran = seconds_between(status.started_at, status.ended_at or iso(now))
        else:
            ran = None
        timeline = AttemptTimeline(status, waited, ran, backoff=backoff)
        timeline.requeues = requeues(status.runs, run.checkpoints, now)
        timeline.checkpoints = _written_during(run, status, end)
        if status.last_step is None and timeline.checkpoints:
            status.last_step = timeline.checkpoints[-1].step
        if previous is not None and status.started_at:
            _losses(run, previous, timeline)
        timelines.append(timeline)
        previous = timeline
    return timelines


def _losses(run: RunStatus, previous: AttemptTimeline, current: AttemptTimeline) -> None:
    """What the previous attempt's failure cost `current`: the steps past the checkpoint it
    resumed from, and the previous attempt's run time after that checkpoint was written."""
    before = previous.status
    resumed = _resumed_step(run, current.status)
    current.status.resumed_step = resumed
    reached = before.last_step
    if reached is not None:
        current.lost_steps = max(0, reached - (resumed or 0))
    if previous.ran is None:
        return
    if resumed is None:
        current.lost_seconds = previous.ran
        return
    checkpoint = _checkpoint(run, current.status.resumed_from)
    written = checkpoint.written_at if checkpoint else ""
    after = seconds_between(written, before.ended_at) if written and before.ended_at else None
    if after is None:
        current.lost_seconds = None
    else:
        current.lost_seconds = min(after, previous.ran)


def delivery(timelines: list[AttemptTimeline]) -> Delivery:
    waited = sum(t.waited or 0.0 for t in timelines)
    ran = sum(t.ran or 0.0 for t in timelines)
    requeued = [r for t in timelines for r in t.requeues]
    rerun = sum(t.lost_seconds or 0.0 for t in timelines)
    rerun += sum(r.lost_seconds or 0.0 for r in requeued)
    lost = sum(t.lost_steps or 0 for t in timelines) + sum(r.lost_steps or 0 for r in requeued)
    first = timelines[0].status.submitted_at if timelines else ""
    last = timelines[-1].status if timelines else None
    ended = last.ended_at if last is not None and last.phase.finished else ""
    return Delivery(
        attempts=len(timelines),
        waited=waited,
        ran=ran,
        rerun=rerun,
        effective=max(0.0, ran - rerun),
        lost_steps=lost,
        backoff=sum(t.backoff or 0.0 for t in timelines),
        first_submitted=first,
        ended=ended,
        held=sum(t.held for t in timelines),
    )


def human_duration(seconds: float | None) -> str:
    """`1h02m`, `3m05s`, `12s`, `0.4s`; "-" for unknown."""
    if seconds is None:
        return "-"
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


_FIELDS: dict[type, frozenset[str]] = {}


def _known(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` without keys `cls` does not declare (data from a newer or older provider)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    if names.issuperset(values):
        return dict(values)
    return {k: v for k, v in values.items() if k in names}


def run_from_json(data: dict[str, Any]) -> RunStatus:
    """A RunStatus back from the plain data providers' observations carry."""
    attempts = []
    for entry in data.get("attempts", []):
        values = _known(AttemptStatus, entry)
        values["phase"] = RunPhase(values.get("phase", "queued"))
        values["waits"] = [WaitSpan(**_known(WaitSpan, w)) for w in entry.get("waits") or []]
        values["launchers"] = [
            LauncherStatus(**_known(LauncherStatus, n)) for n in entry.get("launchers") or []
        ]
        values["runs"] = [RunSpan(**_known(RunSpan, r)) for r in entry.get("runs") or []]
        attempts.append(AttemptStatus(**values))
    evaluations = []
    for entry in data.get("evaluations", []):
        values = _known(EvaluationStatus, entry)
        values["phase"] = RunPhase(values.get("phase", "queued"))
        evaluations.append(EvaluationStatus(**values))
    return RunStatus(
        run_id=data["run_id"],
        attempts=attempts,
        checkpoints=[
            CheckpointStatus(**_known(CheckpointStatus, c)) for c in data.get("checkpoints", [])
        ],
        current_step=data.get("current_step"),
        evaluations=evaluations,
        output_dir=data.get("output_dir", ""),
    )
