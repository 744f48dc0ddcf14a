"""The trainform spec language: models, loading, templating and references.

Public API (pinned by tests/test_public_api.py): `load_specs`, `SpecSet`, `Resource`,
`Dependency`, `Diagnostic`, `Severity`, `Location`, `SpecError`, `SpecLoadError`,
`SpecUsageError`, `KINDS`, `RootConfig`, `Quantity`, `Duration`.
"""

from specs.errors import Diagnostic, Location, Severity, SpecError, SpecLoadError, SpecUsageError
from specs.loader import load_specs
from specs.models.config import RootConfig
from specs.models.kinds import KINDS
from specs.quantity import Duration, Quantity
from specs.resource import Dependency, Resource, SpecSet

__all__ = [
    "KINDS",
    "Dependency",
    "Diagnostic",
    "Duration",
    "Location",
    "Quantity",
    "Resource",
    "RootConfig",
    "Severity",
    "SpecError",
    "SpecLoadError",
    "SpecSet",
    "SpecUsageError",
    "load_specs",
]
