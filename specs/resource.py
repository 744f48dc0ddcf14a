"""What a successful load returns: resources with their sources and resolved dependencies."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from trainform.specs.errors import Diagnostic, Location
from trainform.specs.models.base import DocumentBase, Reference
from trainform.specs.models.config import RootConfig


class Dependency(NamedTuple):
    """A reference resolved to the address of the resource it names."""

    address: str
    reference: Reference


class TemplatedDocument(NamedTuple):
    """A templated document as written, kept so that another environment can render it."""

    file: str
    index: int
    line: int
    document: Any


@dataclass(slots=True)
class Resource:
    """One validated document and where it came from."""

    address: str
    document: DocumentBase
    location: Location
    document_index: int
    dependencies: list[Dependency] = field(default_factory=list)
    templated: bool = False
    """Rendered from a template: it may read otherwise in another environment."""
    kind: str = field(init=False)
    name: str = field(init=False)
    project: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.kind = self.document.kind  # type: ignore[attr-defined]
        self.name = self.document.metadata.name
        self.project = self.document.metadata.project


@dataclass(slots=True)
class SpecSet:
    """The loaded, resolved platform: configuration, resources in source order, warnings."""

    root: Path
    config: RootConfig
    environment: str | None
    resources: dict[str, Resource]
    files: list[str]
    warnings: list[Diagnostic] = field(default_factory=list)
    base_config: RootConfig | None = None
    """trainform.yaml as written, before the environment's overrides (None: `config`)."""
    templates: list[TemplatedDocument] = field(default_factory=list)
    """The templated documents as written (specs.environment_specs renders them again)."""
