"""The local platform's scheduler step: settle dead attempts, then start what fits.

`admit(store)` is called by the provider after each submit and on `tick()`, and by every
supervisor when its attempt ends, so waiting attempts start as soon as capacity frees.
In one write transaction (BEGIN IMMEDIATE) it

1. marks `running` attempts whose supervisor is gone as failed (cause node-failure), or
   cancelled when a cancel was requested, stops the job processes such a supervisor left
   behind, and schedules their retry as a supervisor would (providers/local/outcomes.py),
   with a detached waker (`supervisor DB ATTEMPT --wake`) that admits it once eligible;
2. walks queued attempts by priority (higher first), then submission time, and starts
   each that is eligible (a retry waits until its `eligible_at`: "waiting for retry
   backoff until <time>", and blocks no StrictFIFO queue meanwhile) and fits its Queue
   (the nominalQuota summed over the queue's pools, minus what running attempts on the
   queue use) and its project's Quotas on that queue (cpu, memory, gpu, runningJobs). A
   StrictFIFO queue admits nothing behind its first attempt that does not fit;
   BestEffortFIFO skips it. An attempt of N nodes needs N times its per-node cpu and
   memory (capacity.Usage): its launchers start together or it waits. A waiting
   attempt's `reason` says why, and each change of it is appended to the attempt's
   `waits` (closed when the reason changes or it starts).

Starting an attempt records it `running` (`admitted_at`, `host`) and spawns its supervisor
(`python -m trainform.providers.local.supervisor DB ATTEMPT`) detached in its own session, with its
output appended to the attempt's log; the pid is recorded before the transaction commits.
Capacity arithmetic is exact (Decimal): normalized documents hold quantities as decimal
strings, memory in bytes. A null nominalQuota for a resource means the queue provides
none of it (as in Kueue); a null Quota limit means no limit.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainform.providers.jobs import Cause, parse_utc
from trainform.providers.local import capacity
from trainform.providers.local.capacity import Usage
from trainform.providers.local.outcomes import (
    reached_step,
    resume_point,
    retry_wanted,
    schedule_retry,
)
from trainform.providers.local.processes import (
    is_job_process,
    processes_with,
    signal_group,
    signal_process,
    supervisor_alive,
)
from trainform.providers.local.runs import Attempt, RunStore, utc_now

SUPERVISOR_GONE = "supervisor exited without recording an outcome (killed?)"
_DURATION_PART = re.compile(r"([0-9]+)(w|d|h|m|s)")
_DURATION_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_spawned: list[subprocess.Popen[bytes]] = []


def duration_seconds(text: str | None) -> int | None:
    """Seconds of a normalized duration (`2h`, `1h30m`); None for no duration."""
    if not text:
        return None
    return sum(int(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(text))


@dataclass
class Platform:
    """Queues and quotas as applied, read inside the admission transaction."""

    queues: dict[str, dict[str, Any]]
    quotas: list[tuple[str, str | None, dict[str, Any]]]
    running: list[Attempt] = field(default_factory=list)

    @classmethod
    def read(cls, store: RunStore) -> Platform:
        queues = {
            address.split("/", 1)[1]: document["spec"]
            for address, _, document in store.platform_objects("Queue")
        }
        return cls(queues, store.platform_objects("Quota"), store.running())

    def quotas_of(self, project: str | None, queue: str) -> list[dict[str, Any]]:
        """Limits of every Quota of the project on the queue."""
        if project is None:
            return []
        return [
            document["spec"]["limits"]
            for address, _, document in self.quotas
            if address.startswith(f"Quota/{project}/") and document["spec"]["queue"] == queue
        ]

    def max_runtime(self, attempt: Attempt) -> int | None:
        limits = [attempt.launch.get("max_runtime")]
        queue = self.queues.get(attempt.queue, {})
        limits.append(duration_seconds(queue.get("maxRuntime")))
        for quota in self.quotas_of(attempt.project, attempt.queue):
            limits.append(duration_seconds(quota.get("maxWallTime")))
        known = [limit for limit in limits if limit]
        return min(known) if known else None

    def why_waiting(self, attempt: Attempt) -> str:
        """Why the attempt cannot start now, or "" when it fits."""
        spec = self.queues.get(attempt.queue)
        if spec is None:
            return f"queue {attempt.queue} is not applied"
        if spec.get("stopPolicy", "None") != "None":
            return f"queue {attempt.queue} is on hold (stopPolicy {spec['stopPolicy']})"
        need = Usage.of(attempt)
        on_queue = [a for a in self.running if a.queue == attempt.queue]
        reason = capacity.check(
            f"queue {attempt.queue}", "nominal quota", capacity.nominal_quota(spec), on_queue, need
        )
        if reason:
            return reason
        for limits in self.quotas_of(attempt.project, attempt.queue):
            mine = [a for a in on_queue if a.project == attempt.project]
            owner = f"project {attempt.project} quota on {attempt.queue}"
            reason = capacity.check(owner, "limit", capacity.quota_limits(limits), mine, need)
            if not reason and limits.get("runningJobs") is not None:
                if len(mine) + 1 > int(limits["runningJobs"]):
                    reason = f"{owner}: runningJobs {len(mine)}/{limits['runningJobs']}"
            if reason:
                return reason
        return ""


def backoff_reason(attempt: Attempt, now: datetime) -> str:
    """Why a retry may not start yet ("" once its `eligible_at` has passed)."""
    eligible = parse_utc(attempt.eligible_at)
    if eligible is None or eligible <= now:
        return ""
    return f"waiting for retry backoff until {attempt.eligible_at}"


def cancel_queued(store: RunStore, attempt: Attempt) -> None:
    """Record a queued attempt cancelled (inside the caller's transaction)."""
    ended = utc_now()
    store.update(
        attempt.id,
        phase="cancelled",
        reason="cancelled",
        cause=Cause.CANCELLED,
        ended_at=ended,
        waits=waits_after(attempt, "", ended),
    )


def waits_after(attempt: Attempt, reason: str, now: str) -> list[dict[str, str]]:
    """The attempt's wait spans with the open one closed at `now`, and a span for
    `reason` opened (none when `reason` is "": the attempt stops waiting)."""
    spans = [dict(span) for span in attempt.waits]
    if spans and not spans[-1].get("until"):
        spans[-1]["until"] = now
    if reason:
        spans.append({"reason": reason, "since": now, "until": ""})
    return spans


def admit(store: RunStore) -> list[str]:
    """One scheduler step (see the module docstring); returns the ids of started attempts."""
    _reap()
    started: list[str] = []
    with store.transaction():
        for attempt in store.running():
            if not supervisor_alive(attempt.supervisor_pid, attempt.id):
                settle_orphan(store, attempt)
        platform = Platform.read(store)
        blocked: dict[str, str] = {}
        now = datetime.now(UTC)
        for attempt in store.queued():
            if attempt.cancel_requested:
                cancel_queued(store, attempt)
                continue
            first = blocked.get(attempt.queue)
            # an attempt in its retry backoff is not eligible: it holds no place in a
            # StrictFIFO queue
            reason = backoff_reason(attempt, now)
            if not reason and first is not None:
                reason = f"queue {attempt.queue} is StrictFIFO: waiting behind {first}"
            elif not reason:
                reason = platform.why_waiting(attempt)
                spec = platform.queues.get(attempt.queue, {})
                if reason and spec.get("queueingStrategy") == "StrictFIFO":
                    blocked.setdefault(attempt.queue, attempt.id)
            if reason:
                if reason != attempt.reason:
                    waits = waits_after(attempt, reason, utc_now())
                    store.update(attempt.id, reason=reason, waits=waits)
                continue
            _start(store, platform, attempt)
            started.append(attempt.id)
    return started


def settle_orphan(store: RunStore, attempt: Attempt) -> None:
    """Record the end of an attempt whose supervisor died, stop its job processes (all of
    a distributed one's, found by their TRAINFORM_ATTEMPT_ID), and schedule its retry
    (call inside a transaction)."""
    if is_job_process(attempt.child_pid, attempt.address, attempt.run_id, attempt.attempt):
        signal_group(attempt.child_pid or 0, signal.SIGKILL)
    for pid in processes_with({"TRAINFORM_ATTEMPT_ID": attempt.id}):
        if not signal_group(pid, signal.SIGKILL):
            signal_process(pid, signal.SIGKILL)
    cancelled = bool(attempt.cancel_requested)
    attempt.phase = "cancelled" if cancelled else "failed"
    attempt.reason = "cancelled" if cancelled else SUPERVISOR_GONE
    attempt.cause = Cause.CANCELLED if cancelled else Cause.NODE_FAILURE
    attempt.ended_at = utc_now()
    attempt.last_step = reached_step(attempt) if attempt.kind == "train" else None
    store.update(
        attempt.id,
        phase=attempt.phase,
        reason=attempt.reason,
        cause=attempt.cause,
        ended_at=attempt.ended_at,
        last_step=attempt.last_step,
    )
    _retry(store, attempt)


def _retry(store: RunStore, ended: Attempt) -> None:
    """Schedule the retry of an attempt that ended without its supervisor, and a waker."""
    if not retry_wanted(ended, ended.cause):
        return
    retry = schedule_retry(store, ended, resume_point(ended))
    if retry is None:
        return
    try:
        _spawn(store.path, retry, wake=True)
    except OSError:
        pass  # the next submit, tick or ending attempt admits it instead


def _start(store: RunStore, platform: Platform, attempt: Attempt) -> None:
    attempt.devices = capacity.free_devices(platform.running, attempt.gpus)
    now = utc_now()
    store.update(
        attempt.id,
        phase="running",
        reason="",
        admitted_at=now,
        host=socket.gethostname(),
        max_runtime=platform.max_runtime(attempt),
        devices=attempt.devices,
        waits=waits_after(attempt, "", now),
    )
    try:
        pid = _spawn(store.path, attempt)
    except OSError as exc:
        store.update(
            attempt.id,
            phase="failed",
            reason=f"cannot start the supervisor: {exc}",
            cause=Cause.NODE_FAILURE,
            ended_at=utc_now(),
        )
        return
    store.update(attempt.id, supervisor_pid=pid)
    attempt.phase, attempt.supervisor_pid = "running", pid
    platform.running.append(attempt)


def _spawn(database: Path, attempt: Attempt, wake: bool = False) -> int:
    """Start the attempt's supervisor (or, with `wake`, a waker that admits it once it
    is eligible), detached, its output appended to the attempt's log."""
    log = Path(attempt.log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-P",
                "-m",
                "trainform.providers.local.supervisor",
                str(database),
                attempt.id,
            ]
            + (["--wake"] if wake else []),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=attempt.workdir,
            env=environment,
            start_new_session=True,
            close_fds=True,
        )
    _spawned.append(process)
    return process.pid


def _reap() -> None:
    """Collect supervisors this process started that have exited (no zombies linger)."""
    _spawned[:] = [process for process in _spawned if process.poll() is None]
