"""After the fact: an attempt's log and the runs Slurm's accounting knows.

Called by SlurmJobs (providers/slurm/jobs.py), which it sees as `JobRecords`, for the
JobProvider verbs `read_log` and `accounting`. Logs are the attempt's `--output` file in
its folder under the job root: they outlive the job, and are read by byte offset so
`trainform logs --follow` can poll.
Accounting is one `sacct --json --duplicates --starttime <since>` over every user's jobs,
kept when their ownership comment names this manager, grouped by job address and run; the
attempt folders still on disk add what only the runner recorded (steps, resume points,
checkpoints, listed without hashing).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import AccountedRun, LogChunk, RunStatus
from trainform.providers.local.checkpoints import list_checkpoints
from trainform.providers.slurm import attempts
from trainform.providers.slurm.attempts import Submission
from trainform.providers.slurm.names import parse_marker
from trainform.providers.slurm.status import SlurmJobState, phase_of
from trainform.providers.slurm.timeline import attempt_status

LOG_CHUNK = 4 * 2**20


class JobRecords(Protocol):
    """What history reads through its caller, SlurmJobs: this manager's attempt folders,
    and job records from squeue and sacct."""

    manager: str

    def read_submissions(self, address: str) -> list[Submission]: ...

    def read_states(self, job_ids: list[str]) -> dict[str, list[SlurmJobState]]: ...

    def read_accounting(self, *selection: str) -> list[SlurmJobState]: ...


def read_log(
    jobs: JobRecords,
    address: str,
    run_id: str,
    attempt: int,
    offset: int = 0,
    suite: str | None = None,
) -> LogChunk:
    """The attempt's output file from byte `offset` (at most LOG_CHUNK bytes, never a
    UTF-8 sequence cut in two); complete once the job finished and all of it was read."""
    found = [
        (folder, submission)
        for folder, submission, launch in jobs.read_submissions(address)
        if launch["run_id"] == run_id
        and launch["attempt"] == attempt
        and (launch.get("suite") or None) == (suite or None)
        and launch["kind"] == ("eval" if suite else "train")
    ]
    what = f"attempt {attempt} of run {run_id} of {address}" + (
        f" (evaluation {suite})" if suite else ""
    )
    if not found:
        raise PermanentProviderError(
            f"cannot read the log of {what}: the slurm provider has no such attempt "
            "(see `trainform status` for the attempts it knows)"
        )
    folder, submission = found[0]
    path = folder / attempts.LOG
    records = jobs.read_states([submission["job_id"]]).get(submission["job_id"], [])
    finished = not records or phase_of(records[-1].state).finished
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, offset))
            data = handle.read(LOG_CHUNK)
            size = os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        if finished:
            raise PermanentProviderError(
                f"cannot read the log of {what}: {path} does not exist (the job never "
                "started, or its output file was removed)"
            ) from None
        return LogChunk("", offset, False, str(path))
    data = _whole_characters(data)
    following = max(0, offset) + len(data)
    return LogChunk(
        data.decode("utf-8", errors="replace"),
        following,
        finished and following >= size,
        str(path),
    )


def _owned_fields(comment: str, manager: str) -> list[str] | None:
    """[address, run, kind, suite, attempt] of a job comment this manager wrote."""
    marked = parse_marker(comment)
    if marked is None or marked[0] != manager:
        return None
    fields = marked[1].split(":")
    return fields if len(fields) == 5 and fields[4].isdigit() else None


def accounted_runs(jobs: JobRecords, since: str) -> list[AccountedRun]:
    """Runs of this manager with an attempt running, pending or ended since `since`,
    from one sacct call (jobs no longer in the specs included), one per (job, run):
    project = the job's account, queue = its partition."""
    by_job: dict[str, tuple[list[str], list[SlurmJobState]]] = {}
    for record in jobs.read_accounting("--starttime", _sacct_time(since)):
        fields = _owned_fields(record.comment, jobs.manager)
        if fields is not None and fields[2] == "train":
            by_job.setdefault(record.job_id, (fields, []))[1].append(record)
    folders: dict[tuple[str, str, int], Submission] = {}
    for address in sorted({fields[0] for fields, _ in by_job.values()}):
        for entry in jobs.read_submissions(address):
            launch = entry[2]
            if launch["kind"] == "train":
                folders[(address, launch["run_id"], launch["attempt"])] = entry
    runs: dict[tuple[str, str], AccountedRun] = {}
    for job_id, (fields, found) in by_job.items():
        found.sort(key=lambda j: j.submitted_at)
        address, run_id, number = fields[0], fields[1], int(fields[4])
        entry = folders.get((address, run_id, number))
        folder, submission, launch = entry or (Path(), {"job_id": job_id}, {})
        status = attempt_status(
            number,
            folder,
            attempts.folder_files(folder, submission, launch) if entry else {},
            found,
            found[-1].partition,
            None,
        )
        accounted = runs.setdefault(
            (address, run_id),
            AccountedRun(address, found[-1].account or None, "", RunStatus(run_id=run_id)),
        )
        accounted.run.attempts.append(status)
        accounted.queue = status.queue
        if launch and not accounted.run.checkpoints:
            accounted.run.checkpoints = list_checkpoints(
                Path(launch["checkpoint_dir"]), hashed=False
            )
    for accounted in runs.values():
        accounted.run.attempts.sort(key=lambda a: a.attempt)
    return sorted(runs.values(), key=lambda a: (a.address, a.run.run_id))


def _whole_characters(data: bytes) -> bytes:
    """`data` without a UTF-8 sequence cut at its end (the next read starts with it)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= length else data[:-back]
    return data


def _sacct_time(since: str) -> str:
    """An ISO-8601 UTC time as sacct reads it (local time, no zone)."""
    try:
        moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        raise PermanentProviderError(
            f"cannot read accounting since {since!r}: not an ISO-8601 time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
