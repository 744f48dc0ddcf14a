"""No large quota cut without saying why: compares the plan's before and after values.

For every Queue or Quota the plan updates or replaces, each nominal quota (per pool and
resource) and each Quota limit of the checked `resources` (default gpu, the scarce one;
cpu and memory can be added) that shrinks by more than `maxShare` of
its current value needs the annotation `trainform.dev/allow-quota-cut: "<reason>"` on the
resource. A pool entry removed from a queue is a cut to zero. The current value is the one
last applied (`PolicyContext.previous`: the plan's last applied spec, or in review the base
branch's spec): putting back a limit someone raised by hand is not a cut. With neither a
plan nor a base this policy has nothing to compare and reports nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import Path_, PolicyContext, amount, show_amount
from trainform.policies.findings import Severity

ANNOTATION = "trainform.dev/allow-quota-cut"
RESOURCES = ("gpu", "cpu", "memory")


def _spec(document: dict[str, Any] | None) -> dict[str, Any]:
    if not document:
        return {}
    return document.get("spec", document)  # type: ignore[no-any-return]


def _amounts(
    kind: str, spec: dict[str, Any], resources: list[str]
) -> dict[tuple[str, str], tuple[Path_, Any]]:
    """{(pool or "", resource): (field path, value)} of every limited amount."""
    found: dict[tuple[str, str], tuple[Path_, Any]] = {}
    if kind == "Queue":
        for index, entry in enumerate(spec.get("pools", [])):
            for resource in resources:
                value = (entry.get("nominalQuota") or {}).get(resource)
                path = ("spec", "pools", index, "nominalQuota", resource)
                found[(entry.get("pool", ""), resource)] = (path, value)
    else:
        for resource in resources:
            value = (spec.get("limits") or {}).get(resource)
            found[("", resource)] = (("spec", "limits", resource), value)
    return found


def check_cuts(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    share = Decimal(str(params.get("maxShare", 0.25)))
    resources = [str(r) for r in params.get("resources") or RESOURCES]
    for address, last in context.previous.items():
        subject = context.subjects.get(address)
        if subject is None or subject.kind not in ("Queue", "Quota"):
            continue
        if subject.annotations.get(ANNOTATION, "").strip():
            continue
        before = _amounts(subject.kind, _spec(last), resources)
        after = _amounts(subject.kind, subject.spec, resources)
        for (pool, resource), (_, old) in before.items():
            if old is None:
                continue
            new_path, new = after.get((pool, resource), (("spec", "pools"), Decimal(0)))
            old_value = amount(old)
            # An unset Quota limit is no limit; an unset nominal quota is none at all.
            new_value = None if new is None and subject.kind == "Quota" else amount(new)
            if new_value is None or not old_value or old_value - new_value <= share * old_value:
                continue
            where = f" on pool {pool}" if pool else ""
            cut = (old_value - new_value) / old_value
            yield Violation(
                address,
                new_path,
                f"{resource}{where} drops from {show_amount(old_value)} to "
                f"{show_amount(new_value)} ({cut:.0%}), more than {share:.0%} of it: add the "
                f'annotation {ANNOTATION}: "<reason>" to confirm',
                key=f"{pool}/{resource}",
            )


QUOTA_CUT = BuiltinPolicy(
    id="quota-cut",
    name="No large quota cut without an annotation",
    severity=Severity.DENY,
    kinds=("Queue", "Quota"),
    check=check_cuts,
    parameters={"maxShare": 0.25, "resources": ["gpu"]},
    description=f"A nominal quota or Quota limit (of `resources`, default gpu) cut by more "
    f"than maxShare of its current value needs the annotation {ANNOTATION}.",
)
