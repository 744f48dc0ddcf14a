"""What makes a drill condition other than the baseline: a controlled wait, a fault.

Called by planner/drill.py.

Congestion (`Fillers`) is made only with trainform's own temporary objects: filler runs
under addresses of their own (`<job>-drill-hold-N`, in the job's project and queue, asking
for exactly the job's resources, running a sleep with no code, data or checkpoints),
submitted one by one until one of them waits: the queue and quota the job needs are then
full, so the job's run waits behind them, and the scheduler says why in its own words.
The filler that waits is withdrawn at once; the others are cancelled once the job has
waited `hold` seconds (or at the end, whatever happened). Nothing shared is loaded:
fillers fit inside the job's own project quota and queue, and no other object changes.

The fault (`Fault`) is injected through the provider's `interrupt(address, run_id)`, after
the running attempt has written `after_checkpoint` valid checkpoints: the local provider
kills the attempt's training process, Slurm cancels one step of the job. Recovery is then
the platform's own (a retry from the latest valid checkpoint, or the resume the plan asks
for), which the engine follows like any other run.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.drill_engine import DrillError, tick
from trainform.planner.jobs import JobContext, training_launch
from trainform.planner.lockfile import LockFile, resolve_pins
from trainform.planner.timeline import iso, seconds_between
from trainform.planner.usage import compute_usage
from trainform.planner.workspace import Workspace
from trainform.providers.errors import ProviderError
from trainform.providers.jobs import AccountedRun, JobLaunch

MAX_FILLERS = 16
SETTLE_SECONDS = 10.0


@dataclass
class Fillers:
    """The filler runs holding the job's queue and quota; `release` cancels them."""

    workspace: Workspace
    item: DesiredItem
    hold: float
    sleep: int
    submitted: list[tuple[str, str]] = field(default_factory=list)
    """(address, run id) of every filler submitted."""
    released_at: str = ""
    waited_when_released: float | None = None

    def fill(self) -> None:
        """Submit fillers until one waits (the capacity the job needs is then taken)."""
        provider = self.workspace.providers.get(self.item.providers[0])
        base = _filler_launch(self.workspace, self.item, self.sleep)
        token = secrets.token_hex(4)
        for number in range(1, MAX_FILLERS + 1):
            launch = replace(
                base, address=f"{self.item.address}-drill-hold-{number}", run_id=f"r-drill-{token}"
            )
            provider.submit(launch)
            self.submitted.append((launch.address, launch.run_id))
            if self._waits(provider, launch):
                provider.cancel(launch.address, launch.run_id)  # the queue is full without it
                return
        self.release()
        raise DrillError(
            f"{MAX_FILLERS} filler runs the size of {self.item.address} all started: its "
            "queue has room the drill will not fill; the congested condition needs a queue "
            "or quota the job can fill"
        )

    def _waits(self, provider: Any, launch: JobLaunch) -> bool:
        """Whether the filler just submitted waits (True) or runs (False). A scheduler that
        has not looked at it yet (queued, no reason: Slurm's `None`) is asked again, for
        up to SETTLE_SECONDS, then taken as waiting."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            tick(self.workspace)
            run = next(
                (r for r in provider.runs(launch.address) if r.run_id == launch.run_id), None
            )
            latest = run.latest if run is not None else None
            if latest is not None and latest.phase != "queued":
                return False
            if latest is not None and latest.reason or time.monotonic() > deadline:
                return True
            time.sleep(0.2)

    def on_poll(self, run: dict[str, Any]) -> None:
        """Release the fillers once the job's attempt has waited `hold` seconds."""
        if self.released_at or not run["attempts"]:
            return
        latest = run["attempts"][-1]
        if latest["phase"] != "queued":
            if latest["phase"] != "queued" and latest.get("started_at"):
                self.release()  # it started after all: nothing more to hold
            return
        waited = seconds_between(latest.get("submitted_at") or "", iso(datetime.now(UTC)))
        if waited is not None and waited >= self.hold and latest.get("waits"):
            self.waited_when_released = waited
            self.release()

    def release(self) -> None:
        if self.released_at:
            return
        provider = self.workspace.providers.get(self.item.providers[0])
        for address, run_id in self.submitted:
            try:
                provider.cancel(address, run_id)
            except ProviderError:
                continue  # already gone; `left` reports what is not
        self.released_at = iso(datetime.now(UTC))
        tick(self.workspace)

    def left(self) -> list[str]:
        """Fillers still queued or running (none once released)."""
        provider = self.workspace.providers.get(self.item.providers[0])
        return [
            address
            for address, run_id in self.submitted
            if _phase(provider, address, run_id) in ("queued", "running")
        ]

    def usage(self) -> dict[str, float]:
        """The hours the fillers held (planner/usage.py `compute_usage`, as `usage` does)."""
        provider = self.workspace.providers.get(self.item.providers[0])
        accounted = [
            AccountedRun(address, self.item.project, self.item.document["spec"]["queue"], run)
            for address, run_id in self.submitted
            for run in provider.runs(address)
            if run.run_id == run_id
        ]
        window = (datetime(1970, 1, 1, tzinfo=UTC), datetime.now(UTC))
        rows = compute_usage(accounted, window, "project").rows
        return {
            "acceleratorHours": round(sum(r.gpu_hours for r in rows), 6),
            "cpuHours": round(sum(r.cpu_hours for r in rows), 6),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "filler runs",
            "usage": self.usage(),
            "fillers": [{"address": a, "runId": r} for a, r in self.submitted],
            "holdSeconds": self.hold,
            "releasedAt": self.released_at or None,
            "waitedWhenReleased": None
            if self.waited_when_released is None
            else round(self.waited_when_released, 3),
            "left": self.left(),
        }


def _phase(provider: Any, address: str, run_id: str) -> str:
    run = next((r for r in provider.runs(address) if r.run_id == run_id), None)
    if run is None or run.latest is None:
        return "unknown"
    return str(run.latest.phase)


def _filler_launch(workspace: Workspace, item: DesiredItem, sleep: int) -> JobLaunch:
    """The job's own launch (queue, project, priority, resources) running only a sleep."""
    desired = build_desired(workspace.specs)
    pins = LockFile.read(workspace.root) or resolve_pins(
        desired, workspace.providers, workspace.root
    )
    context = JobContext(desired, pins, workspace.root, lambda _: None)
    launch = training_launch(item, context, "r-drill", 1, None)
    return replace(
        launch,
        command=["python3", "-c", f"import time; time.sleep({int(sleep)})"],
        code_dir=None,
        parameters={},
        env={},
        datasets=[],
        checkpoint_interval=None,
        keep_last=None,
        max_runtime=int(sleep) + 60,
        retries=0,
    )


@dataclass
class Fault:
    """A fault injected once the running attempt wrote `after_checkpoint` checkpoints."""

    workspace: Workspace
    item: DesiredItem
    after_checkpoint: int
    injected_at: str = ""
    attempt: int | None = None
    step: int | None = None
    description: str = ""
    latest_valid: dict[str, Any] | None = None
    armed: int = 0
    """Polls that found the attempt running with enough checkpoints."""
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every checkpoint seen while following the run, by id: retention (keepLast) may
    remove the one recovery resumed from before the report is written."""

    def on_poll(self, run: dict[str, Any]) -> None:
        for checkpoint in run.get("checkpoints", []):
            self.seen.setdefault(checkpoint["id"], dict(checkpoint))
        if self.injected_at or not run["attempts"]:
            return
        latest = run["attempts"][-1]
        valid = [c for c in run.get("checkpoints", []) if c.get("valid")]
        if latest["phase"] != "running" or len(valid) < self.after_checkpoint:
            return
        newest = max(c["step"] for c in valid)
        self.armed += 1
        if (run.get("current_step") or 0) <= newest and self.armed < 2:
            return  # strike between checkpoints (so the fault costs steps) when polls allow
        provider = self.workspace.providers.get(self.item.providers[0])
        interrupt = getattr(provider, "interrupt", None)
        if not callable(interrupt):
            raise DrillError(
                f"provider {self.item.providers[0]} cannot inject a fault into a run "
                "(it has no `interrupt`): run the drill without the failure condition"
            )
        self.latest_valid = max(valid, key=lambda c: c["step"])
        self.step = run.get("current_step")
        self.attempt = latest["attempt"]
        self.description = str(interrupt(self.item.address, run["run_id"]))
        self.injected_at = iso(datetime.now(UTC))

    def to_json(self) -> dict[str, Any]:
        latest = self.latest_valid or {}
        return {
            "afterCheckpoint": self.after_checkpoint,
            "injected": bool(self.injected_at),
            "injectedAt": self.injected_at or None,
            "attempt": self.attempt,
            "stepAtFault": self.step,
            "what": self.description or None,
            "latestValidCheckpoint": {
                "id": latest.get("id"),
                "step": latest.get("step"),
                "writtenAt": latest.get("written_at") or None,
            }
            if latest
            else None,
        }
