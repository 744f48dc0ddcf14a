"""`make_review`: the whole review of a change to queue policy, as one data model.

Pipeline: open both sides (gitrefs) -> load their specs (loading) -> semantic diff
(semantic) -> capacity figures before and after (capacity) -> policy findings on both sides,
with policies from the trusted path only (policies.trusted.load_trusted; the fallback is
the *base* side's trainform.yaml, never the head's): the head judged with the base as
"before" (the verdict, the same as plan's), the base alone, and the two diffed by
fingerprint (finding_diff) -> who must approve the changed files (approvers) -> the trace
simulated under both (simulation). Every renderer (render_text, render_markdown,
render_json) reads the `ReviewReport` this returns; none computes anything of its own.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainform.policies.review.approvers import Approval, approvals_needed
from trainform.policies.review.capacity import Capacity, capacity_json, compute_capacity
from trainform.policies.review.errors import ReviewError
from trainform.policies.review.finding_diff import FindingChange, FindingStatus, diff_findings
from trainform.policies.review.gitrefs import SpecSide, open_side
from trainform.policies.review.loading import load_side
from trainform.policies.review.semantic import SemanticChange, diff_queue_policy
from trainform.policies.review.simulation import (
    AccountingWindow,
    SimulationComparison,
    compare_simulations,
    comparison_json,
    read_jobs,
    slurm_instance,
)
from trainform.policies.review.slurm_settings import read_scheduler_settings, with_release_delay
from trainform.policies.review.trace_names import match_trace_names, parse_mapping

if TYPE_CHECKING:
    from trainform.policies.findings import PolicyFinding
    from trainform.policies.trusted import TrustedPolicies
    from trainform.specs import SpecSet

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ReviewRequest:
    """What `trainform review` was asked: the spec folder, the refs and the inputs."""

    spec_dir: str = "."
    base: str = "HEAD"
    head: str | None = None
    environment: str | None = None
    variables: Sequence[str] = ()
    var_files: Sequence[str] = ()
    policies: Path | None = None
    trace: Path | None = None
    trace_from: str | None = None
    """`slurm` or `slurm:INSTANCE`: read the trace from that provider's accounting."""
    since: str = "now-14days"
    until: str = "now"
    queue_map: Sequence[str] = ()
    """`TRACE=SPEC` renames of the trace's queues (`--map-queue`)."""
    project_map: Sequence[str] = ()
    """`TRACE=SPEC` renames of the trace's projects (`--map-project`)."""


@dataclass
class ReviewReport:
    base: str
    head: str
    spec_dir: str
    changes: list[SemanticChange]
    before: Capacity
    after: Capacity
    findings: list[PolicyFinding] = field(default_factory=list)
    policies_source: str = ""
    simulation: SimulationComparison | None = None
    base_findings: list[PolicyFinding] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)

    @property
    def active_findings(self) -> list[PolicyFinding]:
        return [f for f in self.findings if not f.waived]

    @property
    def finding_changes(self) -> list[FindingChange]:
        return diff_findings(self.base_findings, self.findings)

    def findings_with(self, status: FindingStatus) -> list[PolicyFinding]:
        return [c.finding for c in self.finding_changes if c.status is status]

    @property
    def new_blocking(self) -> list[PolicyFinding]:
        """Unwaived deny findings the change brings (the verdict names them)."""
        return [f for f in self.findings_with(FindingStatus.NEW) if f.blocking]

    @property
    def denied(self) -> bool:
        return any(str(f.severity) == "deny" for f in self.active_findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "base": self.base,
            "head": self.head,
            "specDir": self.spec_dir,
            "verdict": "deny" if self.denied else "pass",
            "changes": [change.to_json() for change in self.changes],
            "capacity": {"base": capacity_json(self.before), "head": capacity_json(self.after)},
            "policies": {
                "source": self.policies_source,
                "findings": [
                    change.to_json()
                    for change in self.finding_changes
                    if change.status is not FindingStatus.FIXED
                ],
                "fixed": [
                    change.finding.to_json()
                    for change in self.finding_changes
                    if change.status is FindingStatus.FIXED
                ],
            },
            "approvals": [approval.to_json() for approval in self.approvals],
            "simulation": comparison_json(self.simulation) if self.simulation else None,
        }


def _relabel_findings(side: SpecSide, findings: Sequence[PolicyFinding]) -> list[PolicyFinding]:
    """Finding locations named like the diagnostics: below the spec folder as given."""
    result = []
    for finding in findings:
        location = finding.location
        if location and os.path.isabs(location):
            location = side.relabel(location)
        elif location and side.display not in ("", "."):
            location = os.path.join(side.display, location)
        if location != finding.location:
            finding = dataclasses.replace(finding, location=location)
        result.append(finding)
    return result


def _changed_files(changes: Sequence[SemanticChange], base: SpecSet, head: SpecSet) -> list[str]:
    """The files (relative to the spec folder, `/`-separated) declaring each change."""
    files = []
    for change in changes:
        for specs in (head, base):
            resource = specs.resources.get(change.address)
            if resource is not None:
                relative = os.path.relpath(resource.location.file, str(specs.root))
                files.append(Path(relative).as_posix())
                break
    return files


def make_review(request: ReviewRequest) -> ReviewReport:
    """Review the change from `request.base` to `request.head` (None: the working tree)."""
    base_side = open_side("base", request.spec_dir, request.base)
    try:
        head_side = open_side("head", request.spec_dir, request.head)
        try:
            return _review_sides(request, base_side, head_side)
        finally:
            head_side.close()
    finally:
        base_side.close()


def _review_sides(request: ReviewRequest, base_side: SpecSide, head_side: SpecSide) -> ReviewReport:
    """The review of two opened sides: their specs, diff, findings, approvals, simulation."""
    from trainform.policies.engine import evaluate_policies

    inputs = {
        "environment": request.environment,
        "variables": request.variables,
        "var_files": request.var_files,
    }
    base_specs = load_side(base_side, **inputs)  # type: ignore[arg-type]
    head_specs = load_side(head_side, **inputs)  # type: ignore[arg-type]
    changes = diff_queue_policy(base_specs, head_specs, base_side.relabel, head_side.relabel)
    trusted = _trusted_policies(request, base_specs, base_side)
    policy_report = evaluate_policies(head_specs, None, trusted, before=base_specs)
    findings = _relabel_findings(head_side, policy_report.findings)
    base_report = evaluate_policies(base_specs, None, trusted)
    base_findings = _relabel_findings(base_side, base_report.findings)
    approvals = approvals_needed(
        _changed_files(changes, base_specs, head_specs),
        base_specs,
        trusted.parameters_of("project-isolation"),
        trusted.code_owners,
    )
    simulation = _simulate_trace(request, base_specs, head_specs)
    source = (
        str(request.policies)
        if request.policies
        else f"trainform.yaml of the base, {base_side.label}"
    )
    return ReviewReport(
        base=base_side.label,
        head=head_side.label,
        spec_dir=base_side.display,
        changes=changes,
        before=compute_capacity(base_specs),
        after=compute_capacity(head_specs),
        findings=findings,
        policies_source=source,
        simulation=simulation,
        base_findings=base_findings,
        approvals=approvals,
    )


def _trusted_policies(
    request: ReviewRequest, base_specs: SpecSet, base_side: SpecSide
) -> TrustedPolicies:
    """Policies and their settings: the trusted path, else the base's trainform.yaml."""
    from trainform.policies.trusted import PolicyConfigError, load_trusted

    try:
        return load_trusted(request.policies, base_specs.config, base_side.folder)
    except PolicyConfigError as exc:
        raise ReviewError(f"cannot read the trusted policies: {exc}") from None


def _simulate_trace(
    request: ReviewRequest, base_specs: SpecSet, head_specs: SpecSet
) -> SimulationComparison | None:
    """The trace (a file, or a Slurm instance's accounting) simulated under both sides;
    None without a trace."""
    if request.trace is None and request.trace_from is None:
        return None
    window = (
        AccountingWindow(request.trace_from, request.since, request.until)
        if request.trace_from
        else None
    )
    jobs = read_jobs(request.trace, window, base_specs.config)
    trace = (
        str(request.trace)
        if request.trace
        else f"{request.trace_from} accounting {request.since} to {request.until}"
    )
    jobs = match_trace_names(
        jobs,
        base_specs,
        head_specs,
        trace,
        parse_mapping(request.queue_map, "--map-queue"),
        parse_mapping(request.project_map, "--map-project"),
    )
    scheduler = None
    if window is not None:
        instance = slurm_instance(window.source, base_specs.config)
        scheduler = with_release_delay(read_scheduler_settings(instance), jobs)
    return compare_simulations(base_specs, head_specs, jobs, trace, scheduler)
