"""The first lines of a review: the verdict and what changed for whom, in a few bullets."""

from __future__ import annotations

from collections import Counter

from policies.review.report import ReviewReport
from policies.review.sections import ARROW, change_cell, duration, duration_delta


def verdict(report: ReviewReport) -> str:
    if report.denied:
        return "DENIED by policy"
    if not report.changes:
        return "no queue-policy change"
    return "allowed by policy"


def summary_lines(report: ReviewReport) -> list[str]:
    """Bullet texts (no bullet marker); backticks mark names for Markdown."""
    lines = []
    kinds = Counter(f"{c.kind} {c.action.value}" for c in report.changes)
    if kinds:
        parts = ", ".join(f"{count} {what}" for what, count in sorted(kinds.items()))
        lines.append(f"{len(report.changes)} queue-policy changes: {parts}")
    else:
        lines.append("no change to pools, queues, quotas or projects")
    severities = Counter(str(f.severity) for f in report.active_findings)
    waived = len(report.findings) - len(report.active_findings)
    lines.append(
        f"policy findings: {severities['deny']} deny, {severities['warn']} warn"
        + (f", {waived} waived" if waived else "")
    )
    guaranteed = [
        f"`{name}` {change_cell(old.guaranteed if old else None, new.guaranteed if new else None)}"
        for name in sorted(report.before.projects.keys() | report.after.projects.keys())
        for old, new in [(report.before.projects.get(name), report.after.projects.get(name))]
        if (old.guaranteed if old else None) != (new.guaranteed if new else None)
    ]
    lines.append(
        "guaranteed GPUs: " + "; ".join(guaranteed) if guaranteed else "guaranteed GPUs unchanged"
    )
    sim = report.simulation
    if sim is not None:
        waits = []
        for row in sim.projects:
            a = row.before.p95 if row.before else None
            b = row.after.p95 if row.after else None
            if duration_delta(a, b) not in ("0", "-"):
                waits.append(
                    f"`{row.key}` {duration(a)} {ARROW} {duration(b)} ({duration_delta(a, b)})"
                )
        lines.append(
            "p95 wait: " + "; ".join(waits)
            if waits
            else f"p95 wait unchanged for every project ({sim.jobs} simulated jobs)"
        )
    return lines
