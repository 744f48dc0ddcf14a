"""A part of the apiserver's pod spec validation (k8s.io/kubernetes/pkg/apis/core/validation),
for Pods and the pod templates of Jobs: what a training platform's manifests can get wrong.

- tolerations: the key is a label name; an empty key needs operator Exists; Exists takes
  no value, Equal a label value; operators Equal/Exists and effects NoSchedule,
  PreferNoSchedule, NoExecute only; tolerationSeconds only with NoExecute;
- nodeSelector: label keys and values;
- containers: names are DNS labels and unique; resource names are standard or fully
  qualified (`nvidia.com/gpu`, not `gpu`); a request is at most its limit; an extended
  resource (not cpu, memory, ephemeral-storage, hugepages-*) cannot be overcommitted: it
  needs a limit, and a request equal to it;
- hostname and subdomain: DNS-1123 labels;
- a Job's template: restartPolicy OnFailure or Never; the Job rules of job_rules.py
  (an Indexed Job's pod hostnames, template labels, podFailurePolicy).
Every violation is a cause of one 422 Invalid (`Job.batch "x" is invalid: [...]`), with the
real server's field paths and wording. Called by validation.validate in strict mode.
"""

from __future__ import annotations

import re
from typing import Any

from tests.services.kube_api import job_rules, quantities
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.resources import ResourceType

_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_STANDARD = ("cpu", "memory", "ephemeral-storage")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

Cause = tuple[str, str, str]  # (reason, field, message)


def _label_name_problem(key: str) -> str:
    prefix, _, short = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not short or len(short) > 63 or not _QUALIFIED.fullmatch(short):
        return _NAME_PART
    return ""


def _label_value_ok(value: Any) -> bool:
    return isinstance(value, str) and (
        not value or (len(value) <= 63 and bool(_QUALIFIED.fullmatch(value)))
    )


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _tolerations(items: list[Any], path: str, causes: list[Cause]) -> None:
    for i, toleration in enumerate(items):
        here = f"{path}[{i}]"
        key, operator = toleration.get("key", ""), toleration.get("operator", "")
        value = toleration.get("value", "")
        if key:
            problem = _label_name_problem(key)
            if problem:
                causes.append(
                    ("FieldValueInvalid", f"{here}.key", f"Invalid value: {_quote(key)}: {problem}")
                )
        elif operator != "Exists":
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{here}.operator",
                    f"Invalid value: {_quote(operator)}: operator must be Exists when `key` is "
                    'empty, which means "match all values and all keys"',
                )
            )
        if (
            toleration.get("tolerationSeconds") is not None
            and toleration.get("effect") != "NoExecute"
        ):
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{here}.effect",
                    f"Invalid value: {_quote(toleration.get('effect', ''))}: effect must be "
                    "'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator in ("", "Equal"):
            if not _label_value_ok(value):
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{here}.operator",
                        f"Invalid value: {_quote(value)}: {_LABEL_VALUE}",
                    )
                )
        elif operator == "Exists":
            if value:
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{here}.operator",
                        'Invalid value: "Exists": value must be empty when '
                        "`operator` is 'Exists'",
                    )
                )
        else:
            causes.append(
                (
                    "FieldValueNotSupported",
                    f"{here}.operator",
                    f'Unsupported value: {_quote(operator)}: supported values: "Equal", "Exists"',
                )
            )
        effect = toleration.get("effect", "")
        if effect and effect not in _EFFECTS:
            supported = ", ".join(f'"{e}"' for e in _EFFECTS)
            causes.append(
                (
                    "FieldValueNotSupported",
                    f"{here}.effect",
                    f"Unsupported value: {_quote(effect)}: supported values: {supported}",
                )
            )


def _extended(name: str) -> bool:
    return name not in _STANDARD and not name.startswith("hugepages-") and "/" in name


def _resources(container: dict[str, Any], path: str, causes: list[Cause]) -> None:
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    for kind, values in (("limits", limits), ("requests", requests)):
        for name in values:
            if name in _STANDARD or name.startswith("hugepages-"):
                continue
            if "/" not in name or _label_name_problem(name):
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{path}.resources.{kind}[{name}]",
                        f"Invalid value: {_quote(name)}: must be a standard resource type or "
                        "fully qualified",
                    )
                )
    for name, value in requests.items():
        try:
            asked = quantities.parse(value)
        except ValueError:
            continue
        where = f"{path}.resources.requests[{name}]"
        if name in limits:
            try:
                limit = quantities.parse(limits[name])
            except ValueError:
                continue
            if asked > limit:
                causes.append(
                    (
                        "FieldValueInvalid",
                        where,
                        f"Invalid value: {_quote(str(value))}: must be less than or equal "
                        f"to {name} limit of {limits[name]}",
                    )
                )
            elif _extended(name) and asked != limit:
                causes.append(
                    (
                        "FieldValueInvalid",
                        where,
                        f"Invalid value: {_quote(str(value))}: must be equal to {name} "
                        f"limit of {limits[name]}",
                    )
                )
        elif _extended(name):
            causes.append(
                (
                    "FieldValueRequired",
                    f"{path}.resources.limits[{name}]",
                    "Required value: Limit must be set for non overcommitable resources",
                )
            )


def pod_spec(spec: dict[str, Any], path: str, causes: list[Cause]) -> None:
    """Append a cause for every rule above that `spec` (at `path`) breaks."""
    for field in ("hostname", "subdomain"):
        value = spec.get(field)
        if value:
            for problem in job_rules.dns_label_problems(str(value)):
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{path}.{field}",
                        f"Invalid value: {_quote(value)}: {problem}",
                    )
                )
    _tolerations(list(spec.get("tolerations") or []), f"{path}.tolerations", causes)
    for key, value in sorted((spec.get("nodeSelector") or {}).items()):
        problem = _label_name_problem(key)
        if problem:
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{path}.nodeSelector",
                    f"Invalid value: {_quote(key)}: {problem}",
                )
            )
        if not _label_value_ok(value):
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{path}.nodeSelector",
                    f"Invalid value: {_quote(value)}: {_LABEL_VALUE}",
                )
            )
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            here = f"{path}.{kind}[{i}]"
            name = container.get("name", "")
            if not name:
                causes.append(("FieldValueRequired", f"{here}.name", "Required value"))
            elif len(name) > 63 or not _DNS_LABEL.fullmatch(name):
                causes.append(
                    (
                        "FieldValueInvalid",
                        f"{here}.name",
                        f"Invalid value: {_quote(name)}: a lowercase RFC 1123 label must "
                        "consist of lower case alphanumeric characters or '-', and must start "
                        "and end with an alphanumeric character",
                    )
                )
            elif name in seen:
                causes.append(
                    ("FieldValueDuplicate", f"{here}.name", f"Duplicate value: {_quote(name)}")
                )
            seen.add(name)
            _resources(container, here, causes)


def validate(resource: ResourceType, obj: dict[str, Any]) -> None:
    """422 Invalid listing every broken pod spec rule of a Pod or a Job's template."""
    causes: list[Cause] = []
    if (resource.kind, resource.group) == ("Pod", ""):
        pod_spec(obj.get("spec") or {}, "spec", causes)
    elif (resource.kind, resource.group) == ("Job", "batch"):
        template = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        pod_spec(template, "spec.template.spec", causes)
        policy = template.get("restartPolicy")
        if policy not in (None, "OnFailure", "Never"):
            causes.append(
                (
                    "FieldValueNotSupported",
                    "spec.template.spec.restartPolicy",
                    f'Unsupported value: {_quote(policy)}: supported values: "OnFailure", "Never"',
                )
            )
        causes += job_rules.job_causes(obj)
    else:
        return
    if not causes:
        return
    name = obj["metadata"].get("name", "")
    texts = [f"{field}: {message}" for _, field, message in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified = f"{resource.kind}.{resource.group}" if resource.group else resource.kind
    details: dict[str, Any] = {"name": name, "kind": resource.kind}
    if resource.group:
        details["group"] = resource.group
    details["causes"] = [{"reason": r, "field": f, "message": m} for r, f, m in causes]
    raise ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details)
