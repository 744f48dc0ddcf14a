"""JSON Schema export and field documentation (`trainform schema`, `trainform explain`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined

from specs.errors import SpecUsageError
from specs.introspect import annotation_at, describe_type, field_info_at, fields_by_alias, models_in
from specs.models.config import RootConfig
from specs.models.kinds import KINDS, Document
from specs.suggest import closest_name

SCHEMA_ID = "https://trainform.dev/schema/trainform-v1.json"


def _models() -> dict[str, type[BaseModel]]:
    return {**KINDS, "Config": RootConfig}


def document_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema of one kind, of `Config` (trainform.yaml), or of any spec document."""
    if kind is None:
        schema = TypeAdapter(Document).json_schema(by_alias=True)
        schema["title"] = "trainform spec document"
    else:
        model = _models().get(kind)
        if model is None:
            raise SpecUsageError(_unknown_kind(kind, "export a schema for"))
        schema = model.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def _unknown_kind(kind: str, verb: str = "explain") -> str:
    suggestion = closest_name(kind, _models())
    hint = f" (did you mean `{suggestion}`?)" if suggestion else ""
    return f"cannot {verb} `{kind}`: unknown kind{hint}; kinds: {', '.join(_models())}"


@dataclass
class FieldDoc:
    name: str
    type: str
    required: bool
    default: str
    description: str


@dataclass
class Explanation:
    """What `trainform explain KIND[.FIELD]` prints: the target and its fields."""

    path: str
    type: str
    description: str
    required: bool = False
    default: str = ""
    fields: list[FieldDoc] = field(default_factory=list)


def _default(info: Any) -> str:
    if info.default is not PydanticUndefined:
        return repr(info.default) if info.default is not None else "null"
    if info.default_factory is not None:
        return "(empty)" if info.default_factory in (list, dict) else "(computed)"
    return ""


def _field_docs(annotation: Any) -> list[FieldDoc]:
    docs = []
    for model in models_in(annotation):
        for name, info in fields_by_alias(model).items():
            docs.append(
                FieldDoc(
                    name,
                    describe_type(info.annotation),
                    info.is_required(),
                    _default(info),
                    info.description or "",
                )
            )
    return docs


def explain(target: str) -> Explanation:
    """Documentation of a kind or one of its fields, e.g. `Queue.spec.pools.nominalQuota`."""
    kind, _, rest = target.partition(".")
    model = _models().get(kind)
    if model is None:
        raise SpecUsageError(_unknown_kind(kind))
    if not rest:
        return Explanation(kind, kind, (model.__doc__ or "").strip(), fields=_field_docs(model))
    path: list[str | int] = []
    for step in rest.split("."):
        if not models_in(annotation_at(model, path)) and annotation_at(model, [*path, 0]):
            path.append(0)  # step through a list to its items
        path.append(step)
    annotation = annotation_at(model, path)
    info = field_info_at(model, path)
    if annotation is None or info is None:
        names = [doc.name for doc in _field_docs(annotation_at(model, path[:-1]))]
        suggestion = closest_name(str(path[-1]), names)
        hint = f" (did you mean `{suggestion}`?)" if suggestion else ""
        raise SpecUsageError(f"cannot explain `{target}`: no such field{hint}")
    items = annotation_at(model, [*path, 0])
    return Explanation(
        target,
        describe_type(annotation),
        info.description or "",
        info.is_required(),
        _default(info),
        _field_docs(items if items is not None and models_in(items) else annotation),
    )
