"""Validate-time checks of where dataset data comes from (`Dataset.spec.source`).

Filled in by the issue-13 work: sources confined to the spec root or a trusted data root.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specs.errors import Diagnostic, Location
from specs.models.config import RootConfig
from specs.resource import Resource


def check_data_sources(
    resources: dict[str, Resource],
    config: RootConfig,
    root: Path,
    locate: Callable[[Resource, tuple[str | int, ...]], Location],
) -> list[Diagnostic]:
    """One diagnostic per dataset source that validate must refuse."""
    return []
