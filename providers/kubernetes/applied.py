"""What this field manager last applied to an object, read back from its managedFields.

Server-side apply makes an applied configuration the manager's whole claim: fields it
applied before and leaves out of the next apply are removed from the object (when no other
manager owns them). So a write that changes one field of an object trainform manages must
apply everything else trainform applied too. Its model is client-go's extract-modify-apply
(k8s.io/apimachinery/pkg/util/managedfields/extract.go, ExtractInto): the managedFields
entry of `manager` with operation Apply on the main resource lists the fields it owns
(fieldsV1: `f:<field>` a map key, `k:{...}` a list item by its keys, `v:<json>` a set
value, `.` the item itself); those fields with their live values are the configuration.

Called by queue_sync.py (a Queue's policy onto its projects' ClusterQueues) and by the
provider's delete (a ClusterQueue's stopPolicy before it goes). Pure; no I/O.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def _entry(live: dict[str, Any], manager: str) -> dict[str, Any]:
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            return dict(entry.get("fieldsV1") or {})
    return {}


def _matches(item: Any, keys: dict[str, Any]) -> bool:
    return isinstance(item, dict) and all(item.get(k) == v for k, v in keys.items())


def _extract_list(value: list[Any], owned: dict[str, Any]) -> list[Any]:
    items: list[Any] = []
    for element, child in owned.items():
        if element.startswith("k:"):
            keys = json.loads(element[2:])
            found = next((item for item in value if _matches(item, keys)), None)
            if found is not None:
                inner = {k: v for k, v in child.items() if k != "."}
                items.append({**keys, **_extract(found, inner)} if inner else found)
        elif element.startswith("v:"):
            items.append(json.loads(element[2:]))
    return items


def _extract(value: Any, owned: dict[str, Any]) -> Any:
    """The parts of `value` that `owned` (a fieldsV1 tree) names; a leaf is its whole
    live value."""
    children = {k: v for k, v in owned.items() if k != "."}
    if not children:
        return copy.deepcopy(value)
    if isinstance(value, list):
        return _extract_list(value, children)
    if not isinstance(value, dict):
        return copy.deepcopy(value)
    found: dict[str, Any] = {}
    for element, child in children.items():
        if element.startswith("f:") and element[2:] in value:
            found[element[2:]] = _extract(value[element[2:]], child or {})
    return found


def applied_configuration(live: dict[str, Any], manager: str) -> dict[str, Any]:
    """The configuration `manager` last applied to `live`, with the live values: kind,
    apiVersion, name (and namespace) always; nothing more when it never applied."""
    metadata = live.get("metadata") or {}
    owned = _entry(live, manager)
    config = _extract(live, owned) if owned else {}
    config = config if isinstance(config, dict) else {}
    config.update(apiVersion=live.get("apiVersion"), kind=live.get("kind"))
    names = {"name": metadata.get("name")}
    if metadata.get("namespace"):
        names["namespace"] = metadata["namespace"]
    config["metadata"] = {**(config.get("metadata") or {}), **names}
    return config
