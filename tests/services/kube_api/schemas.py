"""CRD schema enforcement, on when the server starts with `schema=True`: pruning, unknown-field
handling by `fieldValidation`, and OpenAPI validation, as the apiextensions server does.

- Pruning: fields a structural schema does not declare are dropped (kept under
  `x-kubernetes-preserve-unknown-fields: true`; `x-kubernetes-embedded-resource` keeps
  apiVersion, kind and metadata). `fieldValidation=Strict` (kubectl's default) turns
  unknown fields into 400 BadRequest `strict decoding error: unknown field "spec.x"`;
  `Warn` (the default when the parameter is absent) prunes and answers a `Warning` header;
  `Ignore` prunes silently.
- Validation: type (with `nullable` and `x-kubernetes-int-or-string`), enum, required,
  minimum/maximum, minLength/maxLength, pattern, minItems/maxItems, minProperties/
  maxProperties; then, if those pass, the CEL rules (`x-kubernetes-validations`, see
  cel.py). Failures are one 422 Invalid listing every cause. Strings of
  `x-kubernetes-int-or-string` fields still meet their `pattern` (the quantity syntax:
  `nominalQuota: "lots"` is refused). Integers beyond int64 are refused as the real server
  refuses them (JSON decoding makes them floats). `x-kubernetes-list-type: set` lists may
  not hold an item twice and `map` lists not two items with the same keys
  (`Duplicate value: map[string]interface {}{"name":"x"}`). Formats are not checked: the
  apiextensions validator does not bound `format: int32` integers either.
Warnings of the request being served are collected per thread (`begin`/`end`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from typing import Any

from tests.services.kube_api import cel, errors
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.resources import ResourceType

_local = threading.local()


def begin() -> None:
    _local.warnings = []


def end() -> list[str]:
    found: list[str] = getattr(_local, "warnings", [])
    _local.warnings = []
    return found


def _warn(text: str) -> None:
    if not hasattr(_local, "warnings"):
        _local.warnings = []
    _local.warnings.append(text)


def _prune(
    obj: Any, schema: dict[str, Any] | None, path: str, unknown: list[str], root: bool = False
) -> None:
    if not schema:
        return
    if isinstance(obj, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        for key in list(obj):
            where = f"{path}.{key}" if path else key
            if embedded and key in ("apiVersion", "kind", "metadata"):
                continue  # ObjectMeta has its own rules (validation.py)
            if properties is not None and key in properties:
                _prune(obj[key], properties[key], where, unknown)
            elif isinstance(extra, dict):
                _prune(obj[key], extra, where, unknown)
            elif not keep_all:
                unknown.append(where)
                del obj[key]
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(obj):
            _prune(item, schema["items"], f"{path}[{index}]", unknown)


def prune(resource: ResourceType, version: str, obj: dict[str, Any], query: dict[str, str]) -> None:
    """Drop undeclared fields of a custom resource, or refuse them under Strict validation."""
    schema = resource.schema(version)
    if not resource.custom or not schema:
        return
    unknown: list[str] = []
    _prune(obj, schema, "", unknown, root=True)
    if not unknown:
        return
    mode = query.get("fieldValidation", "Warn")
    if mode == "Strict":
        listed = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(
            f'{resource.kind} in version "{version}" cannot be handled as '
            f"a {resource.kind}: strict decoding error: {listed}"
        )
    if mode != "Ignore":
        for field in unknown:
            _warn(f'unknown field "{field}"')


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def refuse_undeclared(resource: ResourceType, version: str, obj: dict[str, Any]) -> None:
    """Server-side apply of a field the schema does not declare: the real server fails to
    build the typed patch and answers 500, whatever `fieldValidation` says."""
    schema = resource.schema(version)
    if not resource.custom or not schema:
        return
    unknown: list[str] = []
    _prune(copy.deepcopy(obj), schema, "", unknown, root=True)
    if unknown:
        raise ApiError(
            500,
            "InternalError",
            f"failed to create typed patch object ({resource.group}/{version}, "
            f"Kind={resource.kind}): .{unknown[0]}: field not declared in schema",
        )


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _quote(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else json.dumps(value)


def _go_value(value: Any) -> str:
    """A value the way Go's field errors print it (%q for strings, %#v for maps)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{json.dumps(k)}:{_go_value(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    return json.dumps(value)


def _check_unique(
    value: list[Any], schema: dict[str, Any], path: str, causes: list[dict[str, str]]
) -> None:
    """x-kubernetes-list-type set: no item twice; map: no two items with the same keys."""
    list_type = schema.get("x-kubernetes-list-type")
    if list_type not in ("set", "map") or len(value) < 2:
        return
    keys: list[Any] = []
    for item in value:
        if list_type == "set":
            keys.append(item)
        elif isinstance(item, dict):
            names = schema.get("x-kubernetes-list-map-keys") or []
            keys.append({k: item[k] for k in names if k in item})
        else:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {_go_value(item)}: "
                    "must be an object for an array of list-type map",
                    "field": f"{path}[{len(keys)}]",
                }
            )
            return
    seen: dict[str, int] = {}
    for index, key in enumerate(keys):
        text = json.dumps(key, sort_keys=True)
        seen[text] = seen.get(text, 0) + 1
        if seen[text] == 2:  # the real server reports the second appearance only
            causes.append(
                {
                    "reason": "FieldValueDuplicate",
                    "message": f"Duplicate value: {_go_value(key)}",
                    "field": f"{path}[{index}]",
                }
            )


def _check(value: Any, schema: dict[str, Any], path: str, causes: list[dict[str, str]]) -> None:
    def fail(reason: str, message: str) -> None:
        causes.append({"reason": reason, "message": message, "field": path})

    if value is None:
        if not schema.get("nullable"):
            fail(
                "FieldValueInvalid",
                f'Invalid value: "null": {path} in body must be of type '
                f'{schema.get("type", "object")}: "null"',
            )
        return
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not _TYPES["string"](value) and not _TYPES["integer"](value):
            fail(
                "FieldValueInvalid",
                f"Invalid value: {_quote(value)}: {path} in body must be of type integer-or-string",
            )
            return
        if _TYPES["integer"](value) and not INT64_MIN <= value <= INT64_MAX:
            fail(
                "FieldValueInvalid",
                f'Invalid value: "number": {path} in body must be of type integer-or-string',
            )
            return
        kind = None  # the string rules below (the quantity pattern) still apply to strings
    if kind == "integer" and _TYPES["integer"](value) and not INT64_MIN <= value <= INT64_MAX:
        # JSON decoding turns such a number into a float64, which no integer schema accepts
        fail(
            "FieldValueTypeInvalid",
            f'Invalid value: "number": {path} in body must be of type integer: "number"',
        )
        return
    if kind in _TYPES and not _TYPES[kind](value):
        found = {
            dict: "object",
            list: "array",
            str: "string",
            bool: "boolean",
            int: "integer",
            float: "number",
        }.get(type(value), type(value).__name__)
        fail(
            "FieldValueTypeInvalid",
            f'Invalid value: "{found}": {path} in body must be of type {kind}: "{found}"',
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_quote(v) for v in schema["enum"])
        fail(
            "FieldValueNotSupported",
            f"Unsupported value: {_quote(value)}: supported values: {supported}",
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            fail(
                "FieldValueInvalid",
                f"Invalid value: {value}: {path} in body should be "
                f"greater than or equal to {schema['minimum']}",
            )
        if "maximum" in schema and value > schema["maximum"]:
            fail(
                "FieldValueInvalid",
                f"Invalid value: {value}: {path} in body should be "
                f"less than or equal to {schema['maximum']}",
            )
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            fail("FieldValueTooLong", f"Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(value) < schema["minLength"]:
            fail(
                "FieldValueInvalid",
                f"Invalid value: {_quote(value)}: {path} in body should "
                f"be at least {schema['minLength']} chars long",
            )
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            fail(
                "FieldValueInvalid",
                f"Invalid value: {_quote(value)}: {path} in body should "
                f"match '{schema['pattern']}'",
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            fail(
                "FieldValueTooMany",
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
            )
        if "minItems" in schema and len(value) < schema["minItems"]:
            fail(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should "
                f"have at least {schema['minItems']} items",
            )
        _check_unique(value, schema, path, causes)
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                _check(item, schema["items"], f"{path}[{index}]", causes)
    if isinstance(value, dict):
        for required in schema.get("required") or []:
            if required not in value:
                causes.append(
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": f"{path}.{required}" if path else required,
                    }
                )
        for bound, compare, word in (
            ("maxProperties", int.__gt__, "at most"),
            ("minProperties", int.__lt__, "at least"),
        ):
            if bound in schema and compare(len(value), schema[bound]):
                fail(
                    "FieldValueInvalid",
                    f"Invalid value: {len(value)}: {path} in body should "
                    f"have {word} {schema[bound]} properties",
                )
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            where = f"{path}.{key}" if path else key
            if key in properties:
                _check(child, properties[key], where, causes)
            elif isinstance(extra, dict):
                _check(child, extra, where, causes)


def validate(
    resource: ResourceType, version: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> None:
    """422 Invalid listing every schema violation and broken CEL rule of a custom resource
    (metadata excluded); `old` is the stored object on an update, for transition rules."""
    schema = resource.schema(version)
    if not resource.custom or not schema:
        return
    skip = ("apiVersion", "kind", "metadata")
    body = {k: v for k, v in obj.items() if k not in skip}
    root = {
        **schema,
        "properties": {k: v for k, v in (schema.get("properties") or {}).items() if k not in skip},
        "required": [r for r in schema.get("required") or [] if r not in skip],
    }
    causes: list[dict[str, str]] = []
    _check(body, root, "", causes)
    if not causes:
        previous = {k: v for k, v in old.items() if k not in skip} if old else cel.missing()
        cel.check(root, body, previous, "", causes)
    if not causes:
        return
    name = obj["metadata"].get("name", "")
    texts = [f"{c['field']}: {c['message']}" for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    raise ApiError(
        422,
        "Invalid",
        f'{resource.kind}.{resource.group} "{name}" is invalid: {summary}',
        {"name": name, "group": resource.group, "kind": resource.kind, "causes": causes},
    )
