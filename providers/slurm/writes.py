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

from providers.base import DesiredResource
from providers.errors import PermanentProviderError
from providers.slurm import mapping
from providers.slurm.accounting import AccountingSnapshot
from providers.slurm.partitions import Block, ManagedFile, parse_settings, render_settings
from providers.slurm.pools import pool_facts

if TYPE_CHECKING:
    from providers.slurm.provider import SlurmProvider


def refuse(address: str, description: str) -> PermanentProviderError:
    owner = description or "no trainform marker"
    return PermanentProviderError(
        f"cannot change {address}: the Slurm object is not managed by this trainform "
        f"instance ({owner}); import it with `trainform import` to manage it"
    )


def put(provider: SlurmProvider, resource: DesiredResource) -> dict[str, Any]:
    kind = resource.kind
    if kind == "TrainingJob":
        return {}  # runs are submitted by the engine through submit()
    if kind == "EvalSuite":
        provider.suites.write(resource.address, provider.manager, resource.document)
        return {}
    if kind == "ResourcePool":
        return put_pool(provider, resource)
    snapshot = provider.sacctmgr.snapshot()
    if kind == "Project":
        return put_project(provider, resource, snapshot)
    if kind == "Queue":
        return put_queue(provider, resource, snapshot)
    if kind == "Quota":
        return put_quota(provider, resource, snapshot)
    raise PermanentProviderError(f"the slurm provider does not manage {kind}")


def put_project(
    provider: SlurmProvider, resource: DesiredResource, snapshot: AccountingSnapshot
) -> dict[str, Any]:
    name = resource.name.lower()
    account = snapshot.accounts.get(name)
    if account is not None and not provider._ours(account.description):
        raise refuse(resource.address, account.description)
    if account is None:
        provider.sacctmgr.add_account(name, provider.mark(resource.address))
    wanted = sorted({u.lower() for u in resource.spec.get("users", [])})
    present = snapshot.users_of(name)
    for user in wanted:
        if user not in present:
            provider.sacctmgr.add_user(user, name)
    for user in present:
        if user not in wanted:
            provider.sacctmgr.remove_user(user, name, snapshot)
    return {"account": name}


def put_pool(provider: SlurmProvider, resource: DesiredResource) -> dict[str, Any]:
    spec = resource.spec
    known = provider.nodes.all()
    facts = pool_facts(provider.nodes, spec, known)
    if facts.missing or not facts.nodes:
        missing = ", ".join(facts.missing) or f"nodes with features {spec.get('features')}"
        raise PermanentProviderError(
            f"cannot create pool {resource.name}: Slurm has no such nodes ({missing}); "
            "trainform never creates nodes"
        )
    line = provider._pool_line(spec)

    def edit(managed: ManagedFile) -> None:
        owned(provider, managed, resource.address)
        managed.put(Block(provider.manager, resource.address, line))

    provider.partitions.change(edit, lambda managed: [])
    return facts.outputs(provider.nodes)


def owned(provider: SlurmProvider, managed: ManagedFile, address: str) -> Block | None:
    block = managed.find(address)
    if block is not None and block.manager != provider.manager:
        raise refuse(address, f"marked for {block.manager}")
    return block


def semantic_check(provider: SlurmProvider) -> Callable[[ManagedFile], list[str]]:
    """Problems of the partitions in a file: unknown nodes or QOS. Run under the file's
    lock, just before writing, on fresh reads (another apply may have changed either)."""

    def check(managed: ManagedFile) -> list[str]:
        known = provider.nodes.all()
        snapshot_qos = provider.sacctmgr.qos_names()
        problems = []
        for block in managed.blocks:
            if block.is_record or block.manager != provider.manager:
                continue
            settings = block.settings
            hostlist = settings.get("Nodes", "")
            names = provider.nodes.expand(hostlist) if hostlist else []
            unknown = [n for n in names if n not in known]
            if unknown:
                problems.append(f"{block.address}: Slurm has no node {', '.join(unknown)}")
            qos = settings.get("QOS", "").lower()
            if qos and qos not in snapshot_qos:
                problems.append(f"{block.address}: Slurm has no QOS {qos}")
        return problems

    return check


def allowed_accounts(
    provider: SlurmProvider, snapshot: AccountingSnapshot, partition: str
) -> list[str]:
    """Accounts of this manager holding quota associations on the partition."""
    return sorted(
        {
            a.account
            for a in snapshot.associations
            if a.partition == partition
            and a.user
            and a.account in snapshot.accounts
            and provider._ours(snapshot.accounts[a.account].description)
        }
    )


def put_queue(
    provider: SlurmProvider, resource: DesiredResource, snapshot: AccountingSnapshot
) -> dict[str, Any]:
    name = resource.name.lower()
    managed = provider.partitions.read()
    owned(provider, managed, resource.address)
    qos = snapshot.qos.get(name)
    if qos is not None and not provider._ours(qos.description):
        raise refuse(resource.address, qos.description)
    nodes, memory = provider._queue_nodes(resource)
    known = provider.nodes.all()
    unknown = [n for n in provider.nodes.expand(nodes) if n not in known]
    if unknown:  # checked before anything changes: a failed create leaves nothing
        raise PermanentProviderError(
            f"cannot write partition {name}: Slurm has no node {', '.join(unknown)}"
        )
    settings = mapping.qos_settings(resource.spec, provider.mark(resource.address))
    arguments = mapping.qos_arguments(settings)
    if qos is None:
        provider.sacctmgr.add_qos(name, [a for a in arguments if "=-1" not in a])
    else:
        provider.sacctmgr.modify_qos(name, arguments)
    line = render_settings(
        mapping.partition_settings(
            name, resource.spec, nodes, memory, allowed_accounts(provider, snapshot, name)
        )
    )

    def edit(current: ManagedFile) -> None:
        owned(provider, current, resource.address)
        current.put(Block(provider.manager, resource.address, line))

    provider.partitions.change(edit, semantic_check(provider))
    return {"partition": name, "qos": name, "nodes": nodes, "defaultMemory": memory}


def refresh_allow_accounts(
    provider: SlurmProvider, partition: str, record: Block | None = None, drop: str = ""
) -> None:
    """Rewrite a managed partition's AllowAccounts from the quota associations, and put
    (`record`) or drop (`drop`, an address) a quota record in the same write."""
    snapshot = provider.sacctmgr.snapshot()
    accounts = allowed_accounts(provider, snapshot, partition)

    def edit(managed: ManagedFile) -> None:
        if record is not None:
            owned(provider, managed, record.address)
            managed.put(record)
        if drop:
            owned(provider, managed, drop)
            managed.remove(drop)
        block = managed.find(f"Queue/{partition}")
        if block is None or block.manager != provider.manager:
            return
        settings = parse_settings(block.line)
        settings.pop("AllowAccounts", None)
        state = settings.pop("State", "UP")
        if accounts:
            settings["AllowAccounts"] = ",".join(accounts)
        settings["State"] = state
        managed.put(Block(block.manager, block.address, render_settings(settings)))

    provider.partitions.change(edit, semantic_check(provider))


def quota_record(account: str, partition: str) -> str:
    return f"# quota Account={account} Partition={partition}"


def put_quota(
    provider: SlurmProvider, resource: DesiredResource, snapshot: AccountingSnapshot
) -> dict[str, Any]:
    account = (resource.project or "").lower()
    partition = resource.spec["queue"].lower()
    owner = snapshot.accounts.get(account)
    if owner is None or not provider._ours(owner.description):
        raise refuse(resource.address, owner.description if owner else "no such account")
    managed = provider.partitions.read()
    owned(provider, managed, resource.address)
    block = managed.find(f"Queue/{partition}")
    if block is None or block.manager != provider.manager:
        raise refuse(resource.address, f"partition {partition} is not managed here")
    users = snapshot.users_of(account)
    if not users:
        raise PermanentProviderError(
            f"cannot set quota {resource.address}: project {account} has no users; Slurm "
            "keeps partition limits on user associations, so list the project's users"
        )
    limits = mapping.quota_limits(resource.spec["limits"])
    present = {a.user for a in snapshot.partition_associations(account, partition)}
    for user in users:
        if user not in present:
            provider.sacctmgr.add_user(user, account, partition)
        provider.sacctmgr.set_user_limits(user, account, partition, limits)
    record = Block(provider.manager, resource.address, quota_record(account, partition))
    refresh_allow_accounts(provider, partition, record=record)
    # last: the queue's QOS allowed on the associations (`sbatch --qos=<queue>`), which is
    # what job submission waits for (providers/slurm/jobs.py)
    for user in users:
        provider.sacctmgr.set_user_limits(user, account, partition, f"QOS+={partition}")
    return {"account": account, "partition": partition}


def remove(provider: SlurmProvider, address: str, kind: str, outputs: dict[str, Any]) -> None:
    parts = address.split("/")
    if kind == "TrainingJob":
        provider.jobs.cancel(address)
        return
    if kind == "EvalSuite":
        provider.suites.delete(address, provider.manager)
        return
    if kind == "ResourcePool":
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
        if not provider._ours(account.description):
            raise refuse(address, account.description)
        provider.sacctmgr.delete_account(account.name, snapshot)
    elif kind == "Queue":
        name = parts[-1].lower()
        qos = snapshot.qos.get(name)
        if qos is not None and not provider._ours(qos.description):
            raise refuse(address, qos.description)
        provider.partitions.change(
            lambda managed: (owned(provider, managed, address), managed.remove(address))[-1],
            lambda managed: [],
        )
        if qos is not None:
            provider.sacctmgr.delete_qos(name)
    elif kind == "Quota":
        account = parts[1].lower()
        partition = str(outputs.get("partition") or "")
        owner = snapshot.accounts.get(account)
        if owner is None or not partition:
            return  # nothing recorded as created: never guess which limits were ours
        if not provider._ours(owner.description):
            raise refuse(address, owner.description)
        owned(provider, provider.partitions.read(), address)
        for association in snapshot.partition_associations(account, partition):
            provider.sacctmgr.remove_user(association.user, account, snapshot, partition)
        refresh_allow_accounts(provider, partition, drop=address)
