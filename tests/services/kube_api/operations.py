"""The writing verbs on one object: create, update (PUT), patch, server-side apply; and get.

Called by `server.py` with a `Target` (resource type, version, namespace, name,
subresource) and the parsed query; they return (HTTP code, body) or raise `ApiError`.
Rules kept from the real server: uid/resourceVersion/creationTimestamp/generation are
server-set; `.status` is ignored by writes to the main resource of a kind with a status
subresource and a status write changes nothing but `.status`; generation counts changes
outside metadata (and status); custom resources need a resourceVersion on PUT; objects
with finalizers are only marked on delete; deleting a Namespace or a CRD deletes what lies
in it; `dryRun=All` answers without storing. Listing and deleting live in listing.py and
deletion.py.
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from typing import Any

import yaml

from tests.services.kube_api import (
    admission,
    errors,
    fields,
    kueue_webhooks,
    podspec,
    schemas,
)
from tests.services.kube_api.defaults import apply_defaults
from tests.services.kube_api.patch import json_patch, merge_patch, strategic_merge_patch
from tests.services.kube_api.resources import CRD_TYPE, NAMESPACE_TYPE, crd_status
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Query, Target, present
from tests.services.kube_api.validation import (
    check_name,
    check_update,
    no_new_finalizers,
    validate,
)

MAX_GENERATED_NAME = 58
"""k8s.io/apiserver names.MaxGeneratedNameLength: 63 less the 5 random characters."""
GENERATED_NAME_LETTERS = "bcdfghjklmnpqrstvwxz2456789"  # utilrand.String's alphabet


def is_dry_run(query: Query, body: dict[str, Any] | None = None) -> bool:
    values = [query["dryRun"]] if "dryRun" in query else list((body or {}).get("dryRun") or [])
    for value in values:
        if value != "All":
            raise errors.bad_request(
                f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    return bool(values)


def _manager(query: Query, user_agent: str) -> str:
    return query.get("fieldManager") or user_agent.split("/", 1)[0][:128] or "unknown"


def _skip_status(target: Target) -> bool:
    return target.type.status_subresource


def _schema(target: Target) -> dict[str, Any] | None:
    return target.type.schema(target.version) if target.type.custom else None


def _spec_view(target: Target, obj: dict[str, Any]) -> dict[str, Any]:
    ignored = {"metadata", "apiVersion", "kind"}
    if target.type.status_subresource:
        ignored.add("status")
    return {k: v for k, v in obj.items() if k not in ignored}


def get(store: Store, target: Target) -> dict[str, Any]:
    found = store.get(
        target.type.group, target.type.plural, target.namespace or "", target.name or ""
    )
    if found is None:
        raise target.not_found()
    return present(target, found)


def _check_body(target: Target, body: Any, name: str | None) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise errors.bad_request("the object provided is not a JSON object")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if api_version is not None and api_version != target.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match "
            f"the expected API version ({target.api_version})"
        )
    if kind is not None and kind != target.type.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({target.type.kind})"
        )
    metadata = body.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise errors.bad_request("metadata must be an object")
    if target.type.namespaced:
        if metadata.get("namespace") not in (None, "", target.namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the "
                "namespace sent on the request"
            )
        metadata["namespace"] = target.namespace
    else:
        metadata.pop("namespace", None)
    if name is not None and metadata.get("name") not in (None, name):
        raise errors.bad_request(
            f"the name of the object ({metadata.get('name')}) does not "
            f"match the name on the URL ({name})"
        )
    if name is not None:
        metadata["name"] = name
    body["apiVersion"], body["kind"] = target.api_version, target.type.kind
    return body


def _require_namespace(store: Store, target: Target) -> None:
    if not target.type.namespaced:
        return
    found = store.get("", "namespaces", "", target.namespace or "")
    if found is None:
        raise errors.not_found("", "namespaces", target.namespace or "")
    if found["metadata"].get("deletionTimestamp"):
        raise errors.ApiError(
            403,
            "Forbidden",
            f"unable to create new content in namespace {target.namespace} because it is "
            f"being terminated",
            {"name": target.namespace, "kind": "namespaces"},
        )


def _prepare_create(target: Target, obj: dict[str, Any]) -> None:
    metadata = obj["metadata"]
    for key in (
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "managedFields",
        "selfLink",
    ):
        metadata.pop(key, None)
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = fields.now()
    metadata.pop("generation", None)
    if target.type.generation:
        metadata["generation"] = 1
    if target.type.status_subresource:
        obj.pop("status", None)
    if target.type is NAMESPACE_TYPE:
        metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif target.type is CRD_TYPE:
        obj["status"] = crd_status(obj)
    elif not target.type.custom and target.type.status_subresource:
        obj["status"] = {"phase": "Pending"} if target.type.kind == "Pod" else {}


def write(store: Store, target: Target, obj: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    if not dry_run:
        obj["metadata"]["resourceVersion"] = store.next_revision()
        store.put(target.type.group, target.type.plural, obj)
    return present(target, obj)


def create(store: Store, target: Target, body: Any, query: Query, agent: str) -> dict[str, Any]:
    obj = _check_body(target, body, None)
    if store.schema:
        schemas.prune(target.type, target.version, obj, query)
    dry_run = is_dry_run(query)
    metadata = obj["metadata"]
    if not metadata.get("name"):
        if not metadata.get("generateName"):
            raise errors.invalid(
                target.type.kind,
                target.type.group,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            )
        # names.SimpleNameGenerator: the base is cut to 58 characters, then 5 random ones
        suffix = "".join(random.choices(GENERATED_NAME_LETTERS, k=5))
        metadata["name"] = metadata["generateName"][:MAX_GENERATED_NAME] + suffix
    check_name(target.type, metadata["name"])
    with store.lock:
        _require_namespace(store, target)
        if (
            store.get(
                target.type.group, target.type.plural, target.namespace or "", metadata["name"]
            )
            is not None
        ):
            raise errors.already_exists(target.type.group, target.type.plural, metadata["name"])
        _prepare_create(target, obj)
        kueue_webhooks.mutate(store, target, obj)
        validate(target.type, obj)
        if store.defaults:
            apply_defaults(target.type, target.version, obj, creating=True)
        if store.schema:
            schemas.validate(target.type, target.version, obj)
            podspec.validate(target.type, obj)
            kueue_webhooks.check(store, target, obj)
        admission.admit(store, target, obj)
        metadata["managedFields"] = fields.record_update(
            None,
            obj,
            _manager(query, agent),
            "",
            target.api_version,
            _skip_status(target),
            _schema(target),
        )
        return write(store, target, obj, dry_run)


def _finish_update(
    store: Store,
    target: Target,
    old: dict[str, Any],
    new: dict[str, Any],
    dry_run: bool,
    managed: list[dict[str, Any]] | None,
    manager: str,
) -> dict[str, Any]:
    """Carry the server-set fields over, bump generation, store (or delete) the result."""
    if target.subresource == "status":
        status = new.get("status")
        new = copy.deepcopy(old)
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
    elif target.type.status_subresource:
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    validate(target.type, new)
    no_new_finalizers(target.type, old, new)
    if store.defaults:
        apply_defaults(target.type, target.version, new, creating=False)
    if store.schema:
        schemas.validate(target.type, target.version, new, old)
        podspec.validate(target.type, new)
        check_update(target.type, old, new)
        if target.subresource != "status":
            kueue_webhooks.check(store, target, new, old)
    metadata = new["metadata"]
    for key in (
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "name",
        "namespace",
    ):
        if key in old["metadata"]:
            metadata[key] = old["metadata"][key]
        else:
            metadata.pop(key, None)
    if target.type is NAMESPACE_TYPE:
        metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
    if target.type.generation and _spec_view(target, new) != _spec_view(target, old):
        metadata["generation"] = int(old["metadata"].get("generation", 1)) + 1
    metadata["managedFields"] = (
        managed
        if managed is not None
        else fields.record_update(
            old,
            new,
            manager,
            target.subresource,
            target.api_version,
            _skip_status(target) and target.subresource != "status",
            _schema(target),
        )
    )
    if _comparable(new) == _comparable(old):
        return present(target, old)  # a no-op write keeps the resourceVersion
    if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
        if not dry_run:
            gone = store.remove(
                target.type.group, target.type.plural, target.namespace or "", metadata["name"]
            )
            new["metadata"]["resourceVersion"] = (gone or old)["metadata"]["resourceVersion"]
        return present(target, new)
    return write(store, target, new, dry_run)


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without what a no-op write may change (resourceVersion, ownership times)."""
    shown = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    metadata = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    metadata["managedFields"] = [
        {k: v for k, v in entry.items() if k != "time"}
        for entry in metadata.get("managedFields") or []
    ]
    shown["metadata"] = metadata
    return shown


def update(store: Store, target: Target, body: Any, query: Query, agent: str) -> dict[str, Any]:
    obj = _check_body(target, body, target.name)
    if store.schema:
        schemas.prune(target.type, target.version, obj, query)
    dry_run = is_dry_run(query)
    with store.lock:
        old = store.get(
            target.type.group, target.type.plural, target.namespace or "", target.name or ""
        )
        if old is None:
            raise target.not_found()
        uid = obj["metadata"].get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise errors.conflict(
                target.type.group,
                target.type.plural,
                target.name or "",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{old['metadata']['uid']}",
            )
        wanted = obj["metadata"].get("resourceVersion")
        if not wanted and target.type.custom:
            raise errors.invalid(
                target.type.kind,
                target.type.group,
                target.name or "",
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.stale(target.type.group, target.type.plural, target.name or "")
        return _finish_update(store, target, old, obj, dry_run, None, _manager(query, agent))


PATCH_TYPES = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
)


def patch(
    store: Store,
    target: Target,
    raw: bytes,
    content_type: str,
    query: Query,
    agent: str,
) -> tuple[int, dict[str, Any]]:
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in PATCH_TYPES[:4] or (
        kind.startswith("application/strategic") and target.type.custom
    ):
        raise errors.unsupported_media_type(kind)
    dry_run = is_dry_run(query)
    try:
        body = yaml.safe_load(raw.decode()) if kind.endswith("yaml") else json.loads(raw or b"null")
    except (ValueError, yaml.YAMLError) as error:
        raise errors.bad_request(f"error decoding patch: {error}") from None
    if kind.endswith("apply-patch+yaml"):
        return _apply(store, target, body, query, dry_run)
    if kind.endswith("json-patch+json") and not isinstance(body, list):
        raise errors.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    if not kind.endswith("json-patch+json") and not isinstance(body, dict):
        raise errors.bad_request("the body of a merge patch must be a JSON object")
    with store.lock:
        old = store.get(
            target.type.group, target.type.plural, target.namespace or "", target.name or ""
        )
        if old is None:
            raise target.not_found()
        current = present(target, old)
        if kind.endswith("json-patch+json"):
            patched = json_patch(current, body)
        elif kind.startswith("application/strategic"):
            patched = strategic_merge_patch(current, body)
        else:
            patched = merge_patch(current, body)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.unprocessable("the patched object is not a valid object")
        wanted = patched["metadata"].get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.stale(target.type.group, target.type.plural, target.name or "")
        patched = _check_body(target, patched, target.name)
        if store.schema:
            schemas.prune(target.type, target.version, patched, query)
        return 200, _finish_update(
            store, target, old, patched, dry_run, None, _manager(query, agent)
        )


def _apply(
    store: Store,
    target: Target,
    body: Any,
    query: Query,
    dry_run: bool,
) -> tuple[int, dict[str, Any]]:
    manager = query.get("fieldManager")
    if not manager:
        raise errors.bad_request(
            "PATCH, application/apply-patch+yaml requests require a fieldManager query parameter"
        )
    force = query.get("force", "false").lower() == "true"
    if not isinstance(body, dict) or not body.get("apiVersion") or not body.get("kind"):
        raise errors.bad_request(
            "error decoding YAML: Object 'Kind' is missing or apiVersion "
            "is not set: an applied configuration names both"
        )
    applied = _check_body(target, body, target.name)
    if store.schema:
        schemas.refuse_undeclared(target.type, target.version, applied)
    if applied["metadata"].get("managedFields"):
        raise errors.bad_request("metadata.managedFields must be nil")
    with store.lock:
        old = store.get(
            target.type.group, target.type.plural, target.namespace or "", target.name or ""
        )
        if old is None:
            if target.subresource:
                raise target.not_found()
            check_name(target.type, target.name or "")
            _require_namespace(store, target)
            obj = copy.deepcopy(applied)  # defaults and server fields stay out of `config`
            _prepare_create(target, obj)
            kueue_webhooks.mutate(store, target, obj)
            validate(target.type, obj)
            if store.defaults:
                apply_defaults(target.type, target.version, obj, creating=True)
            if store.schema:
                schemas.validate(target.type, target.version, obj)
                podspec.validate(target.type, obj)
                kueue_webhooks.check(store, target, obj)
            admission.admit(store, target, obj)
            skip = {"status"} if target.type.status_subresource else set()
            config = {k: v for k, v in applied.items() if k not in skip}
            _, managed = fields.apply(
                None,
                config,
                manager,
                force,
                "",
                target.api_version,
                _skip_status(target),
                _schema(target),
            )
            obj["metadata"]["managedFields"] = managed
            return 201, write(store, target, obj, dry_run)
        wanted = applied["metadata"].get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.stale(target.type.group, target.type.plural, target.name or "")
        if target.subresource == "status":
            config = {k: v for k, v in applied.items() if k in ("apiVersion", "kind", "status")}
            config["metadata"] = {}
        elif target.type.status_subresource:
            config = {k: v for k, v in applied.items() if k != "status"}
        else:
            config = applied
        merged, managed = fields.apply(
            present(target, old),
            config,
            manager,
            force,
            target.subresource,
            target.api_version,
            _skip_status(target) and target.subresource != "status",
            _schema(target),
        )
        return 200, _finish_update(store, target, old, merged, dry_run, managed, manager)
