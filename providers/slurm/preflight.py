"""What slurmctld would refuse, checked before trainform changes a partition or a QOS.

slurmctld 22.05 exits on `scontrol reconfigure` when a partition names a QOS slurmdbd does
not have ("Partition train has an invalid qos") or a node it does not know; an AllowQos or
DenyQos entry that names no QOS is only logged and ignored. There is no dry-run mode of
slurmctld in 22.05, so the partitions file is checked in two steps (providers/slurm/
partitions.py runs the second): Slurm's own parser reads a temporary slurm.conf that
includes the new text (syntax), and `configuration_problems` below checks what the parser
does not (semantics): every partition slurmctld would load after the write, those of the
new file and those slurm.conf defines itself (the live partitions the old file did not
define), names only existing nodes and an existing QOS. A QOS is never deleted while
anything names it (`qos_users`): a partition (live, or a line of the file), an
association's QOS list or default, a queued or running job.

Called by providers/slurm/writes.py (under the file's lock, on fresh reads) and by the
provider's plan of a delete (`SlurmProvider.delete_impact`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainform.providers.slurm.accounting import AccountingSnapshot
from trainform.providers.slurm.names import check_identifier
from trainform.providers.slurm.nodes import parse_oneliner
from trainform.providers.slurm.partitions import ManagedFile
from trainform.providers.slurm.transactions import association_place

if TYPE_CHECKING:
    from trainform.providers.slurm.instance import SlurmInstance

NO_QOS = ("", "n/a")


def live_partitions(provider: SlurmInstance) -> dict[str, dict[str, str]]:
    """Every partition slurmctld holds now (slurm.conf's own and the file's), by name."""
    text = provider.commands.run(["scontrol", "show", "partition", "--oneliner"]).stdout
    found = {}
    for line in text.splitlines():
        settings = parse_oneliner(line)
        if settings.get("PartitionName"):
            found[settings["PartitionName"].lower()] = settings
    return found


def _qos_of(settings: dict[str, str]) -> str:
    value = settings.get("QOS", settings.get("QoS", "")).lower()
    return "" if value in NO_QOS else value


def configuration_problems(
    provider: SlurmInstance, before: ManagedFile, after: ManagedFile
) -> list[str]:
    """Why slurmctld would refuse the configuration with `after` as the partitions file."""
    loaded = {
        name: settings
        for name, settings in live_partitions(provider).items()
        if name not in before.partitions()
    }  # slurm.conf's own partitions
    loaded.update(after.partitions())
    known_nodes = provider.nodes.all()
    known_qos = provider.sacctmgr.qos_names()
    problems = []
    for name, settings in sorted(loaded.items()):
        hostlist = settings.get("Nodes", "")
        if hostlist and hostlist.upper() != "ALL":
            unknown = [n for n in provider.nodes.expand(hostlist) if n not in known_nodes]
            if unknown:
                problems.append(f"partition {name}: Slurm has no node {', '.join(unknown)}")
        qos = _qos_of(settings)
        if qos and qos not in known_qos:
            problems.append(f"partition {name}: Slurm has no QOS {qos}")
    return problems


def _sets(own: dict[str, str], qos: str) -> bool:
    """Whether an association names the QOS itself (its parent's list is the parent's)."""
    listed = own.get("QOS", "").lower().lstrip("+").split(",")
    return qos in [q.lstrip("+") for q in listed] or own.get("DefaultQOS", "").lower() == qos


def qos_users(
    provider: SlurmInstance, qos: str, snapshot: AccountingSnapshot, leaving: str = ""
) -> list[str]:
    """What still names QOS `qos` besides partition `leaving` (being deleted with it)."""
    partitions = {
        name
        for name, settings in {
            **live_partitions(provider),
            **provider.partitions.read().partitions(),
        }.items()
        if _qos_of(settings) == qos and name != leaving
    }
    users = [f"partition {name}" for name in sorted(partitions)]
    users += [
        association_place(a.account, a.user, a.partition)
        for a in snapshot.naming_qos(qos)
        if a.partition != leaving and _sets(a.own, qos)
    ]
    jobs = provider.commands.run(
        ["squeue", "--noheader", f"--qos={check_identifier(qos, 'QOS')}", "--format=%i"],
        check=False,
    ).stdout.split()
    if jobs:
        users.append(f"{len(jobs)} queued or running job(s) ({', '.join(jobs[:5])})")
    return users
