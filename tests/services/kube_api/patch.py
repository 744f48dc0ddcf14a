"""Patch formats: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

`merge_patch` also serves `application/strategic-merge-patch+json` for built-in kinds (a
known gap: lists are replaced instead of merged by their patch merge key, and `$patch`
directives are not understood; the real server rejects strategic merge for custom
resources with 415, and so does this one). Server-side apply lives in `fields.py`.
Errors raise `ApiError` 422 (patch cannot be applied), as the real server answers.
"""

from __future__ import annotations

import copy
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


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise unprocessable(f'the server rejected our request due to an error in our request: '
                            f'JSON pointer must be empty or start with a "/": {path!r}')
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
        raise unprocessable("the server rejected our request due to an error in our request: "
                            "a JSON patch must be an array of operations")
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
