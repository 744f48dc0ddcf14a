"""Drift reports as text and JSON. A job's secret-looking values are shown masked
(`specs.secrets.mask_value`, through cli.render.drift_view) and the whole output is
redacted. The last line is always the summary (`No drift: ...` or `Drift: ...`)."""

from __future__ import annotations

import json

from trainform.cli.render.drift_view import build_view, shown
from trainform.cli.render.style import paint
from trainform.planner.drift_model import DriftReport
from trainform.specs.secrets import redact


def render_drift_text(report: DriftReport, color: bool = False) -> str:
    view = build_view(report)
    lines = []
    for instance in view.instances:
        for resource in instance.resources:
            for finding in resource.findings:
                tone = "red" if finding.tone != "yellow" else "yellow"
                head = paint(finding.drift, tone, color)
                if finding.warning:
                    head = paint(f"warning ({finding.drift})", "yellow", color)
                lines.append(f"{head}: {resource.address} ({instance.name}): {finding.message}")
                for change in finding.changes:
                    desired = f", desired {change.desired}" if change.desired is not None else ""
                    where = f" ({change.place})" if change.place else ""
                    lines.append(
                        f"    ~ {change.path}: applied {change.applied}, live {change.live}"
                        + desired
                        + where
                    )
                for row in finding.objects:
                    versions = f", version {row.version}" if row.version else ""
                    when = f", modified {row.modified}" if row.modified else ""
                    lines.append(f"    {row.change} {row.key}: ETag {row.etag}{versions}{when}")
                if finding.evidence:
                    shown_evidence = ", ".join(f"{k} {v}" for k, v in finding.evidence)
                    lines.append(paint(f"    evidence: {shown_evidence}", "dim", color))
                if finding.first_seen:
                    since = f"    first seen {finding.first_seen}"
                    lines.append(since + (" (new)" if finding.new else ""))
                if finding.acknowledged:
                    ack = finding.acknowledged
                    lines.append(
                        paint(
                            f"    acknowledged until {ack['expires']}: {ack['reason']} "
                            f"({ack['location']})",
                            "cyan",
                            color,
                        )
                    )
                lines.append(f"    remedy: {finding.remedy}")
    for entry in view.resolved:
        lines.append(
            paint("resolved", "green", color)
            + f": {entry['address']} ({entry['provider']}): {entry['drift']} "
            f"(first seen {entry['first_seen']})"
        )
    for sentence in view.expired:
        lines.append(paint(f"expired acknowledgement: {sentence}", "yellow", color))
    if lines:
        lines.append("")
    lines.append(paint(view.headline, "bold", color) if report.findings else view.headline)
    return redact("\n".join(lines) + "\n")


def render_drift_json(report: DriftReport) -> str:
    data = report.to_json()
    for finding, entry in zip(report.findings, data["findings"], strict=True):
        for change, item in zip(finding.changes, entry["changes"], strict=True):
            item["before"] = shown(finding, change.path, item["before"])
            item["after"] = shown(finding, change.path, item["after"])
            if "desired" in item:
                item["desired"] = shown(finding, change.path, item["desired"])
    return redact(json.dumps(data, indent=2, sort_keys=True) + "\n")
