"""The policy engine: runs built-in policies and user rules, applies waivers, reports.

`evaluate_policies(specs, plan, trusted)` is the entry point of `plan`, `apply` and
`review`. It reads the resolved specs (and the plan, or in review the base branch's specs,
for policies that compare against what is there now), runs every built-in that is not
disabled with its trusted parameters, then every user rule, then applies the waivers. It
changes nothing and never runs code from the specs. The CLI exits 3 when `report.denied`.

`tenancy_diagnostics(specs, trusted)` is what `validate` runs: project-isolation alone, on
the specs as loaded (no normalization, so it stays linear and cheap), its findings turned
into diagnostics (deny: error, warn or waived: warning), and, where a CODEOWNERS file is
trusted, warnings where it and the admin paths disagree (policies.owner_agreement).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from trainform.planner.plan_model import Plan
from trainform.policies.builtin import BUILTINS, BuiltinPolicy, Violation
from trainform.policies.builtin.isolation import PROJECT_ISOLATION, tenancy_violations
from trainform.policies.context import PolicyContext, Subject, field_path
from trainform.policies.findings import PolicyFinding, Severity
from trainform.policies.globs import GlobSet
from trainform.policies.owner_agreement import agreement_diagnostics
from trainform.policies.rules import run_rule
from trainform.policies.trusted import TrustedPolicies
from trainform.policies.waivers import EXPIRED_ID, apply_waivers
from trainform.specs import Diagnostic, Location, SpecSet
from trainform.specs import Severity as DiagnosticSeverity

REPORT_FORMAT_VERSION = 1


@dataclass
class PolicyReport:
    findings: list[PolicyFinding]
    policies: list[str] = field(default_factory=list)
    """Ids of the policies and rules that ran."""
    source: str = "defaults"
    """Where the trusted policies came from."""

    @property
    def denied(self) -> bool:
        """Whether any unwaived deny finding remains (apply is blocked, exit 3)."""
        return any(finding.blocking for finding in self.findings)

    def counts(self) -> dict[str, int]:
        return {
            "deny": sum(1 for f in self.findings if f.blocking),
            "warn": sum(1 for f in self.findings if not f.blocking and not f.waived),
            "waived": sum(1 for f in self.findings if f.waived),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": REPORT_FORMAT_VERSION,
            "source": self.source,
            "denied": self.denied,
            "summary": self.counts(),
            "policies": self.policies,
            "findings": [finding.to_json() for finding in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PolicyReport:
        return cls(
            [PolicyFinding.from_json(item) for item in data.get("findings", [])],
            list(data.get("policies", [])),
            str(data.get("source", "")),
        )


def _builtin_findings(
    policy: BuiltinPolicy,
    context: PolicyContext,
    trusted: TrustedPolicies,
    violations: Iterable[Violation] | None = None,
) -> list[PolicyFinding]:
    """`violations` (default: the policy's check on `context`) as findings."""
    severity = trusted.severity_of(policy.id, policy.severity)
    if violations is None:
        violations = policy.check(context, trusted.parameters_of(policy.id))
    return [
        PolicyFinding(
            policy=policy.id,
            name=policy.name,
            severity=severity,
            address=violation.address,
            field=field_path(violation.path),
            location=context.locate(violation.address, violation.path),
            message=violation.message,
            key=violation.key,
        )
        for violation in violations
    ]


def evaluate_policies(
    specs: SpecSet,
    plan: Plan | None,
    trusted: TrustedPolicies,
    today: date | None = None,
    before: SpecSet | None = None,
) -> PolicyReport:
    """Findings of every enabled policy on `specs`, waivers applied. Policies that compare
    read "before" from `plan` (plan, apply) or else from `before` (review: the base specs)."""
    context = PolicyContext.build(specs, plan, before)
    context.code_owners = trusted.code_owners
    findings: list[PolicyFinding] = []
    ran: list[str] = []
    for policy in BUILTINS.values():
        if policy.id in trusted.disabled:
            continue
        ran.append(policy.id)
        findings += _builtin_findings(policy, context, trusted)
    for rule in trusted.rules:
        if rule.id in trusted.disabled:
            continue
        ran.append(rule.id)
        path = tuple(rule.field.split(".")) if rule.field else ()
        for subject, message in run_rule(rule, context):
            findings.append(
                PolicyFinding(
                    policy=rule.id,
                    name=rule.name,
                    severity=rule.severity,
                    address=subject.address,
                    field=rule.field,
                    location=context.locate(subject.address, path),
                    message=message,
                    key="violation",
                )
            )
    expired = trusted.severity_of(EXPIRED_ID, Severity.WARN)
    waived = apply_waivers(findings, trusted.waivers, today or date.today(), expired)
    return PolicyReport(sorted(waived, key=PolicyFinding.sort_key), ran, trusted.source)


def _relative_files(specs: SpecSet) -> dict[str, str]:
    """Each resource's file as the loader names it -> relative to the spec folder."""
    root = os.path.normpath(str(specs.root))
    relative: dict[str, str] = {}
    for resource in specs.resources.values():
        name = resource.location.file
        if name not in relative:
            relative[name] = Path(os.path.relpath(name, root)).as_posix()
    return relative


def evaluate_tenancy(
    specs: SpecSet, trusted: TrustedPolicies, today: date | None = None
) -> PolicyReport:
    """project-isolation alone (unless disabled) on the specs as loaded, waivers of it
    applied. Subjects (for locations) are built only for the resources it reports."""
    if PROJECT_ISOLATION.id in trusted.disabled:
        return PolicyReport([], [], trusted.source)
    relative = _relative_files(specs)
    entries = (
        (address, resource, relative[resource.location.file])
        for address, resource in specs.resources.items()
    )
    params = trusted.parameters_of(PROJECT_ISOLATION.id)
    violations = list(tenancy_violations(entries, params, trusted.code_owners))
    subjects = {}
    for violation in violations:
        resource = specs.resources[violation.address]
        file = relative[resource.location.file]
        subjects[violation.address] = Subject(
            violation.address, resource.kind, resource.name, resource.project, {}, file, resource
        )
    context = PolicyContext(specs, None, subjects, code_owners=trusted.code_owners)
    findings = _builtin_findings(PROJECT_ISOLATION, context, trusted, violations)
    waivers = [w for w in trusted.waivers if w.policy == PROJECT_ISOLATION.id]
    waived = apply_waivers(findings, waivers, today or date.today())
    waived = [f for f in waived if f.policy == PROJECT_ISOLATION.id]
    return PolicyReport(
        sorted(waived, key=PolicyFinding.sort_key), [PROJECT_ISOLATION.id], trusted.source
    )


def _codeowners_agreement(specs: SpecSet, trusted: TrustedPolicies) -> list[Diagnostic]:
    """Warnings where the trusted CODEOWNERS and the admin paths disagree (none without a
    CODEOWNERS file); the tenants are the Projects with specPaths under the admin paths."""
    if not trusted.code_owners.source or PROJECT_ISOLATION.id in trusted.disabled:
        return []
    relative = _relative_files(specs)
    admin = GlobSet(trusted.parameters_of(PROJECT_ISOLATION.id).get("adminPaths") or [])
    projects = {
        resource.name: tuple(resource.document.spec.spec_paths)  # type: ignore[attr-defined]
        for resource in specs.resources.values()
        if resource.kind == "Project"
        and resource.document.spec.spec_paths  # type: ignore[attr-defined]
        and admin.matches(relative[resource.location.file])
    }
    return agreement_diagnostics(specs, trusted, relative.values(), projects)


def _location(specs: SpecSet, finding: PolicyFinding) -> Location | None:
    """The finding's `file:line:column`, its file named as the loader names it."""
    resource = specs.resources.get(finding.address)
    if resource is None:
        return None
    parts = finding.location.rsplit(":", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return resource.location
    return Location(resource.location.file, int(parts[1]), int(parts[2]))


def tenancy_diagnostics(
    specs: SpecSet, trusted: TrustedPolicies, today: date | None = None
) -> list[Diagnostic]:
    """What `validate` reports of tenancy: a diagnostic per project-isolation finding."""
    diagnostics = _codeowners_agreement(specs, trusted)
    for finding in evaluate_tenancy(specs, trusted, today).findings:
        diagnostics.append(
            Diagnostic(
                severity=DiagnosticSeverity.ERROR
                if finding.blocking
                else DiagnosticSeverity.WARNING,
                code=finding.policy,
                summary=finding.message
                + (f" (waived: {finding.waived})" if finding.waived else ""),
                location=_location(specs, finding),
                field=finding.field,
                address=finding.address,
            )
        )
    return sorted(diagnostics, key=Diagnostic.sort_key)
