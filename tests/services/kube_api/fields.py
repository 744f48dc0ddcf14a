"""Field ownership (metadata.managedFields) and server-side apply, schema-aware but simplified.

A field set is a set of paths; a path is a tuple of fieldsV1 elements exactly as the real
server writes them: `f:<field>` for a map key, `k:{"name":"x"}` for an item of a list with
`x-kubernetes-list-type: map` (plus a `.` leaf for the item itself), `v:"x"` for an item of a
`set` list. List types come from the CRD's structural schema for the version in use; for
metadata, `finalizers` is a set and `ownerReferences` a map keyed by uid; every other list
(all lists of built-in kinds' specs, e.g. containers) is one atomic leaf. Maps with
`x-kubernetes-map-type: atomic` are leaves too.

What apply does (`apply`): the applied configuration's leaf paths are the manager's new
Apply set. A path another manager owns whose live value differs from the applied one is a
conflict: 409 Conflict naming every such field, unless `force`, which takes them over.
Fields the manager applied before and no longer applies are removed from the object unless
another manager owns them. Then the configuration is merged into the live object (maps by
key, list-maps by item key, sets by union, other lists and scalars replaced). Non-apply
writes (`record_update`) give the writer (`fieldManager`, or the User-Agent's product
name) ownership of every field they changed and take it from the other managers.

A manager is its name *and* its operation, as the real server keys managedFields
(apimachinery managedfields/internal/managedfields.go, BuildManagerIdentifier: manager,
operation, subresource, and the apiVersion of an Update, never of an Apply). So an Update
(a merge patch, a PUT) and an Apply sent under the same name are two managers: an Apply
that changes a field the same name's Update entry owns is a 409 like any other conflict
(structured-merge-diff merge/update.go skips only the applier's own identifier). Conflict
messages name the owner as printManager does (managedfields/internal/conflict.go): an
Apply owner as `"name"`, an Update owner as `"name" using <apiVersion>`, a subresource's
as `"name" with subresource "status"`.
Gaps: no `.` self-markers for plain maps, no `i:` (index) elements, no defaulted-field
handling, no reset of fields on the status subresource beyond `.status`.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

from tests.services.kube_api.errors import ApiError

FieldPath = tuple[str, ...]
Schema = dict[str, Any] | None
_SERVER_METADATA = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
}
METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "finalizers": {"type": "array", "x-kubernetes-list-type": "set"},
        "ownerReferences": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
        },
    },
}
_MISSING = object()


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _child(schema: Schema, key: str) -> Schema:
    if not schema:
        return None
    properties = schema.get("properties") or {}
    if key in properties:
        return properties[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _list_type(schema: Schema) -> tuple[str, list[str]]:
    if not schema:
        return "atomic", []
    kind = schema.get("x-kubernetes-list-type", "atomic")
    return kind, list(schema.get("x-kubernetes-list-map-keys") or [])


def _item_key(item: Any, keys: list[str]) -> str | None:
    if not isinstance(item, dict) or not all(k in item for k in keys):
        return None
    return "k:" + json.dumps({k: item[k] for k in keys}, separators=(",", ":"))


def _value_key(item: Any) -> str:
    return "v:" + json.dumps(item, separators=(",", ":"))


def _walk(node: Any, schema: Schema, prefix: FieldPath, paths: set[FieldPath]) -> None:
    if isinstance(node, dict) and node and (schema or {}).get("x-kubernetes-map-type") != "atomic":
        for key, value in node.items():
            _walk(value, _child(schema, key), (*prefix, f"f:{key}"), paths)
        return
    if isinstance(node, list) and node:
        kind, keys = _list_type(schema)
        items = (schema or {}).get("items")
        item_keys = [_item_key(i, keys) for i in node] if kind == "map" else []
        if kind == "map" and all(item_keys):
            for item, key in zip(node, item_keys, strict=True):
                element = (*prefix, str(key))
                paths.add((*element, "."))
                for field, value in item.items():
                    _walk(value, _child(items, field), (*element, f"f:{field}"), paths)
            return
        if kind == "set":
            paths.update((*prefix, _value_key(item)) for item in node)
            return
    paths.add(prefix)


def object_schema(schema: Schema) -> dict[str, Any]:
    """The root schema of a kind with the metadata list rules spliced in."""
    root = dict(schema or {"type": "object"})
    root["properties"] = {**(root.get("properties") or {}), "metadata": METADATA_SCHEMA}
    return root


def leaf_paths(
    obj: dict[str, Any] | None, skip_status: bool, schema: Schema = None
) -> set[FieldPath]:
    """Every owned leaf path of an object (server-set metadata, apiVersion, kind excluded)."""
    paths: set[FieldPath] = set()
    root = object_schema(schema)
    for key, value in (obj or {}).items():
        if key in ("apiVersion", "kind") or (key == "status" and skip_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            for meta_key, meta_value in value.items():
                if meta_key not in _SERVER_METADATA:
                    _walk(
                        meta_value,
                        _child(METADATA_SCHEMA, meta_key),
                        ("f:metadata", f"f:{meta_key}"),
                        paths,
                    )
            continue
        _walk(value, _child(root, key), (f"f:{key}",), paths)
    return paths


def _step(node: Any, element: str) -> Any:
    if element == ".":
        return True if node is not _MISSING else _MISSING
    if element.startswith("f:"):
        return node.get(element[2:], _MISSING) if isinstance(node, dict) else _MISSING
    if not isinstance(node, list):
        return _MISSING
    if element.startswith("k:"):
        wanted = json.loads(element[2:])
        for item in node:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return item
        return _MISSING
    value = json.loads(element[2:])
    return value if value in node else _MISSING


def value_at(obj: Any, path: FieldPath) -> Any:
    node = obj if obj is not None else _MISSING
    for element in path:
        if node is _MISSING:
            return _MISSING
        node = _step(node, element)
    return node


def _remove_path(obj: dict[str, Any], path: FieldPath) -> None:
    if path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1])
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        found = _step(parent, last)
        if found is not _MISSING:
            parent.remove(found)


def _overlaps(left: FieldPath, right: FieldPath) -> bool:
    shorter = min(len(left), len(right))
    return left[:shorter] == right[:shorter]


def merge(live: Any, applied: Any, schema: Schema) -> Any:
    """Merge an applied configuration into a live value, following the schema's list types."""
    if (
        isinstance(live, dict)
        and isinstance(applied, dict)
        and (schema or {}).get("x-kubernetes-map-type") != "atomic"
    ):
        merged = copy.deepcopy(live)
        for key, value in applied.items():
            merged[key] = merge(live.get(key), value, _child(schema, key))
        return merged
    if isinstance(live, list) and isinstance(applied, list):
        kind, keys = _list_type(schema)
        if kind == "set":
            return copy.deepcopy(live) + [copy.deepcopy(v) for v in applied if v not in live]
        if kind == "map" and all(_item_key(i, keys) for i in [*live, *applied]):
            result = copy.deepcopy(live)
            items = (schema or {}).get("items")
            for item in applied:
                key = _item_key(item, keys)
                index = next(
                    (n for n, old in enumerate(result) if _item_key(old, keys) == key), None
                )
                if index is None:
                    result.append(copy.deepcopy(item))
                else:
                    result[index] = merge(result[index], item, items)
            return result
    return copy.deepcopy(applied)


def to_fields_v1(paths: set[FieldPath]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    paths: set[FieldPath] = set()
    for element, child in tree.items():
        path = (*prefix, element)
        if isinstance(child, dict) and child:
            paths |= from_fields_v1(child, path)
        else:
            paths.add(path)
    return paths


ManagerKey = tuple[str, str, str, str]
"""(manager, operation, apiVersion of an Update or "" for an Apply, subresource)."""


def manager_key(manager: str, operation: str, api_version: str, subresource: str) -> ManagerKey:
    """A manager as BuildManagerIdentifier keys it: an Apply's apiVersion is left out, so a
    manager applying through another version is still the same manager."""
    return (manager, operation, "" if operation == "Apply" else api_version, subresource)


def describe_manager(key: ManagerKey) -> str:
    """The owner as the real server names it in a conflict (conflict.go, printManager)."""
    manager, operation, api_version, subresource = key
    text = json.dumps(manager)
    if subresource:
        text += f" with subresource {json.dumps(subresource)}"
    return f"{text} using {api_version}" if operation == "Update" else text


def _identifier(key: ManagerKey) -> str:
    """BuildManagerIdentifier's JSON (field order of metav1.ManagedFieldsEntry, empty
    fields left out): conflict messages list owners sorted by it."""
    manager, operation, api_version, subresource = key
    named = {"manager": manager, "operation": operation, "apiVersion": api_version}
    named["subresource"] = subresource
    return json.dumps({k: v for k, v in named.items() if v}, separators=(",", ":"))


class Managers:
    """The managedFields entries of one object, by ManagerKey."""

    def __init__(self, entries: list[dict[str, Any]] | None) -> None:
        self.sets: dict[ManagerKey, set[FieldPath]] = {}
        self.meta: dict[ManagerKey, dict[str, str]] = {}
        for entry in entries or []:
            key = manager_key(
                entry.get("manager", ""),
                entry.get("operation", "Update"),
                entry.get("apiVersion", ""),
                entry.get("subresource", ""),
            )
            self.sets[key] = from_fields_v1(entry.get("fieldsV1") or {})
            self.meta[key] = {
                "apiVersion": entry.get("apiVersion", ""),
                "time": entry.get("time", ""),
            }

    def take(self, key: ManagerKey, paths: set[FieldPath], api_version: str) -> None:
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
            manager, operation, _, subresource = key
            entry: dict[str, Any] = {
                "manager": manager,
                "operation": operation,
                "apiVersion": self.meta[key]["apiVersion"],
                "time": self.meta[key]["time"],
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(owned),
            }
            if subresource:
                entry["subresource"] = subresource
            rendered.append(entry)
        return rendered


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    subresource: str,
    api_version: str,
    skip_status: bool,
    schema: Schema = None,
) -> list[dict[str, Any]]:
    """managedFields after a create/update/patch by `manager`: it owns what it changed."""
    managers = Managers((old or {}).get("metadata", {}).get("managedFields"))
    new_paths = leaf_paths(new, skip_status, schema)
    changed = {p for p in new_paths if value_at(old, p) != value_at(new, p)} if old else new_paths
    for owned in managers.sets.values():
        owned -= {p for p in owned if value_at(new, p) is _MISSING}
    if changed:
        managers.take(
            manager_key(manager, "Update", api_version, subresource), changed, api_version
        )
    return managers.entries()


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    manager: str,
    force: bool,
    subresource: str,
    api_version: str,
    skip_status: bool,
    schema: Schema = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Server-side apply of `applied` onto `live`: (the merged object, its managedFields)."""
    base = copy.deepcopy(live) if live is not None else {}
    managers = Managers(base.get("metadata", {}).get("managedFields"))
    key = manager_key(manager, "Apply", api_version, subresource)
    applied_paths = leaf_paths(applied, skip_status, schema)
    conflicts: dict[tuple[ManagerKey, FieldPath], None] = {}
    for other, owned in managers.sets.items():
        if other == key:  # only the applier's own Apply entry: its Update entry conflicts
            continue
        for path in applied_paths:
            for theirs in owned:
                if _overlaps(path, theirs):
                    shorter = path if len(path) <= len(theirs) else theirs
                    if value_at(base, shorter) != value_at(applied, shorter):
                        conflicts[(other, shorter)] = None
    if conflicts and not force:
        raise _conflict_error(list(conflicts))
    if conflicts:
        for other, owned in managers.sets.items():
            taken = [path for owner, path in conflicts if owner == other]
            owned -= {p for p in owned if any(_overlaps(p, c) for c in taken)}
    previously = managers.sets.get(key, set())
    others = set().union(*(s for k, s in managers.sets.items() if k != key))
    kept = others | applied_paths
    # whole list items first (so their fields go with them), then the deepest fields first
    for path in sorted(previously - applied_paths, key=lambda p: (p[-1] != ".", -len(p))):
        scope = path[:-1] if path[-1] == "." else path  # an item stays while others own in it
        if not any(_overlaps(path, q) or q[: len(scope)] == scope for q in kept):
            _remove_path(base, path)
    root = object_schema(schema)
    merged = merge(base, {k: v for k, v in applied.items() if k != "metadata"}, root)
    metadata = merged.setdefault("metadata", {})
    for meta_key, meta_value in (applied.get("metadata") or {}).items():
        if meta_key not in _SERVER_METADATA:
            metadata[meta_key] = merge(
                metadata.get(meta_key), meta_value, _child(METADATA_SCHEMA, meta_key)
            )
    managers.sets[key] = applied_paths  # shared fields (same value) stay shared
    managers.meta[key] = {"apiVersion": api_version, "time": now()}
    return merged, managers.entries()


def render(path: FieldPath) -> str:
    """A path as the real server names it in conflict messages: .spec.list[name="x"].field"""
    text = ""
    for element in path:
        if element.startswith("f:"):
            text += f".{element[2:]}"
        elif element.startswith("k:"):
            keys = json.loads(element[2:])
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        elif element.startswith("v:"):
            text += f"[={element[2:]}]"
    return text


def _conflict_error(conflicts: list[tuple[ManagerKey, FieldPath]]) -> ApiError:
    """The 409 of an apply (conflict.go, NewConflictError and getConflictMessage): one
    cause per field, the message grouping the fields by owner sorted by identifier."""
    ordered = sorted(conflicts, key=lambda c: (_identifier(c[0]), c[1]))
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {describe_manager(owner)}",
            "field": render(path),
        }
        for owner, path in ordered
    ]
    if len(causes) == 1:
        message = f"Apply failed with 1 conflict: {causes[0]['message']}: {causes[0]['field']}"
    else:
        lines: list[str] = []
        for owner in dict.fromkeys(owner for owner, _ in ordered):
            lines.append(f"conflicts with {describe_manager(owner)}:")
            lines += [f"- {render(path)}" for other, path in ordered if other == owner]
        message = f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})
