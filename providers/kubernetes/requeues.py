"""An attempt that Kueue preempted and queued again, from its Workload (timeline.py, runs.py).

Kueue keeps one Workload per Job through preemptions (pkg/workload/workload.go,
pkg/controller/jobframework/reconciler.go): on a preemption the Workload gets Evicted
(True, reason Preempted) and Preempted (True, with the preemption's reason and message),
its Job is suspended with its original template, and once its pods are gone Requeued
(True, reason Preempted), QuotaReserved False, and the time it was admitted is added to
status.accumulatedPastExecutionTimeSeconds; status.schedulingStats.evictions counts the
evictions. When it is admitted again, Evicted and Preempted turn False (reason
QuotaReserved, "Previously: <message>") at the new reservation's time. Only the latest
preemption's times are kept, so an attempt preempted n times shows as two runs
(providers/jobs.py RunSpan): what ran before the last preemption (its elapsed time the
accumulated admitted time, its end the preemption: the Evicted condition's time while it
is True, else the Requeued one's), stopped by `preempted`, and the run since the
re-admission. `resolve` completes them from the run's checkpoints: the step the stopped
run reached (the newest checkpoint written before the preemption) and the step the next
run resumed from: for a Job started through resume_entry.py the latest valid checkpoint
written before it started (what its pods found), otherwise the one the attempt was
submitted with (the same template). planner/run_spans.py derives the hold and the steps
and time lost. `last_step`: the newest checkpoint written while an attempt ran. Pure; no
I/O.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from trainform.providers.jobs import (
    AttemptStatus,
    CheckpointStatus,
    RunSpan,
    WaitSpan,
    parse_utc,
    utc_text,
)
from trainform.providers.kubernetes.resume_entry import ENTRY_NAME

PREEMPTED = "Preempted"
PREVIOUSLY = "Previously: "


@dataclass
class Preemption:
    """The latest preemption of an attempt, as its Workload keeps it."""

    at: str
    reason: str
    readmitted_at: str = ""
    elapsed: float | None = None
    count: int = 1


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None


def starts_from_latest(job: dict[str, Any] | None) -> bool:
    """Whether the Job's pods start through resume_entry.py."""
    template = (((job or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    return any(
        ENTRY_NAME in (container.get("command") or [])[:4]
        for container in template.get("containers") or []
    )


def preemption_of(workload: dict[str, Any] | None) -> Preemption | None:
    """The attempt's latest preemption, if Kueue preempted it."""
    evicted = _condition(workload, "Evicted")
    if workload is None or evicted is None:
        return None
    requeued = _condition(workload, "Requeued") or {}
    preempted = _condition(workload, "Preempted") or {}
    text = str(preempted.get("message") or evicted.get("message") or "")
    text = text.removeprefix(PREVIOUSLY)
    kind = str(preempted.get("reason") or "") if preempted.get("status") == "True" else ""
    if evicted.get("status") == "True":
        if evicted.get("reason") != PREEMPTED:
            return None
        at, readmitted = str(evicted.get("lastTransitionTime") or ""), ""
    elif requeued.get("reason") == PREEMPTED:
        at = str(requeued.get("lastTransitionTime") or "")
        readmitted = str(evicted.get("lastTransitionTime") or "")
    else:
        return None
    status = workload.get("status") or {}
    elapsed = status.get("accumulatedPastExecutionTimeSeconds")
    stats = (status.get("schedulingStats") or {}).get("evictions") or []
    count = sum(int(e.get("count") or 0) for e in stats if e.get("reason") == PREEMPTED)
    return Preemption(
        at=at,
        reason=f"preempted by Kueue ({kind}: {text})" if kind else f"preempted by Kueue ({text})",
        readmitted_at=readmitted,
        elapsed=float(elapsed) if isinstance(elapsed, int | float) else None,
        count=max(count, 1),
    )


def with_runs(status: AttemptStatus, found: Preemption | None) -> None:
    """Give a preempted attempt its runs: the one the preemption stopped, and the one
    since Kueue admitted it again; the attempt started with the first."""
    if found is None:
        return
    restarted, started = status.started_at, ""
    end = parse_utc(found.at)
    if found.elapsed is not None and end is not None:
        started = utc_text(end - datetime.timedelta(seconds=found.elapsed))
    stopped = RunSpan(
        started_at=started,
        ended_at=found.at,
        stopped_by="preempted",
        elapsed=found.elapsed,
        gpus=status.gpus,
        cpus=status.cpus,
        resumed_step=status.resumed_step,
    )
    status.runs = [stopped]
    if started:  # Kueue lost the first start with the first run: its admission is it
        status.admitted_at = status.started_at = started
    if found.readmitted_at:
        status.runs.append(
            RunSpan(
                started_at=restarted or found.readmitted_at,
                ended_at=status.ended_at,
                gpus=status.gpus,
                cpus=status.cpus,
                resumed_step=status.resumed_step,
            )
        )


def _before(checkpoint: CheckpointStatus, moment: str) -> bool:
    written, limit = parse_utc(checkpoint.written_at), parse_utc(moment)
    if written is None or limit is None:
        return False
    return written < limit + datetime.timedelta(seconds=1)  # Kubernetes keeps seconds


def resolve_runs(runs: list[RunSpan], checkpoints: list[CheckpointStatus], latest: bool) -> None:
    """The step each stopped run reached and, for a Job started through resume_entry.py
    (`latest`), the latest valid checkpoint the next run resumed from."""
    for index, span in enumerate(runs):
        if span.stopped_by and span.last_step is None:
            steps = [c.step for c in checkpoints if _before(c, span.ended_at)]
            span.last_step = max(steps) if steps else None
        if index and latest:
            valid = [c for c in checkpoints if c.valid and _before(c, span.started_at)]
            span.resumed_step = max((c.step for c in valid), default=None)


def requeued_waits(waits: list[WaitSpan], found: Preemption | None) -> list[WaitSpan]:
    """The attempt's waits with the one up to a re-admission told as the requeue it was
    (timeline.admission can only say it waited from submission to the reservation)."""
    if found is None or not found.readmitted_at:
        return waits
    told = []
    for wait in waits:
        if wait.until == found.readmitted_at and wait.reason.startswith("waited for quota"):
            reason = f"{found.reason}; requeued, waited for quota again"
            told.append(WaitSpan(reason, found.at or wait.since, wait.until))
        else:
            told.append(wait)
    return told


def last_step(attempt: AttemptStatus, checkpoints: list[CheckpointStatus]) -> int | None:
    """The newest checkpoint written while the attempt ran (its end's second included:
    Kubernetes records times to the second)."""
    start = parse_utc(attempt.started_at)
    if start is None:
        return None
    end = parse_utc(attempt.ended_at)
    if end is not None:
        end += datetime.timedelta(seconds=1)
    steps = [
        checkpoint.step
        for checkpoint in checkpoints
        for written in [parse_utc(checkpoint.written_at)]
        if written is not None and written >= start and (end is None or written < end)
    ]
    return max(steps) if steps else None
