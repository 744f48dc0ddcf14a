"""JSON Schema export and field documentation (`trainform schema`, `trainform explain`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticUndefined
from trainform.specs.errors import SpecUsageError
from trainform.specs.introspect import (
    annotation_at,
    describe_type,
    field_info_at,
    fields_by_alias,
    models_in,
)
from trainform.specs.models.config import RootConfig
from trainform.specs.models.kinds import KINDS, Document
from trainform.specs.suggest import closest_name

SCHEMA_ID = "https://trainform.dev/schema/trainform-v1.json"


def _models() -> dict[str, type[BaseModel]]:
    return {**KINDS, "Config": RootConfig}


def document_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema of one kind, of `Config` (trainform.yaml), or of any spec document.

    Spec documents are templated before they are validated (every string value may hold a
    `{{ ... }}` template, specs.templating), so in a spec document's schema every constrained
    scalar also accepts a string holding a template: an editor shows no error on
    `nodes: "{{ nodes }}"` or `name: "{{ team }}-data"`. `Config` is not templated."""
    if kind is None:
        schema = TypeAdapter(Document).json_schema(by_alias=True)
        schema["title"] = "trainform spec document"
    else:
        model = _models().get(kind)
        if model is None:
            raise SpecUsageError(_unknown_kind(kind, "export a schema for"))
        schema = model.model_json_schema(by_alias=True)
    if kind != "Config":
        schema = accept_templates(schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


TEMPLATE_DEFINITION = "TemplatedValue"
TEMPLATE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"\{[{%#]",
    "description": "A jinja2 template, rendered with the environment's variables before the "
    "document is validated.",
}
_SCALAR_TYPES = {"integer", "number", "boolean", "null"}
_STRING_CONSTRAINTS = ("pattern", "format", "enum", "minLength", "maxLength")
_ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def accept_templates(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every constrained scalar schema widened to `anyOf: [it, a template]`.

    Constants (`kind`, `apiVersion`) stay exact: the loader reads them before rendering."""
    widened = _widen(schema)
    widened.setdefault("$defs", {})[TEMPLATE_DEFINITION] = TEMPLATE_SCHEMA
    return widened


def _is_constrained_scalar(node: dict[str, Any]) -> bool:
    if "const" in node:
        return False
    types = node.get("type")
    named = set(types) if isinstance(types, list) else {types} if types else set()
    if named & _SCALAR_TYPES:
        return True
    if "string" in named or "enum" in node:
        return any(key in node for key in _STRING_CONSTRAINTS)
    return False


def _widen(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    result = dict(node)
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            result[key] = {name: _widen(child) for name, child in node[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            result[key] = [_widen(child) for child in node[key]]
    for key in _SCHEMA_VALUES:
        if isinstance(node.get(key), dict):
            result[key] = _widen(node[key])
    if not _is_constrained_scalar(node):
        return result
    outer = {key: result.pop(key) for key in _ANNOTATIONS if key in result}
    return {"anyOf": [result, {"$ref": f"#/$defs/{TEMPLATE_DEFINITION}"}], **outer}


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
