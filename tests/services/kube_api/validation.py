"""The validation every object gets from the real server, whatever its kind: ObjectMeta rules
(name syntax: a DNS-1123 subdomain, a label for Namespaces, a DNS-1035 label for
Services; label keys and values, the 256 KiB annotation limit), the 1 MiB ConfigMap and
Secret limit, and Secret `stringData` folded into base64 `data`.

Also: numbers beyond int32 in the int32 fields of PriorityClass and Job (400, the Go
decoder's error), PriorityClass rules (`system-` names reserved, user values at most 1e9,
value and preemptionPolicy immutable), and no new finalizers on a terminating object.
Called by `operations` on every create and update before storing; raises `ApiError` 422
Invalid with the real server's wording. In schema mode `check_update` adds the Job update
rules: spec.selector and spec.completionMode never change, spec.template only while the Job
is suspended and then only its labels, annotations, nodeSelector, tolerations and
schedulingGates (what Kueue changes on admission). Other built-in specs are not validated.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from tests.services.kube_api import errors
from tests.services.kube_api.resources import ResourceType

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
ANNOTATIONS_LIMIT = 256 * 1024
DATA_LIMIT = 1024 * 1024


def _invalid(resource: ResourceType, name: str, field: str, problem: str) -> errors.ApiError:
    return errors.invalid(resource.kind, resource.group, name, field, problem)


_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def check_name(resource: ResourceType, name: str) -> None:
    if (resource.kind, resource.group) == ("Service", ""):  # ValidateServiceName
        if len(name) > 63 or not _DNS_1035.fullmatch(name):
            raise _invalid(
                resource,
                name,
                "metadata.name",
                f'Invalid value: "{name}": a DNS-1035 label must consist of lower case '
                "alphanumeric characters or '-', start with an alphabetic character, and end "
                "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
                "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            )
        return
    label_only = resource.kind == "Namespace"
    pattern, limit = (_DNS_LABEL, 63) if label_only else (_SUBDOMAIN, 253)
    what = "RFC 1123 label" if label_only else "RFC 1123 subdomain"
    if len(name) > limit or not pattern.fullmatch(name):
        raise _invalid(
            resource,
            name,
            "metadata.name",
            f'Invalid value: "{name}": a lowercase {what} must consist of lower case '
            f"alphanumeric characters, '-' or '.', and must start and end with an "
            f"alphanumeric character",
        )


def _check_key(resource: ResourceType, name: str, field: str, key: str) -> None:
    prefix, _, short = key.rpartition("/")
    bad = (
        not short
        or len(short) > 63
        or not _QUALIFIED.fullmatch(short)
        or ("/" in key and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)))
    )
    if bad:
        raise _invalid(
            resource,
            name,
            field,
            f'Invalid value: "{key}": name part must consist of alphanumeric characters, '
            f"'-', '_' or '.', and must start and end with an alphanumeric character, with an "
            f"optional DNS subdomain prefix and '/'",
        )


def check_metadata(resource: ResourceType, obj: dict[str, Any]) -> None:
    metadata = obj["metadata"]
    name = metadata.get("name", "")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        raise errors.bad_request("metadata.labels must be an object of strings")
    for key, value in labels.items():
        _check_key(resource, name, "metadata.labels", key)
        if (
            not isinstance(value, str)
            or len(value) > 63
            or (value and not _QUALIFIED.fullmatch(value))
        ):
            raise _invalid(
                resource,
                name,
                "metadata.labels",
                f'Invalid value: "{value}": a valid label must be an empty string or consist '
                f"of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                f"alphanumeric character (at most 63 characters)",
            )
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise errors.bad_request("metadata.annotations must be an object of strings")
    for key in annotations:
        _check_key(resource, name, "metadata.annotations", key)
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        raise _invalid(
            resource,
            name,
            "metadata.annotations",
            f"Too long: may not be more than {ANNOTATIONS_LIMIT} bytes",
        )


def prepare_secret(obj: dict[str, Any]) -> None:
    """What the API server does to a Secret's `stringData`: merge it into `data`, base64."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def check_kind_rules(resource: ResourceType, obj: dict[str, Any]) -> None:
    if resource.kind not in ("ConfigMap", "Secret") or resource.group:
        return
    name = obj["metadata"].get("name", "")
    size = 0
    for field in ("data", "binaryData"):
        for key, value in (obj.get(field) or {}).items():
            if not isinstance(value, str):
                raise errors.bad_request(f"{field}[{json.dumps(key)}] must be a string")
            size += len(key) + (
                len(base64.b64decode(value))
                if field == "binaryData" or resource.kind == "Secret"
                else len(value.encode())
            )
    if size > DATA_LIMIT:
        raise _invalid(resource, name, "", f"Too long: must have at most {DATA_LIMIT} bytes")


_INT32_FIELDS = {
    "PriorityClass": ("PriorityClass", [("value",)]),
    "Job": (
        "JobSpec",
        [
            ("spec", "parallelism"),
            ("spec", "completions"),
            ("spec", "backoffLimit"),
            ("spec", "backoffLimitPerIndex"),
            ("spec", "maxFailedIndexes"),
            ("spec", "ttlSecondsAfterFinished"),
        ],
    ),
}
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}


def check_int32(resource: ResourceType, obj: dict[str, Any]) -> None:
    """The Go decoder refuses a number beyond int32 in an int32 field of a built-in kind."""
    struct, paths = _INT32_FIELDS.get(resource.kind, ("", []))
    for path in paths:
        value: Any = obj
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**31) <= value < 2**31:
            raise errors.bad_request(
                f'{resource.kind} in version "v1" cannot be handled as a {resource.kind}: json: '
                f"cannot unmarshal number {value} into Go struct field "
                f"{struct}.{'.'.join(path)} of type int32"
            )


def _forbidden(resource: ResourceType, name: str, field: str, detail: str) -> errors.ApiError:
    error = _invalid(resource, name, field, f"Forbidden: {detail}")
    error.details["causes"][0]["reason"] = "FieldValueForbidden"  # type: ignore[index]
    return error


def check_priority_class(resource: ResourceType, obj: dict[str, Any]) -> None:
    """scheduling/validation: `system-` names are reserved, user values at most 1e9."""
    if resource.kind != "PriorityClass":
        return
    name, value = obj["metadata"].get("name", ""), obj.get("value", 0)
    if name.startswith("system-"):
        if SYSTEM_PRIORITY_CLASSES.get(name) != value:
            raise _forbidden(
                resource,
                name,
                "metadata.name",
                "priority class names with 'system-' prefix are reserved for system use only",
            )
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        raise _forbidden(
            resource,
            name,
            "value",
            f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}",
        )


def validate(resource: ResourceType, obj: dict[str, Any]) -> None:
    """Everything above, for an object about to be stored (Secrets are folded first)."""
    if resource.kind == "Secret" and not resource.group:
        prepare_secret(obj)
    check_int32(resource, obj)
    check_metadata(resource, obj)
    check_kind_rules(resource, obj)
    check_priority_class(resource, obj)


_SUSPENDED_MUTABLE = {
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
}


def _without_mutable(template: Any) -> Any:
    if not isinstance(template, dict):
        return template
    kept = {k: dict(v) if isinstance(v, dict) else v for k, v in template.items()}
    for part, field in _SUSPENDED_MUTABLE:
        if isinstance(kept.get(part), dict):
            kept[part].pop(field, None)
    return kept


def check_update(resource: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """The immutability rules of built-in kinds the provider writes (Jobs, PriorityClasses)."""
    if resource.kind == "PriorityClass":
        for field in ("value", "preemptionPolicy"):
            if old.get(field) != new.get(field):
                name = new["metadata"].get("name", "")
                raise _forbidden(resource, name, field, "may not be changed in an update.")
        return
    if resource.kind == "Service" and not resource.group:
        before, after = old.get("spec") or {}, new.get("spec") or {}
        if "clusterIP" in after and before.get("clusterIP") != after.get("clusterIP"):
            name = new["metadata"].get("name", "")
            raise _invalid(
                resource,
                name,
                "spec.clusterIPs[0]",
                f'Invalid value: []string{{"{after.get("clusterIP")}"}}: may not change once set',
            )
        return
    if resource.kind != "Job" or resource.group != "batch":
        return
    before, after = old.get("spec") or {}, new.get("spec") or {}
    name = new["metadata"].get("name", "")
    for field in ("selector", "completionMode"):
        if before.get(field) != after.get(field) and field in before:
            raise _invalid(
                resource, name, f"spec.{field}", f'Invalid value: "{field}": field is immutable'
            )
    if before.get("template") == after.get("template"):
        return
    if before.get("suspend") and _without_mutable(before.get("template")) == _without_mutable(
        after.get("template")
    ):
        return
    raise _invalid(resource, name, "spec.template", 'Invalid value: "object": field is immutable')


def no_new_finalizers(resource: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """A terminating object may lose finalizers, never gain one (ValidateObjectMetaUpdate)."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    before = set(old["metadata"].get("finalizers") or [])
    added = [f for f in new["metadata"].get("finalizers") or [] if f not in before]
    if not added:
        return
    listed = "[]string{" + ", ".join(json.dumps(f) for f in added) + "}"
    problem = (
        "Forbidden: no new finalizers can be added if the object is being deleted, "
        f"found new finalizers {listed}"
    )
    error = errors.invalid(
        resource.kind, resource.group, new["metadata"]["name"], "metadata.finalizers", problem
    )
    error.details["causes"][0]["reason"] = "FieldValueForbidden"  # type: ignore[index]
    raise error
