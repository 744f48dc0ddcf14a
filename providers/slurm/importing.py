"""Ownership listing, spec generation and adoption for the Slurm provider.

- `owned`: what carries this manager's mark: accounts and QOS (Description marker),
  blocks of the managed partitions file (pools, partitions, quota records), queued or
  running jobs (job comment), suite records.
- `discover`: live Slurm objects as trainform documents (what `trainform import --from`
  writes), every setting trainform manages stated as Slurm holds it and nothing else:
  accounts as Projects (parent, description, organization, the account association's
  limits, users and their own limits; owners = the account's Organization), node groups of
  identical CPUs, memory, GRES and features as ResourcePools (`pool-<first node>`),
  partitions of the managed file with their QOS as Queues (priority, MaxTime and State in
  generic fields, every other managed partition and QOS setting verbatim under
  `spec.slurm`), and the user associations of each account on each such partition as a
  Quota `<account>-<partition>`. Settings at their defaults, and limits a user association
  only inherits from its account, are left out. A plan right after the import is empty.
- `adopt`: reads, never writes: the observation of the object, with `adopted` in its
  outputs, which state keeps as the record that the object is managed from now on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainform.providers.base import Discovered, Observation, ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm import mapping
from trainform.providers.slurm.accounting import Account, AccountingSnapshot, Association
from trainform.providers.slurm.names import duration_text, parse_slurm_time
from trainform.providers.slurm.nodes import group_pools
from trainform.providers.slurm.ownership import is_ours, refuse
from trainform.specs.models.slurm import ASSOCIATION_KEYS, PARTITION_KEYS, QOS_KEYS

if TYPE_CHECKING:
    from trainform.providers.slurm.instance import SlurmInstance

API = "trainform/v1"
SKIPPED_ACCOUNTS = {"root"}


def owned(provider: SlurmInstance) -> list[tuple[str, str]]:
    snapshot = provider.sacctmgr.snapshot()
    found = set()
    for account in snapshot.accounts.values():
        if is_ours(provider.manager, account.description):
            found.add((f"Project/{account.name}", "Project"))
    for qos in snapshot.qos.values():
        if is_ours(provider.manager, qos.description):
            found.add((f"Queue/{qos.name}", "Queue"))
    for block in provider.partitions.read().blocks:
        if block.manager == provider.manager:
            found.add((block.address, block.address.split("/")[0]))
    if provider.job_root:
        found.update(provider.jobs.owned_jobs())
        found.update(provider.suites.owned(provider.manager))
    return sorted(found)


def _document(kind: str, name: str, spec: dict[str, Any], project: str = "") -> dict[str, Any]:
    metadata = {"name": name, **({"project": project} if project else {})}
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


QOS_LISTS = ("QOS", "DefaultQOS")


def discover(provider: SlurmInstance) -> list[Discovered]:
    snapshot = provider.sacctmgr.snapshot()
    managed = provider.partitions.read()
    found: list[Discovered] = []
    queues = managed.partitions()
    for account in sorted(snapshot.accounts.values(), key=lambda a: a.name):
        if account.name in SKIPPED_ACCOUNTS:
            continue
        found.append(_project(snapshot, account))
        for partition in sorted({a.partition for a in snapshot.associations if a.partition}):
            if partition in queues:
                quota = _quota(snapshot, account.name, partition)
                if quota is not None:
                    found.append(quota)
    pool_of_node: dict[str, str] = {}
    for group in group_pools(provider.nodes.all()):
        name = f"pool-{group[0].name.lower()}"
        node_list = provider.nodes.compress([n.name for n in group])
        kind, gpus = group[0].gpus()
        spec: dict[str, Any] = {
            "provider": provider.name,
            "nodes": len(group),
            "cpu": group[0].cpus,
            "memory": f"{group[0].memory_mib}Mi",
            "nodeList": node_list,
        }
        if gpus:
            spec["accelerator"] = {"type": kind or "gpu", "count": gpus}
        found.append(Discovered(_document("ResourcePool", name, spec), node_list))
        pool_of_node.update({n.name: name for n in group})
    owners = _qos_owners(queues)
    for settings in queues.values():
        found.append(_queue(provider, settings, snapshot, pool_of_node, owners))
    return found


def _qos_owners(queues: dict[str, dict[str, str]]) -> dict[str, str]:
    """QOS name -> the one queue that declares it: the first (by name) of the partitions
    that name it; the others take it with `qosFrom` (a QOS declared once, never fought over)."""
    owners: dict[str, str] = {}
    for name in sorted(queues):
        qos = queues[name].get("QOS", "").lower()
        if qos:
            owners.setdefault(qos, name)
    return owners


def _association_settings(association: Association | None, watch_unset: bool) -> dict[str, str]:
    """The settings set on the association itself (a child inherits the rest, so nothing
    inherited is pinned on it), with its QOS list and default when it sets them; with
    `watch_unset`, every limit it does not set as '' too, so one set by hand is drift."""
    if association is None:
        return {}
    own = association.own
    found = {
        key: own.get(key, "")
        for key in ASSOCIATION_KEYS
        if key not in QOS_LISTS and (own.get(key) or watch_unset)
    }
    if own.get("QOS"):  # `WOPLimits` prints a delta without its sign: declare the list it gives
        found["QOS"] = association.effective.get("QOS", "")
    if own.get("DefaultQOS"):
        found["DefaultQOS"] = own["DefaultQOS"]
    return dict(sorted(found.items()))


def _project(snapshot: AccountingSnapshot, account: Account) -> Discovered:
    own = snapshot.association(account.name)
    users = {}
    for user in snapshot.users_of(account.name):
        limits = _association_settings(snapshot.association(account.name, user), False)
        if limits:
            users[user] = limits
    slurm: dict[str, Any] = {
        "parent": snapshot.parent_of(account.name),
        "description": account.description,
        "organization": account.organization,
    }
    limits = _association_settings(own, True)
    if limits:
        slurm["limits"] = limits
    if users:
        slurm["users"] = users
    spec = {
        "owners": [account.organization or account.name],
        "users": snapshot.users_of(account.name),
        "slurm": slurm,
    }
    return Discovered(
        _document("Project", account.name, spec), account.name, "owners: the account's Organization"
    )


def _quota(snapshot: AccountingSnapshot, account: str, partition: str) -> Discovered | None:
    associations = snapshot.partition_associations(account, partition)
    if not associations:
        return None
    users = {a.user: _association_settings(a, False) for a in associations}
    spec = {"queue": partition, "limits": {}, "slurm": {"users": users}}
    name = f"{account}-{partition}"
    return Discovered(_document("Quota", name, spec, account), f"{account}/{partition}")


def _queue(
    provider: SlurmInstance,
    settings: dict[str, str],
    snapshot: AccountingSnapshot,
    pool_of_node: dict[str, str],
    owners: dict[str, str],
) -> Discovered:
    name = settings["PartitionName"].lower()
    qos = snapshot.qos.get(settings.get("QOS", "").lower()) if settings.get("QOS") else None
    owner = owners.get(settings.get("QOS", "").lower(), name)
    nodes = provider.nodes.expand(settings.get("Nodes", "")) if settings.get("Nodes") else []
    pools = sorted({pool_of_node[n] for n in nodes if n in pool_of_node})
    spec: dict[str, Any] = {
        "pools": [{"pool": pool, "nominalQuota": {}} for pool in pools],
        "defaultPriority": qos.priority if qos else 0,
        "stopPolicy": mapping.STOP_POLICIES.get(settings.get("State", "UP").upper(), "None"),
    }
    runtime = parse_slurm_time(settings.get("MaxTime", ""))
    if runtime:
        spec["maxRuntime"] = duration_text(runtime)
    partition = {
        key: value
        for key, value in settings.items()
        if key in PARTITION_KEYS
        and not (key == "MaxTime" and runtime)
        and not (key == "State" and value.upper() in mapping.STOP_POLICIES)
    }
    slurm: dict[str, Any] = {}
    if partition:
        slurm["partition"] = partition
    if qos is not None and owner != name:
        slurm["qosFrom"] = owner
    elif qos is not None:  # every setting, unset ones as '': one set by hand is drift
        slurm["qos"] = {key: qos.settings.get(key, "") for key in QOS_KEYS}
    if slurm:
        spec["slurm"] = slurm
    return Discovered(_document("Queue", name, spec), name)


def adopt(provider: SlurmInstance, request: ObserveRequest, identifier: str) -> Observation:
    """The object as observed, marked adopted in its outputs; nothing is written."""
    if request.kind not in ("Project", "Queue", "Quota", "ResourcePool"):
        raise PermanentProviderError(f"the slurm provider cannot import a {request.kind}")
    if request.kind == "Project":
        account = provider.sacctmgr.snapshot().accounts.get(identifier.lower())
        if account is not None:
            _claimable(provider, request.address, account.description)
    adopted = ObserveRequest(
        request.address,
        request.kind,
        request.name,
        request.project,
        request.document,
        {**request.outputs, "adopted": True},
    )
    return provider.observe([adopted])[request.address]


def _claimable(provider: SlurmInstance, address: str, description: str) -> None:
    from trainform.providers.slurm.names import parse_marker

    found = parse_marker(description)
    if found is not None and found[0] != provider.manager:
        raise refuse(address, description)
