"""The review as renderer-neutral sections: titles, tables of strings, bullet lists.

Text and Markdown render the same sections (render_text, render_markdown); the figures
are formatted here once: GPUs as numbers, waits as durations (`45s`, `12m`, `1h05m`,
`2d3h`), a changed value as `before → after (delta)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from policies.review.capacity import Capacity, number
from policies.review.finding_diff import FindingStatus
from policies.review.headline import change_lines
from policies.review.report import ReviewReport
from policies.review.semantic import SemanticChange
from policies.review.simulation import WaitRow

ARROW = "→"


@dataclass(frozen=True)
class Section:
    """A titled table (`headers` and `rows`) or bullet list (`items`), maybe folded."""

    key: str
    title: str
    headers: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    items: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    note: str = ""
    folded: bool = True


def gpus(value: Decimal | None) -> str:
    return "-" if value is None else str(number(value))


def signed(value: Decimal | float) -> str:
    if value == 0:
        return "0"
    shown = str(number(value)) if isinstance(value, Decimal) else f"{value:g}"
    return shown if shown.startswith("-") else f"+{shown}"


def change_cell(before: Decimal | None, after: Decimal | None) -> str:
    """`24`, or `32 → 24 (-8)`, or `- → 24` for a side where the row does not exist."""
    if before == after:
        return gpus(after)
    if before is None or after is None:
        return f"{gpus(before)} {ARROW} {gpus(after)}"
    return f"{gpus(before)} {ARROW} {gpus(after)} ({signed(after - before)})"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    negative, total = seconds < 0, round(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        text = f"{days}d{hours}h" if hours else f"{days}d"
    elif hours:
        text = f"{hours}h{minutes:02d}m"
    elif minutes:
        text = f"{minutes}m" if not secs else f"{minutes}m{secs:02d}s"
    else:
        text = f"{secs}s"
    return f"-{text}" if negative else text


def duration_delta(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "-"
    delta = after - before
    if round(delta) == 0:
        return "0"
    return duration(delta) if delta < 0 else f"+{duration(delta)}"


def _pairs(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    return [(key, before.get(key), after.get(key)) for key in sorted(before.keys() | after.keys())]


def _figure_rows(
    before: dict[str, Any], after: dict[str, Any], names: Sequence[str], lead: Callable[..., tuple]
) -> list[tuple[str, ...]]:
    rows = []
    for key, old, new in _pairs(before, after):
        cells = tuple(
            change_cell(getattr(old, name) if old else None, getattr(new, name) if new else None)
            for name in names
        )
        rows.append((*lead(key, old, new), *cells))
    return rows


def project_rows(before: Capacity, after: Capacity) -> list[tuple[str, ...]]:
    rows = []
    for name, old, new in _pairs(before.projects, after.projects):
        cells: list[str] = [name]
        for figure in ("guaranteed", "reachable"):
            a = getattr(old, figure) if old else None
            b = getattr(new, figure) if new else None
            delta = signed((b or Decimal(0)) - (a or Decimal(0)))
            cells += [gpus(a), gpus(b), delta]
        rows.append(tuple(cells))
    return rows


def capacity_sections(report: ReviewReport) -> list[Section]:
    before, after = report.before, report.after
    pool_names = ("capacity", "nominal", "unallocated", "lendable", "borrowable")
    return [
        Section(
            "projects",
            "Who gains, who loses: GPUs per project",
            ("project", "guaranteed base", "head", "Δ", "reachable base", "head", "Δ"),
            project_rows(before, after),
            note="guaranteed: nominal quota of the project's queues, capped by its Quota; "
            "reachable: with borrowing in the cohort (docs/review.md).",
            folded=False,
        ),
        Section(
            "pools",
            "Capacity per pool (GPUs)",
            ("pool", *pool_names),
            _figure_rows(before.pools, after.pools, pool_names, lambda k, o, n: (k,)),
        ),
        Section(
            "cohorts",
            "Capacity per cohort and pool (GPUs)",
            ("cohort", "pool", "queues", "nominal", "lendable", "borrowable"),
            _figure_rows(
                before.cohorts,
                after.cohorts,
                ("nominal", "lendable", "borrowable"),
                lambda k, o, n: (
                    (o or n).cohort,
                    (o or n).pool,
                    change_cell(Decimal(o.queues) if o else None, Decimal(n.queues) if n else None),
                ),
            ),
        ),
        Section(
            "queues",
            "GPUs per queue (nominal, reach with borrowing, weighted fair share)",
            ("queue", "nominal", "reach", "fair share"),
            _figure_rows(
                before.queues,
                after.queues,
                ("nominal", "reach", "fair_share"),
                lambda k, o, n: (k,),
            ),
        ),
    ]


def change_items(changes: Sequence[SemanticChange]) -> list[tuple[str, tuple[str, ...]]]:
    items = []
    for change in changes:
        head = f"{change.action.value} `{change.address}` ({change.location})"
        lines = []
        for item in change.fields:
            if change.action.value == "changed":
                lines.append(f"`{item.field}`: {item.old} {ARROW} {item.new}")
            else:
                lines.append(f"`{item.field}`: {item.new if item.new is not None else item.old}")
        items.append((head, tuple(lines)))
    return items


STATUS_ORDER = {FindingStatus.NEW: 0, FindingStatus.PRESENT: 1, FindingStatus.FIXED: 2}
STATUS_SHOWN = {
    FindingStatus.NEW: "new",
    FindingStatus.PRESENT: "still present",
    FindingStatus.FIXED: "fixed",
}


def finding_rows(report: ReviewReport) -> list[tuple[str, ...]]:
    """New findings first, then those the base had too, then those the change fixes."""
    rows = []
    for change in sorted(
        report.finding_changes,
        key=lambda c: (
            STATUS_ORDER[c.status],
            c.finding.waived,
            str(c.finding.severity) != "deny",
            c.finding.location,
        ),
    ):
        finding = change.finding
        severity = "waived" if finding.waived else str(finding.severity)
        message = finding.message + (f" (waived: {finding.waived})" if finding.waived else "")
        rows.append(
            (
                STATUS_SHOWN[change.status],
                severity,
                finding.policy,
                finding.address,
                finding.location or "-",
                message,
            )
        )
    return rows


def approval_items(report: ReviewReport) -> list[tuple[str, tuple[str, ...]]]:
    """Per changed file, whose approval it needs."""
    items: dict[str, list[str]] = {}
    for approval in report.approvals:
        owners = ", ".join(approval.owners) if approval.owners else "(none listed)"
        items.setdefault(approval.file, []).append(f"{approval.who}: {owners}")
    return [(f"`{file}`: " + "; ".join(needs), ()) for file, needs in items.items()]


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

    from policies.queueing.holds import SHOWN

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
    for pool, a, b in _pairs(*pools):
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
                ("queue or project", "jobs", "p50 actual", "simulated", "error",
                 "p95 actual", "simulated", "error"),
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


def review_sections(report: ReviewReport) -> list[Section]:
    """Every section of the review, in the order renderers show them: the change as
    numbers, who gains and loses, simulated waits, findings, approvals, then details."""
    from policies.review.summary import findings_line

    capacity = capacity_sections(report)
    headline = Section(
        "headline",
        f"Queue-policy changes ({len(report.changes)})",
        items=[(line, ()) for line in change_lines(report.changes)],
        note="" if report.changes else "no change to pools, queues, quotas or projects",
        folded=False,
    )
    rows = finding_rows(report)
    findings = Section(
        "findings",
        f"Policy findings: {findings_line(report)}",
        ("status", "severity", "policy", "address", "location", "message"),
        rows,
        note=f"policies from {report.policies_source}",
        folded=not (report.denied or report.findings_with(FindingStatus.NEW)),
    )
    approvals = Section(
        "approvals",
        "Approvals needed",
        items=approval_items(report),
        note="" if report.approvals else "no CODEOWNERS, adminPaths or specPaths cover the "
        "changed files",
        folded=False,
    )
    changes = Section(
        "changes",
        f"Queue-policy changes by field ({len(report.changes)})",
        items=change_items(report.changes),
        note="" if report.changes else "no change to pools, queues, quotas or projects",
    )
    simulation = simulation_sections(report)
    shown = 3 if any(section.key == "actual" for section in simulation) else 2
    return [
        headline,
        capacity[0],
        *simulation[:shown],
        findings,
        approvals,
        changes,
        *capacity[1:],
        *simulation[shown:],
    ]
