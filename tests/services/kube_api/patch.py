"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and an approximate
strategic merge patch.

`strategic_merge_patch` serves `application/strategic-merge-patch+json` for built-in kinds
without their Go struct tags: a list of objects that all carry `name` (containers, env,
volumes, ...) merges item by item on `name`; every other list is replaced (the real server
merges some lists on other keys, e.g. volumeMounts on mountPath, ports on containerPort).
The directives `$patch: delete|replace`, `$deleteFromPrimitiveList/<field>` and
`$retainKeys` are honoured and `$setElementOrder/<field>` is dropped (order is not
rearranged). The real server refuses strategic merge for custom resources with 415, and so
does this one. Server-side apply lives in `fields.py`. Errors raise `ApiError` 422 (patch
cannot be applied), as the real server answers.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.services.kube_api.errors import unprocessable


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_DELETE = object()


def _named(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and "name" in i for i in items)


def _merge_named(live: list[Any], patch: list[Any]) -> list[Any]:
    merged = copy.deepcopy(live)
    for item in patch:
        position = next((i for i, old in enumerate(merged) if old["name"] == item["name"]), None)
        if item.get("$patch") == "delete":
            if position is not None:
                del merged[position]
        elif position is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            result = strategic_merge_patch(merged[position], item)
            if result is _DELETE:
                del merged[position]
            else:
                merged[position] = result
    return merged


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge `patch` into `target` the way strategic merge does for the common cases."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return _DELETE
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return copy.deepcopy(body)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in body.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif value and _named(value) and _named(result.get(key)):
            result[key] = _merge_named(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(body.get("$retainKeys"), list):
        keep = set(body["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep or k in body}
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise unprocessable(f"a JSON pointer must be a string, not {json.dumps(path)}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(
            f"the server rejected our request due to an error in our request: "
            f'JSON pointer must be empty or start with a "/": {path!r}'
        )
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise unprocessable(f"invalid array index: {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise unprocessable(f"array index out of bounds: {index}")
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
    return node


def _get(document: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return document
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise unprocessable(f"doc is missing path: {path}: missing value")


def _add(document: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(document, tokens)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], allow_end=True), value)
    else:
        raise unprocessable(f"doc is missing path: {path}")
    return document


def _remove(document: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise unprocessable("cannot remove the whole document")
    parent = _parent(document, tokens)
    if isinstance(parent, dict) and tokens[-1] in parent:
        del parent[tokens[-1]]
    elif isinstance(parent, list):
        del parent[_index(parent, tokens[-1], allow_end=False)]
    else:
        raise unprocessable(f"Unable to remove nonexistent key: {tokens[-1]}: missing value")
    return document


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test, applied in order to a copy."""
    if not isinstance(operations, list):
        raise unprocessable(
            "the server rejected our request due to an error in our request: "
            "a JSON patch must be an array of operations"
        )
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise unprocessable(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise unprocessable(f"missing value for {op} operation at {path}")
        if op == "add":
            document = _add(document, path, copy.deepcopy(operation["value"]))
        elif op == "remove":
            document = _remove(document, path)
        elif op == "replace":
            _get(document, path)  # must exist
            document = _remove(document, path) if _pointer(path) else document
            document = _add(document, path, copy.deepcopy(operation["value"]))
        elif op in ("move", "copy"):
            source = operation.get("from")
            if source is None:
                raise unprocessable(f"missing from for {op} operation at {path}")
            value = copy.deepcopy(_get(document, source))
            if op == "move":
                document = _remove(document, source)
            document = _add(document, path, value)
        elif op == "test":
            if _get(document, path) != operation["value"]:
                raise unprocessable(f"testing value {path} failed: test failed")
        else:
            raise unprocessable(f"Unexpected kind: {op}")
    return document
