"""The first line of a review: the verdict, naming the findings the change brings.

A deny that was already on the base still blocks (plan blocks on it too), but the verdict
says so, so a reviewer does not hold the pull request responsible for it.
"""

from __future__ import annotations

from trainform.policies.findings import PolicyFinding
from trainform.policies.review.finding_diff import FindingStatus
from trainform.policies.review.report import ReviewReport

NAMED = 3


def _named(findings: list[PolicyFinding]) -> str:
    shown = ", ".join(f"`{f.policy}` on `{f.address}`" for f in findings[:NAMED])
    more = len(findings) - NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def _plural(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def verdict(report: ReviewReport) -> str:
    new = report.new_blocking
    if new:
        return f"DENIED by policy: {_plural(len(new), 'new deny finding')}: {_named(new)}"
    if report.denied:
        present = [f for f in report.active_findings if f.blocking]
        return (
            f"DENIED by policy: {_plural(len(present), 'deny finding')} already on the base "
            f"({_named(present)}), none new"
        )
    if not report.changes:
        return "no queue-policy change"
    return "allowed by policy"


def findings_line(report: ReviewReport) -> str:
    """`1 new (1 deny, 0 warn, 0 waived), 2 still present, 1 fixed`."""
    new = report.findings_with(FindingStatus.NEW)
    present = report.findings_with(FindingStatus.PRESENT)
    fixed = report.findings_with(FindingStatus.FIXED)
    denies = sum(1 for f in new if f.blocking)
    waived = sum(1 for f in new if f.waived)
    return (
        f"{len(new)} new ({denies} deny, {len(new) - denies - waived} warn, {waived} waived), "
        f"{len(present)} still present, {len(fixed)} fixed"
    )


def one_line(report: ReviewReport) -> str | None:
    """The whole review of a pull request that changes no queue policy and brings no
    finding, as one line; None when the review needs more."""
    if report.changes or report.denied or report.findings_with(FindingStatus.NEW):
        return None
    return (
        f"trainform review: no queue-policy change (`{report.spec_dir}`: base `{report.base}` "
        f"→ head `{report.head}`); no new policy finding."
    )
