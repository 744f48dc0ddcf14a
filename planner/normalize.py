"""Normalized specs: the exact, comparable form of a document that state, diffs and hashes use.

Quantities become canonical numbers (`2Ti` -> "2199023255552"), durations canonical
spellings (`90m` -> "1h30m"), defaults are filled in and unset optional fields left out,
so two spellings of the same intent never show up as a change. `humanize` turns canonical
values back into what a person reads in a plan. A spec's hash is taken over its masked form
(`specs.secrets.mask_document`), so the hash state keeps is no fast oracle for a secret
parameter; a changed secret still changes the hash.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.planner.state import digest
from trainform.specs.models.base import DocumentBase
from trainform.specs.secrets import mask_document

_DURATION_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def normalize_document(document: DocumentBase) -> dict[str, Any]:
    """{metadata: {labels, annotations}, spec: {...}} with canonical values, defaults filled,
    unset optional fields left out (pydantic's serializer does it, in one pass)."""
    spec = document.spec.model_dump(by_alias=True, exclude_none=True)  # type: ignore[attr-defined]
    metadata = document.metadata
    return {
        "metadata": {"labels": dict(metadata.labels), "annotations": dict(metadata.annotations)},
        "spec": spec,
    }


def spec_hash(normalized: dict[str, Any]) -> str:
    return digest(mask_document(normalized))


_SORTED_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def humanize(value: Any) -> str:
    """A canonical value as a person writes it: 2199023255552 -> 2Ti."""
    if isinstance(value, str) and value.isdigit() and len(value) >= 4:
        number = int(value)
        for suffix, size in _BINARY:
            if number % size == 0:
                return f"{number // size}{suffix}"
    if isinstance(value, str):
        plain = value and value.strip() == value and " " not in value and value.isprintable()
        return value if plain else repr(value)  # control characters never reach a terminal
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(
        type(item) is str and item.isprintable() and '"' not in item and "\\" not in item
        for item in value
    ):
        return "[" + ", ".join(f'"{item}"' for item in value) + "]"
    if isinstance(value, list | dict):
        return _SORTED_JSON.encode(value)
    return str(value)
