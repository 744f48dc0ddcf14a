"""Ownership listing, spec generation and adoption for the Slurm provider.

- `owned`: what carries this manager's mark: accounts and QOS (Description marker),
  blocks of the managed partitions file (pools, partitions, quota records), queued or
  running jobs (job comment), suite records.
- `discover`: live Slurm objects as trainform documents (what `trainform import --from`
  writes): accounts as Projects (owners = the account's Organization, which Slurm sets to
  the account name when none was given), node groups of identical CPUs, memory, GRES and
  features as ResourcePools (named `pool-<first node>`), partitions of the managed file
  with their QOS as Queues, and partition associations as Quotas named
  `<account>-<partition>`. Every document states the fields `observe` compares, so a plan
  right after the import shows no change.
- `adopt`: put this manager's mark on one object (account or QOS Description, a marker
  line above a partition line of the managed file, a pool record). A partition defined in
  slurm.conf itself cannot be adopted: trainform never edits that file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from providers.base import Discovered, Observation, ObserveRequest
from providers.errors import PermanentProviderError
from providers.slurm.nodes import group_pools
from providers.slurm.partitions import Block, ManagedFile, parse_settings
from providers.slurm.writes import quota_record, refresh_allow_accounts, refuse

if TYPE_CHECKING:
    from providers.slurm.provider import SlurmProvider

API = "trainform/v1"
SKIPPED_ACCOUNTS = {"root"}


def owned(provider: SlurmProvider) -> list[tuple[str, str]]:
    snapshot = provider.sacctmgr.snapshot()
    found = set()
    for account in snapshot.accounts.values():
        if provider._ours(account.description):
            found.add((f"Project/{account.name}", "Project"))
    for qos in snapshot.qos.values():
        if provider._ours(qos.description):
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


def discover(provider: SlurmProvider) -> list[Discovered]:
    snapshot = provider.sacctmgr.snapshot()
    managed = provider.partitions.read()
    found: list[Discovered] = []
    for account in sorted(snapshot.accounts.values(), key=lambda a: a.name):
        if account.name in SKIPPED_ACCOUNTS:
            continue
        spec = {
            "owners": [account.organization or account.name],
            "users": snapshot.users_of(account.name),
        }
        found.append(
            Discovered(
                _document("Project", account.name, spec),
                account.name,
                "owners: the account's Organization",
            )
        )
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
    for settings in managed.partitions().values():
        found.extend(_queue_and_quotas(provider, settings, snapshot, pool_of_node))
    return found


def _queue_and_quotas(
    provider: SlurmProvider, settings: dict[str, str], snapshot: Any, pool_of_node: dict[str, str]
) -> list[Discovered]:
    from providers.slurm import mapping
    from providers.slurm.names import duration_text, parse_slurm_time, parse_tres

    name = settings["PartitionName"].lower()
    qos = snapshot.qos.get(name)
    nodes = provider.nodes.expand(settings.get("Nodes", "")) if settings.get("Nodes") else []
    pools = sorted({pool_of_node[n] for n in nodes if n in pool_of_node})
    tres = parse_tres(qos.grp_tres) if qos else {}
    quota = {k: tres[k] for k in ("gpu", "cpu", "memory") if k in tres}
    spec: dict[str, Any] = {
        "pools": [
            {"pool": pool, "nominalQuota": quota if index == 0 else {}}
            for index, pool in enumerate(pools)
        ],
        "defaultPriority": qos.priority if qos else 0,
        "stopPolicy": mapping.STOP_POLICIES.get(settings.get("State", "UP").upper(), "None"),
    }
    runtime = parse_slurm_time(settings.get("MaxTime", ""))
    if runtime:
        spec["maxRuntime"] = duration_text(runtime)
    if qos and qos.preempt_mode.lower() == "requeue":
        spec["preemption"] = {"withinQueue": "LowerPriority"}
    found = [Discovered(_document("Queue", name, spec), name)]
    accounts = sorted({a.account for a in snapshot.associations if a.partition == name and a.user})
    for account in accounts:
        first = snapshot.partition_associations(account, name)[0]
        limits = mapping.quota_from_association(first.grp_tres, first.max_jobs, first.max_wall)
        found.append(
            Discovered(
                _document("Quota", f"{account}-{name}", {"queue": name, "limits": limits}, account),
                f"{account}/{name}",
            )
        )
    return found


def adopt(provider: SlurmProvider, request: ObserveRequest, identifier: str) -> Observation:
    kind = request.kind
    if kind == "Project":
        snapshot = provider.sacctmgr.snapshot()
        account = snapshot.accounts.get(identifier.lower())
        if account is None:
            return Observation(exists=False)
        _claimable(provider, request.address, account.description)
        provider.sacctmgr.set_account_description(account.name, provider.mark(request.address))
    elif kind == "Queue":
        snapshot = provider.sacctmgr.snapshot()
        qos = snapshot.qos.get(identifier.lower())
        if qos is not None:
            _claimable(provider, request.address, qos.description)
        provider.partitions.change(
            lambda managed: _mark_partition(provider, managed, request.address, identifier),
            lambda managed: [],
        )
        if qos is not None:
            provider.sacctmgr.modify_qos(
                qos.name, [f"Description={provider.mark(request.address)}"]
            )
    elif kind == "ResourcePool":

        def edit(managed: ManagedFile) -> None:
            block = managed.find(request.address)
            if block is not None and block.manager != provider.manager:
                raise refuse(request.address, f"marked for {block.manager}")
            managed.put(
                Block(
                    provider.manager,
                    request.address,
                    provider._pool_line({"nodeList": identifier, "features": []}),
                )
            )

        provider.partitions.change(edit, lambda managed: [])
    elif kind == "Quota":
        account, _, partition = identifier.lower().partition("/")
        record = Block(provider.manager, request.address, quota_record(account, partition))
        refresh_allow_accounts(provider, partition, record=record)
    else:
        raise PermanentProviderError(f"the slurm provider cannot import a {kind}")
    return provider.observe([request])[request.address]


def _claimable(provider: SlurmProvider, address: str, description: str) -> None:
    from providers.slurm.names import parse_marker

    found = parse_marker(description)
    if found is not None and found[0] != provider.manager:
        raise refuse(address, description)


def _mark_partition(
    provider: SlurmProvider, managed: ManagedFile, address: str, identifier: str
) -> None:
    block = managed.find(address)
    if block is not None:
        if block.manager != provider.manager:
            raise refuse(address, f"marked for {block.manager}")
        return
    for index, line in enumerate(managed.others):
        if parse_settings(line).get("PartitionName", "").lower() == identifier.lower():
            del managed.others[index]
            managed.blocks.append(Block(provider.manager, address, line.strip()))
            return
    raise PermanentProviderError(
        f"cannot import partition {identifier}: it is not in {provider.partitions.path}; "
        "trainform only manages partitions of its own include file (move the line there)"
    )
