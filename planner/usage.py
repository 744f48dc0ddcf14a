"""Usage accounting and the platform view, both from the providers' own records.

`usage`: accelerator-hours, CPU-hours, wait hours and lost (re-run) hours of training
attempts, per project, queue or pool, over a window ending now. Each provider instance
that runs jobs reports its runs through `accounting(since)` (sacct, Kubernetes Jobs and
Workloads, the local platform database); an attempt that straddles the window start
counts only its part inside it. Lost hours are the run time of attempts thrown away by a
failure (after the checkpoint the next attempt resumed from), as planner/timeline.py
computes them, charged to the attempt that was lost.

`accounted_runs` is also what the platform view (planner/platform_view.py) reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.drill_usage import drill_charges
from trainform.planner.state import StateError
from trainform.planner.timeline import attempt_timelines, iso, parse_time
from trainform.planner.workspace import Workspace
from trainform.providers.errors import ProviderError
from trainform.providers.jobs import AccountedRun, AttemptStatus


@dataclass
class UsageRow:
    group: str
    runs: set[str] = field(default_factory=set)
    attempts: int = 0
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    wait_hours: float = 0.0
    lost_hours: float = 0.0
    lost_gpu_hours: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "runs": len(self.runs),
            "attempts": self.attempts,
            "acceleratorHours": round(self.gpu_hours, 4),
            "cpuHours": round(self.cpu_hours, 4),
            "waitHours": round(self.wait_hours, 4),
            "lostHours": round(self.lost_hours, 4),
            "lostAcceleratorHours": round(self.lost_gpu_hours, 4),
        }


@dataclass
class UsageReport:
    since: str
    until: str
    by: str
    rows: list[UsageRow]
    sources: list[str]
    problems: list[str] = field(default_factory=list)
    drills: list[dict[str, Any]] = field(default_factory=list)
    """The runs drills made, with their hours (counted in `rows` too): planner/drill_usage.py."""

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": 1,
            "since": self.since,
            "until": self.until,
            "by": self.by,
            "sources": self.sources,
            "rows": [row.to_json() for row in self.rows],
            "drills": self.drills,
            "problems": self.problems,
        }


def _overlap(start: str, end: str, window: tuple[datetime, datetime]) -> float:
    """Seconds of [start, end] inside the window (an open end is the window's end)."""
    first, last = parse_time(start), parse_time(end)
    if first is None:
        return 0.0
    last = last or window[1]
    begin, stop = max(first, window[0]), min(last, window[1])
    return max(0.0, (stop - begin).total_seconds())


def accounted_runs(
    workspace: Workspace, since: str
) -> tuple[list[AccountedRun], list[str], list[str]]:
    """Runs from every provider instance that keeps accounting, the instances asked, and
    what could not be read."""
    runs: list[AccountedRun] = []
    sources, problems = [], []
    for instance in workspace.config.providers:
        provider = workspace.providers.get(instance.name)
        accounting = getattr(provider, "accounting", None)
        if not callable(accounting):
            continue
        sources.append(instance.name)
        try:
            runs += accounting(since)
        except ProviderError as exc:
            problems.append(f"{instance.name}: {exc}")
    return runs, sources, problems


def _pools_of(desired: dict[str, DesiredItem]) -> dict[str, str]:
    """Queue name -> the pools it admits onto (joined by `+`)."""
    pools = {}
    for item in desired.values():
        if item.kind == "Queue":
            names = [p["pool"] for p in item.document["spec"].get("pools", [])]
            pools[item.name] = "+".join(names) or "-"
    return pools


def usage_report(
    workspace: Workspace, window_seconds: float, by: str, now: datetime | None = None
) -> UsageReport:
    now = now or datetime.now(UTC)
    start = now - timedelta(seconds=window_seconds)
    runs, sources, problems = accounted_runs(workspace, iso(start))
    pools = _pools_of(build_desired(workspace.specs)) if by == "pool" else {}
    report = compute_usage(runs, (start, now), by, pools)
    report.sources, report.problems = sources, problems
    try:
        records = workspace.backend.read_audit()
    except StateError as exc:
        report.problems.append(f"audit trail: {exc}")
        records = []
    report.drills = drill_charges(runs, records, (start, now), compute_usage)
    return report


def compute_usage(
    runs: list[AccountedRun],
    window: tuple[datetime, datetime],
    by: str,
    pools: dict[str, str] | None = None,
) -> UsageReport:
    """Usage rows of the runs' training attempts inside the window (pure)."""
    pools = pools or {}
    rows: dict[str, UsageRow] = {}

    def row_of(accounted: AccountedRun, queue: str) -> UsageRow:
        key = {
            "project": accounted.project or "-",
            "queue": queue or "-",
            "pool": accounted.pool or pools.get(queue, "-"),
        }[by]
        return rows.setdefault(key, UsageRow(key))

    for accounted in runs:
        timelines = attempt_timelines(accounted.run, window[1])
        for timeline in timelines:
            status = timeline.status
            ran, gpu_seconds, cpu_seconds = _charged(status, window)
            begin = status.eligible_at or status.submitted_at
            until = status.started_at or status.ended_at
            waited = _overlap(begin, until, window) if begin else 0.0
            if not ran and not waited and not _inside(status.ended_at, window):
                continue
            row = row_of(accounted, status.queue or accounted.queue)
            row.runs.add(f"{accounted.address}:{accounted.run.run_id}")
            row.attempts += 1
            row.gpu_hours += gpu_seconds / 3600
            row.cpu_hours += cpu_seconds / 3600
            row.wait_hours += waited / 3600
            for requeue in timeline.requeues:  # a run a requeue threw away, as charged
                if requeue.lost_seconds and _inside(requeue.stopped.ended_at, window):
                    row.lost_hours += requeue.lost_seconds / 3600
                    row.lost_gpu_hours += requeue.stopped.gpus * requeue.lost_seconds / 3600
        for previous, timeline in zip(timelines, timelines[1:], strict=False):
            lost = timeline.lost_seconds or 0.0
            if not lost or not _inside(previous.status.ended_at, window):
                continue
            row = row_of(accounted, previous.status.queue or accounted.queue)
            row.lost_hours += lost / 3600
            row.lost_gpu_hours += previous.status.gpus * lost / 3600
    return UsageReport(
        since=iso(window[0]),
        until=iso(window[1]),
        by=by,
        rows=sorted(rows.values(), key=lambda r: r.group),
        sources=[],
    )


def _charged(
    status: AttemptStatus, window: tuple[datetime, datetime]
) -> tuple[float, float, float]:
    """Run seconds, GPU-seconds and CPU-seconds of an attempt inside the window. A requeued
    attempt is charged run by run, each with its own allocation and the platform's own
    elapsed time (a run cut by the window start counts its share), never its holds."""
    if not status.runs:
        ran = _overlap(status.started_at, status.ended_at, window) if status.started_at else 0.0
        return ran, status.gpus * ran, status.cpus * ran
    total = gpus = cpus = 0.0
    for span in status.runs:
        inside = _overlap(span.started_at, span.ended_at, window)
        whole = _overlap(
            span.started_at, span.ended_at, (datetime.min.replace(tzinfo=UTC), window[1])
        )
        if span.elapsed is not None and span.ended_at and whole:
            inside = span.elapsed * inside / whole
        total += inside
        gpus += span.gpus * inside
        cpus += span.cpus * inside
    return total, gpus, cpus


def _inside(when: str, window: tuple[datetime, datetime]) -> bool:
    moment = parse_time(when)
    return moment is not None and window[0] <= moment <= window[1]
