"""The policy engine: runs built-in policies and user rules, applies waivers, reports.

`evaluate_policies(specs, plan, trusted)` is the one entry point. It reads the resolved
specs (and the plan, when there is one, for policies that compare against current state),
runs every built-in that is not disabled with its trusted parameters, then every user rule,
then applies the waivers. It changes nothing and never runs code from the specs. The CLI
exits 3 when `report.denied`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from planner.plan_model import Plan
from policies.builtin import BUILTINS
from policies.context import PolicyContext, field_path
from policies.findings import PolicyFinding, Severity
from policies.rules import run_rule
from policies.trusted import TrustedPolicies
from policies.waivers import EXPIRED_ID, apply_waivers
from specs import SpecSet

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


def evaluate_policies(
    specs: SpecSet, plan: Plan | None, trusted: TrustedPolicies, today: date | None = None
) -> PolicyReport:
    """Findings of every enabled policy on `specs` (and `plan`), waivers applied."""
    context = PolicyContext.build(specs, plan)
    findings: list[PolicyFinding] = []
    ran: list[str] = []
    for policy in BUILTINS.values():
        if policy.id in trusted.disabled:
            continue
        ran.append(policy.id)
        severity = trusted.severity_of(policy.id, policy.severity)
        for violation in policy.check(context, trusted.parameters_of(policy.id)):
            findings.append(
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
            )
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
