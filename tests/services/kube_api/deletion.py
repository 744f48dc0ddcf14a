"""The delete verbs: one object, or a collection filtered by selectors.

Objects with finalizers are only marked (deletionTimestamp) and stay until an update empties
their finalizers; deleting one again changes nothing. Deleting a Namespace deletes every
object in it at once, but objects with finalizers are only marked and hold the namespace
Terminating (creates in it answer 403) until the last is gone (`sweep_namespaces`, run
after every write). Deleting a CRD deletes every object of its kind. Preconditions
(uid, resourceVersion) and `dryRun` are honoured; `propagationPolicy` is checked and ignored.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.services.kube_api import errors, fields
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.listing import list_objects
from tests.services.kube_api.operations import is_dry_run, write
from tests.services.kube_api.resources import CRD_TYPE, NAMESPACE_TYPE
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Query, Target, present

# Kinds whose immediate delete answers the object (ReturnDeletedObject, or a custom delete that
# marks the object); every other kind answers a Status with details (name, group, kind, uid).
RETURNS_DELETED_OBJECT = ("Pod", "Namespace", "CustomResourceDefinition")


def delete(store: Store, target: Target, query: Query, body: Any) -> dict[str, Any]:
    options = body if isinstance(body, dict) else {}
    dry_run = is_dry_run(query, options)
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise errors.bad_request(f'propagationPolicy: Unsupported value: "{policy}"')
    group, plural, namespace = target.type.group, target.type.plural, target.namespace or ""
    if target.type is NAMESPACE_TYPE and target.name in ("default", "kube-system", "kube-public"):
        raise ApiError(
            403,
            "Forbidden",
            f'namespaces "{target.name}" is forbidden: this namespace may not be deleted',
            {"name": target.name, "kind": plural},
        )
    with store.lock:
        old = store.get(group, plural, namespace, target.name or "")
        if old is None:
            raise target.not_found()
        preconditions = options.get("preconditions") or {}
        for key in ("uid", "resourceVersion"):
            if preconditions.get(key) and preconditions[key] != old["metadata"].get(key):
                raise errors.conflict(
                    group,
                    plural,
                    target.name or "",
                    f"Precondition failed: {key.upper() if key == 'uid' else key} in "
                    f"precondition: {preconditions[key]}, {key} in object meta: "
                    f"{old['metadata'].get(key)}",
                )
        if old["metadata"].get("deletionTimestamp") and (
            old["metadata"].get("finalizers") or target.type is NAMESPACE_TYPE
        ):
            return present(target, old)  # already terminating: nothing changes
        gone = copy.deepcopy(old)
        gone["metadata"].setdefault("deletionTimestamp", fields.now())
        if target.type is NAMESPACE_TYPE:
            gone["status"] = {"phase": "Terminating"}
        if old["metadata"].get("finalizers") and target.type is not NAMESPACE_TYPE:
            gone["metadata"]["deletionGracePeriodSeconds"] = 0
            return write(store, target, gone, dry_run)
        if not dry_run:
            if target.type is NAMESPACE_TYPE and _empty_namespace(store, target.name or ""):
                return write(store, target, gone, dry_run)  # Terminating until they are gone
            if target.type is CRD_TYPE:
                store.drop_resource(old["spec"]["group"], old["spec"]["names"]["plural"])
            removed = store.remove(group, plural, namespace, target.name or "")
            gone["metadata"]["resourceVersion"] = (removed or old)["metadata"]["resourceVersion"]
    if target.type.kind in RETURNS_DELETED_OBJECT:
        return present(target, gone)
    details = {"name": target.name, "group": group, "kind": plural, "uid": old["metadata"]["uid"]}
    if not group:
        del details["group"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _empty_namespace(store: Store, namespace: str) -> bool:
    """What the namespace controller does: delete every object in the namespace (objects
    with finalizers are only marked); False when some remain and the namespace must wait."""
    held = False
    for group, plural, where, name in sorted(store.keys()):
        if where != namespace:
            continue
        found = store.get(group, plural, where, name)
        if found is None:
            continue
        if not found["metadata"].get("finalizers"):
            store.remove(group, plural, where, name)
            continue
        held = True
        if not found["metadata"].get("deletionTimestamp"):
            found["metadata"]["deletionTimestamp"] = fields.now()
            found["metadata"]["deletionGracePeriodSeconds"] = 0
            found["metadata"]["resourceVersion"] = store.next_revision()
            store.put(group, plural, found)
    return held


def sweep_namespaces(store: Store) -> None:
    """Remove Terminating namespaces whose last object is gone (the namespace controller)."""
    with store.lock:
        waiting = [
            n["metadata"]["name"]
            for n in store.peek("", "namespaces", "")
            if n["metadata"].get("deletionTimestamp")
        ]
        if not waiting:
            return
        occupied = {key[2] for key in store.keys()}
        for name in waiting:
            if name not in occupied:
                store.remove("", "namespaces", "", name)


def delete_collection(store: Store, target: Target, query: Query, body: Any) -> dict[str, Any]:
    """DELETE on a collection: delete every object the selectors match; answer the list."""
    if target.type.kind == "Namespace":
        raise errors.method_not_allowed()
    listed = list_objects(
        store, target, {k: v for k, v in query.items() if k in ("labelSelector", "fieldSelector")}
    )
    deleted = []
    for item in listed["items"]:
        metadata = item["metadata"]
        one = Target(target.type, target.version, metadata.get("namespace"), metadata["name"])
        try:
            deleted.append(delete(store, one, query, body))
        except ApiError as error:
            if error.code != 404:
                raise
    listed["items"] = deleted
    return listed
