"""Traces from Slurm accounting: `sacct --json` output as TraceJobs (best effort).

Mapping (Slurm's data_parser JSON, versions 0.0.37 to 0.0.41 and later):

    id           job_id (with `_array_task_id` for array tasks)
    submit       time.submission (epoch seconds), shifted so the earliest job submits at 0
    project      account
    queue        partition (the first one when a job lists several)
    gpus         tres.allocated gres/gpu count, else tres.requested (any `gpu` or `gpu:<type>`)
    duration     time.elapsed (seconds) of its last run
    limit        time.limit (minutes in sacct; seconds here), when set
    actual_wait  time.start of its first run - its first submission
    user, qos    user and qos (lowercased): per-user limits count by the user, and the
                 job runs under its own QOS when the specs declare it
    priority     not read: Slurm's job priority is its own scale (multifactor weights), so
                 the simulation takes each queue's priority from the specs

Requeued jobs are folded: `sacct --duplicates` lists one record per run of a job (a
requeued record carries the requeue time as its submission); the trace has one job per
id, submitted at its first submission, first started at its earliest start, lasting as
long as its last run that ran.

Skipped, not errors: jobs without GPUs (the simulation counts GPUs only), jobs that never
ran (elapsed 0: pending, cancelled before start), job steps (sacct lists steps inside
their job, not as jobs), and jobs whose partition is still empty (slurmdbd records it a
few seconds after the job ends). A document that is not sacct JSON at all is a
TraceError. Checked against the real `sacct` of Slurm 22.05 (data_parser 0.0.38) in
tests/policies/queueing/test_sacct_slurm.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from trainform.policies.queueing.errors import TraceError
from trainform.policies.queueing.trace import TraceJob

SOURCE = "<sacct --json>"


def read_sacct(text: str, source: str = SOURCE) -> list[TraceJob]:
    """TraceJobs of `sacct --json` output, sorted by submit time, times relative to the
    earliest submission."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceError(source, error.lineno, "", f"invalid JSON: {error.msg}") from None
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise TraceError(source, 0, "jobs", "expected sacct --json output: an object with jobs[]")
    folded: dict[str, _Row] = {}
    for index, job in enumerate(document["jobs"]):
        if not isinstance(job, dict):
            raise TraceError(source, 0, f"jobs[{index}]", "expected an object")
        row = _row(job, index, source)
        if row is None:
            continue
        known = folded.get(row.id)
        folded[row.id] = row if known is None else known.fold(row)
    rows = [row for row in folded.values() if row.elapsed > 0]
    if not rows:
        return []
    origin = min(row.submit for row in rows)
    jobs = [
        TraceJob(
            id=row.id,
            submit=row.submit - origin,
            project=row.account,
            queue=row.partition,
            gpus=row.gpus,
            duration=row.elapsed,
            limit=row.limit,
            actual_wait=None if row.start is None else max(0.0, row.start - row.submit),
            user=row.user or None,
            qos=row.qos or None,
        )
        for row in rows
    ]
    return sorted(jobs, key=lambda job: (job.submit, job.id))


@dataclass(frozen=True, slots=True)
class _Row:
    """One record of sacct (one run of a job), or several folded into one job."""

    id: str
    submit: float
    account: str
    partition: str
    gpus: int
    elapsed: float
    last_start: float
    start: float | None
    limit: float | None
    user: str = ""
    qos: str = ""

    def fold(self, other: _Row) -> _Row:
        """Two runs of one job: first submission and start, the last run's length."""
        later = other if other.last_start >= self.last_start else self
        starts = [s for s in (self.start, other.start) if s is not None]
        return replace(
            later,
            submit=min(self.submit, other.submit),
            start=min(starts) if starts else None,
            elapsed=later.elapsed or max(self.elapsed, other.elapsed),
        )


def _row(job: dict[str, Any], index: int, source: str) -> _Row | None:
    where = f"jobs[{index}]"
    time = job.get("time") if isinstance(job.get("time"), dict) else {}
    elapsed = _number(time.get("elapsed"))
    submit = _number(time.get("submission"))
    gpus = _gpus(job.get("tres"))
    if not gpus:
        return None
    if submit is None:
        raise TraceError(source, 0, f"{where}.time.submission", "missing submission time")
    account, partition = job.get("account"), job.get("partition")
    if not isinstance(account, str) or not account:
        raise TraceError(source, 0, f"{where}.account", "missing account (the project)")
    if partition == "":
        return None  # slurmdbd has not recorded the finished job's partition yet
    if not isinstance(partition, str):
        raise TraceError(source, 0, f"{where}.partition", "missing partition (the queue)")
    job_id = str(job.get("job_id", index))
    task = _number(job.get("array_task_id"))
    if task is not None and task >= 0 and _number(job.get("array_job_id")):
        job_id = f"{_number(job.get('array_job_id')):.0f}_{task:.0f}"
    start = _number(time.get("start"))
    minutes = _number(time.get("limit"))
    return _Row(
        id=job_id,
        submit=submit,
        account=account,
        partition=partition.split(",")[0],
        gpus=gpus,
        elapsed=max(0.0, elapsed or 0.0),
        last_start=start or 0.0,
        start=start if start else None,
        limit=minutes * 60.0 if minutes else None,
        user=_text(job.get("user")),
        qos=_text(job.get("qos")),
    )


def _text(value: Any) -> str:
    """A lowercased name (Slurm compares user and QOS names without case), or ''."""
    return value.lower() if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    """A number, or the `number` of Slurm's {"set", "infinite", "number"} wrapper."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _gpus(tres: Any) -> int:
    if not isinstance(tres, dict):
        return 0
    for key in ("allocated", "requested"):
        plain, typed = 0, 0
        for entry in tres.get(key) or []:
            if not isinstance(entry, dict) or entry.get("type") != "gres":
                continue
            name = str(entry.get("name") or "")
            count = int(_number(entry.get("count")) or 0)
            if name == "gpu":
                plain += count
            elif name.startswith("gpu:"):
                typed += count
        # Slurm may list both gres/gpu and gres/gpu:<type> for one allocation.
        if plain or typed:
            return plain or typed
    return 0
