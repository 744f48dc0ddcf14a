"""Policy findings: what a policy reports about one field of one resource.

Built-in policies, user rules and waivers all produce `PolicyFinding` values; the engine
collects them into a report, renderers print them, and the CLI exits 3 when an unwaived
deny remains. A finding's `fingerprint` is stable across runs and line moves (it hashes the
policy, address, field and a message key, never the location), so CI can track a finding
from one pull request to the next.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.StrEnum):
    """How a finding weighs: a deny blocks apply (exit 3), a warn is shown only."""

    DENY = "deny"
    WARN = "warn"


@dataclass(frozen=True)
class PolicyFinding:
    """One violation of one policy, pointing at a field of a resource."""

    policy: str
    name: str
    severity: Severity
    address: str
    field: str
    location: str
    message: str
    waived: str = ""
    key: str = field(default="", compare=False, repr=False)
    """What identifies the violation besides policy, address and field (default: message)."""
    _fingerprint: str = field(default="", compare=False, repr=False)

    @property
    def fingerprint(self) -> str:
        if self._fingerprint:
            return self._fingerprint
        text = "\x1f".join((self.policy, self.address, self.field, self.key or self.message))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def blocking(self) -> bool:
        return self.severity is Severity.DENY and not self.waived

    def sort_key(self) -> tuple[int, str, str, str, str]:
        return (0 if self.blocking else 1, self.address, self.field, self.policy, self.message)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "name": self.name,
            "severity": self.severity.value,
            "address": self.address,
            "field": self.field,
            "location": self.location,
            "message": self.message,
            "waived": self.waived,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PolicyFinding:
        """A finding read back from `to_json()` (a saved plan); the fingerprint is kept."""
        return cls(
            policy=data["policy"],
            name=data["name"],
            severity=Severity(data["severity"]),
            address=data["address"],
            field=data["field"],
            location=data["location"],
            message=data["message"],
            waived=data.get("waived", ""),
            key=data.get("fingerprint", ""),
            _fingerprint=data.get("fingerprint", ""),
        )
