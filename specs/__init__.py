"""The trainform spec language: models, loading, templating and references.

Public API (pinned by tests/test_public_api.py): `load_specs`, `SpecSet`, `Resource`,
`Dependency`, `Diagnostic`, `Severity`, `Location`, `SpecError`, `SpecLoadError`,
`SpecUsageError`, `KINDS`, `RootConfig`, `Quantity`, `Duration`.
"""

from trainform.specs.errors import (
    Diagnostic,
    Location,
    Severity,
    SpecError,
    SpecLoadError,
    SpecUsageError,
)
from trainform.specs.loader import load_specs
from trainform.specs.models.config import RootConfig
from trainform.specs.models.kinds import KINDS
from trainform.specs.quantity import Duration, Quantity
from trainform.specs.resource import Dependency, Resource, SpecSet

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
