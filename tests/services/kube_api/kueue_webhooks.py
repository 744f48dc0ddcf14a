"""Kueue's validating admission webhooks (pkg/webhooks of kubernetes-sigs/kueue), which a
cluster with Kueue installed runs on every create and update of its kinds.

Run by `operations` after schema and CEL validation when the server is strict (a Kueue
installation brings its webhooks with its CRDs). A refusal is what the API server makes of
a webhook's denial: 403 Forbidden, `admission webhook "vclusterqueue.kb.io" denied the
request: <field errors>` (one error as is, several as `[a, b]`).

- ClusterQueue (vclusterqueue.kb.io) and Cohort (vcohort.kb.io): every covered resource
  name is a qualified name and appears in one resource group only, every flavor in one
  group only; each flavor lists its resources in the order of coveredResources; quotas
  are not negative; borrowingLimit and lendingLimit need a cohort (a parent for a Cohort);
  a ClusterQueue's lendingLimit is at most its nominalQuota; a fairSharing weight is not
  negative nor in (0, 1n] (common.go validateFairSharing: such a weight would collapse).
- ResourceFlavor (vresourceflavor.kb.io): nodeLabels are valid labels; nodeTaints have
  label-like keys and values and are unique per key and effect.
- batch/v1 Job (mjob.kb.io, vjob.kb.io): a Job created with a queue name is suspended;
  the queue-name label is a DNS subdomain, `kueue.x-k8s.io/max-exec-time-seconds` (a
  label) a positive integer, the pod template carries at most one of the
  podset-{required,preferred,unconstrained}-topology annotations and names valid label
  keys in them; on update the priority-class label never changes, the queue name not
  while the Job runs, the max-exec-time label only while the Job stays suspended.
"""

from __future__ import annotations

import re
from typing import Any

from tests.services.kube_api import quantities
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Target

_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
    "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
WEBHOOKS = {
    "Job": "vjob.kb.io",
    "ClusterQueue": "vclusterqueue.kb.io",
    "Cohort": "vcohort.kb.io",
    "ResourceFlavor": "vresourceflavor.kb.io",
}


def _qualified_name_problem(name: str) -> str:
    prefix, _, short = name.rpartition("/")
    if "/" in name and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        return (
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character"
        )
    if not short or len(short) > 63 or not _QUALIFIED.fullmatch(short):
        return _NAME_PART
    return ""


def _invalid(path: str, value: Any, detail: str) -> str:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    return f"{path}: Invalid value: {shown}: {detail}"


def _quota_text(value: Any) -> str:
    return str(value)


def _resource_groups(spec: dict[str, Any], has_parent: bool, is_cohort: bool) -> list[str]:
    errors: list[str] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    parent_word = "parent" if is_cohort else "cohort"
    for i, group in enumerate(spec.get("resourceGroups") or []):
        base = f"spec.resourceGroups[{i}]"
        covered = list(group.get("coveredResources") or [])
        for j, name in enumerate(covered):
            path = f"{base}.coveredResources[{j}]"
            problem = _qualified_name_problem(name)
            if problem:
                errors.append(_invalid(path, name, problem))
            if name in seen_resources:
                errors.append(f'{path}: Duplicate value: "{name}"')
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            path = f"{base}.flavors[{j}]"
            for k, resource in enumerate((flavor.get("resources") or [])[: len(covered)]):
                where = f"{path}.resources[{k}]"
                if resource.get("name") != covered[k]:
                    errors.append(
                        _invalid(
                            f"{where}.name",
                            resource.get("name"),
                            "must match the name in coveredResources",
                        )
                    )
                nominal = quantities.parse(resource.get("nominalQuota", 0))
                if nominal < 0:
                    errors.append(
                        _invalid(
                            f"{where}.nominalQuota",
                            _quota_text(resource["nominalQuota"]),
                            "must be greater than or equal to 0",
                        )
                    )
                for limit in ("borrowingLimit", "lendingLimit"):
                    if resource.get(limit) is None:
                        continue
                    text, amount = _quota_text(resource[limit]), quantities.parse(resource[limit])
                    if not has_parent:
                        errors.append(
                            _invalid(
                                f"{where}.{limit}", text, f"must be nil when {parent_word} is empty"
                            )
                        )
                    if amount < 0:
                        errors.append(
                            _invalid(f"{where}.{limit}", text, "must be greater than or equal to 0")
                        )
                    if limit == "lendingLimit" and not is_cohort and amount > nominal:
                        errors.append(
                            _invalid(
                                f"{where}.{limit}",
                                text,
                                "must be less than or equal to the nominalQuota",
                            )
                        )
            name = flavor.get("name")
            if name in seen_flavors:
                errors.append(f'{path}.name: Duplicate value: "{name}"')
            seen_flavors.add(name)
    return errors


def _fair_sharing(spec: dict[str, Any]) -> list[str]:
    """validateFairSharing (pkg/webhooks/common.go), for ClusterQueues and Cohorts."""
    weight = (spec.get("fairSharing") or {}).get("weight")
    if weight is None:
        return []
    try:
        value = quantities.parse(weight)
    except ValueError:
        return []  # the CRD's quantity pattern refused it already
    path = "spec.fairSharing"
    if value < 0:
        return [_invalid(path, str(weight), "must be greater than or equal to 0")]
    if 0 < value <= quantities.parse("1n"):
        return [_invalid(path, str(weight), "When not 0, weight must be > 10e-9")]
    return []


def _label_value_problem(value: str) -> str:
    if value and (len(value) > 63 or not _QUALIFIED.fullmatch(value)):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return ""


def _flavor(spec: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    for key, value in sorted((spec.get("nodeLabels") or {}).items()):
        problem = _qualified_name_problem(key)
        if problem:
            errors.append(_invalid("spec.nodeLabels", key, problem))
        problem = _label_value_problem(str(value))
        if problem:
            errors.append(_invalid("spec.nodeLabels", value, problem))
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(spec.get("nodeTaints") or []):
        path = f"spec.nodeTaints[{i}]"
        problem = _qualified_name_problem(taint.get("key", ""))
        if problem:
            errors.append(_invalid(f"{path}.key", taint.get("key", ""), problem))
        problem = _label_value_problem(taint.get("value", ""))
        if problem:
            errors.append(_invalid(f"{path}.value", taint.get("value", ""), problem))
        key = (taint.get("key", ""), taint.get("effect", ""))
        if key in seen:
            errors.append(f"{path}: Duplicate value: taints must be unique by key and effect pair")
        seen.add(key)
    return errors


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
TOPOLOGY = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
)
_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
    "([-a-z0-9]*[a-z0-9])?)*')"
)


def suspend_queued_job(obj: dict[str, Any]) -> None:
    """mjob.kb.io: a Job created with a queue name starts suspended (Kueue unsuspends it)."""
    metadata = obj.get("metadata") or {}
    queue = (metadata.get("labels") or {}).get(QUEUE_LABEL) or (
        metadata.get("annotations") or {}
    ).get(QUEUE_LABEL)
    if queue:
        obj.setdefault("spec", {})["suspend"] = True


def _job(new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """vjob.kb.io (jobframework/validation.go and the TAS pod set request checks)."""
    errors: list[str] = []
    labels = new["metadata"].get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    if queue is not None and (len(queue) > 253 or not _SUBDOMAIN.fullmatch(queue)):
        errors.append(_invalid(f"metadata.labels[{QUEUE_LABEL}]", queue, _SUBDOMAIN_TEXT))
    limit = labels.get(MAX_EXEC_LABEL)
    if limit is not None and old is None:
        if not re.fullmatch(r"[+-]?[0-9]+", limit):
            problem = f'strconv.Atoi: parsing "{limit}": invalid syntax'
            errors.append(_invalid(f"metadata.labels[{MAX_EXEC_LABEL}]", limit, problem))
        elif int(limit) <= 0:
            errors.append(
                f"metadata.labels[{MAX_EXEC_LABEL}]: Invalid value: {int(limit)}: "
                "should be greater than 0"
            )
    template = ((new.get("spec") or {}).get("template") or {}).get("metadata") or {}
    annotations = template.get("annotations") or {}
    if sum(1 for a in TOPOLOGY if a in annotations) > 1:
        listed = ", ".join(f'"{a}"' for a in TOPOLOGY)
        errors.append(
            "spec.template.metadata.annotations: Invalid value: "
            f"must not contain more than one topology annotation: [{listed}]"
        )
    for annotation in TOPOLOGY[:2]:
        if annotation in annotations:
            problem = _qualified_name_problem(annotations[annotation])
            if problem:
                path = f"spec.template.metadata.annotations[{annotation}]"
                errors.append(_invalid(path, annotations[annotation], problem))
    if old is not None:
        before = old["metadata"].get("labels") or {}
        suspended = (new.get("spec") or {}).get("suspend", False)
        was_suspended = (old.get("spec") or {}).get("suspend", False)
        immutable = [(PRIORITY_LABEL, True), (QUEUE_LABEL, not suspended)]
        immutable.append((MAX_EXEC_LABEL, not (suspended and was_suspended)))
        for label, applies in immutable:
            if applies and labels.get(label) != before.get(label):
                value = labels.get(label, "")
                errors.append(_invalid(f"metadata.labels[{label}]", value, "field is immutable"))
    return errors


def validate(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    """403 Forbidden with the webhook's denial, if Kueue's webhook for `kind` refuses `obj`
    (`old`: the stored object, on an update)."""
    spec = obj.get("spec") or {}
    if kind == "Job":
        errors = _job(obj, old)
    elif kind == "ClusterQueue":
        errors = _resource_groups(spec, bool(spec.get("cohortName")), False)
        errors += _fair_sharing(spec)
    elif kind == "Cohort":
        errors = _resource_groups(spec, bool(spec.get("parentName")), True)
        errors += _fair_sharing(spec)
    elif kind == "ResourceFlavor":
        errors = _flavor(spec)
    else:
        return
    if not errors:
        return
    summary = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    raise ApiError(
        403, "Forbidden", f'admission webhook "{WEBHOOKS[kind]}" denied the request: {summary}'
    )


WORKLOADS_CRD = "workloads.kueue.x-k8s.io"


def _installed(store: Store, target: Target) -> bool:
    """Kueue's webhooks answer for its kinds, and for Jobs once its CRDs are installed."""
    if target.type.custom:
        return target.type.group == "kueue.x-k8s.io"
    if (target.type.kind, target.type.group) != ("Job", "batch"):
        return False
    crds = ("apiextensions.k8s.io", "customresourcedefinitions", "")
    return store.get(*crds, WORKLOADS_CRD) is not None


def mutate(store: Store, target: Target, obj: dict[str, Any]) -> None:
    """The mutating webhooks, on create (strict mode only, like the validating ones)."""
    if store.schema and target.type.kind == "Job" and _installed(store, target):
        suspend_queued_job(obj)


def check(
    store: Store, target: Target, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> None:
    """The validating webhooks, on create and update of the main resource."""
    if _installed(store, target):
        validate(target.type.kind, obj, old)
