"""The delivery kind: ModelRelease.

A ModelRelease publishes one run of a TrainingJob (its final output, or a named checkpoint
of it) under a version, as an OCI artifact on a registry instance and/or as files under an
object-store prefix, once the EvalSuites it names have passed on that very run. The run is
pinned: by `spec.run`, else resolved when the release is first planned and kept in state,
so a newer run of the job never moves a published release (releasing it is a change in Git).
The planner checks the gates (planner/releases.py); providers publish (providers/oci,
providers/objectstore).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator
from trainform.specs.models.base import DocumentBase, Reference, Scope, SpecModel
from trainform.specs.names import ResourceName, VersionName

RUN_ID = r"^r-[0-9a-f]{12}$"
RunId = Annotated[str, StringConstraints(pattern=RUN_ID)]
CheckpointName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", max_length=128)
]
Repository = Annotated[
    str,
    StringConstraints(
        pattern=r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$",
        max_length=255,
    ),
]
Tag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")]


class RegistryTarget(SpecModel):
    provider: ResourceName | None = Field(
        default=None,
        description="Registry provider instance to publish to (default: the first instance "
        "of type registry in trainform.yaml).",
    )
    repository: Repository = Field(
        description="Repository on that registry, without the host, e.g. models/bigram."
    )
    tag: Tag | None = Field(default=None, description="Tag of the artifact (default: version).")


class ObjectStoreTarget(SpecModel):
    provider: ResourceName | None = Field(
        default=None,
        description="Objectstore provider instance (default: the one holding s3:// data).",
    )
    prefix: str = Field(
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\x00-\x1f]*)?$",
        max_length=1024,
        description="s3://bucket/prefix; the release's files go under <prefix>/<version>/.",
    )


class Approval(SpecModel):
    required: bool = Field(
        default=False,
        description="The release needs the approval of its project's CODEOWNERS "
        "(policy release-approval; see docs/releases.md).",
    )


class ModelReleaseSpec(SpecModel):
    job: ResourceName | None = Field(
        default=None,
        description="TrainingJob whose run is released (required unless promoteFrom is set).",
    )
    promote_from: ResourceName | None = Field(
        default=None,
        description="Another ModelRelease of the same project whose published artifact this "
        "one copies, same digest, to its own registry repository/tag (a promotion: no "
        "rebuild, the source's gates are relied on). Excludes job, run, checkpoint, "
        "evaluations and objectStore.",
    )
    run: RunId | None = Field(
        default=None,
        description="Run id to release (r-<12 hex>). Without it the job's current run is "
        "resolved when the release is first planned and kept in state; a newer run never "
        "moves an existing release.",
    )
    checkpoint: CheckpointName | None = Field(
        default=None,
        description="A named checkpoint of the run (e.g. step-000020) instead of its final "
        "output folder.",
    )
    evaluations: list[ResourceName] = Field(
        default_factory=list,
        description="EvalSuites that must have passed on that run, on the dataset versions "
        "they declare (at least one, unless promoteFrom is set).",
    )
    version: VersionName = Field(description="Version of the release, e.g. 1.0.0.")
    registry: RegistryTarget | None = Field(
        default=None, description="Publish as an OCI artifact on a registry instance."
    )
    object_store: ObjectStoreTarget | None = Field(
        default=None, description="Publish the files under an object-store prefix."
    )
    approval: Approval = Field(default_factory=Approval, description="Approval requirement.")
    delete_artifacts: bool = Field(
        default=False,
        description="On delete, also remove the artifact's blobs and files; by default a "
        "delete only unpublishes (removes the tag and the release record).",
    )

    @model_validator(mode="after")
    def _has_a_target(self) -> ModelReleaseSpec:
        if self.registry is None and self.object_store is None:
            raise ValueError("a release needs a target: registry, objectStore or both")
        if len(set(self.evaluations)) != len(self.evaluations):
            raise ValueError("evaluations names a suite twice")
        if self.promote_from is None:
            if self.job is None or not self.evaluations:
                raise ValueError("a release needs job and evaluations (or promoteFrom)")
            return self
        given = [
            name
            for name, value in (
                ("job", self.job),
                ("run", self.run),
                ("checkpoint", self.checkpoint),
                ("evaluations", self.evaluations),
                ("objectStore", self.object_store),
            )
            if value
        ]
        if given or self.registry is None:
            raise ValueError(
                "a promotion (promoteFrom) copies the source's artifact to a registry: it "
                f"takes registry and no {', '.join(given) or 'other source'}"
                if given
                else "a promotion (promoteFrom) needs registry"
            )
        return self

    def tag(self) -> str:
        return (self.registry.tag if self.registry else None) or self.version


class ModelRelease(DocumentBase):
    """A gated, published model: one run of a job, with its provenance."""

    kind: Literal["ModelRelease"] = Field(description="ModelRelease")
    spec: ModelReleaseSpec = Field(description="Run, gates, version and targets.")
    scope: ClassVar[Scope] = Scope.PROJECT

    def spec_references(self) -> list[Reference]:
        refs = []
        if self.spec.job:
            refs.append(Reference("TrainingJob", self.spec.job, ("spec", "job")))
        if self.spec.promote_from:
            refs.append(Reference("ModelRelease", self.spec.promote_from, ("spec", "promoteFrom")))
        refs += [
            Reference("EvalSuite", suite, ("spec", "evaluations", index))
            for index, suite in enumerate(self.spec.evaluations)
        ]
        return refs
