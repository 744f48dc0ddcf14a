"""Job states from `squeue --json` and `sacct --json`: phases, causes and readable reasons.

Pure: parses the JSON text Slurm prints (22.05, openapi v0.0.38 field names, with the
newer nested spellings accepted too) into `SlurmJobState` values, maps Slurm job states to
trainform run phases and cause classes, and Slurm reason codes to sentences a person
understands. Slurm's quirks handled here:

- squeue's `exit_code` is the raw wait status (768 is exit 3, 9 is signal 9); sacct's is
  `{status, return_code, signal}` and 22.05 reports `return_code` 0 for failed jobs, so the
  runner's own record (result.json) is preferred for the exit code (providers/slurm/timeline.py).
- A pending job's `start_time` and `end_time` are Slurm's forecasts, not facts: they are
  dropped. A requeued job's submit time is reset to the requeue; `sacct --duplicates` keeps
  one record per run, the first one holding the original submit time.
- sacct keeps, as the finished job's `state.reason`, the reason it last waited for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import Cause, RunPhase

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
CAUSES = {
    "COMPLETED": Cause.SUCCEEDED,
    "FAILED": Cause.CODE_ERROR,
    "OUT_OF_MEMORY": Cause.OUT_OF_MEMORY,
    "NODE_FAIL": Cause.NODE_FAILURE,
    "BOOT_FAIL": Cause.NODE_FAILURE,
    "PREEMPTED": Cause.PREEMPTED,
    "TIMEOUT": Cause.TIME_LIMIT,
    "DEADLINE": Cause.TIME_LIMIT,
    "CANCELLED": Cause.CANCELLED,
    "REVOKED": Cause.CANCELLED,
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
NOT_WAITING = {"", "None", "NonZeroExitCode", "RaisedSignal", "TimeLimit", "JobLaunchFailure"}


@dataclass(frozen=True)
class SlurmJobState:
    """One record of a Slurm job: squeue's current one, or one run of sacct's."""

    job_id: str
    state: str
    reason: str
    exit_code: int | None
    comment: str
    submitted_at: str = ""
    started_at: str = ""
    ended_at: str = ""
    eligible_at: str = ""
    signal: int | None = None
    """The signal that ended the batch step, where Slurm says."""
    restarts: int = 0
    """Requeues so far (squeue's restart_cnt; sacct shows one record per run instead)."""
    partition: str = ""
    account: str = ""
    node_list: str = ""
    node_count: int = 0
    tres: dict[str, float] = field(default_factory=dict)
    """Allocated TRES: {"cpu": 2, "node": 1, "gres/gpu": 1, "mem": 256 (MiB)}."""
    source: str = ""
    elapsed: float | None = None
    """Seconds sacct accounts for this run (its Elapsed), once it ended."""

    @property
    def pending(self) -> bool:
        return phase_of(self.state) == RunPhase.QUEUED


def readable_reason(code: str) -> str:
    """`AssocGrpGRES` -> "the project's GPU quota ... (AssocGrpGRES)"; None -> ""."""
    if not code or code == "None":
        return ""
    text = REASONS.get(code)
    return f"{text} ({code})" if text else code


def is_wait_reason(code: str) -> bool:
    """Whether a reason code says why a job waited (not how it ended)."""
    return code not in NOT_WAITING


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


def cause_of_state(state: str) -> Cause | None:
    """The cause class of a finished Slurm job state; None while it is not finished."""
    return CAUSES.get(state.upper()) if phase_of(state).finished else None


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
        if value.get("set") is False or value.get("infinite") is True:
            return None
        value = value.get("number")
    if isinstance(value, bool):
        return None
    return int(value) if isinstance(value, int | float) else None


def _exit(job: dict[str, Any], command: str) -> tuple[int | None, int | None]:
    """(exit code, signal) of the job."""
    code = job.get("exit_code")
    if isinstance(code, dict):
        signal = _number((code.get("signal") or {}).get("signal_id"))
        if code.get("status") == "SIGNALED":
            return None, signal
        return _number(code.get("return_code")), signal
    status = _number(code)
    if status is None:
        return None, None
    if command == "squeue":  # a wait status: low 7 bits the signal, next byte the code
        if status & 0x7F:
            return None, status & 0x7F
        return status >> 8, None
    return status, None


def _comment(job: dict[str, Any]) -> str:
    comment = job.get("comment")
    if isinstance(comment, dict):
        return str(comment.get("job") or comment.get("administrator") or "")
    return str(comment or "")


def iso_seconds(seconds: int | None) -> str:
    if not seconds or seconds <= 0 or seconds > 2**32 * 2:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(job: dict[str, Any], flat: str, nested: str) -> str:
    value = job.get(flat)
    if value is None:
        value = (job.get("time") or {}).get(nested)
    return iso_seconds(_number(value))


def parse_tres_text(text: str) -> dict[str, float]:
    """`cpu=2,mem=512M,node=1,gres/gpu=1` -> {"cpu": 2, "mem": 512, "node": 1, "gres/gpu": 1}
    (memory in MiB)."""
    amounts: dict[str, float] = {}
    for item in (text or "").split(","):
        name, _, value = item.partition("=")
        if not name or not value:
            continue
        scale = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}.get(value[-1:].upper())
        number = value[:-1] if scale is not None else value
        try:
            amounts[name] = float(number) * (scale if scale is not None else 1)
        except ValueError:
            continue
    return amounts


def _tres(job: dict[str, Any]) -> dict[str, float]:
    text = job.get("tres_alloc_str")
    if isinstance(text, str):
        return parse_tres_text(text)
    allocated = (job.get("tres") or {}).get("allocated") or []
    amounts: dict[str, float] = {}
    for item in allocated if isinstance(allocated, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("count"), int | float):
            continue
        name = str(item.get("type") or "")
        if item.get("name"):
            name = f"{name}/{item['name']}"
        amounts[name] = float(item["count"])
    return amounts


def _nodes(job: dict[str, Any]) -> str:
    value = job.get("nodes")
    if isinstance(value, dict):
        value = value.get("range") or ",".join(value.get("list") or [])
    text = str(value or "")
    return "" if text in ("None assigned", "(null)") else text


def _job(job: dict[str, Any], command: str) -> SlurmJobState:
    state = _state(job)
    pending = phase_of(state) == RunPhase.QUEUED
    code, signal = _exit(job, command)
    if signal is None:  # sacct: the batch step knows the signal that ended it
        for step in job.get("steps") or []:
            if isinstance(step, dict) and (step.get("step") or {}).get("name") == "batch":
                signal = _exit(step, "sacct")[1]
    return SlurmJobState(
        job_id=str(job.get("job_id")),
        state=state,
        reason=_reason(job),
        exit_code=code,
        comment=_comment(job),
        submitted_at=_time(job, "submit_time", "submission"),
        started_at="" if pending else _time(job, "start_time", "start"),
        ended_at="" if pending or state in RUNNING_STATES else _time(job, "end_time", "end"),
        eligible_at=_time(job, "eligible_time", "eligible"),
        signal=signal,
        restarts=_number(job.get("restart_cnt")) or 0,
        partition=str(job.get("partition") or ""),
        account=str(job.get("account") or ""),
        node_list="" if pending else _nodes(job),
        node_count=_number(job.get("node_count") or job.get("allocation_nodes")) or 0,
        tres={} if pending else _tres(job),
        source=command,
        elapsed=None if pending or state in RUNNING_STATES else _elapsed(job),
    )


def _elapsed(job: dict[str, Any]) -> float | None:
    value = job.get("elapsed")
    times = job.get("time")
    if value is None and isinstance(times, dict):
        value = times.get("elapsed")
    number = _number(value)
    return float(number) if number is not None and number >= 0 else None


def parse_jobs(text: str, command: str) -> list[SlurmJobState]:
    """Jobs of `squeue --json` or `sacct --json` output, in the order Slurm lists them."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PermanentProviderError(f"cannot parse {command} --json output: {exc}") from None
    jobs = data.get("jobs", []) if isinstance(data, dict) else []
    return [_job(job, command) for job in jobs if isinstance(job, dict)]
