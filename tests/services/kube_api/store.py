"""The object store: every object by resource, namespace and name, under one lock.

Objects are kept as JSON-like dicts exactly as the API returns them, except `apiVersion`,
which readers set to the version they asked for (no conversion between versions: a CRD's
versions all see the same fields). `revision` is the global resourceVersion counter; every
write takes the next value, and every stored change is appended to the event history that
watches read (`events_after`, woken through `changed`). Callers hold `lock` across
read-modify-write sequences.
"""

from __future__ import annotations

import bisect
import copy
import threading
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True)
class Event:
    """One stored change, as a watch reports it."""

    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    group: str
    plural: str
    object: dict[str, Any]


class Store:
    """Objects of every resource; `(group, plural)` -> `(namespace, name)` -> object."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.revision = 0
        self.crd_revision = 0  # bumps when a CustomResourceDefinition changes
        self.defaults = False  # a server option: fill in defaults (see defaults.py)
        self.schema = False  # a server option: prune and validate by CRD schemas (schemas.py)
        self._objects: dict[tuple[str, str], dict[Key, dict[str, Any]]] = {}
        # (namespace, group, plural) written since the last quota refresh (admission.py)
        self.touched: set[tuple[str, str, str]] = set()
        # (group, plural) written since the Kueue stand-in last reconciled (kueue.py): its
        # own set, so a quota refresh of a concurrent request never hides a write from it
        self.kueue_touched: set[tuple[str, str]] = set()
        self._events: list[Event] = []
        self._event_revisions: list[int] = []

    def next_revision(self) -> str:
        with self.lock:
            self.revision += 1
            return str(self.revision)

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self._objects.get((group, plural), {}).get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def _record(self, kind: str, group: str, plural: str, obj: dict[str, Any]) -> None:
        self.touched.add((obj["metadata"].get("namespace", ""), group, plural))
        self.kueue_touched.add((group, plural))
        revision = int(obj["metadata"]["resourceVersion"])
        self._events.append(Event(revision, kind, group, plural, copy.deepcopy(obj)))
        self._event_revisions.append(revision)
        if plural == "customresourcedefinitions":
            self.crd_revision += 1
        self.changed.notify_all()

    def put(self, group: str, plural: str, obj: dict[str, Any]) -> None:
        """Store `obj` (its metadata.resourceVersion already set by `next_revision`)."""
        metadata = obj["metadata"]
        with self.lock:
            bucket = self._objects.setdefault((group, plural), {})
            key = (metadata.get("namespace", ""), metadata["name"])
            kind = "MODIFIED" if key in bucket else "ADDED"
            bucket[key] = copy.deepcopy(obj)
            self._record(kind, group, plural, obj)

    def remove(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Delete one object; answer it with the deletion's resourceVersion (None if absent)."""
        with self.lock:
            found = self._objects.get((group, plural), {}).pop((namespace, name), None)
            if found is None:
                return None
            found["metadata"]["resourceVersion"] = self.next_revision()
            self._record("DELETED", group, plural, found)
            return found

    def items(self, group: str, plural: str, namespace: str | None) -> list[dict[str, Any]]:
        """Objects of one resource, in one namespace or all, sorted by (namespace, name)."""
        with self.lock:
            bucket = self._objects.get((group, plural), {})
            return [
                copy.deepcopy(bucket[key])
                for key in sorted(bucket)
                if namespace is None or key[0] == namespace
            ]

    def peek(self, group: str, plural: str, namespace: str) -> list[dict[str, Any]]:
        """The stored objects themselves (no copies), for read-only counting under `lock`."""
        with self.lock:
            bucket = self._objects.get((group, plural), {})
            return [obj for key, obj in bucket.items() if key[0] == namespace]

    def drop_namespace(self, namespace: str) -> None:
        """Delete every namespaced object in `namespace` (what the namespace controller does)."""
        with self.lock:
            for (group, plural), bucket in list(self._objects.items()):
                for key in [k for k in bucket if k[0] == namespace]:
                    self.remove(group, plural, *key)

    def drop_resource(self, group: str, plural: str) -> None:
        """Delete every object of one resource (what removing its CRD does)."""
        with self.lock:
            for key in list(self._objects.get((group, plural), {})):
                self.remove(group, plural, *key)

    def keys(self) -> set[tuple[str, str, str, str]]:
        """(group, plural, namespace, name) of every stored object."""
        with self.lock:
            return {
                (group, plural, *key)
                for (group, plural), bucket in self._objects.items()
                for key in bucket
            }

    def events_after(self, revision: int) -> list[Event]:
        with self.lock:
            start = bisect.bisect_right(self._event_revisions, revision)
            return self._events[start:]

    def count(self) -> int:
        with self.lock:
            return sum(len(bucket) for bucket in self._objects.values())
