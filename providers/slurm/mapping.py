"""How trainform kinds map to Slurm settings, and back: pure functions, no I/O.

Forward (`render` for plans, and what create/update write):
- Queue -> partition line (Nodes from its pools' outputs, PriorityTier, MaxTime,
  DefMemPerGPU or DefMemPerCPU, QOS, State from stopPolicy) and a QOS of the same name
  (Description marker, Priority, GrpTRES = nominal quota plus borrowing limit summed over
  pools, PreemptMode).
- Quota -> association limits GrpTRES (cpu, mem, gres/gpu), MaxJobs, MaxWall.

Back (`observe`): the desired document with the fields Slurm holds replaced by what Slurm
holds. A hand change Slurm holds but no spec field can express (a partition's Nodes or
DefMemPerGPU, a QOS's PreemptMode) appears as the annotation `DRIFT_ANNOTATION`, so it
shows in drift and plan as a change and the next apply writes the partition again.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from providers.slurm.names import (
    bytes_of_mebibytes,
    duration_text,
    parse_slurm_time,
    parse_tres,
    render_tres,
    seconds_of,
    slurm_minutes,
)

DRIFT_ANNOTATION = "slurm.trainform.io/drift"
STATES = {"None": "UP", "Hold": "DOWN", "HoldAndDrain": "INACTIVE"}
STOP_POLICIES = {state: policy for policy, state in STATES.items()}
CLEAR_TRES = "cpu=-1,mem=-1,gres/gpu=-1"
MAX_PRIORITY_TIER = 65533


def _add(total: dict[str, Decimal], amounts: dict[str, Any] | None) -> None:
    for key in ("gpu", "cpu", "memory"):
        if amounts and amounts.get(key) is not None:
            total[key] = total.get(key, Decimal(0)) + Decimal(amounts[key])


def queue_tres(spec: dict[str, Any]) -> dict[str, str]:
    """The queue's QOS GrpTRES: nominal quota plus borrowing limit, over all pools.

    With a cohort and no borrowing limit a resource may be borrowed without bound, so it
    gets no QOS limit.
    """
    total: dict[str, Decimal] = {}
    unbounded: set[str] = set()
    for pool in spec["pools"]:
        _add(total, pool["nominalQuota"])
        borrowing = pool.get("borrowingLimit")
        if spec.get("cohort") and borrowing is None:
            unbounded |= {k for k, v in pool["nominalQuota"].items() if v is not None}
        _add(total, borrowing)
    return {key: str(value) for key, value in total.items() if key not in unbounded}


def qos_settings(spec: dict[str, Any], description: str) -> dict[str, str]:
    preempts = spec["preemption"]["withinQueue"] != "Never" or (
        spec["preemption"]["reclaimWithinCohort"] != "Never"
    )
    tres = render_tres(queue_tres(spec))
    return {
        "Description": description,
        "Priority": str(max(0, spec["defaultPriority"])),
        "GrpTRES": tres,
        "PreemptMode": "requeue" if preempts else "cluster",
    }


def qos_arguments(settings: dict[str, str]) -> list[str]:
    """sacctmgr `set` arguments; an empty GrpTRES clears every limit it could hold."""
    return [
        f"{key}={value if value or key != 'GrpTRES' else CLEAR_TRES}"
        for key, value in settings.items()
    ]


def partition_settings(
    name: str, spec: dict[str, Any], nodes: str, default_memory: str, accounts: list[str]
) -> dict[str, str]:
    runtime = seconds_of(spec.get("maxRuntime"))
    settings = {
        "PartitionName": name,
        "Nodes": nodes,
        "PriorityTier": str(min(max(0, spec["defaultPriority"]), MAX_PRIORITY_TIER)),
        "MaxTime": str(slurm_minutes(runtime)) if runtime else "UNLIMITED",
    }
    if default_memory:
        key, _, value = default_memory.partition("=")
        settings[key] = value
    settings["QOS"] = name
    if accounts:
        settings["AllowAccounts"] = ",".join(sorted(accounts))
    settings["State"] = STATES[spec.get("stopPolicy", "None")]
    return settings


def default_memory(pool_outputs: dict[str, Any]) -> str:
    """`DefMemPerGPU=<MiB>` for GPU pools, `DefMemPerCPU=<MiB>` otherwise."""
    memory = int(pool_outputs.get("memoryMiB") or 0)
    gpus = int(pool_outputs.get("gpusPerNode") or 0)
    cpus = int(pool_outputs.get("cpusPerNode") or 0)
    if not memory:
        return ""
    if gpus:
        return f"DefMemPerGPU={memory // gpus}"
    return f"DefMemPerCPU={memory // cpus}" if cpus else ""


def quota_limits(limits: dict[str, Any]) -> str:
    """sacctmgr `set` arguments of a quota; unset limits are cleared (-1)."""
    tres = render_tres({k: limits[k] for k in ("gpu", "cpu", "memory") if k in limits})
    cleared = [
        f"{name}=-1"
        for name, key in (("cpu", "cpu"), ("mem", "memory"), ("gres/gpu", "gpu"))
        if key not in limits
    ]
    grp = ",".join(filter(None, [tres, *cleared]))
    wall = seconds_of(limits.get("maxWallTime"))
    jobs = limits.get("runningJobs")
    return " ".join(
        [
            f"GrpTRES={grp}",
            f"MaxJobs={jobs if jobs is not None else -1}",
            f"MaxWall={slurm_minutes(wall) if wall else -1}",
        ]
    )


def quota_from_association(grp_tres: str, max_jobs: str, max_wall: str) -> dict[str, Any]:
    limits: dict[str, Any] = {
        k: v for k, v in parse_tres(grp_tres).items() if k in ("gpu", "cpu", "memory")
    }
    if max_jobs.strip():
        limits["runningJobs"] = int(max_jobs)
    wall = parse_slurm_time(max_wall)
    if wall:
        limits["maxWallTime"] = duration_text(wall)
    return limits


def live_queue(
    document: dict[str, Any],
    partition: dict[str, str],
    qos: dict[str, str],
    expected_partition: dict[str, str],
    expected_qos: dict[str, str],
) -> dict[str, Any]:
    """The queue document as Slurm holds it (see the module docstring)."""
    live = copy.deepcopy(document)
    spec = live["spec"]
    spec["defaultPriority"] = int(qos.get("Priority") or 0)
    runtime = parse_slurm_time(partition.get("MaxTime", ""))
    if runtime:
        spec["maxRuntime"] = duration_text(runtime)
    else:
        spec.pop("maxRuntime", None)
    spec["stopPolicy"] = STOP_POLICIES.get(partition.get("State", "UP").upper(), "None")
    tres = parse_tres(qos.get("GrpTRES", ""))
    single = len(spec["pools"]) == 1 and spec["pools"][0].get("borrowingLimit") is None
    if single and not spec.get("cohort"):
        spec["pools"][0]["nominalQuota"] = {
            k: tres[k] for k in ("gpu", "cpu", "memory") if k in tres
        }
    elif _tres_key(tres) != _tres_key(parse_tres(expected_qos.get("GrpTRES", ""))):
        _drift(live, f"QOS GrpTRES={qos.get('GrpTRES', '')}")
    if qos.get("PreemptMode", "cluster").lower() != expected_qos["PreemptMode"]:
        _drift(live, f"QOS PreemptMode={qos.get('PreemptMode')}")
    for key, expected in expected_partition.items():
        if key in ("MaxTime", "State", "AllowAccounts", "PriorityTier"):
            continue
        if partition.get(key, "") != expected:
            _drift(live, f"partition {key}={partition.get(key, '(unset)')}")
    tier = partition.get("PriorityTier")  # absent (a line written by hand): not compared
    if tier is not None and tier != expected_partition.get("PriorityTier"):
        _drift(live, f"partition PriorityTier={tier}")
    for key in partition:
        if key not in expected_partition and key != "AllowAccounts":
            _drift(live, f"partition {key}={partition[key]}")
    return live


def _tres_key(tres: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in tres.items() if k in ("gpu", "cpu", "memory")}


def _drift(live: dict[str, Any], text: str) -> None:
    annotations = live.setdefault("metadata", {}).setdefault("annotations", {})
    previous = annotations.get(DRIFT_ANNOTATION)
    annotations[DRIFT_ANNOTATION] = f"{previous}; {text}" if previous else text


def live_pool(document: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    live = copy.deepcopy(document)
    spec = live["spec"]
    spec["nodes"] = facts["count"]
    spec["cpu"] = str(facts["cpusPerNode"])
    spec["memory"] = bytes_of_mebibytes(facts["memoryMiB"])
    gpus, kind = facts["gpusPerNode"], facts["gpuType"]
    if gpus:
        declared = spec.get("accelerator") or {"type": kind or "gpu", "resourceName": "gpu"}
        spec["accelerator"] = {**declared, "count": gpus}
        if kind and declared.get("type") != kind:
            spec["accelerator"]["type"] = kind
    else:
        spec.pop("accelerator", None)
    return live
