"""Job states from `squeue --json` and `sacct --json`: phases and readable reasons.

Pure: parses the JSON text Slurm prints (22.05, openapi v0.0.38 field names, with the
newer nested spellings accepted too) into `SlurmJobState` values, maps Slurm job states to
trainform run phases and Slurm reason codes to sentences a person understands.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from providers.errors import PermanentProviderError
from providers.jobs import RunPhase

QUEUED_STATES = {
    "PENDING",
    "CONFIGURING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SUSPENDED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "SPECIAL_EXIT",
    "RESV_DEL_HOLD",
}
RUNNING_STATES = {"RUNNING", "COMPLETING"}
FAILED_STATES = {
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "REVOKED",
}
REASONS = {
    "Resources": "waiting for resources: the nodes it needs are busy",
    "Priority": "waiting behind higher-priority jobs in the queue",
    "QOSGrpGRES": "the queue's GPU limit (QOS GrpTRES gres/gpu) is in use",
    "QOSGrpCpuLimit": "the queue's CPU limit (QOS GrpTRES cpu) is in use",
    "QOSGrpMemLimit": "the queue's memory limit (QOS GrpTRES mem) is in use",
    "QOSGrpJobsLimit": "the queue's running-jobs limit is reached",
    "QOSMaxGRESPerUser": "the queue's per-user GPU limit is reached",
    "AssocGrpGRES": "the project's GPU quota on this queue is in use (association GrpTRES "
    "gres/gpu)",
    "AssocGrpCpuLimit": "the project's CPU quota on this queue is in use (association GrpTRES cpu)",
    "AssocGrpMemLimit": "the project's memory quota on this queue is in use (association "
    "GrpTRES mem)",
    "AssocMaxJobsLimit": "the project's running-jobs quota on this queue is reached "
    "(association MaxJobs)",
    "AssocMaxWallDurationPerJobLimit": "the job's time limit exceeds the project's "
    "maxWallTime on this queue (association MaxWall)",
    "PartitionTimeLimit": "the job's time limit exceeds the queue's maxRuntime",
    "PartitionDown": "the queue is held (stopPolicy): its partition is down",
    "PartitionInactive": "the queue is stopped (stopPolicy): its partition is inactive",
    "PartitionNodeLimit": "the job asks for more nodes than the queue's pools have",
    "ReqNodeNotAvail": "the nodes it needs are unavailable (down, drained or reserved)",
    "BeginTime": "waiting for its start time",
    "Dependency": "waiting for a job it depends on",
    "JobHeldUser": "held by a user (scontrol hold)",
    "JobHeldAdmin": "held by an administrator",
    "InvalidAccount": "the project's Slurm account is invalid or missing",
    "InvalidQOS": "the queue's QOS is invalid or missing",
    "BadConstraints": "the job's constraints cannot be met by any node",
    "Prolog": "its prolog is running",
    "NodeDown": "a node it needs is down",
}


@dataclass(frozen=True)
class SlurmJobState:
    job_id: str
    state: str
    reason: str
    exit_code: int | None
    comment: str
    submitted_at: str = ""
    started_at: str = ""
    ended_at: str = ""


def readable_reason(code: str) -> str:
    """`AssocGrpGRES` -> "the project's GPU quota ... (AssocGrpGRES)"; None -> ""."""
    if not code or code == "None":
        return ""
    text = REASONS.get(code)
    return f"{text} ({code})" if text else code


def phase_of(state: str) -> RunPhase:
    state = state.upper()
    if state in QUEUED_STATES:
        return RunPhase.QUEUED
    if state in RUNNING_STATES:
        return RunPhase.RUNNING
    if state == "COMPLETED":
        return RunPhase.SUCCEEDED
    if state == "CANCELLED":
        return RunPhase.CANCELLED
    return RunPhase.FAILED


def _state(job: dict[str, Any]) -> str:
    value = job.get("job_state")
    if value is None:
        value = (job.get("state") or {}).get("current", "")
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value).split()[0].upper() if value else ""


def _reason(job: dict[str, Any]) -> str:
    value = job.get("state_reason")
    if value is None:
        value = (job.get("state") or {}).get("reason", "")
    return str(value or "")


def _number(value: Any) -> int | None:
    if isinstance(value, dict):
        if value.get("set") is False:
            return None
        value = value.get("number")
    return int(value) if isinstance(value, int | float) else None


def _exit_code(job: dict[str, Any]) -> int | None:
    code = job.get("exit_code")
    if isinstance(code, dict):
        return _number(code.get("return_code"))
    return _number(code)


def _comment(job: dict[str, Any]) -> str:
    comment = job.get("comment")
    if isinstance(comment, dict):
        return str(comment.get("job") or comment.get("administrator") or "")
    return str(comment or "")


def _time(job: dict[str, Any], flat: str, nested: str) -> str:
    value = job.get(flat)
    if value is None:
        value = (job.get("time") or {}).get(nested)
    seconds = _number(value)
    if not seconds:
        return ""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_jobs(text: str, command: str) -> list[SlurmJobState]:
    """Jobs of `squeue --json` or `sacct --json` output."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PermanentProviderError(f"cannot parse {command} --json output: {exc}") from None
    jobs = []
    for job in data.get("jobs", []):
        jobs.append(
            SlurmJobState(
                job_id=str(job.get("job_id")),
                state=_state(job),
                reason=_reason(job),
                exit_code=_exit_code(job),
                comment=_comment(job),
                submitted_at=_time(job, "submit_time", "submission"),
                started_at=_time(job, "start_time", "start"),
                ended_at=_time(job, "end_time", "end"),
            )
        )
    return jobs
