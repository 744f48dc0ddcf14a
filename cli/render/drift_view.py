"""The drift report arranged for reading: one view shared by the text, Markdown and HTML
renderers (the JSON renderer serialises the model itself).

Findings are grouped per provider instance, then per resource; values are shown as a
person writes them (`planner.normalize.humanize`) with a job's secret-looking values
masked (`specs.secrets.mask_value`). Symbols and tones follow the plan output: `~` yellow
for a field that changed, `-` red for something gone, `+` green for something extra, `!`
red for a broken run, check or data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainform.cli.render.words import plural
from trainform.planner.diff import is_missing
from trainform.planner.drift_model import SEVERITIES, DriftFinding, DriftReport
from trainform.planner.normalize import humanize
from trainform.specs.secrets import JOB_KINDS, mask_value

SYMBOL = {"modified": "~", "missing": "-", "data-missing": "-", "orphaned": "+", "pending": "~"}
TONE = {"~": "yellow", "-": "red", "+": "green", "!": "red"}


def symbol_of(drift: str) -> str:
    return SYMBOL.get(drift, "!")


def shown(finding: DriftFinding, path: str, value: Any) -> Any:
    """`value` at `path` with a job's secret-looking values masked."""
    if finding.kind not in JOB_KINDS:
        return value
    name = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return mask_value(name, value)


def as_text(value: Any) -> str:
    if is_missing(value):
        return "(unset)"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "; ".join(
            ", ".join(f"{k} {as_text(v)}" for k, v in item.items() if v is not None)
            for item in value
        )
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(v if isinstance(v, str) else humanize(v) for v in value) or "(none)"
    return humanize(value)


@dataclass
class ChangeView:
    path: str
    applied: str
    live: str
    desired: str | None
    place: str = ""
    """The platform object the field lives in (`QOS gold`), where the provider says."""


@dataclass
class ObjectView:
    change: str
    key: str
    etag: str
    version: str
    modified: str


def _objects(evidence: dict[str, Any]) -> list[ObjectView] | None:
    """The object-level changes of a data finding as rows, or None when not that shape."""
    items = evidence.get("changes")
    if not isinstance(items, list) or not items:
        return None
    if not all(isinstance(i, dict) and "change" in i and "key" in i for i in items):
        return None

    def pair(item: dict[str, Any], name: str) -> str:
        old, new = item.get(f"old{name}"), item.get(f"new{name}")
        if old is None and new is None:
            return ""
        return f"{old or '(none)'} -> {new or '(none)'}"

    return [
        ObjectView(
            str(item["change"]),
            str(item["key"]),
            pair(item, "Etag"),
            pair(item, "VersionId"),
            str(item.get("lastModified") or ""),
        )
        for item in items
    ]


@dataclass
class FindingView:
    warning: bool
    drift: str
    symbol: str
    tone: str
    severity: str
    message: str
    new: bool
    first_seen: str
    last_seen: str
    remedy: str
    acknowledged: dict[str, str] | None
    changes: list[ChangeView]
    evidence: list[tuple[str, str]]
    objects: list[ObjectView] = field(default_factory=list)
    """Objects added, removed or changed under a dataset version (evidence `changes`)."""


@dataclass
class ResourceView:
    address: str
    kind: str
    findings: list[FindingView] = field(default_factory=list)


@dataclass
class InstanceView:
    name: str
    resources: list[ResourceView] = field(default_factory=list)


@dataclass
class DriftView:
    checked_at: str
    previous_run: str | None
    lineage: str | None
    serial: int
    checked: int
    drifted: bool
    headline: str
    by_severity: list[tuple[str, int]]
    by_kind: list[tuple[str, int]]
    acknowledged: int
    new: int
    instances: list[InstanceView]
    resolved: list[dict[str, str]]
    expired: list[str]


def _finding_view(finding: DriftFinding) -> FindingView:
    places = finding.evidence.get("places") or {}
    changes = [
        ChangeView(
            change.path,
            as_text(shown(finding, change.path, change.before)),
            as_text(shown(finding, change.path, change.after)),
            as_text(shown(finding, change.path, finding.desired[change.path]))
            if change.path in finding.desired
            else None,
            places.get(change.path, ""),
        )
        for change in finding.changes
    ]
    symbol = symbol_of(finding.drift)
    objects = _objects(finding.evidence)
    split = any(k in finding.evidence for k in ("added", "removed", "changed"))
    evidence = {
        k: v
        for k, v in finding.evidence.items()
        if not ((objects or split) and k == "changes") and k != "places"
    }
    return FindingView(
        warning=finding.warning,
        drift=finding.drift,
        symbol=symbol,
        tone=TONE[symbol],
        severity=finding.severity,
        message=finding.message,
        new=finding.new,
        first_seen=finding.first_seen,
        last_seen=finding.last_seen,
        remedy=finding.remedy,
        acknowledged=None if finding.acknowledged is None else finding.acknowledged.to_json(),
        changes=changes,
        evidence=[(key, as_text(value)) for key, value in sorted(evidence.items())],
        objects=objects or [],
    )


def headline(report: DriftReport) -> str:
    checked = plural(report.checked, "resource")
    acknowledged = sum(f.acknowledged is not None for f in report.findings)
    if not report.open_findings and not acknowledged:
        agrees = "matches" if report.checked == 1 else "match"
        advice = f" ({plural(len(report.warnings), 'warning')})" if report.warnings else ""
        return f"No drift: {checked} {agrees} what was applied{advice}."
    parts = [f"{count} {kind}" for kind, count in report.counts()["kind"].items()]
    if acknowledged:
        parts.append(f"{acknowledged} acknowledged")
    if report.warnings:
        parts.append(plural(len(report.warnings), "warning"))
    lead = "Drift" if report.drifted else "No open drift"
    return f"{lead}: {', '.join(parts)} (of {checked} checked)."


def build_view(report: DriftReport) -> DriftView:
    instances: dict[str, InstanceView] = {}
    resources: dict[tuple[str, str], ResourceView] = {}
    for finding in report.findings:
        instance = instances.setdefault(finding.provider, InstanceView(finding.provider))
        key = (finding.provider, finding.address)
        if key not in resources:
            resources[key] = ResourceView(finding.address, finding.kind)
            instance.resources.append(resources[key])
        resources[key].findings.append(_finding_view(finding))
    counts = report.counts()
    return DriftView(
        checked_at=report.checked_at,
        previous_run=report.previous_run,
        lineage=report.lineage,
        serial=report.serial,
        checked=report.checked,
        drifted=report.drifted,
        headline=headline(report),
        by_severity=[(s, counts["severity"][s]) for s in SEVERITIES],
        by_kind=list(counts["kind"].items()),
        acknowledged=counts["acknowledged"]["total"],
        new=counts["new"]["total"],
        instances=[instances[name] for name in sorted(instances)],
        resolved=[
            {
                "address": r.address,
                "provider": r.provider,
                "drift": r.drift,
                "first_seen": r.first_seen,
            }
            for r in report.resolved
        ],
        expired=report.expired_acknowledgements,
    )
