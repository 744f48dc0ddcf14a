"""Drift reports as text and JSON. A job's secret-looking values are shown masked
(`specs.secrets.mask_value`) and the whole output is redacted."""

from __future__ import annotations

import json
from typing import Any

from planner.drift import DriftFinding, DriftReport
from planner.normalize import humanize
from planner.render.style import paint
from planner.render.words import plural
from specs.secrets import JOB_KINDS, mask_value, redact


def _shown(finding: DriftFinding, path: str, value: Any) -> Any:
    if finding.kind not in JOB_KINDS:
        return value
    name = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return mask_value(name, value)


def render_drift_text(report: DriftReport, color: bool = False) -> str:
    if not report.drifted:
        agrees = "matches" if report.checked == 1 else "match"
        return f"No drift: {plural(report.checked, 'resource')} {agrees} what was applied.\n"
    lines = []
    for finding in report.findings:
        head = paint(f"{finding.drift}", "red" if finding.drift != "pending" else "yellow", color)
        lines.append(f"{head}: {finding.address} ({finding.provider}): {finding.message}")
        for change in finding.changes:
            before = _shown(finding, change.path, change.before)
            after = _shown(finding, change.path, change.after)
            lines.append(f"    ~ {change.path}: applied {humanize(before)}, live {humanize(after)}")
    counts: dict[str, int] = {}
    for finding in report.findings:
        counts[finding.drift] = counts.get(finding.drift, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    lines.append("")
    lines.append(
        paint(f"Drift: {summary} (of {plural(report.checked, 'resource')} checked).", "bold", color)
    )
    return redact("\n".join(lines) + "\n")


def render_drift_json(report: DriftReport) -> str:
    data = report.to_json()
    for finding, shown in zip(report.findings, data["findings"], strict=True):
        for change, entry in zip(finding.changes, shown["changes"], strict=True):
            entry["before"] = _shown(finding, change.path, entry["before"])
            entry["after"] = _shown(finding, change.path, entry["after"])
    return redact(json.dumps(data, indent=2, sort_keys=True) + "\n")
