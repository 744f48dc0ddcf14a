"""What a successful load returns: resources with their sources and resolved dependencies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specs.errors import Diagnostic, Location
from specs.models.base import DocumentBase, Reference
from specs.models.config import RootConfig


@dataclass(frozen=True, slots=True)
class Dependency:
    """A reference resolved to the address of the resource it names."""

    address: str
    reference: Reference


@dataclass(slots=True)
class Resource:
    """One validated document and where it came from."""

    address: str
    document: DocumentBase
    location: Location
    document_index: int
    dependencies: list[Dependency] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.document.kind  # type: ignore[attr-defined,no-any-return]

    @property
    def name(self) -> str:
        return self.document.metadata.name

    @property
    def project(self) -> str | None:
        return self.document.metadata.project


@dataclass(slots=True)
class SpecSet:
    """The loaded, resolved platform: configuration, resources in source order, warnings."""

    root: Path
    config: RootConfig
    environment: str | None
    resources: dict[str, Resource]
    files: list[str]
    warnings: list[Diagnostic] = field(default_factory=list)
