"""The simulation's sections of a review: waits per project and queue, what held jobs back,
the actual waits of an accounting window beside the simulated base, totals, and the jobs
never admitted. Called by sections.review_sections; cells are formatted by cells.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainform.policies.review.cells import ARROW, Section, duration, duration_delta, pairs
from trainform.policies.review.report import ReviewReport
from trainform.policies.review.simulation import WaitRow


def wait_rows(rows: Sequence[WaitRow]) -> list[tuple[str, ...]]:
    result = []
    for row in rows:
        old, new = row.before, row.after
        cells = [row.key, str((new or old).count if (new or old) else 0)]
        for figure in ("p50", "p95"):
            a = getattr(old, figure) if old else None
            b = getattr(new, figure) if new else None
            cells += [duration(a), duration(b), duration_delta(a, b)]
        never = [str(s.never_admitted) if s else "-" for s in (old, new)]
        cells.append(never[0] if never[0] == never[1] else f"{never[0]} {ARROW} {never[1]}")
        result.append(tuple(cells))
    return result


WAIT_HEADERS = ("jobs", "p50 base", "head", "Δ", "p95 base", "head", "Δ", "never admitted")


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def never_admitted_rows(report: ReviewReport) -> list[tuple[str, ...]]:
    """Jobs no state of one side's platform could admit, with the reason on each side."""
    sim = report.simulation
    if sim is None:
        return []
    base, head = set(sim.base.never_admitted), set(sim.head.never_admitted)
    rows = []
    for job in sim.head.jobs:
        if job.id in base or job.id in head:
            rows.append(
                (
                    job.id,
                    job.project,
                    job.queue,
                    str(job.gpus),
                    sim.base.reasons.get(job.id, "admitted") if job.id in base else "admitted",
                    sim.head.reasons.get(job.id, "admitted") if job.id in head else "admitted",
                )
            )
    return rows


HELD_REASONS_SHOWN = 3


def held_rows(report: ReviewReport) -> list[tuple[str, ...]]:
    """Per project and queue, the causes its jobs waited for (mean per job, base and head),
    largest first, at most HELD_REASONS_SHOWN each."""
    from collections import Counter

    from trainform.policies.queueing.holds import SHOWN

    sim = report.simulation
    if sim is None:
        return []
    jobs = Counter((job.project, job.queue) for job in sim.head.jobs)
    rows = []
    for key in sorted(sim.base.held.keys() | sim.head.held.keys()):
        count = jobs.get(key, 0)
        if not count:
            continue
        before, after = sim.base.held.get(key, {}), sim.head.held.get(key, {})
        reasons = sorted(
            before.keys() | after.keys(),
            key=lambda r: (-max(after.get(r, 0.0), before.get(r, 0.0)), r),
        )
        for reason in reasons[:HELD_REASONS_SHOWN]:
            a, b = before.get(reason, 0.0) / count, after.get(reason, 0.0) / count
            if round(a) == 0 and round(b) == 0:
                continue
            rows.append(
                (key[0], key[1], SHOWN[reason], duration(a), duration(b), duration_delta(a, b))
            )
    return rows


def actual_rows(report: ReviewReport) -> list[tuple[str, ...]]:
    """Per queue and project: the waits the trace's jobs really had, the simulated base's,
    and the difference (the simulator's error on this history)."""
    sim = report.simulation
    if sim is None:
        return []
    rows = []
    for kind, actual, simulated in (
        ("queue", sim.actual_queues, sim.base.per_queue),
        ("project", sim.actual_projects, sim.base.per_project),
    ):
        for name, real in actual.items():
            base = simulated.get(name)
            cells = [f"{kind} {name}", str(real.count)]
            for figure in ("p50", "p95"):
                a = getattr(real, figure)
                b = getattr(base, figure) if base else None
                cells += [duration(a), duration(b), duration_delta(a, b)]
            rows.append(tuple(cells))
    return rows


def simulation_sections(report: ReviewReport) -> list[Section]:
    sim = report.simulation
    if sim is None:
        return []
    totals: list[tuple[str, ...]] = [
        ("utilisation", _percent(sim.base.utilisation), _percent(sim.head.utilisation))
    ]
    pools = sim.base.pool_utilisation, sim.head.pool_utilisation
    for pool, a, b in pairs(*pools):
        totals.append((f"utilisation {pool}", _percent(a), _percent(b)))
    totals += [
        ("preemptions", str(sim.base.preemptions), str(sim.head.preemptions)),
        ("never admitted", str(len(sim.base.never_admitted)), str(len(sim.head.never_admitted))),
    ]
    sections = [
        Section(
            "wait-projects",
            f"Simulated wait per project ({sim.jobs} jobs of {sim.trace})",
            ("project", *WAIT_HEADERS),
            wait_rows(sim.projects),
            folded=False,
        ),
        Section(
            "held",
            "What held jobs back: mean time pending per job, by cause",
            ("project", "queue", "cause", "base", "head", "Δ"),
            held_rows(report),
            note="time pending (first wait and after preemptions) attributed to the constraint "
            "that kept the job out; docs/simulation.md",
            folded=False,
        ),
        Section(
            "wait-queues",
            "Simulated wait per queue",
            ("queue", *WAIT_HEADERS),
            wait_rows(sim.queues),
        ),
        Section("simulation", "Simulation totals", ("figure", "base", "head"), totals),
    ]
    actual = actual_rows(report)
    if actual:
        sections.insert(
            2,
            Section(
                "actual",
                "Actual waits in the accounting window beside the simulated base",
                (
                    "queue or project",
                    "jobs",
                    "p50 actual",
                    "simulated",
                    "error",
                    "p95 actual",
                    "simulated",
                    "error",
                ),
                actual,
                note="actual: first start - submission as accounted; the error is the "
                "simulator's on this platform's own history (docs/simulation.md)",
                folded=False,
            ),
        )
    never = never_admitted_rows(report)
    if never:
        title = (
            f"Jobs never admitted ({len(sim.base.never_admitted)} base, "
            f"{len(sim.head.never_admitted)} head)"
        )
        sections.append(
            Section(
                "never-admitted", title, ("job", "project", "queue", "gpus", "base", "head"), never
            )
        )
    return sections
