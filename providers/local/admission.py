"""The local platform's scheduler step: settle dead attempts, then start what fits.

`admit(store)` is called by the provider after each submit and on `tick()`, and by every
supervisor when its attempt ends, so waiting attempts start as soon as capacity frees.
In one write transaction (BEGIN IMMEDIATE) it

1. marks `running` attempts whose supervisor is gone as failed (or cancelled, when a
   cancel was requested), and stops the job processes such a supervisor left behind;
2. walks queued attempts by priority (higher first), then submission time, and starts
   each that fits its Queue (the nominalQuota summed over the queue's pools, minus what
   running attempts on the queue use) and its project's Quotas on that queue (cpu,
   memory, gpu, runningJobs). A StrictFIFO queue admits nothing behind its first attempt
   that does not fit; BestEffortFIFO skips it. A waiting attempt's `reason` says why.

Starting an attempt records it `running` and spawns its supervisor
(`python -m providers.local.supervisor DB ATTEMPT`) detached in its own session, with its
output appended to the attempt's log; the pid is recorded before the transaction commits.
Capacity arithmetic is exact (Decimal): normalized documents hold quantities as decimal
strings, memory in bytes. A null nominalQuota for a resource means the queue provides
none of it (as in Kueue); a null Quota limit means no limit.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import providers
from providers.local import capacity
from providers.local.capacity import Usage
from providers.local.processes import is_job_process, signal_group, supervisor_alive
from providers.local.runs import Attempt, RunStore, utc_now

SUPERVISOR_GONE = "supervisor exited without recording an outcome (killed?)"
REPOSITORY = Path(providers.__file__).resolve().parent.parent
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
        for attempt in store.queued():
            if attempt.cancel_requested:
                store.update(attempt.id, phase="cancelled", reason="cancelled", ended_at=utc_now())
                continue
            first = blocked.get(attempt.queue)
            if first is not None:
                reason = f"queue {attempt.queue} is StrictFIFO: waiting behind {first}"
            else:
                reason = platform.why_waiting(attempt)
            if reason:
                if reason != attempt.reason:
                    store.update(attempt.id, reason=reason)
                spec = platform.queues.get(attempt.queue, {})
                if spec.get("queueingStrategy") == "StrictFIFO":
                    blocked.setdefault(attempt.queue, attempt.id)
                continue
            _start(store, platform, attempt)
            started.append(attempt.id)
    return started


def settle_orphan(store: RunStore, attempt: Attempt) -> None:
    """Record the end of an attempt whose supervisor died, and stop its job processes."""
    if is_job_process(attempt.child_pid, attempt.address, attempt.run_id, attempt.attempt):
        signal_group(attempt.child_pid or 0, signal.SIGKILL)
    cancelled = bool(attempt.cancel_requested)
    store.update(
        attempt.id,
        phase="cancelled" if cancelled else "failed",
        reason="cancelled" if cancelled else SUPERVISOR_GONE,
        ended_at=utc_now(),
    )


def _start(store: RunStore, platform: Platform, attempt: Attempt) -> None:
    attempt.devices = capacity.free_devices(platform.running, attempt.gpus)
    store.update(
        attempt.id,
        phase="running",
        reason="",
        started_at=utc_now(),
        max_runtime=platform.max_runtime(attempt),
        devices=attempt.devices,
    )
    try:
        pid = _spawn(store.path, attempt)
    except OSError as exc:
        store.update(
            attempt.id,
            phase="failed",
            reason=f"cannot start the supervisor: {exc}",
            ended_at=utc_now(),
        )
        return
    store.update(attempt.id, supervisor_pid=pid)
    attempt.phase, attempt.supervisor_pid = "running", pid
    platform.running.append(attempt)


def _spawn(database: Path, attempt: Attempt) -> int:
    log = Path(attempt.log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    paths = [str(REPOSITORY), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "providers.local.supervisor", str(database), attempt.id],
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
