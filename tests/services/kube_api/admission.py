"""ResourceQuota admission, as the apiserver's ResourceQuota plugin and quota controller do it.

`admit(store, target, obj)` runs before a namespaced object is created: every
ResourceQuota of the namespace whose scopes match the object is checked, in name order,
and the first one the new usage would exceed refuses the create with 403 Forbidden:
`pods "p" is forbidden: exceeded quota: q, requested: requests.cpu=2, used:
requests.cpu=7, limited: requests.cpu=8` (only the exceeded resources are named). A pod
that leaves out a cpu or memory request or limit a quota constrains is refused with
`failed quota: q: must specify limits.cpu for: main`. `refresh(store)` then writes each
quota's `status.hard` and `status.used`, recomputed from what the namespace holds (what the
quota controller does a moment later on a real cluster).

Counted (k8s.io/kubernetes/pkg/quota/v1/evaluator/core): for pods that are not Succeeded
or Failed, `pods`, `count/pods`, `requests.<r>`/`limits.<r>` and the bare `cpu`/`memory`
(requests), extended resources as `requests.<name>` (a pod's requests: the sum of its
containers, the largest init container if larger, plus overhead; a missing request
defaults to the limit); for any kind, `count/<plural>.<group>` (`count/<plural>` in the
core group), finished Jobs included; `configmaps`, `secrets`, `resourcequotas`.
Scopes: Terminating/NotTerminating (activeDeadlineSeconds), BestEffort/NotBestEffort,
PriorityClass through `scopeSelector`.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

from tests.services.kube_api import quantities
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Target

_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_LEGACY_COUNTS = {
    "configmaps": "configmaps",
    "secrets": "secrets",
    "resourcequotas": "resourcequotas",
}


def _container_amounts(container: dict[str, Any], kind: str) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    values = dict(resources.get("limits") or {}) if kind == "requests" else {}
    values.update(resources.get(kind) or {})
    return {name: quantities.parse(value) for name, value in values.items()}


def _pod_amounts(spec: dict[str, Any], kind: str) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_amounts(container, kind).items():
            total[name] = total.get(name, Fraction(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_amounts(container, kind).items():
            total[name] = max(total.get(name, Fraction(0)), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Fraction(0)) + quantities.parse(value)
    return total


def usage(plural: str, group: str, obj: dict[str, Any]) -> dict[str, Fraction]:
    """What one object counts against quota."""
    counted = {f"count/{plural}.{group}" if group else f"count/{plural}": Fraction(1)}
    if not group and plural in _LEGACY_COUNTS:
        counted[_LEGACY_COUNTS[plural]] = Fraction(1)
    if group or plural != "pods":
        return counted
    if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return {}
    spec = obj.get("spec") or {}
    counted["pods"] = Fraction(1)
    for name, value in _pod_amounts(spec, "requests").items():
        counted[f"requests.{name}"] = value
        if name in ("cpu", "memory"):
            counted[name] = value
    for name, value in _pod_amounts(spec, "limits").items():
        if name in _COMPUTE or name.startswith("hugepages-"):
            counted[f"limits.{name}"] = value
    return counted


def _best_effort(spec: dict[str, Any]) -> bool:
    return not any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits")
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
    )


def _in_scope(quota: dict[str, Any], plural: str, group: str, obj: dict[str, Any]) -> bool:
    spec = quota.get("spec") or {}
    scopes = list(spec.get("scopes") or [])
    expressions = list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])
    if not scopes and not expressions:
        return True
    if group or plural != "pods":
        return False  # scoped quotas track pods only
    pod = obj.get("spec") or {}
    priority = pod.get("priorityClassName")
    checks = {
        "Terminating": pod.get("activeDeadlineSeconds") is not None,
        "NotTerminating": pod.get("activeDeadlineSeconds") is None,
        "BestEffort": _best_effort(pod),
        "NotBestEffort": not _best_effort(pod),
    }
    for scope in scopes:
        if not checks.get(scope, False):
            return False
    for term in expressions:
        name, operator, values = (
            term.get("scopeName"),
            term.get("operator"),
            term.get("values") or [],
        )
        if name != "PriorityClass":
            if not checks.get(name, False):
                return False
            continue
        if operator == "In" and priority not in values:
            return False
        if operator == "NotIn" and priority in values:
            return False
        if operator == "Exists" and not priority:
            return False
        if operator == "DoesNotExist" and priority:
            return False
    return True


def _sources(hard: dict[str, Any]) -> set[tuple[str, str]]:
    """The (group, plural) whose objects the quota's resource names count."""
    found = set()
    for name in hard:
        if name.startswith("count/"):
            plural, _, group = name[len("count/") :].partition(".")
            found.add((group, plural))
        elif name in _LEGACY_COUNTS:
            found.add(("", name))
        else:
            found.add(("", "pods"))
    return found


def _used(store: Store, quota: dict[str, Any]) -> dict[str, Fraction]:
    namespace = quota["metadata"]["namespace"]
    hard = (quota.get("spec") or {}).get("hard") or {}
    totals = {name: Fraction(0) for name in hard}
    for group, plural in _sources(hard):
        for obj in store.peek(group, plural, namespace):
            if not _in_scope(quota, plural, group, obj):
                continue
            for name, value in usage(plural, group, obj).items():
                if name in totals:
                    totals[name] += value
    return totals


def _show(name: str, value: Fraction) -> str:
    """A quantity as the quota messages print it (cpu in cores or milli-cores)."""
    base = name.removeprefix("requests.").removeprefix("limits.")
    if base == "cpu" or value.denominator != 1:
        milli = value * 1000
        if milli.denominator == 1 and milli % 1000:
            return f"{int(milli)}m"
        if milli.denominator != 1:
            return str(float(value))
    return quantities.render(base, int(value))


def _missing(quota: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    hard = (quota.get("spec") or {}).get("hard") or {}
    problems = []
    for kind in ("limits", "requests"):
        for resource in ("cpu", "memory"):
            wanted = f"{kind}.{resource}"
            if wanted not in hard and not (kind == "requests" and resource in hard):
                continue
            without = [
                c.get("name", "")
                for c in (obj.get("spec") or {}).get("containers") or []
                if resource not in _container_amounts(c, kind)
            ]
            if without:
                problems.append(f"{wanted} for: {','.join(without)}")
    return problems


def admit(store: Store, target: Target, obj: dict[str, Any]) -> None:
    """Refuse a create the namespace's ResourceQuotas do not allow (403 Forbidden)."""
    namespace = target.namespace
    if not namespace or not target.type.namespaced:
        return
    group, plural = target.type.group, target.type.plural
    quotas = sorted(
        store.peek("", "resourcequotas", namespace), key=lambda q: q["metadata"]["name"]
    )
    name = obj["metadata"].get("name", "")
    what = f"{plural}.{group}" if group else plural
    details = (
        {"name": name, "group": group, "kind": plural} if group else {"name": name, "kind": plural}
    )
    for quota in quotas:
        if not _in_scope(quota, plural, group, obj):
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        quota_name = quota["metadata"]["name"]
        if plural == "pods" and not group:
            missing = _missing(quota, obj)
            if missing:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{what} "{name}" is forbidden: failed quota: {quota_name}: must specify '
                    + "; ".join(missing),
                    details,
                )
        requested = {k: v for k, v in usage(plural, group, obj).items() if k in hard}
        if not requested:
            continue
        used = _used(store, quota)
        exceeded = sorted(
            k for k, v in requested.items() if used[k] + v > quantities.parse(hard[k])
        )
        if exceeded:
            limits = {k: quantities.parse(v) for k, v in hard.items()}

            def listed(values: dict[str, Fraction], names: list[str] = exceeded) -> str:
                return ",".join(f"{k}={_show(k, values[k])}" for k in names)

            raise ApiError(
                403,
                "Forbidden",
                f'{what} "{name}" is forbidden: exceeded quota: {quota_name}, requested: '
                f"{listed(requested)}, used: {listed(used)}, limited: {listed(limits)}",
                details,
            )


def refresh(store: Store) -> None:
    """Write `status.hard` and `status.used` of the ResourceQuotas that count something
    written since the last call (or were written themselves), where the figures moved."""
    with store.lock:
        touched, store.touched = store.touched, set()
        kinds_by_namespace: dict[str, set[tuple[str, str]]] = {}
        for namespace, group, plural in touched:
            if namespace:
                kinds_by_namespace.setdefault(namespace, set()).add((group, plural))
        for namespace, kinds in sorted(kinds_by_namespace.items()):
            for quota in store.peek("", "resourcequotas", namespace):
                hard = (quota.get("spec") or {}).get("hard") or {}
                if ("", "resourcequotas") not in kinds and not kinds & _sources(hard):
                    continue
                used = {k: _show(k, v) for k, v in sorted(_used(store, quota).items())}
                status = {"hard": dict(sorted(hard.items())), "used": used}
                if quota.get("status") != status:
                    changed = copy.deepcopy(quota)
                    changed["status"] = status
                    changed["metadata"]["resourceVersion"] = store.next_revision()
                    store.put("", "resourcequotas", changed)
        store.touched.clear()
