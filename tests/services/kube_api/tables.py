"""Server-side printing: a meta.k8s.io/v1 `Table` for clients that ask for one.

kubectl's human-readable `get` asks for `application/json;as=Table;g=meta.k8s.io;v=v1`.
The table has the columns NAME and AGE (what the real server prints for a custom resource
without printer columns); `additionalPrinterColumns` of the CRDs are not evaluated (gap).
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.services.kube_api.target import Target


def _age(created: str | None) -> str:
    if not created:
        return "<unknown>"
    then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    seconds = int((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def as_table(target: Target, listed: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for item in listed["items"]:
        metadata = item.get("metadata") or {}
        partial = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
        }
        rows.append({"cells": [metadata.get("name", ""),
                               _age(metadata.get("creationTimestamp"))],
                     "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": (listed.get("metadata") or {}).get("resourceVersion",
                                                                           "")},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": "Name must be unique within a namespace."},
            {"name": "Age", "type": "string", "format": "", "priority": 0,
             "description": "CreationTimestamp is a timestamp representing the server time "
                            "when this object was created."},
        ],
        "rows": rows,
    }
