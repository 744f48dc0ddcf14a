"""Field-level differences between two normalized documents.

Paths read like the YAML (`spec.pools[0].nominalQuota.gpu`). Lists of equal length are
compared item by item; otherwise extra or missing items are reported by index. A field is
ignored when its path falls under one of the kind's ignored prefixes, and forces
replacement when it falls under a replacement prefix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainform.specs.secrets import same_secret


class _Unset:
    """The value of a field a document does not have; shown as `(unset)` wherever a value
    is rendered (plan, drift, reasons), never as a Python object."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "(unset)"

    __str__ = __repr__

    def __reduce__(self) -> str:
        return "_MISSING"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Unset:
        return self


_MISSING = _Unset()


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any
    forces_replacement: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "before": None if self.before is _MISSING else self.before,
            "after": None if self.after is _MISSING else self.after,
            "forcesReplacement": self.forces_replacement,
        }


def _under(path: str, prefixes: Sequence[str]) -> bool:
    for prefix in prefixes:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return True
    return False


def _walk(before: Any, after: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            child = f"{path}.{key}" if path else str(key)
            left, right = before.get(key, _MISSING), after.get(key, _MISSING)
            if {id(left), id(right)} <= {id(_MISSING), id(None)}:
                continue  # unset and null mean the same
            _walk(left, right, child, out)
        return
    if isinstance(before, list) and isinstance(after, list) and before != after:
        if len(before) == len(after):
            for index, (left, right) in enumerate(zip(before, after, strict=True)):
                _walk(left, right, f"{path}[{index}]", out)
            return
        out.append((path, before, after))
        return
    if (before != after or type(before) is not type(after)) and not same_secret(before, after):
        out.append((path, before, after))  # state keeps secrets masked: same_secret says equal


def _identical(before: Any, after: Any) -> bool:
    """Equal and of the same types all the way down (`==` alone takes 1 for 1.0 and True,
    which `_walk` reports as changes)."""
    kind = type(before)
    if kind is not type(after):
        return False
    if kind is dict:
        if before.keys() != after.keys():
            return False
        return all(_identical(value, after[key]) for key, value in before.items())
    if kind is list:
        return len(before) == len(after) and all(map(_identical, before, after))
    return bool(before == after)


def diff_documents(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    ignored: Sequence[str] = (),
    forces_replacement: Sequence[str] = (),
) -> list[FieldChange]:
    """Every changed leaf between `before` and `after`, ignored prefixes left out."""
    if before == after and _identical(before, after):
        return []  # the common case of a plan: most documents did not change
    raw: list[tuple[str, Any, Any]] = []
    _walk(before if before is not None else {}, after if after is not None else {}, "", raw)
    return [
        FieldChange(path, left, right, _under(path, forces_replacement))
        for path, left, right in raw
        if not _under(path, ignored)
    ]


def is_missing(value: Any) -> bool:
    return value is _MISSING


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def value_at(document: Any, path: str) -> tuple[bool, Any]:
    """The value at a dotted path with [index] steps (`spec.pools[0].nominalQuota.cpu`)."""
    node = document
    for key, index in _STEP.findall(path):
        if key:
            if not isinstance(node, dict) or key not in node:
                return False, None
            node = node[key]
        else:
            position = int(index)
            if not isinstance(node, list) or position >= len(node):
                return False, None
            node = node[position]
    return True, node


def with_value_at(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`document` with the value at `path` set (created along the way), or removed when
    `value` is the missing marker diff_documents reports for an absent field. Changes
    `document` in place and returns it."""
    steps = [key or int(index) for key, index in _STEP.findall(path)]
    node: Any = document
    for step, following in zip(steps, steps[1:], strict=False):
        if isinstance(step, int):
            node = node[step]
        else:
            node = node.setdefault(step, [] if isinstance(following, int) else {})
    last = steps[-1]
    if is_missing(value):
        if isinstance(last, int):
            del node[last]
        else:
            node.pop(last, None)
    elif isinstance(last, int) and last == len(node):
        node.append(value)
    else:
        node[last] = value
    return document
