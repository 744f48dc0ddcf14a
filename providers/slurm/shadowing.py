"""Association limits a QOS limit hides: the `limit-shadowed` warning, at every level.

Slurm enforces a limit at the first level of its hierarchy that defines it: partition QOS,
job QOS, user association, account associations up the tree, root (resource_limits.html,
"Hierarchy"; the order of Slurm 22.05, the version trainform is tested against). A limit
a spec declares on an association (a Quota's generic limits on the account, its users'
limits on the queue's partition, a Project's account or user limits) is therefore not the
one enforced when a QOS the association's jobs run under sets the same limit (for TRES
limits, on the same TRES). Observe reports each such pair as a warning, never drift.

Pure: called by providers/slurm/observing.py with the snapshot's QOS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainform.providers.base import Finding
from trainform.providers.slurm.accounting import Qos
from trainform.providers.slurm.settings import TRES_KEYS, canonical

# association setting -> the QOS setting of the same limit (QOS MaxJobsPerUser is what the
# resource_limits example calls a QOS's MaxJobs)
SHADOWED_BY = {
    "GrpTRES": "GrpTRES",
    "GrpTRESMins": "GrpTRESMins",
    "GrpJobs": "GrpJobs",
    "GrpSubmitJobs": "GrpSubmitJobs",
    "GrpWall": "GrpWall",
    "MaxJobs": "MaxJobsPerUser",
    "MaxSubmitJobs": "MaxSubmitJobsPerUser",
    "MaxTRESPerJob": "MaxTRESPerJob",
    "MaxWall": "MaxWall",
}


def _set(key: str, value: str) -> Any:
    meaning = canonical(key, value)
    return meaning not in (None, "", {}, [])


def shadowed(limits: dict[str, str], qos: Qos) -> list[str]:
    """`Key` or `Key tres` for each declared limit that `qos` also sets."""
    found = []
    for key, value in sorted(limits.items()):
        qos_key = SHADOWED_BY.get(key)
        if qos_key is None or not _set(key, value):
            continue
        held = qos.settings.get(qos_key, "")
        if key in TRES_KEYS:
            both = sorted(set(canonical(key, value)) & set(canonical(qos_key, held)))
            found += [f"{key} {tres}" for tres in both]
        elif _set(qos_key, held):
            found.append(key)
    return found


def findings(
    where: str, limits: dict[str, str], qos_names: Iterable[str], qos: dict[str, Qos]
) -> list[Finding]:
    """One `limit-shadowed` warning per QOS that hides some of `limits` (declared on the
    association `where` names)."""
    found = []
    for name in sorted(set(qos_names)):
        record = qos.get(name)
        hidden = shadowed(limits, record) if record else []
        if hidden:
            message = (
                f"Slurm enforces QOS {name}'s limits before those of the {where} on the same "
                f"limit: {', '.join(hidden)} (jobs under QOS {name} are not held by them)"
            )
            evidence = {"qos": name, "association": where, "limits": hidden}
            found.append(Finding("limit-shadowed", message, evidence, warning=True))
    return found
