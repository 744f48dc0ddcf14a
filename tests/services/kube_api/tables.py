"""Server-side printing: a meta.k8s.io/v1 `Table` for clients that ask for one.

kubectl's human-readable `get` asks for `application/json;as=Table;g=meta.k8s.io;v=v1`.
A custom resource's table has NAME and its CRD's `additionalPrinterColumns` for the version
(or NAME and AGE when it declares none), as the real server prints it; JSONPaths are
evaluated for plain field paths and `[?(@.field=='value')]` filters. Built-in kinds get
NAME and AGE only (the real server prints more columns: a gap).
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from tests.services.kube_api.target import Target

_AGE = {
    "name": "Age",
    "type": "date",
    "jsonPath": ".metadata.creationTimestamp",
    "description": "CreationTimestamp is a timestamp representing the server time when "
    "this object was created.",
}
_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[\?\(@\.([A-Za-z0-9_-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def _age(created: Any) -> str:
    if not isinstance(created, str):
        return "<unknown>"
    then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    seconds = int((datetime.datetime.now(datetime.UTC) - then).total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def evaluate(obj: Any, path: str) -> Any:
    """A printer column's JSONPath on one object; None when a step finds nothing."""
    nodes = [obj]
    for match in _STEP.finditer(path):
        field, key, value = match.groups()
        if field is not None:
            nodes = [n[field] for n in nodes if isinstance(n, dict) and field in n]
        else:
            nodes = [
                item
                for n in nodes
                if isinstance(n, list)
                for item in n
                if isinstance(item, dict) and str(item.get(key)) == value
            ]
    return nodes[0] if nodes else None


def _cell(column: dict[str, Any], obj: dict[str, Any]) -> Any:
    value = evaluate(obj, column.get("jsonPath", ""))
    if column.get("type") == "date":
        return _age(value) if value is not None else "<unknown>"
    return value


def as_table(target: Target, listed: dict[str, Any]) -> dict[str, Any]:
    declared = target.type.columns.get(target.version) or [] if target.type.custom else []
    columns = declared or [_AGE]
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "priority": 0,
            "description": "Name must be unique within a namespace.",
        }
    ]
    definitions += [
        {
            "name": c["name"],
            "type": c.get("type", "string"),
            "format": c.get("format", ""),
            "priority": c.get("priority", 0),
            "description": c.get("description", ""),
        }
        for c in columns
    ]
    rows = []
    for item in listed["items"]:
        metadata = item.get("metadata") or {}
        rows.append(
            {
                "cells": [metadata.get("name", ""), *(_cell(c, item) for c in columns)],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": (listed.get("metadata") or {}).get("resourceVersion", "")},
        "columnDefinitions": definitions,
        "rows": rows,
    }
