"""The Slurm settings a spec declares, and how two spellings of one value compare.

Pure functions, no I/O. `observe` (providers/slurm/observing.py) and the writes
(providers/slurm/writes.py) both start from these, so a setting is compared and written by
the same rule:

- `queue_partition` / `queue_qos`: the partition and QOS settings a Queue declares, each
  either from a generic field (maxRuntime -> MaxTime, stopPolicy -> State, defaultPriority ->
  QOS Priority, nominalQuota -> QOS GrpTRES, preemption -> QOS PreemptMode) or stated
  verbatim under `spec.slurm`; a verbatim setting wins over the generic field of the same
  Slurm setting. Nothing is derived beyond that (no PriorityTier from a priority, no
  DefMemPerGPU from a pool's memory, no AllowAccounts from quotas).
- `same`: whether two values mean the same to Slurm (times, TRES lists, case of modes), so
  `1440` and `1-00:00:00` never show up as a change, and a write never rewrites the
  spelling of an unchanged value.
- `assignments`: `Key=Value` arguments for sacctmgr, with TRES Slurm must clear (`=-1`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainform.providers.slurm import mapping
from trainform.providers.slurm.names import (
    MIB,
    parse_slurm_time,
    parse_tres,
    render_tres,
    seconds_of,
    slurm_minutes,
)

TIME_KEYS = {"MaxWall", "GrpWall", "MaxTime", "DefaultTime", "GraceTime"}
TRES_KEYS = {"GrpTRES", "GrpTRESMins", "MaxTRESPerJob", "MaxTRESPerUser"}
# Slurm keeps QOS descriptions lowercased
CASELESS_KEYS = {"PreemptMode", "State", "OverSubscribe", "Flags", "Description", "DefaultQOS"}
LIST_KEYS = {"AllowAccounts", "Preempt", "QOS"}
UNSET = {"", "UNLIMITED", "INFINITE", "-1"}


def _tres(text: str) -> dict[str, str]:
    """TRES name -> amount (memory in MiB: `mem=4G` and `mem=4096M` are one value)."""
    found = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if value in ("-1", ""):
            continue
        if name.lower() == "mem":
            value = str(int(Decimal(parse_tres(part)["memory"]) / MIB))
        found[name.lower()] = value.upper()
    return found


def canonical(key: str, value: str | None) -> Any:
    """What a value means to Slurm, comparable across spellings."""
    text = (value or "").strip()
    if key in TIME_KEYS:
        if text.upper() in UNSET:
            return None
        seconds = parse_slurm_time(text)
        return seconds or None
    if key in TRES_KEYS:
        return _tres(text)
    if key in LIST_KEYS:
        return sorted({p.lower() for p in text.split(",") if p})
    if key == "UsageFactor":
        return float(text) if text else 1.0
    if key in CASELESS_KEYS:
        return "" if text == "-1" else text.upper()
    return "" if text in ("-1",) else text


def same(key: str, desired: str | None, live: str | None) -> bool:
    return canonical(key, desired) == canonical(key, live)


def assignments(changes: dict[str, str], live: dict[str, str]) -> list[str]:
    """sacctmgr `set` arguments; TRES the live value has and the desired lacks are cleared."""
    arguments = []
    for key, value in changes.items():
        if key in TRES_KEYS:
            cleared = [
                f"{name}=-1" for name in _tres(live.get(key, "")) if name not in _tres(value)
            ]
            value = ",".join(filter(None, [value, *cleared])) or "cpu=-1"
        elif value == "" and key not in CLEARED:
            value = "-1"
        arguments.append(f"{key}={value}")
    return arguments


def differing(desired: dict[str, str], live: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in desired.items() if not same(k, v, live.get(k))}


# What clears a setting that a spec stops declaring (sacctmgr takes -1 for most limits; an
# association's QOS list set empty is inherited from its parent again).
CLEARED = {"Preempt": "", "PreemptMode": "cluster", "UsageFactor": "1", "Flags": "-1", "QOS": ""}
NEVER_CLEARED = {"Description", "Priority", "State", "QOS", "Nodes"}


def declared(kind: str, spec: dict[str, Any], adopted: bool, name: str) -> dict[str, Any]:
    """The Slurm settings a resource's spec declares, by section: kept in outputs, so the
    next write clears what the spec stopped declaring (the plan shows that removal)."""
    slurm = spec.get("slurm") or {}
    if kind == "Queue":
        return {
            "partition": sorted(queue_partition(spec, adopted, name)),
            "qos": sorted(queue_qos(spec, adopted, "")),
        }
    if kind in ("Project", "Quota"):
        users = {user: sorted(limits) for user, limits in slurm.get("users", {}).items()}
        return {"limits": sorted(slurm.get("limits", {})), "users": users}
    return {}


def dropped(before: list[str], wanted: dict[str, Any]) -> dict[str, str]:
    """Settings declared before and not now, with the value that clears each."""
    return {
        key: CLEARED.get(key, "-1")
        for key in before
        if key not in wanted and key not in NEVER_CLEARED
    }


def qos_name(name: str, spec: dict[str, Any]) -> str:
    return ((spec.get("slurm") or {}).get("partition") or {}).get("QOS", name).lower()


def qos_from(spec: dict[str, Any]) -> str:
    """The Queue that declares this queue's QOS (`spec.slurm.qosFrom`), or ''."""
    return str((spec.get("slurm") or {}).get("qosFrom") or "")


def queue_partition(spec: dict[str, Any], adopted: bool, name: str) -> dict[str, str]:
    """Partition settings the queue declares (Nodes aside: it comes from the pools)."""
    settings: dict[str, str] = {}
    runtime = seconds_of(spec.get("maxRuntime"))
    if runtime:
        settings["MaxTime"] = str(slurm_minutes(runtime))
    settings["State"] = mapping.STATES[spec.get("stopPolicy", "None")]
    if not adopted:
        settings["QOS"] = name
    settings.update((spec.get("slurm") or {}).get("partition") or {})
    return settings


def queue_qos(spec: dict[str, Any], adopted: bool, marker: str) -> dict[str, str]:
    """QOS settings the queue declares (none when another Queue declares its QOS)."""
    if qos_from(spec):
        return {}
    settings = {"Priority": str(max(0, spec["defaultPriority"]))}
    quota = any(v is not None for p in spec["pools"] for v in p["nominalQuota"].values())
    if quota:
        settings["GrpTRES"] = render_tres(mapping.queue_tres(spec))
    preemption = spec["preemption"]
    preempts = preemption["withinQueue"] != "Never" or (
        preemption["reclaimWithinCohort"] != "Never"
    )
    settings["PreemptMode"] = "requeue" if preempts else "cluster"
    if not adopted:
        settings["Description"] = marker
    settings.update((spec.get("slurm") or {}).get("qos") or {})
    return settings


def quota_account_limits(limits: dict[str, Any]) -> dict[str, str]:
    """A Quota's generic limits as settings of the project's account association."""
    settings: dict[str, str] = {}
    tres = render_tres({k: limits[k] for k in ("gpu", "cpu", "memory") if k in limits})
    if tres:
        settings["GrpTRES"] = tres
    if limits.get("runningJobs") is not None:
        settings["GrpJobs"] = str(limits["runningJobs"])
    wall = seconds_of(limits.get("maxWallTime"))
    if wall:
        settings["MaxWall"] = str(slurm_minutes(wall))
    return settings
