"""Drift reports as text and JSON. A job's secret-looking values are shown masked
(`specs.secrets.mask_value`) and the whole output is redacted."""

from __future__ import annotations

import json
from typing import Any

from planner.drift import DriftFinding, DriftReport
from planner.normalize import humanize
from planner.render.style import paint
from specs.secrets import JOB_KINDS, mask_value, redact


def _shown(finding: DriftFinding, path: str, value: Any) -> Any:
    if finding.kind not in JOB_KINDS:
        return value
    name = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return mask_value(name, value)


def render_drift_text(report: DriftReport, color: bool = False) -> str:
    warnings = [f for f in report.findings if f.warning]
    if not report.drifted:
        lines = [_warning(f, color) for f in warnings]
        return "".join(line + "\n" for line in lines) + (
            f"No drift: {report.checked} resources match what was applied.\n"
        )
    lines = []
    for finding in report.findings:
        if finding.warning:
            lines.append(_warning(finding, color))
            continue
        head = paint(f"{finding.drift}", "red" if finding.drift != "pending" else "yellow", color)
        lines.append(f"{head}: {finding.address} ({finding.provider}): {finding.message}")
        for change in finding.changes:
            before = _shown(finding, change.path, change.before)
            after = _shown(finding, change.path, change.after)
            place = finding.evidence.get("places", {}).get(change.path)
            where = f" ({place})" if place else ""
            lines.append(
                f"    ~ {change.path}: applied {_text(before)}, live {_text(after)}{where}"
            )
    counts: dict[str, int] = {}
    for finding in report.findings:
        if not finding.warning:
            counts[finding.drift] = counts.get(finding.drift, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    lines.append("")
    lines.append(paint(f"Drift: {summary} (of {report.checked} resources checked).", "bold", color))
    return redact("\n".join(lines) + "\n")


def _warning(finding: DriftFinding, color: bool) -> str:
    head = paint(f"warning ({finding.drift})", "yellow", color)
    return f"{head}: {finding.address} ({finding.provider}): {finding.message}"


def _text(value: object) -> str:
    from planner.diff import is_missing

    return "(unset)" if is_missing(value) else humanize(value)


def render_drift_json(report: DriftReport) -> str:
    data = report.to_json()
    for finding, shown in zip(report.findings, data["findings"], strict=True):
        for change, entry in zip(finding.changes, shown["changes"], strict=True):
            entry["before"] = _shown(finding, change.path, entry["before"])
            entry["after"] = _shown(finding, change.path, entry["after"])
    return redact(json.dumps(data, indent=2, sort_keys=True) + "\n")
