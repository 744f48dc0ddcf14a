"""Create, update and delete for the Slurm provider: converge one resource, idempotently.

Called by SlurmProvider.create/update (`put`) and delete (`remove`). Every function reads
what exists first and refuses objects that carry another manager's marker or none (those
are adopted with `trainform import`, never taken over silently). Order within a write:
QOS before the partition that names it; associations before the partition's
AllowAccounts that list their account.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm import settings
from trainform.providers.slurm.accounting import ROOT_ACCOUNT, AccountingSnapshot
from trainform.providers.slurm.mapping import queue_nodes
from trainform.providers.slurm.ownership import is_ours, refuse
from trainform.providers.slurm.partitions import (
    Block,
    ManagedFile,
    edit_line,
    pool_record,
    render_settings,
)
from trainform.providers.slurm.pools import pool_facts
from trainform.providers.slurm.preflight import configuration_problems, qos_users

if TYPE_CHECKING:
    from trainform.providers.slurm.instance import SlurmInstance


def put(
    provider: SlurmInstance, resource: DesiredResource, outputs: dict[str, Any]
) -> dict[str, Any]:
    kind = resource.kind
    adopted = bool(outputs.get("adopted"))
    if kind == "TrainingJob":
        return {}  # runs are submitted by the engine through submit()
    if kind == "EvalSuite":
        provider.suites.write(resource.address, provider.manager, resource.document)
        return {}
    if kind == "Image":  # run by sbatch (--container-image) or on the nodes' own runtime
        spec = resource.spec
        return {"runtime": spec.get("runtime", "container"), "reference": spec.get("reference", "")}
    if kind == "ResourcePool":
        if adopted:  # nodes are never written; an adopted pool has no record to keep
            facts = pool_facts(provider.nodes, resource.spec, provider.nodes.all())
            return {**facts.outputs(provider.nodes), "adopted": True}
        return put_pool(provider, resource)
    snapshot = provider.sacctmgr.snapshot()
    before = outputs.get("declared", {})
    if kind == "Project":
        written = put_project(provider, resource, snapshot, adopted, before)
    elif kind == "Queue":
        written = put_queue(provider, resource, snapshot, adopted, before)
    elif kind == "Quota":
        written = put_quota(provider, resource, snapshot, outputs)
    else:
        raise PermanentProviderError(f"the slurm provider does not manage {kind}")
    written["declared"] = settings.declared(kind, resource.spec, adopted, resource.name.lower())
    return {**written, **({"adopted": True} if adopted else {})}


def put_project(
    provider: SlurmInstance,
    resource: DesiredResource,
    snapshot: AccountingSnapshot,
    adopted: bool,
    before: dict[str, Any],
) -> dict[str, Any]:
    name = resource.name.lower()
    slurm = resource.spec.get("slurm") or {}
    account = snapshot.accounts.get(name)
    if account is not None and not (adopted or is_ours(provider.manager, account.description)):
        raise refuse(resource.address, account.description)
    if account is None:
        provider.sacctmgr.add_account(
            name,
            slurm.get("description") or provider.mark(resource.address),
            slurm.get("organization", ""),
            slurm.get("parent", ""),
        )
    else:
        changes = []
        for key, setting, held in (
            ("description", "Description", account.description),
            ("organization", "Organization", account.organization),
        ):
            if key in slurm and slurm[key] != held:
                changes.append(f"{setting}={slurm[key]}")
        own = snapshot.association(name)
        if own is None and _needs_association(resource.spec, slurm):
            provider.sacctmgr.add_association(name, slurm.get("parent", ""))
            snapshot = provider.sacctmgr.snapshot()
        elif slurm.get("parent") and snapshot.parent_of(name) != slurm["parent"]:
            changes.append(f"Parent={slurm['parent']}")
        if changes:
            provider.sacctmgr.modify_account(name, changes)
    own = snapshot.association(name)
    held = own.limits if own else {}
    limits = {**settings.dropped(before.get("limits", []), slurm.get("limits", {}))}
    limits.update(slurm.get("limits", {}))
    changed = settings.differing(limits, held)
    if changed:
        provider.sacctmgr.modify_account(name, settings.assignments(changed, held))
    wanted = sorted({u.lower() for u in resource.spec.get("users", [])})
    present = snapshot.users_of(name)
    for user in wanted:
        if user not in present:
            provider.sacctmgr.add_user(user, name)
    for user in present:
        if user not in wanted:  # its associations on partitions are its Quotas' to remove
            provider.sacctmgr.remove_user(user, name, snapshot, "")
    users = _with_dropped(slurm.get("users", {}), before.get("users", {}))
    if users:
        put_user_limits(provider, name, "", users, set(slurm.get("users", {})))
    return {"account": name}


def _needs_association(spec: dict[str, Any], slurm: dict[str, Any]) -> bool:
    """Whether an account without an association here must get one: its parent is not
    root (what it reads as), or it has users or limits, which live on associations."""
    return bool(
        slurm.get("parent", ROOT_ACCOUNT) != ROOT_ACCOUNT
        or spec.get("users")
        or slurm.get("limits")
        or slurm.get("users")
    )


def _with_dropped(
    users: dict[str, dict[str, str]], before: dict[str, list[str]]
) -> dict[str, dict[str, str]]:
    """Each user's limits, plus the clearing of those the spec stopped declaring."""
    merged = {}
    for user in set(users) | set(before):
        limits = settings.dropped(before.get(user, []), users.get(user, {}))
        merged[user] = {**limits, **users.get(user, {})}
    return merged


def put_user_limits(
    provider: SlurmInstance,
    account: str,
    partition: str,
    users: dict[str, dict[str, str]],
    declared: frozenset[str] | set[str] | None = None,
    qos: str = "",
) -> None:
    """Each user's association with the account (on `partition`, or none) holds its limits;
    an association is created only for a user the spec declares (`declared`, default all),
    with the queue's QOS (`qos`) added to what it inherits unless it states its QOS list."""
    snapshot = provider.sacctmgr.snapshot()
    for user, limits in users.items():
        association = snapshot.association(account, user, partition)
        if association is None and declared is not None and user not in declared:
            continue  # only its limits were to be cleared, and it has none
        if association is None:
            arguments = settings.assignments(limits, {})
            if qos and "QOS" not in limits:
                arguments.append(f"QOS+={qos}")  # what `sbatch --qos` on the queue needs
            provider.sacctmgr.add_user(user, account, partition, " ".join(arguments))
            continue
        changed = settings.differing(limits, association.limits)
        if changed:
            provider.sacctmgr.modify_association(
                account, user, partition, settings.assignments(changed, association.limits)
            )


def put_pool(provider: SlurmInstance, resource: DesiredResource) -> dict[str, Any]:
    spec = resource.spec
    known = provider.nodes.all()
    facts = pool_facts(provider.nodes, spec, known)
    if facts.missing or not facts.nodes:
        missing = ", ".join(facts.missing) or f"nodes with features {spec.get('features')}"
        raise PermanentProviderError(
            f"cannot create pool {resource.name}: Slurm has no such nodes ({missing}); "
            "trainform never creates nodes"
        )
    line = pool_record(spec)

    def edit(managed: ManagedFile) -> None:
        owned(provider, managed, resource.address)
        managed.put(Block(provider.manager, resource.address, line))

    provider.partitions.change(edit, lambda managed: [])
    return facts.outputs(provider.nodes)


def owned(provider: SlurmInstance, managed: ManagedFile, address: str) -> Block | None:
    block = managed.find(address)
    if block is not None and block.manager != provider.manager:
        raise refuse(address, f"marked for {block.manager}")
    return block


def semantic_check(provider: SlurmInstance) -> Callable[[ManagedFile], list[str]]:
    """What slurmctld would refuse in the configuration the new file makes (an unknown node
    or QOS in any partition it would load: providers/slurm/preflight.py). Run under the
    file's lock, just before writing, on fresh reads (another apply may have changed
    either); the file on disk is still the old one."""

    def check(managed: ManagedFile) -> list[str]:
        return configuration_problems(provider, provider.partitions.read(), managed)

    return check


def put_queue(
    provider: SlurmInstance,
    resource: DesiredResource,
    snapshot: AccountingSnapshot,
    adopted: bool,
    before: dict[str, Any],
) -> dict[str, Any]:
    name = resource.name.lower()
    spec = resource.spec
    managed = provider.partitions.read()
    managed.refuse_ignored(name)  # before anything is written
    if not adopted:
        owned(provider, managed, resource.address)
    qos_name = settings.qos_name(name, spec)
    shared = settings.qos_from(spec)  # another Queue declares the QOS: never written here
    qos = None if shared else snapshot.qos.get(qos_name)
    if qos is not None and not (adopted or is_ours(provider.manager, qos.description)):
        raise refuse(resource.address, qos.description)
    nodes, _ = queue_nodes(provider.name, resource)
    known = provider.nodes.all()
    unknown = [n for n in provider.nodes.expand(nodes) if n not in known]
    if unknown:  # checked before anything changes: a failed create leaves nothing
        raise PermanentProviderError(
            f"cannot write partition {name}: Slurm has no node {', '.join(unknown)}"
        )
    line = managed.partition_line(name)
    wanted_qos = settings.queue_qos(spec, adopted, provider.mark(resource.address))
    wanted_qos = {**settings.dropped(before.get("qos", []), wanted_qos), **wanted_qos}
    if qos is None and not adopted and not shared:  # an adopted partition's QOS is never made up
        provider.sacctmgr.add_qos(
            qos_name, [f"{k}={v}" for k, v in wanted_qos.items() if v not in ("", "cluster")]
        )
    elif qos is not None:
        held = {**qos.settings, "Priority": str(qos.priority)}
        changed = settings.differing(wanted_qos, held)
        if changed:
            provider.sacctmgr.modify_qos(qos_name, settings.assignments(changed, held))
    wanted = settings.queue_partition(spec, adopted, name)
    if line is None:
        text = render_settings({"PartitionName": name, "Nodes": nodes, **wanted})

        def create(current: ManagedFile) -> None:
            owned(provider, current, resource.address)
            current.put(Block(provider.manager, resource.address, text))

        provider.partitions.change(create, semantic_check(provider))
    else:
        live = {"State": "UP", **managed.partition_settings(name)}
        changed: dict[str, str | None] = dict(settings.differing(wanted, live))
        for key in settings.dropped(before.get("partition", []), wanted):
            if key in live:
                changed[key] = None  # no longer declared: the setting goes, as planned
        if set(provider.nodes.expand(nodes)) != set(
            provider.nodes.expand(live["Nodes"]) if live.get("Nodes") else []
        ):
            changed["Nodes"] = nodes
        if changed:

            def edit(current: ManagedFile) -> None:
                present = current.partition_line(name)
                if present is None:
                    raise PermanentProviderError(f"cannot change partition {name}: it is gone")
                current.set_partition_line(name, edit_line(present, changed))

            provider.partitions.change(edit, semantic_check(provider))
    written = {"partition": name, "qos": qos_name, "nodes": nodes, "defaultMemory": ""}
    return {**written, **({"qosFrom": shared} if shared else {})}


def quota_record(account: str, partition: str) -> str:
    return f"# quota Account={account} Partition={partition}"


def put_quota(
    provider: SlurmInstance,
    resource: DesiredResource,
    snapshot: AccountingSnapshot,
    outputs: dict[str, Any],
) -> dict[str, Any]:
    account = (resource.project or "").lower()
    spec = resource.spec
    partition = spec["queue"].lower()
    adopted = bool(outputs.get("adopted"))
    owner = snapshot.accounts.get(account)
    if owner is None or not (adopted or is_ours(provider.manager, owner.description)):
        raise refuse(resource.address, owner.description if owner else "no such account")
    managed = provider.partitions.read()
    if managed.partition_line(partition) is None:
        raise PermanentProviderError(
            f"cannot set quota {resource.address}: Slurm has no partition {partition}"
        )
    if not adopted:
        owned(provider, managed, resource.address)
    own = snapshot.association(account)
    held = own.limits if own else {}
    wanted = settings.quota_account_limits(spec["limits"])
    before = set(outputs.get("limits", []))
    dropped = before - set(spec["limits"])
    cleared = settings.quota_account_limits(
        {key: "1" if key != "maxWallTime" else "1m" for key in dropped}
    )
    changed = {
        key: value
        for key, value in wanted.items()
        if not settings.same(key, value, _partial(key, value, held.get(key, "")))
    }
    arguments = [f"{key}={value}" for key, value in changed.items()]
    for key, value in cleared.items():
        if key == "GrpTRES":
            names = ",".join(f"{part.partition('=')[0]}=-1" for part in value.split(","))
            arguments.append(f"GrpTRES={names}")
        elif key not in wanted:
            arguments.append(f"{key}=-1")
    if arguments:
        provider.sacctmgr.modify_account(account, _merge_tres(arguments))
    slurm = spec.get("slurm")
    line = managed.partition_settings(partition)
    queue_qos = (line.get("QOS") or partition).lower()
    if slurm is not None:
        wanted_users = slurm.get("users", {})
        previous = outputs.get("declared", {}).get("users", {})
        kept = {user: keys for user, keys in previous.items() if user in wanted_users}
        merged = _with_dropped(wanted_users, kept)
        put_user_limits(provider, account, partition, merged, qos=queue_qos)
        for user in set(outputs.get("users", [])) - set(slurm.get("users", {})):
            provider.sacctmgr.remove_user(user, account, snapshot, partition)
    elif not adopted:
        present = {a.user for a in snapshot.partition_associations(account, partition)}
        for user in snapshot.users_of(account):
            if user not in present:
                # the queue's QOS allowed on the association: what `sbatch --qos` needs
                provider.sacctmgr.add_user(user, account, partition, f"QOS+={queue_qos}")
    if not adopted and managed.find(resource.address) is None:
        record = Block(provider.manager, resource.address, quota_record(account, partition))
        provider.partitions.change(lambda m: m.put(record), lambda m: [])
    written: dict[str, Any] = {"account": account, "partition": partition}
    written["limits"] = sorted(spec["limits"])
    if slurm is not None:
        written["users"] = sorted(slurm.get("users", {}))
    return written


def _partial(key: str, value: str, held: str) -> str:
    """The held TRES restricted to the names `value` sets (the rest is not the quota's)."""
    if key != "GrpTRES":
        return held
    names = {part.partition("=")[0].lower() for part in value.split(",")}
    return ",".join(p for p in held.split(",") if p.partition("=")[0].lower() in names)


def _merge_tres(arguments: list[str]) -> list[str]:
    tres = [a.partition("=")[2] for a in arguments if a.startswith("GrpTRES=")]
    rest = [a for a in arguments if not a.startswith("GrpTRES=")]
    return rest + ([f"GrpTRES={','.join(tres)}"] if tres else [])


def remove(provider: SlurmInstance, address: str, kind: str, outputs: dict[str, Any]) -> None:
    parts = address.split("/")
    adopted = bool(outputs.get("adopted"))
    if kind == "TrainingJob":
        provider.jobs.cancel(address)
        return
    if kind == "EvalSuite":
        provider.suites.delete(address, provider.manager)
        return
    if kind == "Image":
        return  # nothing was written for it
    if kind == "ResourcePool":
        if not adopted:
            provider.partitions.change(
                lambda managed: (owned(provider, managed, address), managed.remove(address))[-1],
                lambda managed: [],
            )
        return
    snapshot = provider.sacctmgr.snapshot()
    if kind == "Project":
        account = snapshot.accounts.get(parts[-1].lower())
        if account is None:
            return
        if not (adopted or is_ours(provider.manager, account.description)):
            raise refuse(address, account.description)
        provider.sacctmgr.delete_account(account.name, snapshot)
    elif kind == "Queue":
        remove_queue(provider, address, outputs, snapshot)
    elif kind == "Quota":
        account = parts[1].lower()
        partition = str(outputs.get("partition") or "")
        owner = snapshot.accounts.get(account)
        if owner is None or not partition:
            return  # nothing recorded as created: never guess which limits were ours
        if not (adopted or is_ours(provider.manager, owner.description)):
            raise refuse(address, owner.description)
        owned(provider, provider.partitions.read(), address)
        for association in snapshot.partition_associations(account, partition):
            provider.sacctmgr.remove_user(association.user, account, snapshot, partition)
        provider.partitions.change(lambda managed: managed.remove(address), lambda m: [])


def remove_queue(
    provider: SlurmInstance, address: str, outputs: dict[str, Any], snapshot: AccountingSnapshot
) -> None:
    """The queue's partition line goes; its QOS goes too unless another Queue declares it
    (`qosFrom`) or anything still names it (a partition, an association, a job: the plan
    listed them), in which case it stays as it is."""
    name = address.split("/")[-1].lower()
    adopted = bool(outputs.get("adopted"))
    qos_name = "" if outputs.get("qosFrom") else str(outputs.get("qos") or name)
    qos = snapshot.qos.get(qos_name) if qos_name else None
    if qos is not None and not (adopted or is_ours(provider.manager, qos.description)):
        raise refuse(address, qos.description)

    def drop(managed: ManagedFile) -> None:
        owned(provider, managed, address)
        managed.remove(address)
        if adopted:
            managed.remove_partition(name)

    provider.partitions.change(drop, semantic_check(provider))
    if qos is not None and not qos_users(provider, qos_name, provider.sacctmgr.snapshot(), name):
        provider.sacctmgr.delete_qos(qos_name)
