"""Waivers: a signed-off exception to a policy for some resources, until a date.

A waiver names a policy id, an address (a glob: `Queue/team-*`), a reason and an expiry
date. While it is valid (through its expiry date, inclusive) every finding of that policy
on a matching address keeps its place in the report but is downgraded: a deny becomes a
warn, and `waived` holds the reason. An expired waiver waives nothing and is itself a
finding (`waiver-expired`, a warn unless the settings say deny) naming the waiver's own
file:line, so stale exceptions get cleaned up.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from trainform.policies.findings import PolicyFinding, Severity

EXPIRED_ID = "waiver-expired"
EXPIRED_NAME = "Waiver expired"


@dataclass(frozen=True)
class Waiver:
    policy: str
    address: str
    reason: str
    expires: date
    location: str = ""
    index: int = 0

    def matches(self, finding: PolicyFinding) -> bool:
        return finding.policy == self.policy and fnmatch.fnmatchcase(finding.address, self.address)

    def valid_on(self, today: date) -> bool:
        return today <= self.expires


def apply_waivers(
    findings: Iterable[PolicyFinding],
    waivers: list[Waiver],
    today: date,
    expired_severity: Severity = Severity.WARN,
) -> list[PolicyFinding]:
    """Findings with valid waivers applied, plus one finding per expired waiver."""
    valid = [w for w in waivers if w.valid_on(today)]
    result = []
    for finding in findings:
        waiver = next((w for w in valid if w.matches(finding)), None)
        if waiver is not None:
            finding = dataclasses.replace(
                finding, severity=Severity.WARN, waived=waiver.reason or "waived"
            )
        result.append(finding)
    for waiver in waivers:
        if waiver.valid_on(today):
            continue
        result.append(
            PolicyFinding(
                policy=EXPIRED_ID,
                name=EXPIRED_NAME,
                severity=expired_severity,
                address=waiver.address,
                field=f"waivers[{waiver.index}]",
                location=waiver.location,
                message=f"the waiver of {waiver.policy} for {waiver.address} expired on "
                f"{waiver.expires.isoformat()} ({waiver.reason}); it waives nothing now: "
                "renew it with a new date or remove it",
                key=f"{waiver.policy}/{waiver.expires.isoformat()}",
            )
        )
    return result


ADOPTION_REASON = "adopted by trainform import: the live platform already breaks this policy"


def suggest_waivers(
    findings: Iterable[PolicyFinding], addresses: Iterable[str], expires: date
) -> str:
    """A `waivers:` block (policies.yaml) for the unwaived deny findings on `addresses`:
    what `import --from` prints when the platform it adopted already breaks a policy, so the
    adoption is a reviewed exception rather than a blocked plan. Empty when none."""
    wanted = set(addresses)
    pairs = sorted({(f.policy, f.address) for f in findings if f.blocking and f.address in wanted})
    if not pairs:
        return ""
    lines = ["waivers:"]
    for policy, address in pairs:
        lines += [
            f"  - policy: {policy}",
            f"    address: {address}",
            f'    reason: "{ADOPTION_REASON}"',
            f"    expires: {expires.isoformat()}",
        ]
    return "\n".join(lines) + "\n"
