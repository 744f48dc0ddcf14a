"""Versioned inputs: Dataset and Image.

Both are immutable once pinned: a dataset version names a manifest digest, an image a
content digest. Whatever a job reads is therefore identified by content, not by a name
that can be re-pointed.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from trainform.specs.models.base import DocumentBase, Reference, Scope, SpecModel
from trainform.specs.names import (
    ResourceName,
    Sha256Digest,
    VersionName,
    check_storage_uri,
    split_image_reference,
)


class DatasetVersion(SpecModel):
    name: VersionName = Field(description="Version name, e.g. v3 or 2024-06-01.")
    path: str = Field(
        default="",
        description="Location of this version relative to the dataset source "
        "(defaults to the version name).",
    )
    manifest_digest: Sha256Digest | None = Field(
        default=None,
        description="sha256 of the version's manifest (files, sizes, digests); "
        "pins its content. Recorded by `trainform lock` when omitted.",
    )

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("must be a relative path without '..'")
        return value


class DatasetSpec(SpecModel):
    source: str = Field(
        description="Where the dataset lives: s3://bucket/prefix, a path relative to the "
        "spec folder, or file:///path under a data root of trainform.yaml (security.dataRoots)."
    )
    format: Literal[
        "jsonl", "parquet", "arrow", "webdataset", "mds", "tfrecord", "text", "csv", "other"
    ] = Field(description="Storage format of the records.")
    versions: list[DatasetVersion] = Field(
        min_length=1, description="Declared immutable versions; jobs pin one of them."
    )
    readers: list[ResourceName] = Field(
        default_factory=list,
        description="Projects allowed to read the dataset; empty means the owning project "
        "only for project datasets and every project for global ones.",
    )
    provider: ResourceName | None = Field(
        default=None,
        description="Provider instance holding the data; defaults by the source's scheme.",
    )
    deletion_policy: Literal["Abandon", "Delete"] = Field(
        default="Abandon",
        description="Abandon (default) leaves the data in place when the resource is "
        "removed from the specs; Delete removes it.",
    )

    @field_validator("source")
    @classmethod
    def _valid_source(cls, value: str) -> str:
        check_storage_uri(value)
        return value

    @model_validator(mode="after")
    def _unique_versions(self) -> DatasetSpec:
        seen: set[str] = set()
        for version in self.versions:
            if version.name in seen:
                raise ValueError(f"version {version.name!r} is declared twice")
            seen.add(version.name)
        return self

    def version_names(self) -> list[str]:
        return [version.name for version in self.versions]


class Dataset(DocumentBase):
    """A named, versioned, immutable input."""

    kind: Literal["Dataset"] = Field(description="Dataset")
    spec: DatasetSpec = Field(description="Source, format, versions and readers.")
    scope: ClassVar[Scope] = Scope.EITHER

    def spec_references(self) -> list[Reference]:
        return [
            Reference("Project", reader, ("spec", "readers", index))
            for index, reader in enumerate(self.spec.readers)
        ]


class ImageSpec(SpecModel):
    reference: str | None = Field(
        default=None,
        description="OCI reference: [registry/]repository[:tag][@sha256:digest]. A digest "
        "pins the content; a tag alone is resolved and recorded by `trainform lock`.",
    )
    runtime: Literal["container", "host"] = Field(
        default="container",
        description="container: run the image; host: run on the host's own environment "
        "(local provider), recorded for reproducibility.",
    )
    image_class: Literal["standard", "project", "custom"] = Field(
        default="standard",
        alias="class",
        description="standard: platform-maintained; project: built for one project; "
        "custom: anything else.",
    )
    required_labels: list[str] = Field(
        default_factory=list, description="OCI config labels the image must carry."
    )
    promoted_from: ResourceName | None = Field(
        default=None, description="Image this one is promoted (copied) from."
    )
    provider: ResourceName | None = Field(
        default=None, description="Registry provider instance that serves the image."
    )

    @field_validator("reference")
    @classmethod
    def _valid_reference(cls, value: str | None) -> str | None:
        if value is not None:
            parts = split_image_reference(value)
            if not parts["tag"] and not parts["digest"]:
                raise ValueError("needs a tag, a digest or both")
        return value

    @model_validator(mode="after")
    def _container_needs_reference(self) -> ImageSpec:
        if self.runtime == "container" and self.reference is None:
            raise ValueError("a container image needs a reference")
        return self

    def parts(self) -> dict[str, Any]:
        if self.reference is None:
            return {"registry": None, "repository": None, "tag": None, "digest": None}
        return split_image_reference(self.reference)


class Image(DocumentBase):
    """A container image (or the host runtime), pinned by digest."""

    kind: Literal["Image"] = Field(description="Image")
    spec: ImageSpec = Field(description="Reference, runtime and class.")
    scope: ClassVar[Scope] = Scope.EITHER

    def spec_references(self) -> list[Reference]:
        if self.spec.promoted_from:
            return [Reference("Image", self.spec.promoted_from, ("spec", "promotedFrom"))]
        return []
