"""References of a document that failed validation, so they are checked in the same run.

A document with a schema error is not a resource, but the references it makes by name
(`spec.queue`, `spec.datasets[0]`, ...) are still worth checking: a typo in one of them
must show beside the schema error, not only on the next run. `partial_references` reads
them with the kind's own `spec_references` (one definition of which fields refer to what)
through `LenientView`: attribute access over the raw mapping as the model would read it
(aliases, defaults), each nested mapping viewed as its field's model. A reference whose
field has an error of its own, or whose value is not a name, is left out: its own
diagnostic says what is wrong. Called by the document loader; pure.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from trainform.specs.errors import Location
from trainform.specs.models.base import DocumentBase, Reference

Path = tuple[str | int, ...]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (through `X | None`, `list[X]`, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_is_list(a) for a in typing.get_args(annotation))
    return origin is list


class LenientView:
    """A raw mapping read as `model` reads it; absent fields give the field's default."""

    __slots__ = ("_data", "_model")

    def __init__(self, data: dict[str, Any], model: type[BaseModel]) -> None:
        self._data = data
        self._model = model

    def __getattr__(self, name: str) -> Any:
        field = self._model.model_fields.get(name)
        if field is None:
            raise AttributeError(name)
        key = field.alias or name
        if key in self._data:
            value = self._data[key]
        elif name in self._data:
            value = self._data[name]
        else:
            return field.get_default(call_default_factory=True)
        return _wrap(value, field.annotation)


def _wrap(value: Any, annotation: Any) -> Any:
    model = _model_in(annotation)
    if model is None:
        return value
    if isinstance(value, dict):
        return LenientView(value, model)
    if isinstance(value, list) and _is_list(annotation):
        return [LenientView(v, model) if isinstance(v, dict) else v for v in value]
    return value


@dataclass(frozen=True, slots=True)
class FailedDocument:
    """A document that failed validation, as reference checking needs it: who refers
    (address, project), where it is, and the references it makes."""

    address: str
    project: str | None
    location: Location
    document_index: int
    references: tuple[Reference, ...]


def _under(path: Path, errors: Sequence[Path]) -> bool:
    return any(path[: len(e)] == e or e[: len(path)] == path for e in errors)


def partial_references(
    document: dict[str, Any], model: type[DocumentBase], errors: Sequence[Path]
) -> tuple[Reference, ...]:
    """The references `document` makes where its fields are valid names."""
    view = LenientView(document, model)
    try:
        refs = list(model.spec_references(view))  # type: ignore[arg-type]
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        refs = []  # a shape spec_references cannot read: its own errors say why
    metadata = document.get("metadata")
    project = metadata.get("project") if isinstance(metadata, dict) else None
    if isinstance(project, str) and project:
        refs.insert(0, Reference("Project", project, ("metadata", "project")))
    return tuple(
        ref
        for ref in refs
        if isinstance(ref.name, str) and ref.name and not _under(ref.path, errors)
    )
