"""Drift reports as text and JSON."""

from __future__ import annotations

import json

from planner.drift import DriftReport
from planner.normalize import humanize
from planner.render.style import paint


def render_drift_text(report: DriftReport, color: bool = False) -> str:
    if not report.drifted:
        return f"No drift: {report.checked} resources match what was applied.\n"
    lines = []
    for finding in report.findings:
        head = paint(f"{finding.drift}", "red" if finding.drift != "pending" else "yellow", color)
        lines.append(f"{head}: {finding.address} ({finding.provider}): {finding.message}")
        for change in finding.changes:
            lines.append(
                f"    ~ {change.path}: applied {humanize(change.before)}, "
                f"live {humanize(change.after)}"
            )
    counts: dict[str, int] = {}
    for finding in report.findings:
        counts[finding.drift] = counts.get(finding.drift, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    lines.append("")
    lines.append(paint(f"Drift: {summary} (of {report.checked} resources checked).", "bold", color))
    return "\n".join(lines) + "\n"


def render_drift_json(report: DriftReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n"
