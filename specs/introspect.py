"""Walking the spec models by YAML field path: for suggestions and `trainform explain`."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def _candidates(annotation: Any) -> list[Any]:
    """The types a value of `annotation` may take, with Annotated and unions unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _candidates(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        result: list[Any] = []
        for arg in typing.get_args(annotation):
            result += _candidates(arg)
        return result
    return [annotation]


def fields_by_alias(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {(info.alias or name): info for name, info in model.model_fields.items()}


def models_in(annotation: Any) -> list[type[BaseModel]]:
    if annotation is None:
        return []
    return [c for c in _candidates(annotation) if isinstance(c, type) and issubclass(c, BaseModel)]


def _step(annotation: Any, step: str | int) -> Any | None:
    for candidate in _candidates(annotation):
        origin = typing.get_origin(candidate)
        if (
            isinstance(candidate, type)
            and issubclass(candidate, BaseModel)
            and isinstance(step, str)
        ):
            info = fields_by_alias(candidate).get(step)
            if info is not None:
                return info.annotation
        elif origin in (list, tuple, set, frozenset) and isinstance(step, int):
            return typing.get_args(candidate)[0]
        elif origin is dict and isinstance(step, str):
            return typing.get_args(candidate)[1]
    return None


def annotation_at(model: type[BaseModel], path: Sequence[str | int]) -> Any | None:
    """The annotation found by following `path` from `model`, or None if it leads nowhere."""
    annotation: Any = model
    for step in path:
        annotation = _step(annotation, step)
        if annotation is None:
            return None
    return annotation


def field_names_at(model: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """Valid YAML field names of the mapping at `path` (empty if it is not a model)."""
    annotation = annotation_at(model, path)
    names: list[str] = []
    for candidate in models_in(annotation) if annotation is not None else []:
        names += list(fields_by_alias(candidate))
    return names


def field_info_at(model: type[BaseModel], path: Sequence[str | int]) -> FieldInfo | None:
    if not path or not isinstance(path[-1], str):
        return None
    parent = annotation_at(model, path[:-1])
    for candidate in models_in(parent) if parent is not None else []:
        info = fields_by_alias(candidate).get(path[-1])
        if info is not None:
            return info
    return None


def describe_type(annotation: Any) -> str:
    """A short human name of a field's type: `list of QueuePool`, `Quantity`, `string`."""
    names = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    parts = []
    for candidate in _candidates(annotation):
        origin = typing.get_origin(candidate)
        if candidate in names:
            parts.append(names[candidate])
        elif origin is typing.Literal:
            parts.append(" | ".join(repr(arg) for arg in typing.get_args(candidate)))
        elif origin in (list, tuple):
            parts.append(f"list of {describe_type(typing.get_args(candidate)[0])}")
        elif origin is dict:
            key, value = typing.get_args(candidate)
            parts.append(f"map of {describe_type(key)} to {describe_type(value)}")
        elif isinstance(candidate, type):
            parts.append(candidate.__name__)
        else:
            parts.append(str(candidate))
    return " or ".join(dict.fromkeys(parts))
