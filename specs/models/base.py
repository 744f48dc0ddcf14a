"""Shared pieces of every spec document: the model base class, metadata, references.

Every kind is a document `{apiVersion, kind, metadata, spec, lifecycle}`. Models are frozen,
forbid unknown fields and use camelCase aliases in YAML (snake_case in Python). A spec's
references to other resources are declared by `references()` as typed `Reference` values
with the field path they come from, so the loader can resolve them and point at the line.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from trainform.specs.names import LabelKey, LabelValue, ResourceName

API_VERSION = "trainform/v1"


class SpecModel(BaseModel):
    """Base of every spec model: frozen, no unknown fields, camelCase in YAML."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=False,
    )


class Scope(enum.StrEnum):
    """Whether a kind lives in a project (`metadata.project`) or globally."""

    GLOBAL = "global"
    PROJECT = "project"
    EITHER = "either"


class Reference(NamedTuple):
    """A by-name link from one resource to another, typed by the kind it must point to."""

    kind: str
    name: str
    path: tuple[str | int, ...]
    version: str | None = None


class Metadata(SpecModel):
    name: ResourceName = Field(
        description="Name of the resource, unique per kind (and per project for project-scoped "
        "kinds). A DNS-1123 label, so it is valid as a Kubernetes name and a Slurm name."
    )
    project: ResourceName | None = Field(
        default=None,
        description="Project the resource belongs to. Required for Quota and TrainingJob, "
        "optional for Dataset, Image and EvalSuite, forbidden for global kinds.",
    )
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description="Labels copied onto provider objects (Kubernetes label rules).",
    )
    annotations: dict[LabelKey, str] = Field(
        default_factory=dict, description="Free-form notes, never interpreted."
    )


class Lifecycle(SpecModel):
    prevent_destroy: bool = Field(
        default=False,
        description="Refuse any plan that would delete or replace this resource.",
    )


class DocumentBase(SpecModel):
    api_version: Literal["trainform/v1"] = Field(
        description="Version of the spec language; always trainform/v1."
    )
    metadata: Metadata = Field(description="Name, project and labels of the resource.")
    lifecycle: Lifecycle = Field(
        default_factory=Lifecycle, description="Safety settings for destructive changes."
    )

    scope: ClassVar[Scope] = Scope.GLOBAL

    def references(self) -> list[Reference]:
        """References this document makes, each with the field path it comes from."""
        refs = self.spec_references()
        if self.metadata.project:
            refs.insert(0, Reference("Project", self.metadata.project, ("metadata", "project")))
        return refs

    def spec_references(self) -> list[Reference]:
        return []

    @property
    def address(self) -> str:
        kind = self.kind  # type: ignore[attr-defined]
        if self.metadata.project:
            return f"{kind}/{self.metadata.project}/{self.metadata.name}"
        return f"{kind}/{self.metadata.name}"
