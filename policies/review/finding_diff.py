"""Policy findings as a diff between the base and the head of a review.

A finding is matched across the two sides by its fingerprint (policy, address, field and
key: stable across line moves, policies.findings), so a reviewer sees which findings the
pull request brings (`new`), which were there before it (`present`) and which it removes
(`fixed`). The verdict names the new ones; a deny that was already on the base still blocks
apply, as it does in `plan`, and is shown as such.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainform.policies.findings import PolicyFinding


class FindingStatus(enum.StrEnum):
    NEW = "new"
    PRESENT = "present"
    FIXED = "fixed"


@dataclass(frozen=True, slots=True)
class FindingChange:
    """One finding of either side and what the change did to it."""

    status: FindingStatus
    finding: PolicyFinding

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status.value, **self.finding.to_json()}


def diff_findings(
    base: Sequence[PolicyFinding], head: Sequence[PolicyFinding]
) -> list[FindingChange]:
    """Head findings (new or present) in head order, then base-only findings (fixed)."""
    before = {finding.fingerprint for finding in base}
    after = {finding.fingerprint for finding in head}
    changes = [
        FindingChange(
            FindingStatus.PRESENT if finding.fingerprint in before else FindingStatus.NEW,
            finding,
        )
        for finding in head
    ]
    changes += [
        FindingChange(FindingStatus.FIXED, finding)
        for finding in base
        if finding.fingerprint not in after
    ]
    return changes
