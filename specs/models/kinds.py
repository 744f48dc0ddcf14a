"""The registry of spec kinds: the discriminated union a document is validated against."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter
from trainform.specs.models.artifacts import Dataset, Image
from trainform.specs.models.base import DocumentBase
from trainform.specs.models.platform import Project, Queue, Quota, ResourcePool
from trainform.specs.models.release import ModelRelease
from trainform.specs.models.training import EvalSuite, TrainingJob

KINDS: dict[str, type[DocumentBase]] = {
    model.__name__: model
    for model in (
        Project,
        ResourcePool,
        Queue,
        Quota,
        Dataset,
        Image,
        TrainingJob,
        EvalSuite,
        ModelRelease,
    )
}

Document = Annotated[
    Project
    | ResourcePool
    | Queue
    | Quota
    | Dataset
    | Image
    | TrainingJob
    | EvalSuite
    | ModelRelease,
    Field(discriminator="kind"),
]

DOCUMENT_ADAPTER: TypeAdapter[DocumentBase] = TypeAdapter(Document)
