"""Drift history: compare a report with the previous run, and record it as a compact run.

`compare_with_history` sets each finding's firstSeen (kept from the previous run when the
same finding, `DriftFinding.key`, was there; else this run's time), lastSeen and `new`,
and lists the previous run's findings that are gone as resolved. `compact_run` is what the
backend keeps of a run (planner.backends.drift_runs): counts and the identity of each
finding, no values, so the history never holds live data. Called by the drift CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainform.planner.drift_model import DriftReport, ResolvedFinding

RUN_FORMAT = 1
HISTORY_FORMAT_VERSION = 1
"""`drift --history --format json`: `{"formatVersion": 1, "runs": [RunSummary...]}`."""


def compare_with_history(report: DriftReport, runs: list[dict[str, Any]]) -> DriftReport:
    """Each finding's firstSeen, lastSeen and `new`, and the resolved ones, from the newest
    recorded run of the same state lineage, whoever ran it: a finding is the same one while
    its identity (`DriftFinding.key`) stays open from run to run, so a manual run in between
    changes neither its firstSeen nor what the next run reports as resolved."""
    previous = next((r for r in reversed(runs) if r.get("lineage") == report.lineage), None)
    seen = {entry["key"]: entry for entry in (previous or {}).get("findings", [])}
    for finding in report.findings:
        before = seen.get(finding.key)
        finding.first_seen = before["firstSeen"] if before else report.checked_at
        finding.last_seen = report.checked_at
        finding.new = before is None
    if previous is None:
        return report
    report.previous_run = previous.get("checkedAt")
    current = {finding.key for finding in report.findings}
    report.resolved = [
        ResolvedFinding(
            entry["address"],
            entry["provider"],
            entry["drift"],
            entry["firstSeen"],
            entry.get("lastSeen", ""),
        )
        for key, entry in sorted(seen.items())
        if key not in current
    ]
    return report


def compact_run(report: DriftReport) -> dict[str, Any]:
    return {
        "format": RUN_FORMAT,
        "checkedAt": report.checked_at,
        "lineage": report.lineage,
        "serial": report.serial,
        "checked": report.checked,
        "drifted": report.drifted,
        "summary": report.counts(),
        "resolved": len(report.resolved),
        "findings": [
            {
                "key": finding.key,
                "address": finding.address,
                "provider": finding.provider,
                "drift": finding.drift,
                "severity": finding.severity,
                "fields": finding.fields,
                "firstSeen": finding.first_seen,
                "lastSeen": finding.last_seen,
                "acknowledged": finding.acknowledged is not None,
            }
            for finding in report.findings
        ],
    }


@dataclass(frozen=True)
class RunSummary:
    """One line of `trainform drift --history`."""

    checked_at: str
    serial: int
    checked: int
    open: int
    acknowledged: int
    new: int
    resolved: int

    def to_json(self) -> dict[str, Any]:
        return {
            "checkedAt": self.checked_at,
            "serial": self.serial,
            "checked": self.checked,
            "open": self.open,
            "acknowledged": self.acknowledged,
            "new": self.new,
            "resolved": self.resolved,
        }


def summarize_runs(runs: list[dict[str, Any]]) -> list[RunSummary]:
    summaries = []
    for run in runs:
        summary = run.get("summary", {})
        summaries.append(
            RunSummary(
                checked_at=run.get("checkedAt", ""),
                serial=run.get("serial", 0),
                checked=run.get("checked", 0),
                open=sum(summary.get("severity", {}).values()),
                acknowledged=summary.get("acknowledged", {}).get("total", 0),
                new=summary.get("new", {}).get("total", 0),
                resolved=run.get("resolved", 0),
            )
        )
    return summaries
