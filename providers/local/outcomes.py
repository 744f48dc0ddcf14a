"""How an attempt's end is classified on the local platform, and the retry that follows it.

Called by the supervisor when it records an outcome and by admission when it settles an
attempt whose supervisor is gone; status reads the recorded cause.

Cause classes (providers/jobs.py `Cause`), from what the supervisor saw:
- exit 0: succeeded (an evaluation also needs its metrics); exit > 0: code-error;
- killed by SIGKILL with the command's peak resident memory at or above its memory
  request: out-of-memory (the kernel's OOM killer; the local platform sets no cgroup limit,
  so the request is the line it was told to stay under);
- killed by a signal the process raises on itself by crashing (SIGSEGV, SIGABRT, SIGFPE,
  SIGILL, SIGSYS, SIGTRAP, SIGPIPE, SIGXFSZ): code-error; SIGXCPU (a CPU-time limit):
  time-limit;
- killed from outside by any other signal (SIGKILL under the memory request, SIGTERM,
  SIGHUP, SIGBUS ...), which the supervisor did not send: node-failure. Nothing on this
  platform preempts, so whoever stopped the job was the machine or its operator, not the
  job's code; retrying it is what a person wants;
- past its max runtime: time-limit; cancelled: cancelled; the supervisor gone, the
  supervisor unable to start, or checkpoint storage failing: node-failure;
- refused before start (`LaunchRefused`: data mutated, dataset gone, resume checkpoint
  invalid): refused.

Self-driven retries (`schedule_retry`): a training attempt that ended with any cause but
succeeded or cancelled is followed, while `launch.retries` allows (attempts allowed =
retries + 1), by attempt n+1, queued with `eligible_at` = its end + `retry_delay(backoff,
n)`, resuming from the run's latest valid checkpoint (from scratch when the resume policy
is `never` or none is valid). A refusal is retried only when the resume checkpoint was
what refused it (an older valid checkpoint, or a fresh start, may run); refused data
stays refused. The new row takes the id a later engine submit of the same attempt uses,
so that submit changes nothing.
"""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path

from trainform.providers.errors import ProviderError
from trainform.providers.jobs import Cause, parse_utc, retry_delay, utc_text
from trainform.providers.local.checkpoint_sync import remote_store
from trainform.providers.local.checkpoints import STEP_FOLDER, latest_valid, list_checkpoints
from trainform.providers.local.runs import Attempt, RunStore, attempt_id, utc_now

CRASH_SIGNALS = frozenset(
    int(getattr(signal, name))
    for name in (
        "SIGSEGV",
        "SIGABRT",
        "SIGFPE",
        "SIGILL",
        "SIGSYS",
        "SIGTRAP",
        "SIGPIPE",
        "SIGXFSZ",
    )
    if hasattr(signal, name)
)
CPU_LIMIT_SIGNAL = int(getattr(signal, "SIGXCPU", 24))


def memory_request(attempt: Attempt) -> int | None:
    """The attempt's memory request in bytes, None when it asks for none."""
    try:
        amount = Decimal(attempt.memory)
    except (InvalidOperation, TypeError):
        return None
    return int(amount) if amount.is_finite() and amount > 0 else None


def classify(
    exit_code: int | None,
    *,
    timed_out: bool = False,
    cancelled: bool = False,
    peak_rss: int | None = None,
    memory: int | None = None,
) -> Cause:
    """The cause class of a finished command (see the module docstring).

    `exit_code` is the return code as Python reports it (negative: killed by a signal),
    None when the command never ran or nobody saw it end."""
    if cancelled:
        return Cause.CANCELLED
    if timed_out:
        return Cause.TIME_LIMIT
    if exit_code is None:
        return Cause.NODE_FAILURE
    if exit_code == 0:
        return Cause.SUCCEEDED
    if exit_code > 0:
        return Cause.CODE_ERROR
    signum = -exit_code
    if signum == signal.SIGKILL and memory and peak_rss is not None and peak_rss >= memory:
        return Cause.OUT_OF_MEMORY
    if signum in CRASH_SIGNALS:
        return Cause.CODE_ERROR
    if signum == CPU_LIMIT_SIGNAL:
        return Cause.TIME_LIMIT
    return Cause.NODE_FAILURE


def resumed_step(attempt: Attempt) -> int | None:
    """The step of the checkpoint the attempt resumed from (`step-<N>`), if any."""
    match = STEP_FOLDER.match(Path(attempt.resume_from or "").name)
    return int(match.group(1)) if match else None


def _progress(path: Path, since: float) -> int | None:
    """The step in a progress file written at or after `since` (epoch seconds)."""
    try:
        if path.stat().st_mtime < since:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    step = data.get("step") if isinstance(data, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def reached_step(attempt: Attempt) -> int | None:
    """The last step the attempt reached: its progress file if it wrote one while it ran
    (the file is the run's, shared by its attempts), else the newest checkpoint it wrote,
    else the step it resumed from; None when it never started from a checkpoint."""
    started = parse_utc(attempt.started_at)
    if started is None:
        return resumed_step(attempt)
    since = started.timestamp()
    step = _progress(Path(attempt.workdir) / "progress.json", since)
    if step is not None:
        return step
    written = [
        c.step
        for c in list_checkpoints(Path(attempt.checkpoint_dir))
        if c.valid and c.written_at and (parse_utc(c.written_at) or started) >= started
    ]
    return max(written) if written else resumed_step(attempt)


def resume_point(attempt: Attempt) -> str | None:
    """The checkpoint a retry of the attempt resumes from: the run's latest valid one
    (from S3 when its checkpoints are kept there and S3 answers), None to start over."""
    if attempt.launch.get("resume") == "never":
        return None
    store = remote_store(attempt)
    checkpoints = None
    if store is not None:
        try:
            checkpoints = store.list()
        except ProviderError:
            pass  # S3 unreachable now: the staging folder holds what this machine wrote
    if checkpoints is None:
        checkpoints = list_checkpoints(Path(attempt.checkpoint_dir))
    newest = latest_valid(checkpoints)
    return newest.id if newest else None


def retry_wanted(attempt: Attempt, cause: str, retryable: bool = True) -> bool:
    """True when the ended attempt is to be followed by another (module docstring)."""
    if attempt.kind != "train" or not retryable:
        return False
    if cause in (Cause.SUCCEEDED, Cause.CANCELLED, ""):
        return False
    return attempt.attempt <= int(attempt.launch.get("retries") or 0)


def schedule_retry(store: RunStore, ended: Attempt, resume_from: str | None) -> Attempt | None:
    """Insert the retry of `ended` (recorded finished, with `ended_at` and `cause`) when
    `retry_wanted` says so; call inside the transaction that recorded the end. Returns the
    queued attempt, or None when there is none (or a later attempt exists already)."""
    if not retry_wanted(ended, ended.cause):
        return None
    recorded = store.get(ended.id)
    if recorded is None or recorded.cancel_requested:
        return None  # a cancel raced the failure: the run is being stopped
    number = ended.attempt + 1
    later = [
        a
        for a in store.by_address(ended.address)
        if a.run_id == ended.run_id and a.kind == "train" and a.attempt >= number
    ]
    if later:
        return None
    finished_at = parse_utc(ended.ended_at) or parse_utc(utc_now())
    assert finished_at is not None
    delay = retry_delay(int(ended.launch.get("backoff") or 0), ended.attempt)
    retry = replace(
        ended,
        id=attempt_id(ended.address, ended.run_id, number),
        attempt=number,
        phase="queued",
        reason="",
        launch={**ended.launch, "attempt": number, "resume_from": resume_from},
        log_path=str(Path(ended.log_path).with_name(f"attempt-{number}.log")),
        resume_from=resume_from,
        supervisor_pid=None,
        child_pid=None,
        exit_code=None,
        metrics=None,
        submitted_at=utc_text(finished_at),
        started_at="",
        ended_at="",
        max_runtime=None,
        devices="",
        cancel_requested=0,
        eligible_at=utc_text(finished_at + timedelta(seconds=delay)),
        admitted_at="",
        waits=[],
        cause="",
        last_step=None,
        peak_rss=None,
        host="",
        launchers=[],
    )
    return retry if store.insert(retry) else None
