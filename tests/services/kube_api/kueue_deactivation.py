"""Kueue's maximum execution time, the deactivation of Workloads and the stop of an evicted
Workload's Job, for the Kueue stand-in (kueue.py mixes `Deactivations` in). Each step is
one of Kueue's, in the order its controllers take them:

1. Maximum execution time (pkg/controller/core/workload_controller.go,
   reconcileMaxExecutionTime): a Workload whose Job carries the label
   `kueue.x-k8s.io/max-exec-time-seconds` has `spec.maximumExecutionTimeSeconds`
   (jobframework/utils.go, MaximumExecutionTimeSecondsForObject). While it is Admitted,
   its time left is that limit minus `status.accumulatedPastExecutionTimeSeconds` (the
   admitted time of its earlier admissions; v1beta1 spells it
   `accumulatedPastExexcutionTimeSeconds`) minus the time since the Admitted condition
   turned True. At zero it gets the condition DeactivationTarget (reason
   MaximumExecutionTimeExceeded, message "exceeding the maximum execution time") and its
   accumulated time is dropped.
2. Deactivation (workload_controller.go, Reconcile): an active Workload with
   DeactivationTarget True is set `spec.active: false` (what a person or another
   controller may also do by hand). An inactive Workload not yet evicted is evicted
   (pkg/workload/evict, Evict): condition Evicted True, reason `Deactivated`, or
   `DeactivatedDueTo<the target's reason>` (patching.ReasonWithCause) with the message
   "The workload is deactivated due to <the target's message>"; the DeactivationTarget
   condition and any requeueState are removed. An inactive Workload is never queued again
   (the scheduler passes it over: kueue.py schedules active Workloads only).
3. An evicted Workload's Job (pkg/controller/jobframework/reconciler.go, "handle
   eviction"; jobs/job/job_controller.go, Job.Stop), whatever the eviction's reason: the
   Job is suspended, its status.startTime cleared and its pod template restored from the
   Workload (RestorePodSetsInfo: kueue_eviction.restore_template); once it has no active
   pod left, the Workload gives its quota back: Requeued False with the eviction's reason and
   message (True only for a preemption or a node failure), QuotaReserved False (reason
   Pending, the eviction's message), `status.admission` removed, and Admitted False
   (reason NoReservation, "The workload has no reservation") with the time it was
   admitted added to `accumulatedPastExecutionTimeSeconds`
   (pkg/workload/admissionchecks.go, SyncAdmittedCondition). Of an inactive Workload
   the QuotaReserved False ends as the workload controller words it next: reason
   Deactivated, "The workload is deactivated" (syncQuotaReservedFalseCondition).
4. Kueue drops an inactive Workload from its queues and its cache at once, as it does a
   finished one (workload_controller.go, Update): its quota is free for others while its
   Job's pods stop, and it is neither pending nor reserving in queue status (kueue.py
   `reserving`, kueue_status.py).

Not modelled: waitForPodsReady (its requeue limit sets DeactivationTarget with reason
RequeuingLimitExceeded: a test sets that condition as Kueue would) and the
objectRetentionPolicies that delete a deactivated
Job after a while.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.services.kube_api import fields
from tests.services.kube_api.kueue_eviction import restore_template
from tests.services.kube_api.kueue_workloads import condition, find_condition, is_true

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

KUEUE = "kueue.x-k8s.io"
TARGET = "DeactivationTarget"
MAX_EXEC_REASON = "MaximumExecutionTimeExceeded"
MAX_EXEC_MESSAGE = "exceeding the maximum execution time"
DEACTIVATED = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
REQUEUED_REASONS = {"Preempted", "NodeFailures"}  # Requeued True after these evictions
ACCUMULATED = "accumulatedPastExecutionTimeSeconds"


def _seconds_since(text: str) -> float:
    then = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    now = datetime.datetime.fromisoformat(fields.now().replace("Z", "+00:00"))
    return (now - then).total_seconds()


def _owner(workload: dict[str, Any]) -> dict[str, Any] | None:
    references = workload["metadata"].get("ownerReferences") or []
    return next((o for o in references if o.get("kind") == "Job"), None)


class Deactivations:
    """Steps 1-3 above, run by KueueController.reconcile after the Job step; steps 1 and
    2 of one Workload follow each other in one pass (Kueue takes a reconcile for each)."""

    api: KubeAPI
    _items: Callable[[str, str], list[dict[str, Any]]]
    _write: Callable[..., None]

    def _deactivate(self) -> None:
        for workload in self._items(KUEUE, "workloads"):
            if workload["metadata"].get("deletionTimestamp") or is_true(workload, "Finished"):
                continue
            if (workload.get("spec") or {}).get("active", True):
                if self._past_max_exec(workload):
                    workload = self._fresh(workload)
                if not is_true(workload, TARGET):
                    continue
                workload["spec"]["active"] = False
                self._write(KUEUE, "workloads", workload)
                workload = self._fresh(workload)
            if not is_true(workload, "Evicted"):
                self._evict_inactive(workload)
        for workload in self._items(KUEUE, "workloads"):
            if is_true(workload, "Evicted") and not is_true(workload, "Finished"):
                self._stop_evicted(workload)

    def _fresh(self, workload: dict[str, Any]) -> dict[str, Any]:
        """The stored Workload after a write (the next step writes on top of it)."""
        metadata = workload["metadata"]
        found = self.api.store.get(KUEUE, "workloads", metadata["namespace"], metadata["name"])
        return found if found is not None else workload

    def _past_max_exec(self, workload: dict[str, Any]) -> bool:
        """Step 1; whether it set the DeactivationTarget now."""
        limit = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
        admitted = find_condition(workload, "Admitted")
        if limit is None or admitted is None or admitted.get("status") != "True":
            return False
        status = workload.setdefault("status", {})
        used = int(status.get(ACCUMULATED) or 0) + _seconds_since(admitted["lastTransitionTime"])
        if used < int(limit) or is_true(workload, TARGET):
            return False
        condition(workload, TARGET, "True", MAX_EXEC_REASON, MAX_EXEC_MESSAGE)
        status.pop(ACCUMULATED, None)
        self._write(KUEUE, "workloads", workload, "status")
        return True

    def _evict_inactive(self, workload: dict[str, Any]) -> None:
        """Step 2's eviction of an inactive Workload."""
        target = find_condition(workload, TARGET)
        reason, message = DEACTIVATED, DEACTIVATED_MESSAGE
        if target is not None and target.get("status") == "True":
            reason = f"{DEACTIVATED}DueTo{target.get('reason', '')}"
            message = f"{DEACTIVATED_MESSAGE} due to {target.get('message', '')}"
        status = workload.setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != TARGET]
        status.pop("requeueState", None)
        condition(workload, "Evicted", "True", reason, message)
        self._write(KUEUE, "workloads", workload, "status")

    def _stop_evicted(self, workload: dict[str, Any]) -> None:
        """Step 3: stop the Job, then give the quota back once its pods are gone."""
        job = self._owned_job(workload)
        if job is not None:
            running = self._stop_job(job)
            self._restore_template(job, workload)
            if running:
                return  # the Job controller deletes its pods first
        if is_true(workload, "QuotaReserved"):
            self._release(workload)

    def _owned_job(self, workload: dict[str, Any]) -> dict[str, Any] | None:
        owner = _owner(workload)
        if owner is None:
            return None
        job = self.api.store.get("batch", "jobs", workload["metadata"]["namespace"], owner["name"])
        return job if job is not None and job["metadata"].get("uid") == owner.get("uid") else None

    def _stop_job(self, job: dict[str, Any]) -> bool:
        """Suspend the Job and clear its startTime (Job.Stop); whether pods still run."""
        metadata = job["metadata"]
        if not (job.get("spec") or {}).get("suspend"):
            job["spec"]["suspend"] = True
            self._write("batch", "jobs", job)
            job = (
                self.api.store.get("batch", "jobs", metadata["namespace"], metadata["name"]) or job
            )
        status = job.get("status") or {}
        if status.get("startTime"):
            status.pop("startTime")
            self._write("batch", "jobs", job, "status")
        return bool(int(status.get("active", 0)))

    def _restore_template(self, job: dict[str, Any], workload: dict[str, Any]) -> None:
        """RestorePodSetsInfo on the stopped Job (kueue_eviction.restore_template)."""
        metadata = job["metadata"]
        found = self.api.store.get("batch", "jobs", metadata["namespace"], metadata["name"])
        if found is not None and restore_template(found, workload):
            self._write("batch", "jobs", found)

    def _release(self, workload: dict[str, Any]) -> None:
        evicted = find_condition(workload, "Evicted") or {}
        reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        requeued = "True" if reason in REQUEUED_REASONS else "False"
        condition(workload, "Requeued", requeued, reason, message)
        if (workload.get("spec") or {}).get("active", True) is False:
            condition(workload, "QuotaReserved", "False", DEACTIVATED, DEACTIVATED_MESSAGE)
        else:
            condition(workload, "QuotaReserved", "False", "Pending", message)
        status = workload["status"]
        status.pop("admission", None)
        admitted = find_condition(workload, "Admitted")
        if admitted is not None and admitted.get("status") == "True":
            held = int(_seconds_since(admitted["lastTransitionTime"]))
            status[ACCUMULATED] = int(status.get(ACCUMULATED) or 0) + held
        condition(workload, "Admitted", "False", "NoReservation", "The workload has no reservation")
        self._write(KUEUE, "workloads", workload, "status")
