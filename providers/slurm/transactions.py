"""Who changed a Slurm object last, from slurmdbd's own record (`sacctmgr show transactions`).

slurmdbd keeps a transaction per accounting change: its time, action (`Modify QOS`,
`Modify Associations`, `Modify Accounts`, `Add ...`), actor (the Unix user who ran
sacctmgr) and where (`(name='gold')`, `(id_assoc=7)`). `last_changes` reads them with the
association ids (two sacctmgr calls side by side) and answers, per object as drift names
it (the places of providers/slurm/observing.py: `QOS gold`, `account acme`, `association
of user bob in account acme`), the newest one. The partitions file has no such record.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from trainform.providers.slurm.commands import SlurmCommands

WINDOW = timedelta(days=90)
"""How far back transactions are read: drift shows the last change within it."""
_NAME = re.compile(r"name='([^']*)'")
_ASSOCIATION = re.compile(r"id_assoc=(\d+)")


@dataclass(frozen=True)
class Change:
    time: str
    action: str
    actor: str

    def evidence(self, place: str) -> dict[str, str]:
        return {"changedAt": self.time, "changedBy": self.actor, "action": self.action,
                "object": place}  # fmt: skip


def association_place(account: str, user: str, partition: str) -> str:
    if not user:
        return f"association of account {account}"
    if not partition:
        return f"association of user {user} in account {account}"
    return f"association of user {user} in account {account} on partition {partition}"


def last_changes(
    commands: SlurmCommands, where_cluster: list[str], now: datetime | None = None
) -> dict[str, Change]:
    """The newest transaction of each object, keyed by the object as drift names it."""
    since = ((now or datetime.now(UTC)) - WINDOW).strftime("%Y-%m-%dT%H:%M:%S")
    queries = [
        ["sacctmgr", "-nP", "show", "transactions", f"start={since}",
         "format=Time,Action,Actor,Where"],
        ["sacctmgr", "-nP", "show", "association", *where_cluster,
         "format=ID,Account,User,Partition"],
    ]  # fmt: skip
    with ThreadPoolExecutor(max_workers=2) as pool:
        transactions, associations = (r.stdout for r in pool.map(commands.run, queries))
    by_id = {}
    for line in associations.splitlines():
        cells = line.split("|")
        if len(cells) >= 4 and cells[0].isdigit():
            by_id[cells[0]] = association_place(*(cell.lower() for cell in cells[1:4]))
    found: dict[str, Change] = {}
    for line in transactions.splitlines():
        cells = line.split("|")
        if len(cells) < 4:
            continue
        moment, action, actor, where = cells[:4]
        for place in _places(action, where, by_id):
            if place not in found or moment >= found[place].time:
                found[place] = Change(moment, action, actor)
    return found


def _places(action: str, where: str, associations: dict[str, str]) -> list[str]:
    subject = action.split(" ", 1)[-1].lower()
    if subject.startswith("association"):
        return [associations[i] for i in _ASSOCIATION.findall(where) if i in associations]
    names = _NAME.findall(where) or ([where.strip()] if where and "=" not in where else [])
    if subject == "qos":
        return [f"QOS {name.lower()}" for name in names]
    if subject.startswith("account"):
        return [f"account {name.lower()}" for name in names]
    return []


def evidence_for(places: dict[str, str], changes: dict[str, Change]) -> dict[str, object]:
    """`byPlace`: the last change of each object `places` names (drift picks those of the
    fields that changed: planner.drift)."""
    found = {place: changes[place].evidence(place) for place in set(places.values())
             if place in changes}  # fmt: skip
    return {"byPlace": found} if found else {}
