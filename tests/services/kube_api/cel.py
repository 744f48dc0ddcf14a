"""CRD validation rules (`x-kubernetes-validations`), evaluated with cel-python in schema mode.

As the apiextensions server does: a rule runs with `self` bound to the value of its schema
node, when that value is present; a transition rule (one that names `oldSelf`) runs only on
an update whose old object has a value at the same place (correlated through object
properties, map values and the items of `x-kubernetes-list-type: map` lists, never through
atomic lists). A rule that is false, or fails to evaluate, is a cause
`<path>: Invalid value: "<type>": <message>`. `messageExpression`, `optionalOldSelf` and the
Kubernetes CEL extension libraries (quantity, regex, url, ...) are not supported (gaps).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import celpy

_MISSING = object()


@functools.cache
def _program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _holds(rule: str, value: Any, old: Any) -> tuple[bool, str]:
    activation = {"self": celpy.json_to_cel(value)}
    if old is not _MISSING:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        result = _program(rule).evaluate(activation)
    except Exception as error:  # noqa: BLE001 - any evaluation failure fails the rule
        return False, f"{_problem(error)} evaluating rule: {rule}"
    if isinstance(result, celpy.celtypes.BoolType):
        return bool(result), ""
    return False, f"{_problem(result)} evaluating rule: {rule}"


def _problem(error: Any) -> str:
    """An evaluation error in the words of cel-go ("no such key: x")."""
    text = str(error.args[0]) if getattr(error, "args", None) else str(error)
    missing = re.search(r"no such member in mapping: '([^']*)'", text)
    return f"no such key: {missing.group(1)}" if missing else text


def _key(item: Any, keys: list[str]) -> str | None:
    if not isinstance(item, dict) or not all(k in item for k in keys):
        return None
    return json.dumps([item[k] for k in keys])


def check(
    schema: dict[str, Any] | None, value: Any, old: Any, path: str, causes: list[dict[str, str]]
) -> None:
    """Append a cause for every rule under `schema` that `value` breaks."""
    if not schema or value is _MISSING or value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule.get("rule", "")
        if "oldSelf" in text and old is _MISSING:
            continue
        holds, problem = _holds(text, value, old)
        if not holds:
            message = problem or rule.get("message") or f"failed rule: {text}"
            field = path + rule.get("fieldPath", "") if rule.get("fieldPath") else path
            kind = schema.get("type", "object")
            causes.append(
                {
                    "reason": rule.get("reason", "FieldValueInvalid"),
                    "message": f'Invalid value: "{kind}": {message}',
                    "field": field,
                }
            )
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            child_schema = properties.get(key) or (extra if isinstance(extra, dict) else None)
            previous = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            check(child_schema, child, previous, f"{path}.{key}" if path else key, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = list(schema.get("x-kubernetes-list-map-keys") or [])
        by_key = {}
        if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
            by_key = {_key(item, keys): item for item in old}
        for index, item in enumerate(value):
            previous = by_key.get(_key(item, keys), _MISSING) if by_key else _MISSING
            check(schema["items"], item, previous, f"{path}[{index}]", causes)


def missing() -> Any:
    """The marker for "no old value" (a create)."""
    return _MISSING
