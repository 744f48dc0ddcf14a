"""The review as renderer-neutral sections: titles, tables of strings, bullet lists.

Text and Markdown render the same sections (render_text, render_markdown); the cells are
formatted once, in cells (GPUs as numbers, waits as durations, a changed value as
`before → after (delta)`); the simulation's sections are built in wait_sections.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from trainform.policies.review.capacity import Capacity
from trainform.policies.review.cells import ARROW, Section, change_cell, gpus, pairs, signed
from trainform.policies.review.finding_diff import FindingStatus
from trainform.policies.review.headline import change_lines
from trainform.policies.review.report import ReviewReport
from trainform.policies.review.semantic import SemanticChange
from trainform.policies.review.wait_sections import simulation_sections


def _figure_rows(
    before: dict[str, Any], after: dict[str, Any], names: Sequence[str], lead: Callable[..., tuple]
) -> list[tuple[str, ...]]:
    rows = []
    for key, old, new in pairs(before, after):
        cells = tuple(
            change_cell(getattr(old, name) if old else None, getattr(new, name) if new else None)
            for name in names
        )
        rows.append((*lead(key, old, new), *cells))
    return rows


def project_rows(before: Capacity, after: Capacity) -> list[tuple[str, ...]]:
    rows = []
    for name, old, new in pairs(before.projects, after.projects):
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


def review_sections(report: ReviewReport) -> list[Section]:
    """Every section of the review, in the order renderers show them: the change as
    numbers, who gains and loses, simulated waits, findings, approvals, then details."""
    from trainform.policies.review.summary import findings_line

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
        note=""
        if report.approvals
        else "no CODEOWNERS, adminPaths or specPaths cover the changed files",
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
