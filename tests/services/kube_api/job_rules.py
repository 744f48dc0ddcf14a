"""The apiserver's Job rules beyond the pod spec (k8s.io/kubernetes/pkg/apis/batch/validation,
`ValidateJob` and `validateJobSpec`), for what a training platform's Jobs can get wrong:

- an Indexed Job's last pod hostname `<name>-<completions - 1>` must be a DNS-1123 label
  (the Job controller names every pod's hostname so): "will not able to create pod with
  invalid DNS label";
- the pod template's labels are label keys and values (the controller-uid and job-name
  labels the strategy adds carry the Job's name, so a name over 63 characters is refused);
- `podFailurePolicy`: at most 20 rules; each an action (Count, FailIndex with
  backoffLimitPerIndex, FailJob, Ignore) and exactly one of `onExitCodes` (operator In or
  NotIn, a container of the template, 1 to 255 values, ordered, unique, no 0 with In) and
  `onPodConditions` (at most 20, type a qualified name, status True, False or Unknown);
  `podReplacementPolicy` must then be Failed and the template's restartPolicy Never.
Each violation is a cause `(reason, field, message)` with the real server's wording;
podspec.validate lists them in the same 422 as the pod spec's own.
"""

from __future__ import annotations

import re
from typing import Any

Cause = tuple[str, str, str]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
MAX_RULES = 20
MAX_PATTERNS = 20
MAX_VALUES = 255
ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
OPERATORS = ("In", "NotIn")
STATUSES = ("False", "True", "Unknown")


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{value}"' for value in values)


def _go_ints(values: list[Any]) -> str:
    """How field.Invalid prints an []int32 (`%#v`)."""
    return "[]int32{" + ", ".join(str(v) for v in values) + "}"


def dns_label_problems(value: str) -> list[str]:
    """apimachinery IsDNS1123Label: what is wrong with `value` as a DNS-1123 label."""
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS_LABEL.fullmatch(value):
        problems.append(DNS_LABEL_MESSAGE)
    return problems


def indexed_name_causes(job: dict[str, Any]) -> list[Cause]:
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    if spec.get("completionMode") != "Indexed" or not isinstance(completions, int):
        return []
    if completions <= 0:
        return []
    name = job["metadata"].get("name", "")
    hostname = f"{name}-{completions - 1}"
    if not dns_label_problems(hostname):
        return []
    message = f'Invalid value: "{name}": will not able to create pod with invalid DNS label: '
    return [("FieldValueInvalid", "metadata.name", message + hostname)]


def _label_causes(labels: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in sorted((labels or {}).items()):
        prefix, _, short = str(key).rpartition("/")
        if (
            not short
            or len(short) > 63
            or not _QUALIFIED.fullmatch(short)
            or ("/" in str(key) and (len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)))
        ):
            causes.append(("FieldValueInvalid", path, f'Invalid value: "{key}": not a label key'))
        if not isinstance(value, str):
            continue
        if len(value) > 63:
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f'Invalid value: "{value}": must be no more than 63 characters',
                )
            )
        elif value and not _QUALIFIED.fullmatch(value):
            causes.append(
                (
                    "FieldValueInvalid",
                    path,
                    f'Invalid value: "{value}": a valid label must be '
                    "an empty string or consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    return causes


def _exit_code_causes(rule: dict[str, Any], path: str, containers: set[str]) -> list[Cause]:
    requirement = rule.get("onExitCodes") or {}
    causes: list[Cause] = []
    operator = requirement.get("operator")
    if not operator:
        causes.append(
            (
                "FieldValueRequired",
                f"{path}.operator",
                f"Required value: valid values: [{_quoted(OPERATORS)}]",
            )
        )
    elif operator not in OPERATORS:
        causes.append(
            (
                "FieldValueNotSupported",
                f"{path}.operator",
                f'Unsupported value: "{operator}": supported values: {_quoted(OPERATORS)}',
            )
        )
    name = requirement.get("containerName")
    if name is not None and name not in containers:
        causes.append(
            (
                "FieldValueInvalid",
                f"{path}.containerName",
                f'Invalid value: "{name}": must be '
                "one of the container or initContainer names in the pod template",
            )
        )
    values = list(requirement.get("values") or [])
    if not values:
        causes.append(
            (
                "FieldValueInvalid",
                f"{path}.values",
                "Invalid value: []: at least one value is required",
            )
        )
    elif len(values) > MAX_VALUES:
        causes.append(
            (
                "FieldValueTooMany",
                f"{path}.values",
                f"Too many: {len(values)}: must have at most {MAX_VALUES} items",
            )
        )
    for index, value in enumerate(values):
        if operator == "In" and value == 0:
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{path}.values[{index}]",
                    "Invalid value: 0: must not be 0 for the In operator",
                )
            )
        if value in values[:index]:
            causes.append(
                ("FieldValueDuplicate", f"{path}.values[{index}]", f"Duplicate value: {value}")
            )
    if values != sorted(values):
        causes.append(
            (
                "FieldValueInvalid",
                f"{path}.values",
                f"Invalid value: {_go_ints(values)}: must be ordered",
            )
        )
    return causes


def _condition_causes(patterns: list[Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    if len(patterns) > MAX_PATTERNS:
        causes.append(
            (
                "FieldValueTooMany",
                path,
                f"Too many: {len(patterns)}: must have at most {MAX_PATTERNS} items",
            )
        )
    for index, pattern in enumerate(patterns):
        here = f"{path}[{index}]"
        kind = str((pattern or {}).get("type") or "")
        if not kind or not _QUALIFIED.fullmatch(kind.rpartition("/")[2]):
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{here}.type",
                    f'Invalid value: "{kind}": name part '
                    "must consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
        status = (pattern or {}).get("status")
        if not status:
            causes.append(
                (
                    "FieldValueRequired",
                    f"{here}.status",
                    f"Required value: valid values: [{_quoted(STATUSES)}]",
                )
            )
        elif status not in STATUSES:
            causes.append(
                (
                    "FieldValueNotSupported",
                    f"{here}.status",
                    f'Unsupported value: "{status}": supported values: {_quoted(STATUSES)}',
                )
            )
    return causes


def _rule_causes(
    spec: dict[str, Any], rule: dict[str, Any], path: str, containers: set[str]
) -> list[Cause]:
    causes: list[Cause] = []
    action = rule.get("action")
    if not action:
        causes.append(
            (
                "FieldValueRequired",
                f"{path}.action",
                f"Required value: valid values: [{_quoted(ACTIONS)}]",
            )
        )
    elif action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
        causes.append(
            (
                "FieldValueInvalid",
                f"{path}.action",
                'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
            )
        )
    elif action not in ACTIONS:
        causes.append(
            (
                "FieldValueNotSupported",
                f"{path}.action",
                f'Unsupported value: "{action}": supported values: {_quoted(ACTIONS)}',
            )
        )
    exit_codes, conditions = rule.get("onExitCodes"), list(rule.get("onPodConditions") or [])
    if exit_codes is not None:
        causes += _exit_code_causes(rule, f"{path}.onExitCodes", containers)
    if conditions:
        causes += _condition_causes(conditions, f"{path}.onPodConditions")
    if exit_codes is not None and conditions:
        causes.append(
            (
                "FieldValueInvalid",
                path,
                "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
            )
        )
    if exit_codes is None and not conditions:
        causes.append(
            (
                "FieldValueInvalid",
                path,
                "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            )
        )
    return causes


def failure_policy_causes(spec: dict[str, Any]) -> list[Cause]:
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return []
    rules = list((policy or {}).get("rules") or [])
    causes: list[Cause] = []
    path = "spec.podFailurePolicy.rules"
    if len(rules) > MAX_RULES:
        causes.append(
            (
                "FieldValueTooMany",
                path,
                f"Too many: {len(rules)}: must have at most {MAX_RULES} items",
            )
        )
    template = (spec.get("template") or {}).get("spec") or {}
    containers = {
        str(c.get("name"))
        for key in ("containers", "initContainers")
        for c in template.get(key) or []
    }
    for index, rule in enumerate(rules):
        causes += _rule_causes(spec, rule or {}, f"{path}[{index}]", containers)
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement != "Failed":
        causes.append(
            (
                "FieldValueNotSupported",
                "spec.podReplacementPolicy",
                f'Unsupported value: "{replacement}": supported values: "Failed"',
            )
        )
    restart = template.get("restartPolicy")
    if restart == "OnFailure":
        causes.append(
            (
                "FieldValueInvalid",
                "spec.template.spec.restartPolicy",
                'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is '
                "specified",
            )
        )
    return causes


def job_causes(job: dict[str, Any]) -> list[Cause]:
    """Every rule above that `job` (defaulted, as the server stores it) breaks."""
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    return (
        indexed_name_causes(job)
        + _label_causes((template.get("metadata") or {}).get("labels"), "spec.template.labels")
        + failure_policy_causes(spec)
    )
