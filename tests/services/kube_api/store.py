"""The object store: every object by resource, namespace and name, under one lock.

Objects are kept as JSON-like dicts exactly as the API returns them, except `apiVersion`,
which readers set to the version they asked for (no conversion between versions: a CRD's
versions all see the same fields). `revision` is the global resourceVersion counter; every
write takes the next value. Callers hold `lock` across read-modify-write sequences.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

Key = tuple[str, str]  # (namespace or "", name)


class Store:
    """Objects of every resource; `(group, plural)` -> `(namespace, name)` -> object."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.revision = 0
        self._objects: dict[tuple[str, str], dict[Key, dict[str, Any]]] = {}
        self.crd_revision = 0  # bumps when a CustomResourceDefinition changes

    def next_revision(self) -> str:
        with self.lock:
            self.revision += 1
            return str(self.revision)

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self._objects.get((group, plural), {}).get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def put(self, group: str, plural: str, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        with self.lock:
            bucket = self._objects.setdefault((group, plural), {})
            bucket[(metadata.get("namespace", ""), metadata["name"])] = copy.deepcopy(obj)
            if plural == "customresourcedefinitions":
                self.crd_revision += 1

    def remove(self, group: str, plural: str, namespace: str, name: str) -> None:
        with self.lock:
            self._objects.get((group, plural), {}).pop((namespace, name), None)
            if plural == "customresourcedefinitions":
                self.crd_revision += 1

    def items(self, group: str, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        """Objects of one resource, in one namespace or all, sorted by (namespace, name)."""
        with self.lock:
            bucket = self._objects.get((group, plural), {})
            return [
                copy.deepcopy(bucket[key])
                for key in sorted(bucket)
                if namespace is None or key[0] == namespace
            ]

    def drop_namespace(self, namespace: str) -> None:
        """Delete every namespaced object in `namespace` (what the namespace controller does)."""
        with self.lock:
            for bucket in self._objects.values():
                for key in [k for k in bucket if k[0] == namespace]:
                    del bucket[key]

    def drop_resource(self, group: str, plural: str) -> None:
        with self.lock:
            self._objects.pop((group, plural), None)

    def count(self) -> int:
        with self.lock:
            return sum(len(bucket) for bucket in self._objects.values())
