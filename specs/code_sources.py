"""Validate-time checks of where job and evaluation code comes from (`spec.code.repo`).

Filled in by the issue-13 work: URL forms, option-looking values, allowed code hosts
(`security.codeHosts`) and local code folders confined to the spec root.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from specs.errors import Diagnostic, Location
from specs.models.config import RootConfig
from specs.resource import Resource


def check_code_sources(
    resources: dict[str, Resource],
    config: RootConfig,
    root: Path,
    locate: Callable[[Resource, tuple[str | int, ...]], Location],
) -> list[Diagnostic]:
    """One diagnostic per code location that validate must refuse."""
    return []
