"""No large quota cut without saying why: compares the plan's before and after values.

For every Queue or Quota the plan updates or replaces, each nominal quota (per pool and
resource) and each Quota limit of the checked `resources` (default gpu, the scarce one;
cpu and memory can be added) that shrinks by more than `maxShare` of
its current value needs the annotation `trainform.dev/allow-quota-cut: "<reason>"` on the
resource. A pool entry removed from a queue is a cut to zero. The current value is the one
last applied (`PolicyContext.previous`: the plan's last applied spec, or in review the base
branch's spec): putting back a limit someone raised by hand is not a cut. With neither a
plan nor a base this policy has nothing to compare and reports nothing.

A deleted Queue is a cut of each of its nominal quotas to zero. A deleted Quota is a cut of
each of its limits to zero where a project without a Quota on a queue runs nothing there,
as the providers make it: on Kubernetes its namespace has no LocalQueue (a job is a plan
error, providers/kubernetes/kueue_rules.py), on Slurm its users have no association on the
partition (providers/slurm/jobs.py refuses to submit). On a local queue a project without a
Quota is held only by the queue (providers/local/admission.py): deleting its Quota lifts
its limits, no cut. A deleted resource cannot carry the annotation; the one it had before
the delete counts (annotate it, then delete it), or a waiver in the trusted policies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from trainform.policies.builtin.base import BuiltinPolicy, Violation
from trainform.policies.context import Path_, PolicyContext, Subject, amount, show_amount
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


def _provider_type(context: PolicyContext, queue: str) -> str:
    """The provider type of the queue's first pool ("" when the queue is gone or unknown)."""
    subject = context.subjects.get(f"Queue/{queue}")
    pools = (subject.spec.get("pools") or []) if subject else []
    pool = context.subjects.get(f"ResourcePool/{pools[0].get('pool', '')}") if pools else None
    instance = context.specs.config.provider(pool.spec.get("provider", "")) if pool else None
    return str(getattr(instance, "type", "") or "")


def _deleted_cut_reason(context: PolicyContext, kind: str, last: dict[str, Any]) -> str | None:
    """Why deleting this resource cuts its amounts to zero, or None when it does not."""
    if kind == "Queue":
        return "its jobs have no queue"
    queue = str(_spec(last).get("queue", ""))
    provider = _provider_type(context, queue)
    if provider == "local":
        return None  # a local queue admits a project without a Quota up to the queue's quota
    if provider == "slurm":
        return (
            f"without a Quota the project's users have no association on partition {queue}, "
            "so none of its jobs is submitted there"
        )
    if provider == "kubernetes":
        return (
            f"without a Quota the project has no LocalQueue for queue {queue}, so Kueue "
            "admits none of its jobs there"
        )
    return f"the project has no Quota on queue {queue} any more"


def _successor(context: PolicyContext, address: str, last: dict[str, Any]) -> Subject | None:
    """The Quota of the same project on the same queue that replaces a deleted one (a
    rename): the cut, if any, is measured against it."""
    project = address.split("/")[1] if address.count("/") == 2 else None
    queue = _spec(last).get("queue")
    for subject in context.of_kind("Quota"):
        if subject.project == project and subject.spec.get("queue") == queue:
            return subject
    return None


def _confirm(deleted: bool) -> str:
    if deleted:
        return (
            f'annotate it with {ANNOTATION}: "<reason>" before deleting it, or waive '
            "quota-cut for it in the trusted policies, to confirm"
        )
    return f'add the annotation {ANNOTATION}: "<reason>" to confirm'


def _annotated(subject: Subject | None, last: dict[str, Any]) -> bool:
    """Whether the cut is confirmed: by the resource's annotation, or for a deleted one by
    the annotation it had before the delete."""
    if subject is not None:
        return bool(subject.annotations.get(ANNOTATION, "").strip())
    metadata = last.get("metadata") or {}
    return bool(str((metadata.get("annotations") or {}).get(ANNOTATION, "")).strip())


def check_cuts(context: PolicyContext, params: Mapping[str, Any]) -> Iterator[Violation]:
    share = Decimal(str(params.get("maxShare", 0.25)))
    resources = [str(r) for r in params.get("resources") or RESOURCES]
    for address, last in context.previous.items():
        subject = context.subjects.get(address)
        kind = subject.kind if subject else address.partition("/")[0]
        if kind not in ("Queue", "Quota"):
            continue
        if subject is None and kind == "Quota":
            subject = _successor(context, address, last)
        if _annotated(subject, last):
            continue
        deleted = None if subject else _deleted_cut_reason(context, kind, last)
        if subject is None and deleted is None:
            continue
        before = _amounts(kind, _spec(last), resources)
        after = _amounts(kind, subject.spec, resources) if subject else {}
        for (pool, resource), (old_path, old) in before.items():
            if old is None:
                continue
            gone = (old_path, Decimal(0)) if subject is None else (("spec", "pools"), Decimal(0))
            new_path, new = after.get((pool, resource), gone)
            old_value = amount(old)
            # An unset Quota limit is no limit; an unset nominal quota is none at all.
            new_value = None if new is None and kind == "Quota" else amount(new)
            if new_value is None or not old_value or old_value - new_value <= share * old_value:
                continue
            where = f" on pool {pool}" if pool else ""
            cut = (old_value - new_value) / old_value
            yield Violation(
                subject.address if subject else address,
                new_path if subject else (),
                (f"the {kind} is deleted, so " if deleted else "")
                + f"{resource}{where} drops from {show_amount(old_value)} to "
                f"{show_amount(new_value)} ({cut:.0%}), more than {share:.0%} of it"
                + (f" ({deleted})" if deleted else "")
                + f": {_confirm(subject is None)}",
                key=f"{pool}/{resource}" + ("/deleted" if deleted else ""),
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
