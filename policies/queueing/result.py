"""What a simulation returns: per-job outcomes, wait statistics, utilisation.

Built by `simulator.simulate`; read by the review command (tables, Markdown, JSON) and by
tests. Percentiles are nearest-rank (the smallest observed wait with at least p% of the
waits at or below it), so every reported figure is a wait some job actually had.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

JSON_VERSION = 1


@dataclass(frozen=True, slots=True)
class Run:
    """One stretch of a job on a pool: from admission to completion or preemption."""

    start: float
    end: float
    pool: str


@dataclass(slots=True)
class JobOutcome:
    """What happened to one job. `start` is the first admission (None: never admitted);
    `wait` = start - submit; `borrowed`: some run was admitted above its queue's nominal
    quota on that pool."""

    id: str
    project: str
    queue: str
    submit: float
    gpus: int
    duration: float
    priority: int
    start: float | None = None
    end: float | None = None
    wait: float | None = None
    preempted: int = 0
    borrowed: bool = False
    runs: list[Run] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "queue": self.queue,
            "submit": self.submit,
            "gpus": self.gpus,
            "duration": self.duration,
            "priority": self.priority,
            "start": self.start,
            "end": self.end,
            "wait": self.wait,
            "preempted": self.preempted,
            "borrowed": self.borrowed,
            "runs": [[run.start, run.end, run.pool] for run in self.runs],
        }


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Waits (seconds from submit to first admission) of the admitted jobs of a group."""

    count: int
    p50: float | None
    p95: float | None
    mean: float | None
    max: float | None
    never_admitted: int

    @classmethod
    def of(cls, waits: Iterable[float], never_admitted: int = 0) -> WaitStats:
        ordered = sorted(waits)
        if not ordered:
            return cls(0, None, None, None, None, never_admitted)
        return cls(
            count=len(ordered),
            p50=percentile(ordered, 50),
            p95=percentile(ordered, 95),
            mean=math.fsum(ordered) / len(ordered),
            max=ordered[-1],
            never_admitted=never_admitted,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "p50": self.p50,
            "p95": self.p95,
            "mean": self.mean,
            "max": self.max,
            "never_admitted": self.never_admitted,
        }


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class NeverAdmitted:
    """A job that no state of the platform could admit, and why."""

    id: str
    reason: str


@dataclass
class SimulationResult:
    """Outcomes of one simulation. `never_admitted` holds job ids (reasons in `reasons`);
    `utilisation` is GPU-seconds used over capacity x makespan (first submit to last end),
    overall and per pool in `pool_utilisation`."""

    jobs: list[JobOutcome]
    per_queue: dict[str, WaitStats]
    per_project: dict[str, WaitStats]
    utilisation: float
    pool_utilisation: dict[str, float]
    preemptions: int
    never_admitted: list[str]
    reasons: dict[str, str]
    makespan: float
    held: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    """(project, queue) -> reason -> job-seconds its jobs spent pending for it (holds)."""

    def held_per_job(self, project: str, queue: str) -> dict[str, float]:
        """Mean seconds per job of (project, queue) pending for each reason."""
        jobs = sum(1 for job in self.jobs if job.project == project and job.queue == queue)
        reasons = self.held.get((project, queue), {})
        return {reason: value / jobs for reason, value in reasons.items()} if jobs else {}

    def to_json(self, include_jobs: bool = True) -> dict[str, Any]:
        """Stable JSON: sorted keys per group; `jobs` in trace order (omit: include_jobs)."""
        document: dict[str, Any] = {
            "version": JSON_VERSION,
            "summary": {
                "jobs": len(self.jobs),
                "admitted": sum(1 for job in self.jobs if job.start is not None),
                "never_admitted": len(self.never_admitted),
                "preemptions": self.preemptions,
                "utilisation": self.utilisation,
                "makespan": self.makespan,
                "wait": WaitStats.of(
                    job.wait for job in self.jobs if job.wait is not None
                ).to_json(),
            },
            "pool_utilisation": dict(sorted(self.pool_utilisation.items())),
            "per_queue": {name: stats.to_json() for name, stats in sorted(self.per_queue.items())},
            "per_project": {
                name: stats.to_json() for name, stats in sorted(self.per_project.items())
            },
            "never_admitted": [
                {"id": job_id, "reason": self.reasons[job_id]} for job_id in self.never_admitted
            ],
            "held": [
                {"project": project, "queue": queue, "seconds": reasons}
                for (project, queue), reasons in sorted(self.held.items())
            ],
        }
        if include_jobs:
            document["jobs"] = [job.to_json() for job in self.jobs]
        return document


def summarise(
    outcomes: list[JobOutcome],
    reasons: dict[str, str],
    capacity: dict[str, int],
    held: dict[tuple[str, str], dict[str, float]] | None = None,
) -> SimulationResult:
    """Group waits per queue and project, and compute utilisation and preemptions."""
    waits: dict[str, dict[str, list[float]]] = {"queue": defaultdict(list), "project": {}}
    waits["project"] = defaultdict(list)
    missing: dict[str, dict[str, int]] = {"queue": defaultdict(int), "project": defaultdict(int)}
    used: dict[str, float] = defaultdict(float)
    first = min((job.submit for job in outcomes), default=0.0)
    last = first
    for job in outcomes:
        if job.wait is None:
            missing["queue"][job.queue] += 1
            missing["project"][job.project] += 1
            waits["queue"].setdefault(job.queue, [])
            waits["project"].setdefault(job.project, [])
            continue
        waits["queue"][job.queue].append(job.wait)
        waits["project"][job.project].append(job.wait)
        for run in job.runs:
            used[run.pool] += job.gpus * (run.end - run.start)
        if job.end is not None and job.end > last:
            last = job.end
    makespan = last - first
    pools = {name: gpus for name, gpus in capacity.items() if gpus > 0}
    total = sum(pools.values())
    pool_utilisation = {
        name: (used[name] / (gpus * makespan) if makespan > 0 else 0.0)
        for name, gpus in sorted(pools.items())
    }
    utilisation = math.fsum(used.values()) / (total * makespan) if total and makespan > 0 else 0.0
    return SimulationResult(
        jobs=outcomes,
        per_queue={
            name: WaitStats.of(values, missing["queue"][name])
            for name, values in sorted(waits["queue"].items())
        },
        per_project={
            name: WaitStats.of(values, missing["project"][name])
            for name, values in sorted(waits["project"].items())
        },
        utilisation=utilisation,
        pool_utilisation=pool_utilisation,
        preemptions=sum(job.preempted for job in outcomes),
        never_admitted=[job.id for job in outcomes if job.start is None],
        reasons=reasons,
        makespan=makespan,
        held=held or {},
    )
