"""Observe accounts, queues and quotas: the desired document with what Slurm holds put in.

Called by SlurmProvider.observe with one batched snapshot (sacctmgr) and one read of the
partitions file. Only what a spec declares is compared: the live document starts as a copy
of the desired one, and each declared setting is replaced by Slurm's value (kept in the
spec's spelling when both mean the same: `same` in providers/slurm/settings.py). A setting
the spec does not declare never appears, so it never shows as drift and is never written.

Ownership: an object is the resource's when it carries this manager's marker (created by
trainform) or when state records that `trainform import` adopted it (`adopted` in the
resource's outputs); import itself writes nothing.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from trainform.providers.base import Finding, Observation, ObserveRequest
from trainform.providers.slurm import mapping, settings, shadowing
from trainform.providers.slurm.accounting import AccountingSnapshot, Qos
from trainform.providers.slurm.names import duration_text, parse_tres
from trainform.providers.slurm.ownership import is_ours
from trainform.providers.slurm.partitions import ManagedFile
from trainform.providers.slurm.transactions import association_place

if TYPE_CHECKING:
    from trainform.providers.slurm.instance import SlurmInstance


def _keep(key: str, desired: str, live: str) -> str:
    return desired if settings.same(key, desired, live) else live


def _put_live(declared: dict[str, str], live: dict[str, str]) -> dict[str, str]:
    return {key: _keep(key, value, live.get(key, "")) for key, value in declared.items()}


def ours(provider: SlurmInstance, request: ObserveRequest, description: str) -> bool:
    return bool(request.outputs.get("adopted")) or is_ours(provider.manager, description)


def observe_project(
    provider: SlurmInstance, request: ObserveRequest, snapshot: AccountingSnapshot
) -> Observation:
    name = request.name.lower()
    account = snapshot.accounts.get(name)
    if account is None or not ours(provider, request, account.description):
        return Observation(exists=False)
    live = copy.deepcopy(request.document)
    spec = live["spec"]
    spec["users"] = snapshot.users_of(name)
    slurm = spec.get("slurm")
    if slurm:
        own = snapshot.association(name)
        if "parent" in slurm:
            slurm["parent"] = snapshot.parent_of(name)
        if "description" in slurm:
            slurm["description"] = account.description
        if "organization" in slurm:
            slurm["organization"] = account.organization
        slurm["limits"] = _put_live(slurm.get("limits", {}), own.limits if own else {})
        users = {}
        for user, limits in slurm.get("users", {}).items():
            association = snapshot.association(name, user)
            if association is not None:
                users[user] = _put_live(limits, association.limits)
        slurm["users"] = users
    outputs = {"account": name, **({"adopted": True} if request.outputs.get("adopted") else {})}
    outputs["declared"] = settings.declared("Project", request.document["spec"], False, name)
    found = _project_shadowing(snapshot, name, request.document["spec"].get("slurm") or {})
    places = {
        "spec.users": f"user associations of account {name}",
        "spec.slurm": f"account {name}",
        "spec.slurm.limits": f"association of account {name}",
        **{
            f"spec.slurm.users.{user}": f"association of user {user} in account {name}"
            for user in (slurm or {}).get("users", {})
        },
    }
    return Observation(
        exists=True, live=live, outputs=outputs, places=places, findings=tuple(found)
    )


def _project_shadowing(
    snapshot: AccountingSnapshot, account: str, slurm: dict[str, Any]
) -> list[Finding]:
    """Limits of the account's and its users' associations that a QOS they may run
    under sets too (providers/slurm/shadowing.py)."""
    levels = [("", f"association of account {account}", slurm.get("limits", {}))]
    levels += [
        (user, f"association of user {user} in account {account}", limits)
        for user, limits in sorted(slurm.get("users", {}).items())
    ]
    found = []
    for user, where, limits in levels:
        association = snapshot.association(account, user)
        if association is not None and limits:
            found += shadowing.findings(where, limits, association.qos_list, snapshot.qos)
    return found


def observe_queue(
    provider: SlurmInstance,
    request: ObserveRequest,
    snapshot: AccountingSnapshot,
    managed: ManagedFile | None,
) -> Observation:
    name = request.name.lower()
    adopted = bool(request.outputs.get("adopted"))
    block = managed.find(request.address) if managed else None
    line = managed.partition_line(name) if managed else None
    if adopted:
        if line is None:
            return Observation(exists=False)
    elif block is None or block.manager != provider.manager or block.is_record:
        return Observation(exists=False)
    partition = managed.partition_settings(name) if managed else {}
    spec = request.document["spec"]
    qos_name = settings.qos_name(name, spec)
    shared = settings.qos_from(spec)  # another Queue declares the QOS: not compared here
    qos = snapshot.qos.get(qos_name) if partition.get("QOS") or not adopted else None
    if qos is None and not adopted and not shared:
        return Observation(exists=False)
    if qos is not None and not shared and not ours(provider, request, qos.description):
        return Observation(exists=False)
    if shared:
        qos = None
    live = copy.deepcopy(request.document)
    _put_live_partition(provider, request, live, partition)
    if qos is not None:
        _put_live_qos(provider, request, live, qos_name, qos)
    outputs: dict[str, Any] = {
        "partition": name,
        "qos": qos_name if qos is not None or shared else "",
        "nodes": partition.get("Nodes", ""),
        "defaultMemory": "",
        "declared": settings.declared("Queue", spec, adopted, name),
    }
    if adopted:
        outputs["adopted"] = True
    if shared:
        outputs["qosFrom"] = shared
    line_place = f"partition {name} in {provider.partitions.path}"
    places = {"spec.slurm.partition": line_place, "spec.maxRuntime": line_place}
    places["spec.stopPolicy"] = line_place
    if qos is not None:
        for path in ("spec.slurm.qos", "spec.defaultPriority", "spec.pools"):
            places[path] = f"QOS {qos_name}"
    return Observation(exists=True, live=live, outputs=outputs, places=places)


def _put_live_partition(
    provider: SlurmInstance,
    request: ObserveRequest,
    live: dict[str, Any],
    partition: dict[str, str],
) -> None:
    """The queue's partition line put into `live`: stop policy, maximum runtime, verbatim
    settings, and a hand change of its Nodes or QOS as drift."""
    name = request.name.lower()
    adopted = bool(request.outputs.get("adopted"))
    spec = request.document["spec"]
    live_spec = live["spec"]
    declared = settings.queue_partition(spec, adopted, name)
    seen_partition = _put_live(declared, {"State": "UP", **partition})
    state = seen_partition["State"].upper()
    if "State" in _verbatim(spec, "partition"):
        live_spec["stopPolicy"] = spec.get("stopPolicy", "None")  # the verbatim State rules
    elif state in mapping.STOP_POLICIES:
        live_spec["stopPolicy"] = mapping.STOP_POLICIES[state]
    else:  # DRAIN: no stop policy says it (spec.slurm.partition.State can)
        mapping.annotate_drift(live, f"partition {name} State={seen_partition['State']}")
    if "maxRuntime" in spec and "MaxTime" not in _verbatim(spec, "partition"):
        if settings.same("MaxTime", declared["MaxTime"], partition.get("MaxTime")):
            pass
        elif settings.canonical("MaxTime", partition.get("MaxTime")) is None:
            live_spec.pop("maxRuntime", None)
        else:
            seconds = settings.canonical("MaxTime", partition.get("MaxTime"))
            live_spec["maxRuntime"] = duration_text(seconds)
    _set_verbatim(live_spec, "partition", seen_partition)
    nodes = request.outputs.get("nodes", "")
    if nodes and set(provider.nodes.expand(nodes)) != set(
        provider.nodes.expand(partition.get("Nodes", "")) if partition.get("Nodes") else []
    ):
        mapping.annotate_drift(live, f"partition {name} Nodes={partition.get('Nodes', '(unset)')}")
    if not adopted and partition.get("QOS", "").lower() != settings.qos_name(name, spec):
        mapping.annotate_drift(live, f"partition {name} QOS={partition.get('QOS', '(unset)')}")


def _put_live_qos(
    provider: SlurmInstance,
    request: ObserveRequest,
    live: dict[str, Any],
    qos_name: str,
    qos: Qos,
) -> None:
    """The queue's QOS put into `live`: priority, verbatim settings, the one pool's nominal
    quota from GrpTRES, and a hand change no field expresses as drift."""
    adopted = bool(request.outputs.get("adopted"))
    spec = request.document["spec"]
    live_spec = live["spec"]
    wanted = settings.queue_qos(spec, adopted, provider.mark(request.address))
    held = {**qos.settings, "Priority": str(qos.priority)}
    seen_qos = _put_live(wanted, held)
    live_spec["defaultPriority"] = int(seen_qos["Priority"] or 0)
    _set_verbatim(live_spec, "qos", seen_qos)
    verbatim = _verbatim(spec, "qos")
    if "GrpTRES" in wanted and "GrpTRES" not in verbatim:
        if settings.same("GrpTRES", wanted["GrpTRES"], held["GrpTRES"]):
            pass
        elif len(spec["pools"]) == 1 and _one_to_one(spec):
            tres = parse_tres(held["GrpTRES"])
            live_spec["pools"][0]["nominalQuota"] = {
                k: tres[k] for k in ("gpu", "cpu", "memory") if k in tres
            }
        else:
            mapping.annotate_drift(live, f"QOS {qos_name} GrpTRES={held['GrpTRES'] or '(unset)'}")
    if "PreemptMode" not in verbatim and seen_qos["PreemptMode"] != wanted["PreemptMode"]:
        mapping.annotate_drift(live, f"QOS {qos_name} PreemptMode={held['PreemptMode']}")
    if not adopted and seen_qos["Description"] != wanted["Description"]:
        mapping.annotate_drift(live, f"QOS {qos_name} Description={held['Description']}")


def _one_to_one(spec: dict[str, Any]) -> bool:
    """GrpTRES is exactly the one pool's nominal quota (no cohort, no borrowing)."""
    return not spec.get("cohort") and spec["pools"][0].get("borrowingLimit") is None


def _verbatim(spec: dict[str, Any], section: str) -> dict[str, str]:
    return dict(((spec.get("slurm") or {}).get(section)) or {})


def _set_verbatim(spec: dict[str, Any], section: str, seen: dict[str, str]) -> None:
    slurm = spec.get("slurm")
    if slurm and slurm.get(section):
        slurm[section] = {key: seen[key] for key in slurm[section]}


def observe_quota(
    provider: SlurmInstance,
    request: ObserveRequest,
    snapshot: AccountingSnapshot,
    managed: ManagedFile | None,
) -> Observation:
    account = (request.project or "").lower()
    spec = request.document["spec"]
    partition = spec["queue"].lower()
    owner = snapshot.accounts.get(account)
    adopted = bool(request.outputs.get("adopted"))
    if owner is None or not ours(provider, request, owner.description):
        return Observation(exists=False)
    if managed is None or managed.partition_line(partition) is None:
        return Observation(exists=False)
    record = managed.find(request.address)
    if not adopted and (record is None or record.manager != provider.manager):
        return Observation(exists=False)
    live = copy.deepcopy(request.document)
    own = snapshot.association(account)
    declared = settings.quota_account_limits(spec["limits"])
    held = own.limits if own else {}
    seen = mapping.quota_from_association(
        held.get("GrpTRES", ""), held.get("GrpJobs", ""), held.get("MaxWall", "")
    )
    wanted = spec["limits"]
    limits = {}
    for key, value in wanted.items():
        setting = {"runningJobs": "GrpJobs", "maxWallTime": "MaxWall"}.get(key, "GrpTRES")
        if setting == "GrpTRES":
            if str(seen.get(key)) == str(value):
                limits[key] = value
            elif key in seen:
                limits[key] = seen[key]
        elif settings.same(setting, declared.get(setting), held.get(setting)):
            limits[key] = value
        elif key in seen:
            limits[key] = seen[key]
    live["spec"]["limits"] = limits
    slurm = live["spec"].get("slurm")
    if slurm:
        users = {}
        for user, user_limits in slurm.get("users", {}).items():
            association = snapshot.association(account, user, partition)
            if association is not None:
                users[user] = _put_live(user_limits, association.limits)
        slurm["users"] = users
    outputs: dict[str, Any] = {"account": account, "partition": partition}
    outputs["limits"] = sorted(spec["limits"])  # what the next write may have to clear
    if spec.get("slurm") is not None:
        outputs["users"] = sorted(spec["slurm"].get("users", {}))
    outputs["declared"] = settings.declared("Quota", spec, adopted, request.name)
    if adopted:
        outputs["adopted"] = True
    queue_qos = managed.partition_settings(partition).get("QOS", partition)
    places = {"spec.limits": f"association of account {account}"}
    for user in (slurm or {}).get("users", {}):
        places[f"spec.slurm.users.{user}"] = (
            f"association of user {user} in account {account} on partition {partition}"
        )
    findings = quota_shadowing(snapshot, queue_qos.lower(), (account, partition), spec)
    return Observation(
        exists=True, live=live, outputs=outputs, findings=tuple(findings), places=places
    )


def quota_shadowing(
    snapshot: AccountingSnapshot, qos_name: str, where: tuple[str, str], spec: dict[str, Any]
) -> list[Finding]:
    """The quota's account limits and its users' limits on the partition that the queue's
    QOS sets too (providers/slurm/shadowing.py)."""
    account, partition = where
    levels = [(association_place(account, "", ""), settings.quota_account_limits(spec["limits"]))]
    for user, limits in sorted(((spec.get("slurm") or {}).get("users") or {}).items()):
        levels.append((association_place(account, user, partition), limits))
    found = []
    for where, limits in levels:
        found += shadowing.findings(where, limits, [qos_name], snapshot.qos)
    return found
