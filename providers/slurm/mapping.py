"""Generic trainform fields and Slurm values, both ways: pure functions, no I/O.

- `queue_tres`: a Queue's QOS GrpTRES from its nominal quotas and borrowing limits;
- `quota_from_association`: an association's GrpTRES/GrpJobs/MaxWall as Quota limits;
- `live_pool`: a ResourcePool document with the capacity Slurm reports;
- `default_memory`: a pool's memory per GPU or CPU (recorded in outputs, never written);
- `queue_nodes`: a Queue's partition Nodes, from the nodes its pools recorded;
- `annotate_drift`: the annotation `DRIFT_ANNOTATION` for a hand change no spec field expresses
  (a partition's Nodes, a created QOS's PreemptMode), so drift and plan show it.

Which Slurm setting each field maps to, and when it is written, is in
providers/slurm/settings.py.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.names import (
    bytes_of_mebibytes,
    duration_text,
    parse_slurm_time,
    parse_tres,
)

DRIFT_ANNOTATION = "slurm.trainform.io/drift"
STATES = {"None": "UP", "Hold": "DOWN", "HoldAndDrain": "INACTIVE"}
STOP_POLICIES = {state: policy for policy, state in STATES.items()}


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


def queue_nodes(instance: str, resource: DesiredResource, strict: bool = True) -> tuple[str, str]:
    """The queue's partition Nodes (its pools' recorded hostlists) and the first default
    memory among its pools; without `strict`, `(known after apply)` while a pool has none
    recorded yet."""
    lists, memory = [], ""
    for entry in resource.spec["pools"]:
        outputs = resource.outputs_of_dependencies.get(f"ResourcePool/{entry['pool']}")
        if outputs and isinstance(outputs.get(instance), dict):
            outputs = outputs[instance]  # the engine keys outputs by provider instance
        if not outputs or not outputs.get("nodeList"):
            if strict:
                raise PermanentProviderError(
                    f"cannot place queue {resource.name}: pool {entry['pool']} has no nodes "
                    "recorded (create the pool first)"
                )
            return "(known after apply)", ""
        lists.append(outputs["nodeList"])
        memory = memory or default_memory(outputs)
    return ",".join(lists), memory


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


def annotate_drift(live: dict[str, Any], text: str) -> None:
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
