"""Field ownership and server-side apply, simplified.

A field set is a set of paths (tuples of map keys). Maps are walked key by key; every list
is one atomic leaf (the real server merges lists of `x-kubernetes-list-type: map` or `set`
item by item: here a manager always owns, and replaces, a whole list). Paths render as
`metadata.managedFields[].fieldsV1` the way the real server writes them (`{"f:spec":
{"f:cohort": {}}}`), without the `.` self-markers and without `k:`/`v:` list-item keys.

What apply does (`apply`): the applied configuration's leaf paths are the manager's new
Apply set. A path another manager owns whose live value differs from the applied one is a
conflict: 409 Conflict naming every such field, unless `force`, which takes them over.
Fields the manager applied before and no longer applies are removed from the object
unless another manager also owns them. Then the configuration is merged into the live
object (maps merge, lists and scalars replace). Non-apply writes (`record_update`) give
the writer (`fieldManager`, or the User-Agent's product name) ownership of every field
they changed and take it away from the other managers, as the real server does.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

from tests.services.kube_api.errors import ApiError

FieldPath = tuple[str, ...]
_SERVER_METADATA = {
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def leaf_paths(obj: dict[str, Any], skip_status: bool) -> set[FieldPath]:
    """Every owned leaf path of an object (server-set metadata, apiVersion, kind excluded)."""
    paths: set[FieldPath] = set()

    def walk(node: Any, prefix: FieldPath) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(value, (*prefix, key))
        else:
            paths.add(prefix)

    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and skip_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            for meta_key, meta_value in value.items():
                if meta_key not in _SERVER_METADATA:
                    walk(meta_value, ("metadata", meta_key))
            continue
        walk(value, (key,))
    return paths


_MISSING = object()


def value_at(obj: Any, path: FieldPath) -> Any:
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _remove_path(obj: dict[str, Any], path: FieldPath) -> None:
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _overlaps(left: FieldPath, right: FieldPath) -> bool:
    shorter = min(len(left), len(right))
    return left[:shorter] == right[:shorter]


def deep_merge(live: Any, applied: Any) -> Any:
    """Maps merge recursively; everything else (lists, scalars) replaces."""
    if isinstance(live, dict) and isinstance(applied, dict):
        merged = copy.deepcopy(live)
        for key, value in applied.items():
            merged[key] = deep_merge(live.get(key), value)
        return merged
    return copy.deepcopy(applied)


def to_fields_v1(paths: set[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for key, child in tree.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        if isinstance(child, dict) and any(k.startswith("f:") for k in child):
            paths |= from_fields_v1(child, path)
        else:
            paths.add(path)
    return paths


class Managers:
    """The managedFields entries of one object, as (manager, operation, subresource) -> set."""

    def __init__(self, entries: list[dict[str, Any]] | None) -> None:
        self.sets: dict[tuple[str, str, str], set[FieldPath]] = {}
        self.meta: dict[tuple[str, str, str], dict[str, str]] = {}
        for entry in entries or []:
            key = (entry.get("manager", ""), entry.get("operation", "Update"),
                   entry.get("subresource", ""))
            self.sets[key] = from_fields_v1(entry.get("fieldsV1") or {})
            self.meta[key] = {"apiVersion": entry.get("apiVersion", ""),
                              "time": entry.get("time", "")}

    def take(self, key: tuple[str, str, str], paths: set[FieldPath], api_version: str) -> None:
        """Give `paths` to `key` and take every overlapping path from the others."""
        for other, owned in self.sets.items():
            if other != key:
                owned -= {p for p in owned if any(_overlaps(p, q) for q in paths)}
        self.sets.setdefault(key, set()).update(paths)
        self.meta[key] = {"apiVersion": api_version, "time": now()}

    def entries(self) -> list[dict[str, Any]]:
        rendered = []
        for key, owned in self.sets.items():
            if not owned:
                continue
            manager, operation, subresource = key
            entry: dict[str, Any] = {
                "manager": manager, "operation": operation,
                "apiVersion": self.meta[key]["apiVersion"], "time": self.meta[key]["time"],
                "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(owned),
            }
            if subresource:
                entry["subresource"] = subresource
            rendered.append(entry)
        return rendered


def record_update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, subresource: str,
    api_version: str, skip_status: bool,
) -> list[dict[str, Any]]:
    """managedFields after a create/update/patch by `manager`: it owns what it changed."""
    managers = Managers((old or {}).get("metadata", {}).get("managedFields"))
    new_paths = leaf_paths(new, skip_status)
    changed = {p for p in new_paths if value_at(old, p) != value_at(new, p)} if old else new_paths
    for owned in managers.sets.values():
        owned -= {p for p in owned if value_at(new, p) is _MISSING}
    if changed:
        managers.take((manager, "Update", subresource), changed, api_version)
    return managers.entries()


def apply(
    live: dict[str, Any] | None, applied: dict[str, Any], manager: str, force: bool,
    subresource: str, api_version: str, skip_status: bool,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Server-side apply of `applied` onto `live`: (the merged object, its managedFields)."""
    base = copy.deepcopy(live) if live is not None else {}
    managers = Managers(base.get("metadata", {}).get("managedFields"))
    key = (manager, "Apply", subresource)
    applied_paths = leaf_paths(applied, skip_status)
    conflicts: dict[FieldPath, str] = {}
    for other, owned in managers.sets.items():
        if other[0] == manager:
            continue
        for path in applied_paths:
            for theirs in owned:
                if _overlaps(path, theirs):
                    shorter = path if len(path) <= len(theirs) else theirs
                    if value_at(base, shorter) != value_at(applied, shorter):
                        conflicts.setdefault(shorter, other[0])
    if conflicts and not force:
        raise _conflict_error(conflicts, api_version)
    if conflicts:
        for other, owned in managers.sets.items():
            if other[0] != manager:
                owned -= {p for p in owned if any(_overlaps(p, c) for c in conflicts)}
    previously = managers.sets.get(key, set())
    others = set().union(*(s for k, s in managers.sets.items() if k != key))
    for path in previously - applied_paths:
        if not any(_overlaps(path, q) for q in others | applied_paths):
            _remove_path(base, path)
    merged = deep_merge(base, {k: v for k, v in applied.items() if k != "metadata"})
    metadata = merged.setdefault("metadata", {})
    for meta_key, meta_value in (applied.get("metadata") or {}).items():
        if meta_key not in _SERVER_METADATA:
            metadata[meta_key] = deep_merge(metadata.get(meta_key), meta_value)
    managers.sets[key] = applied_paths  # shared fields (same value) stay shared
    managers.meta[key] = {"apiVersion": api_version, "time": now()}
    return merged, managers.entries()


def _render(path: FieldPath) -> str:
    return "".join(f".{p}" if p.replace("-", "_").isidentifier() else f"[{json.dumps(p)}]"
                   for p in path)


def _conflict_error(conflicts: dict[FieldPath, str], api_version: str) -> ApiError:
    causes = [
        {"reason": "FieldManagerConflict",
         "message": f'conflict with "{owner}" using {api_version}', "field": _render(path)}
        for path, owner in sorted(conflicts.items())
    ]
    if len(causes) == 1:
        message = f"Apply failed with 1 conflict: {causes[0]['message']}: {causes[0]['field']}"
    else:
        lines = "\n".join(f"- {c['field']}" for c in causes)
        owners = sorted(set(conflicts.values()))
        message = (f"Apply failed with {len(causes)} conflicts: conflicts with "
                   f"{', '.join(json.dumps(o) for o in owners)} using {api_version}:\n{lines}")
    return ApiError(409, "Conflict", message, {"causes": causes})
