"""One owner for every Slurm object two resources could both declare.

- A QOS named by several partitions is declared by one Queue; the others take it with
  `spec.slurm.qosFrom: <that queue>` and name it in `spec.slurm.partition.QOS`. They write
  nothing on it, and deleting one of them never deletes it. Two Queues that both declare
  one QOS would undo each other's writes on every apply: refused at plan.
- An account's own association is declared in one place per setting: its Project's
  `spec.slurm.limits`, or one Quota's generic limits (GrpTRES per TRES, GrpJobs, MaxWall);
  two declarations are refused at plan, naming both.
- User associations are the Project's on no partition (`spec.users`) and the Quota's on
  its queue's partition (`spec.slurm.users`), so a user in a Quota only never makes the
  Project's apply remove it (providers/slurm/accounting.py `users_of`).

`queue_problems` and `cross_problems` are pure (validate, validate_all); `delete_impact`
reads what still names a QOS a Queue's delete would remove (providers/slurm/preflight.py),
for the plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.slurm import settings
from trainform.providers.slurm.names import parse_tres
from trainform.providers.slurm.preflight import qos_users

if TYPE_CHECKING:
    from trainform.providers.slurm.instance import SlurmInstance

QOS_FROM = "spec.slurm.qosFrom"


def queue_problems(resource: DesiredResource) -> list[ValidationProblem]:
    """What a queue taking another's QOS may not state itself."""
    spec = resource.spec
    owner = settings.qos_from(spec)
    if not owner:
        return []
    problems = []

    def problem(field: str, message: str) -> None:
        problems.append(ValidationProblem(resource.address, field, message))

    if owner == resource.name:
        problem(QOS_FROM, "a queue cannot take its QOS from itself")
    if "QOS" not in ((spec.get("slurm") or {}).get("partition") or {}):
        problem(QOS_FROM, "name the shared QOS in spec.slurm.partition.QOS too")
    for index, pool in enumerate(spec["pools"]):
        if any(value is not None for value in pool["nominalQuota"].values()):
            problem(
                f"spec.pools[{index}].nominalQuota",
                f"the QOS's GrpTRES is declared by Queue/{owner} (qosFrom): leave it empty here",
            )
    return problems


def _queue_problems(queues: dict[str, DesiredResource]) -> list[ValidationProblem]:
    problems = []
    declared: dict[str, str] = {}
    for name, queue in sorted(queues.items()):
        spec, owner_name = queue.spec, settings.qos_from(queue.spec)
        qos = settings.qos_name(name, spec)
        if not owner_name:
            if qos in declared:
                message = (
                    f"QOS {qos} is declared by Queue/{declared[qos]} too: let one Queue declare "
                    f"it and the other take it with spec.slurm.qosFrom: {declared[qos]}"
                )
                problems.append(
                    ValidationProblem(queue.address, "spec.slurm.partition.QOS", message)
                )
            declared.setdefault(qos, name)
            continue
        owner = queues.get(owner_name)
        if owner is None:
            message = f"Queue/{owner_name} is not a queue of this Slurm instance"
        elif settings.qos_from(owner.spec):
            message = f"Queue/{owner_name} takes its QOS from another queue: name that one"
        elif settings.qos_name(owner_name, owner.spec) != qos:
            message = (
                f"Queue/{owner_name} declares QOS {settings.qos_name(owner_name, owner.spec)}, "
                f"not the QOS {qos} this partition names"
            )
        elif owner.spec["defaultPriority"] != spec["defaultPriority"]:
            message = (
                f"defaultPriority is the shared QOS's Priority, declared by Queue/{owner_name} "
                f"({owner.spec['defaultPriority']}): state the same value"
            )
        else:
            continue
        problems.append(ValidationProblem(queue.address, QOS_FROM, message))
    return problems


def _account_settings(limits: dict[str, Any]) -> set[str]:
    """The parts of an account association a Quota's generic limits write."""
    written = settings.quota_account_limits(limits)
    parts = {key for key in written if key != "GrpTRES"}
    return parts | {f"GrpTRES {tres}" for tres in parse_tres(written.get("GrpTRES", ""))}


def _account_problems(resources: list[DesiredResource]) -> list[ValidationProblem]:
    owners: dict[tuple[str, str], str] = {}
    for resource in sorted(resources, key=lambda r: (r.kind != "Project", r.address)):
        if resource.kind == "Project":
            limits = (resource.spec.get("slurm") or {}).get("limits") or {}
            for key in limits:
                parts = (
                    [f"GrpTRES {t}" for t in ("cpu", "memory", "gpu")]
                    if key == "GrpTRES"
                    else [key]
                )
                for part in parts:
                    owners[(resource.name.lower(), part)] = resource.address
        elif resource.kind == "Quota":
            account = (resource.project or "").lower()
            for part in sorted(_account_settings(resource.spec["limits"])):
                other = owners.setdefault((account, part), resource.address)
                if other != resource.address:
                    message = (
                        f"the {part.split()[0]} of account {account}'s association is declared "
                        f"by {other} too: declare each account limit in one place"
                    )
                    return [ValidationProblem(resource.address, "spec.limits", message)]
    return []


def cross_problems(resources: list[DesiredResource]) -> list[ValidationProblem]:
    queues = {r.name.lower(): r for r in resources if r.kind == "Queue"}
    return _queue_problems(queues) + _account_problems(resources)


def delete_impact(
    provider: SlurmInstance, address: str, kind: str, outputs: dict[str, Any]
) -> list[str]:
    """For the plan of a Queue's delete: whether its QOS goes, and if not, what keeps it."""
    if kind != "Queue" or not outputs.get("qos"):
        return []
    qos = str(outputs["qos"])
    if outputs.get("qosFrom"):
        return [f"QOS {qos} stays: Queue/{outputs['qosFrom']} declares it"]
    users = qos_users(provider, qos, provider.sacctmgr.snapshot(), address.split("/")[-1].lower())
    if users:
        return [f"QOS {qos} stays: still named by {'; '.join(users)}"]
    return [f"QOS {qos} is deleted with it (nothing else names it)"]
