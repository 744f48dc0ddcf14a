"""The drift report model: findings, their severity and remedy, and the report around them.

detect_drift (planner.drift) builds it, history (planner.drift_history) and
acknowledgements (planner.drift_acknowledgements) annotate it, and every renderer (text,
JSON, Markdown, HTML under cli.render) reads it; none of them derives anything the
model does not hold. JSON field names are camelCase and stable (`formatVersion` 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainform.planner.diff import FieldChange
from trainform.planner.normalize import humanize

SEVERITIES = ("high", "medium", "low")
_SEVERITY = {
    "missing": "high",
    "managed-by-other": "high",
    "data-mutated": "high",
    "data-missing": "high",
    "checkpoint-invalid": "high",
    "job-failed": "high",
    "source-refused": "high",
    "tag-missing": "high",
    "object-missing": "high",
    "object-terminating": "high",
    "object-left-over": "medium",
    "nodes-missing": "high",
    "modified": "medium",
    "orphaned": "medium",
    "tag-moved": "medium",
    "evaluation-failing": "medium",
    "limit-shadowed": "medium",
    "nodes-mixed": "medium",
    "pending": "low",
    "evaluation-missing": "low",
}


def severity_of(drift: str) -> str:
    """high: data or work is lost or wrong; medium: the platform differs; low: to follow up."""
    return _SEVERITY.get(drift, "medium")


@dataclass(frozen=True)
class Acknowledged:
    """A valid acknowledgement that covers a finding (from the trusted policies folder)."""

    reason: str
    expires: str
    location: str

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "expires": self.expires, "location": self.location}


@dataclass
class DriftFinding:
    address: str
    kind: str
    drift: str
    message: str
    provider: str = ""
    changes: list[FieldChange] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    desired: dict[str, Any] = field(default_factory=dict)
    """Per changed field path, the value the specs declare now, where it differs from the
    applied one (absent: the specs were not loaded or agree with what was applied)."""
    location: str = ""
    """file:line of the resource's spec, when the specs declare it."""
    instance_type: str = ""
    first_seen: str = ""
    last_seen: str = ""
    new: bool = True
    acknowledged: Acknowledged | None = None
    warning: bool = False
    """Advice about the live setup (`limit-shadowed`), not a difference: never drift."""

    @property
    def severity(self) -> str:
        return severity_of(self.drift)

    @property
    def key(self) -> str:
        """What identifies the same finding across runs."""
        return f"{self.provider}|{self.address}|{self.drift}"

    @property
    def fields(self) -> list[str]:
        return [change.path for change in self.changes]

    @property
    def remedy(self) -> str:
        return remedy_of(self)

    def to_json(self) -> dict[str, Any]:
        changes = []
        for change in self.changes:
            entry = change.to_json()
            if change.path in self.desired:
                entry["desired"] = self.desired[change.path]
            changes.append(entry)
        return {
            "address": self.address,
            "kind": self.kind,
            "drift": self.drift,
            "severity": self.severity,
            "warning": self.warning,
            "provider": self.provider,
            "message": self.message,
            "changes": changes,
            "evidence": self.evidence,
            "remedy": self.remedy,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "new": self.new,
            "acknowledged": None if self.acknowledged is None else self.acknowledged.to_json(),
        }


@dataclass(frozen=True)
class ResolvedFinding:
    """A finding of the previous run that this run no longer sees."""

    address: str
    provider: str
    drift: str
    first_seen: str
    last_seen: str

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "provider": self.provider,
            "drift": self.drift,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
        }


@dataclass
class DriftReport:
    lineage: str | None
    serial: int
    checked: int
    findings: list[DriftFinding]
    checked_at: str = ""
    previous_run: str | None = None
    """checkedAt of the run this one is compared with (None: no history yet)."""
    resolved: list[ResolvedFinding] = field(default_factory=list)
    expired_acknowledgements: list[str] = field(default_factory=list)
    not_recorded: str | None = None
    """Why this run was not appended to the history (read-only history); None if it was,
    or if recording was not asked for (`drift --no-record`)."""
    """One sentence per acknowledgement past its expiry (it covers nothing now)."""

    @property
    def open_findings(self) -> list[DriftFinding]:
        """Findings that count: not acknowledged, not a warning."""
        return [f for f in self.findings if f.acknowledged is None and not f.warning]

    @property
    def warnings(self) -> list[DriftFinding]:
        return [f for f in self.findings if f.warning]

    @property
    def drifted(self) -> bool:
        """Whether anything not acknowledged drifted: this decides the exit code."""
        return bool(self.open_findings)

    def counts(self) -> dict[str, dict[str, int]]:
        """Open findings by severity and by kind; acknowledged ones counted apart."""
        by_severity = {severity: 0 for severity in SEVERITIES}
        by_kind: dict[str, int] = {}
        for finding in self.open_findings:
            by_severity[finding.severity] += 1
            by_kind[finding.drift] = by_kind.get(finding.drift, 0) + 1
        return {
            "severity": by_severity,
            "kind": dict(sorted(by_kind.items())),
            "acknowledged": {"total": len(self.findings) - len(self.open_findings)},
            "new": {"total": sum(1 for f in self.open_findings if f.new)},
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": 2,
            "checkedAt": self.checked_at,
            "previousRun": self.previous_run,
            "lineage": self.lineage,
            "serial": self.serial,
            "checked": self.checked,
            "drifted": self.drifted,
            "summary": self.counts(),
            "findings": [finding.to_json() for finding in self.findings],
            "resolved": [finding.to_json() for finding in self.resolved],
            "expiredAcknowledgements": self.expired_acknowledgements,
        }


def utc_timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _inline(value: Any) -> str:
    """A value inside a remedy, whose `backticks` mark commands: a value's own become '."""
    return humanize(value).replace("`", "'")


def _checkpoint_remedy(finding: DriftFinding) -> str:
    """What happens to a broken checkpoint depends on its run: a finished run never resumes
    (plan schedules nothing for it), a running one resumes only if an attempt fails."""
    checkpoint = finding.evidence.get("checkpoint", "")
    remove = f"delete the broken checkpoint {checkpoint}".rstrip()
    phase = finding.evidence.get("runPhase")
    if phase == "succeeded":
        return (
            "the run succeeded, so nothing resumes from it and plan schedules no run: "
            f"{remove}, or restore its files if a release or evaluation needs it; to train "
            f"again, `trainform apply --replace {finding.address}` starts a new run"
        )
    if phase in ("running", "queued"):
        return (
            f"the run goes on; should an attempt fail, the next one resumes from the latest "
            f"valid checkpoint, never this one: {remove}"
        )
    return f"`trainform apply` resumes from the latest valid checkpoint; {remove}"


def remedy_of(finding: DriftFinding) -> str:
    """What to run or edit to resolve one finding, with its arguments."""
    address = finding.address
    if finding.drift == "modified":
        shown = finding.changes[:3]
        more = len(finding.changes) > 3
        restore = ", ".join(
            f"{c.path} to {_inline(finding.desired.get(c.path, c.before))}" for c in shown
        ) + (", ..." if more else "")
        verb = "set" if any(c.path in finding.desired for c in shown) else "restore"
        accept = "; ".join(f"{c.path}: {_inline(c.after)}" for c in shown) + (
            "; ..." if more else ""
        )
        where = f" ({finding.location})" if finding.location else ""
        return (
            f"`trainform apply` to {verb} {restore}; or, to accept the live value, set "
            f"{accept} in the spec of {address}{where} and apply"
        )
    if finding.drift == "missing":
        return (
            f"`trainform apply` to create {address} again; or remove it from the specs to "
            "stop managing it"
        )
    if finding.drift == "managed-by-other":
        manager = finding.evidence.get("manager", "another manager")
        identifier = finding.evidence.get("identifier", address)
        return (
            f"{address} was taken over by {manager!r}: agree with them who manages it; to "
            f"manage it again run `trainform state rm {address} && trainform import {address} "
            f"{identifier}` (then plan shows what would change), or remove it from the specs "
            f"and `trainform state rm {address}` to leave it to {manager!r}"
        )
    if finding.drift == "orphaned":
        identifier = address if finding.instance_type == "local" else "ID"
        return (
            f"declare {address} in the specs and run `trainform import {address} "
            f"{identifier}`, or run `trainform import --from {finding.provider}` to write its "
            "spec and adopt it; or delete it on the provider"
        )
    if finding.drift in ("data-mutated", "data-missing"):
        version = finding.evidence.get("version", "the version")
        objects = finding.evidence.get("changes") or []
        previous = [
            o for o in objects if isinstance(o, dict) and o.get("oldVersionId") and o.get("newEtag")
        ]
        restore = (
            "copy back the previous version of each changed object (its oldVersionId) and "
            "delete the added ones"
            if previous
            else f"restore the files of {address} {version} as recorded"
        )
        return (
            f"{restore}; a changed dataset is a new version: declare it under a new version "
            "name and pin it"
        )
    if finding.drift == "pending":
        return "`trainform plan` then `trainform apply` to finish the interrupted action"
    if finding.drift == "job-failed":
        return (
            f"read `trainform logs {address}`, fix the cause, then `trainform apply` to "
            "resume from the latest valid checkpoint"
        )
    if finding.drift == "checkpoint-invalid":
        return _checkpoint_remedy(finding)
    if finding.drift == "evaluation-missing":
        return f"`trainform apply` to run the evaluations of {address}"
    if finding.drift == "evaluation-failing":
        return f"inspect the metrics of {address}; retrain or change the gate in its EvalSuite"
    return "`trainform plan` to see what apply would change"
