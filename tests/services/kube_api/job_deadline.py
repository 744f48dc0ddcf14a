"""The Job controller's clock rules, for the stand-in's Job controller (job_controller.py),
after kubernetes pkg/controller/job/job_controller.go (syncJob, pastActiveDeadline):

- `status.startTime` is set when a Job is first seen not suspended ("Job first start");
  Kueue's Job integration clears it when it stops the Job (kueue
  pkg/controller/jobs/job/job_controller.go, Job.Stop), so a Job Kueue admits again starts
  anew, as a resumed Job does on a real cluster (startTime reset on resume: the deadline
  counts the time a Job is continuously active);
- a running Job whose `activeDeadlineSeconds` have passed since its startTime fails: its
  active pods are deleted (counted as failed) and it gets the conditions FailureTarget,
  then Failed, both with reason `DeadlineExceeded` and the message "Job was active longer
  than specified deadline" (newFailureCondition; the FailureTarget interim condition of
  Kubernetes 1.31+ is kept beside Failed as the real controller leaves it).

Times come from the server's clock (fields.now; tests let time pass with clock.elapse).
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.services.kube_api import fields

DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"


def _parse(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def mark_started(job: dict[str, Any]) -> bool:
    """Set the running Job's startTime if it has none; whether it was set."""
    status = job.setdefault("status", {})
    if status.get("startTime"):
        return False
    status["startTime"] = fields.now()
    return True


def past_deadline(job: dict[str, Any]) -> bool:
    """pastActiveDeadline: a running Job active at least activeDeadlineSeconds."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    limit = spec.get("activeDeadlineSeconds")
    started = _parse(str(status.get("startTime") or ""))
    if limit is None or started is None or spec.get("suspend"):
        return False
    now = _parse(fields.now())
    assert now is not None
    return (now - started).total_seconds() >= int(limit)


def fail_for_deadline(job: dict[str, Any], deleted: int) -> None:
    """The Job's status once its deadline fired and its `deleted` active pods are gone."""
    now = fields.now()
    status = job.setdefault("status", {})
    status["failed"] = int(status.get("failed", 0)) + deleted
    status.pop("active", None)
    conditions = [
        c
        for c in status.get("conditions") or []
        if c.get("type") not in ("FailureTarget", "Failed")
    ]
    for kind in ("FailureTarget", "Failed"):
        conditions.append(
            {
                "type": kind,
                "status": "True",
                "reason": DEADLINE_REASON,
                "message": DEADLINE_MESSAGE,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            }
        )
    status["conditions"] = conditions
