"""The list verb: selectors, `limit`/`continue` paging, and the `<Kind>List` document.

Items are sorted by (namespace, name); a continue token is base64 JSON holding the list's
resourceVersion and the last key served, like the real server's. Items of built-in kinds
are shown without apiVersion/kind, items of custom resources with them (as on the wire).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.services.kube_api import errors
from tests.services.kube_api.selectors import field_matcher, label_matcher
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Query, Target, present


def list_objects(store: Store, target: Target, query: Query) -> dict[str, Any]:
    labels = label_matcher(query.get("labelSelector"))
    by_field = field_matcher(query.get("fieldSelector"))
    with store.lock:
        revision = str(store.revision)
        items = [
            o
            for o in store.items(target.type.group, target.type.plural, target.namespace)
            if labels(o) and by_field(o)
        ]
    start = _continue_start(query.get("continue"))
    if start is not None:
        revision = start[0]
        items = [o for o in items if _key(o) > start[1]]
    metadata: dict[str, Any] = {"resourceVersion": revision}
    limit = int(query["limit"]) if query.get("limit", "").isdigit() else 0
    if 0 < limit < len(items):
        metadata["continue"] = _continue_token(revision, _key(items[limit - 1]))
        metadata["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    shown = [
        present(target, o)
        if target.type.custom
        else {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
        for o in items
    ]
    return {
        "apiVersion": target.api_version,
        "kind": target.type.list_kind,
        "metadata": metadata,
        "items": shown,
    }


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _continue_token(revision: str, last: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": int(revision), "start": last + "\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _continue_start(token: str | None) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(decoded["rv"]), str(decoded["start"]).rstrip("\x00")
    except (ValueError, KeyError, TypeError) as error:
        raise errors.bad_request(f"continue key is not valid: {error}") from None
