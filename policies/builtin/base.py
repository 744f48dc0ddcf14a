"""The shape of a built-in policy: identity, default severity, parameters and a check.

A check is a pure function of the `PolicyContext` and the policy's parameters (defaults
overlaid with the trusted settings). It yields `Violation`s; the engine turns them into
findings with the policy's identity, the configured severity and a location.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainform.policies.context import Path_, PolicyContext
from trainform.policies.findings import Severity


@dataclass(frozen=True)
class Violation:
    address: str
    path: Path_
    message: str
    key: str = ""
    """Stable part of the message for the fingerprint (default: the message)."""


Check = Callable[[PolicyContext, Mapping[str, Any]], Iterable[Violation]]


@dataclass(frozen=True)
class BuiltinPolicy:
    id: str
    name: str
    severity: Severity
    kinds: tuple[str, ...]
    check: Check
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Default parameters; the trusted settings of the policy id override them."""
    description: str = ""
