"""What a preemption does to a Workload and its Job, for the Kueue stand-in (kueue.py).

After kubernetes-sigs/kueue v0.15:
- `evict` (pkg/workload/workload.go Evict with preemption's WithCustomPrepare): the
  Preempted condition (True, the preemption reason: InClusterQueue, InCohortReclamation,
  InCohortReclaimWhileBorrowing), the Evicted condition (True, reason Preempted) with
  preemptionMessage's text, and one more eviction counted in
  status.schedulingStats.evictions (workloadEvictionStateInc);
- `restore_template` (pkg/controller/jobs/job/job_controller.go Stop,
  RestorePodSetsInfo): once the evicted Workload's Job is suspended and its startTime
  cleared (kueue_deactivation.py step 3, which then releases the quota), its pod
  template's labels, annotations, nodeSelector and tolerations are restored as the
  Workload's pod set recorded them (the template the Job was created with, before
  admission added the flavor's), so a later admission starts it from its original
  template;
- `readmit` (SetQuotaReservation's resetActiveCondition): on a new quota reservation the
  Evicted and Preempted conditions turn False, reason QuotaReserved, "Previously: <msg>".
Each returns whether it changed the object; kueue.py writes it.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.services.kube_api.kueue_workloads import condition, find_condition, is_true

PREEMPTED = "Preempted"  # the Evicted reason WorkloadEvictedByPreemption


def evict(workload: dict[str, Any], reason: str, message: str) -> bool:
    """Mark the Workload preempted for `reason` (a Preempted condition reason)."""
    if is_true(workload, "Evicted"):
        return False
    condition(workload, "Preempted", "True", reason, message)
    condition(workload, "Evicted", "True", PREEMPTED, message)
    stats = workload["status"].setdefault("schedulingStats", {})
    evictions = stats.setdefault("evictions", [])
    found = next(
        (e for e in evictions if e["reason"] == PREEMPTED and not e["underlyingCause"]), None
    )
    if found is None:
        evictions.append({"reason": PREEMPTED, "underlyingCause": "", "count": 1})
    else:
        found["count"] += 1
    return True


def restore_template(job: dict[str, Any], workload: dict[str, Any]) -> bool:
    """Give the (suspended) Job's pod template back what the Workload recorded."""
    spec = job.setdefault("spec", {})
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    original = (pod_sets[0].get("template") if pod_sets else None) or {}
    template = spec.setdefault("template", {})
    before = copy.deepcopy(template)
    metadata = template.setdefault("metadata", {})
    wanted = original.get("metadata") or {}
    for key in ("labels", "annotations"):
        if wanted.get(key):
            metadata[key] = dict(wanted[key])
        else:
            metadata.pop(key, None)
    pod_spec = template.setdefault("spec", {})
    for key in ("nodeSelector", "tolerations"):
        value = (original.get("spec") or {}).get(key)
        if value:
            pod_spec[key] = copy.deepcopy(value)
        else:
            pod_spec.pop(key, None)
    return before != template


def readmit(workload: dict[str, Any]) -> None:
    """Turn the Evicted and Preempted conditions of a re-admitted Workload False."""
    for kind in ("Evicted", "Preempted"):
        found = find_condition(workload, kind)
        if found is not None and found.get("status") == "True":
            said = f"Previously: {found.get('message', '')}"
            condition(workload, kind, "False", "QuotaReserved", said)
