"""The supervisor of one attempt: `python -m trainform.providers.local.supervisor DB ATTEMPT_ID`.

(`... DB ATTEMPT_ID --wake` only waits until the queued attempt is eligible, then admits:
admission starts one for a retry it schedules itself.)

Admission spawns it detached (its own session, output appended to the attempt's log). It

1. claims the attempt: it must be `running` with this process's pid as supervisor;
2. builds the job's environment (providers/local/environment.py), which re-verifies every
   pinned dataset version and the resume checkpoint; a refusal fails the attempt without
   running the command;
3. runs the command (an argument vector, never a shell) in the run's code snapshot, in a
   new process group, output appended to the log, and waits: past the attempt's max
   runtime the group gets SIGTERM, then SIGKILL after a grace period ("exceeded max
   runtime"); SIGTERM or SIGINT to the supervisor is forwarded the same way (cancelled).
   A distributed attempt (a torchrun command, or more than one process) runs instead as
   one launcher per node (providers/local/group.py), watched and stopped as one group:
   its failure is the first process that failed ("node 1 rank 3 killed by signal 9
   (SIGKILL)");
4. records the outcome: succeeded (exit 0), failed ("exit code N", "killed by signal N"),
   cancelled; `exit_code` is the return code as Python reports it (negative: a signal);
   `cause` its class (providers/local/outcomes.py, from the exit, the command's peak
   memory and what the supervisor itself did), `started_at` when the command started,
   `last_step` the step it reached. An evaluation also needs a metrics file holding a
   JSON object of numbers. Everything it prints to the log is printed before the outcome
   is committed, so a reader that sees the attempt finished sees its whole log;
5. in the same transaction, schedules the retry of a failed training attempt while its
   retries allow (outcomes.schedule_retry);
6. applies checkpoint retention (training; also every minute while the job runs; before
   the outcome is recorded) and calls `admit` so waiting attempts start on the capacity
   just freed; with a retry scheduled it stays alive until the retry is eligible, then
   calls `admit` again, so a retry starts after its backoff without anyone running apply.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from trainform.providers.errors import ProviderError
from trainform.providers.jobs import Cause, parse_utc
from trainform.providers.local.admission import admit
from trainform.providers.local.checkpoint_sync import CheckpointSync, remote_store
from trainform.providers.local.checkpoints import apply_retention, latest_valid
from trainform.providers.local.environment import LaunchRefused, job_environment, resume_variables
from trainform.providers.local.group import LauncherGroup, runs_as_group
from trainform.providers.local.layout import suite_name
from trainform.providers.local.outcomes import (
    classify,
    memory_request,
    reached_step,
    resume_point,
    retry_wanted,
    schedule_retry,
)
from trainform.providers.local.processes import describe_signal, signal_group
from trainform.providers.local.runs import Attempt, RunStore, utc_now
from trainform.providers.objectstore.checkpoints import S3Checkpoints
from trainform.specs.quantity import binary_size

GRACE_SECONDS = 10.0
POLL_SECONDS = 0.1
RETENTION_EVERY = 60.0
SYNC_EVERY = 1.0
WAKE_CHECK_SECONDS = 5.0


@dataclass
class Outcome:
    phase: str
    reason: str = ""
    exit_code: int | None = None
    metrics: dict[str, float] | None = field(default=None)
    cause: str = Cause.NODE_FAILURE
    retryable: bool = True
    """False when a retry would be refused the same way (mutated or missing data)."""


def say(message: str) -> None:
    print(f"[trainform {utc_now()}] {message}", flush=True)


def read_metrics(path: Path) -> dict[str, float]:
    """The evaluator's metrics: a JSON object of numbers. Raises ValueError."""
    if not path.is_file():
        raise ValueError(f"metrics file {path.name} was not written")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"metrics file {path.name} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"metrics file {path.name} does not hold a JSON object")
    metrics = {}
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"metrics file {path.name}: {name!r} is not a number")
        metrics[str(name)] = float(value)
    return metrics


class Running(Protocol):
    """The started processes of an attempt, as the supervisor waits for them."""

    peak_rss: int | None

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int: ...
    def finished(self) -> bool: ...
    def signal(self, signum: int) -> None: ...
    def pause(self, seconds: float) -> None: ...
    def close(self) -> None: ...
    def describe(self) -> str: ...
    def launchers(self) -> list[dict[str, Any]]: ...


class SingleProcess:
    """One child in a process group of its own: the command of a single-process job."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self.pid = child.pid
        self.peak_rss: int | None = None

    @property
    def returncode(self) -> int:
        return int(self.child.returncode)

    def finished(self) -> bool:
        """True once the job exited; collects its return code and peak memory (wait4)."""
        try:
            pid, status, usage = os.wait4(self.child.pid, os.WNOHANG)
        except ChildProcessError:
            return self.child.poll() is not None  # already collected
        if pid == 0:
            return False
        self.child.returncode = os.waitstatus_to_exitcode(status)
        # ru_maxrss is in KiB on Linux, in bytes on macOS.
        scale = 1 if sys.platform == "darwin" else 1024
        self.peak_rss = usage.ru_maxrss * scale
        return True

    def signal(self, signum: int) -> None:
        signal_group(self.child.pid, signum)

    def pause(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        """Whatever the job left running in its process group ends with it."""
        signal_group(self.child.pid, signal.SIGKILL)

    def describe(self) -> str:
        return ""  # the supervisor's own words: "exit code N", "killed by signal N"

    def launchers(self) -> list[dict[str, Any]]:
        return []  # one process: the attempt's own times and exit code say it all


class Supervisor:
    def __init__(self, store: RunStore, attempt_id: str) -> None:
        self.store = store
        self.attempt_id = attempt_id
        self.stop_signal: int | None = None
        self.sync: CheckpointSync | None = None
        self.peak_rss: int | None = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = signum

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        attempt = self._claim()
        if attempt is None:
            return 0
        say(f"attempt {attempt.id} of {attempt.address} starts: {attempt.launch['command']}")
        try:
            store = remote_store(attempt)
            if store is not None and attempt.kind == "train":
                self.sync = CheckpointSync(attempt, store)
                self.sync.fetch_resume_point()
            outcome = self._execute(attempt)
            if store is not None and attempt.kind == "eval" and outcome.phase == "succeeded":
                self._keep_evaluated(attempt, store)
        except ProviderError as exc:
            outcome = Outcome("failed", f"checkpoint storage: {exc}")
        except LaunchRefused as exc:
            outcome = Outcome(
                "failed", str(exc), cause=Cause.REFUSED, retryable=_checkpoint_refused(attempt)
            )
        except Exception as exc:  # any failure must be recorded, never lost
            outcome = Outcome("failed", f"supervisor error: {type(exc).__name__}: {exc}")
        if attempt.kind == "train":
            # Before the outcome is recorded: whoever sees the attempt finished also sees
            # its checkpoints as retention leaves them.
            self._retain(attempt, finishing=True)
        retry = self._record(attempt, outcome)
        admit(self.store)
        if retry is not None:
            admit_when_eligible(self.store, retry.id, lambda: self.stop_signal is not None)
        return 0

    def _record(self, attempt: Attempt, outcome: Outcome) -> Attempt | None:
        """Commit the outcome and, in the same transaction, the retry it calls for."""
        attempt.phase, attempt.reason, attempt.cause = outcome.phase, outcome.reason, outcome.cause
        attempt.exit_code, attempt.ended_at = outcome.exit_code, utc_now()
        attempt.peak_rss = self.peak_rss
        if attempt.kind == "train":
            attempt.last_step = reached_step(attempt)
        resume = None
        wanted = outcome.retryable and retry_wanted(attempt, attempt.cause)
        if wanted:
            resume = resume_point(attempt)
        say(f"attempt {attempt.id} {outcome.phase} {outcome.reason}".rstrip())
        with self.store.transaction():
            self.store.update(
                attempt.id,
                phase=outcome.phase,
                reason=outcome.reason,
                cause=outcome.cause,
                exit_code=outcome.exit_code,
                metrics=outcome.metrics,
                ended_at=attempt.ended_at,
                last_step=attempt.last_step,
                peak_rss=attempt.peak_rss,
                launchers=attempt.launchers,
            )
            retry = schedule_retry(self.store, attempt, resume) if wanted else None
            if retry is not None:
                say(
                    f"attempt {retry.attempt} scheduled ({attempt.cause}): "
                    + (f"resumes from {resume}" if resume else "starts over")
                    + f", not before {retry.eligible_at} (retries.backoff)"
                )
        return retry

    def _claim(self) -> Attempt | None:
        """The attempt, once admission's transaction committed it to this process."""
        with self.store.transaction():
            attempt = self.store.get(self.attempt_id)
            if attempt is None or attempt.phase != "running":
                say(f"attempt {self.attempt_id} is not waiting to run here: nothing to do")
                return None
            if attempt.supervisor_pid != os.getpid():
                say(f"attempt {self.attempt_id} belongs to supervisor {attempt.supervisor_pid}")
                return None
            if attempt.cancel_requested or self.stop_signal is not None:
                self.store.update(
                    attempt.id,
                    phase="cancelled",
                    reason="cancelled",
                    cause=Cause.CANCELLED,
                    ended_at=utc_now(),
                )
                return None
        return attempt

    def _execute(self, attempt: Attempt) -> Outcome:
        environment = job_environment(attempt)
        for folder in (attempt.checkpoint_dir, attempt.output_dir, str(attempt.code_dir)):
            Path(folder).mkdir(parents=True, exist_ok=True)
        metrics_file = Path(attempt.metrics_file) if attempt.metrics_file else None
        if metrics_file is not None:
            metrics_file.unlink(missing_ok=True)
        command = [str(part) for part in attempt.launch["command"]]
        if self.stop_signal is not None:
            return Outcome("cancelled", "cancelled", cause=Cause.CANCELLED)
        started = utc_now()
        try:
            running = self._start(attempt, command, environment)
        except OSError as exc:
            reason = f"cannot start {command[0]}: {exc.strerror or exc}"
            return Outcome("failed", reason, cause=Cause.CODE_ERROR)
        attempt.started_at = started
        self.store.update(
            attempt.id, child_pid=running.pid, started_at=started, launchers=running.launchers()
        )
        timed_out = self._wait(attempt, running)
        self.peak_rss = running.peak_rss
        attempt.launchers = running.launchers()
        return self._outcome(attempt, running, timed_out, metrics_file)

    def _start(self, attempt: Attempt, command: list[str], environment: dict[str, str]) -> Running:
        """The attempt's processes, started: one child, or a group of launchers."""
        if runs_as_group(attempt):
            group = LauncherGroup(attempt, command, environment, say)
            group.start()
            return group
        with open(attempt.log_path, "ab") as log:
            child = subprocess.Popen(
                command,
                cwd=attempt.code_dir,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        return SingleProcess(child)

    def _outcome(
        self, attempt: Attempt, running: Running, timed_out: bool, metrics_file: Path | None
    ) -> Outcome:
        code = running.returncode
        memory = memory_request(attempt)
        cause = classify(
            code,
            timed_out=timed_out,
            cancelled=self.stop_signal is not None,
            peak_rss=self.peak_rss,
            memory=memory,
        )
        if cause is Cause.CANCELLED:
            return Outcome("cancelled", "cancelled", code, cause=cause)
        if timed_out:
            reason = f"exceeded max runtime ({attempt.max_runtime}s)"
            return Outcome("failed", reason, code, cause=cause)
        if code < 0:
            reason = running.describe() or f"killed by signal {describe_signal(-code)}"
            if cause is Cause.OUT_OF_MEMORY:
                peak = binary_size(self.peak_rss or 0)
                reason += f": out of memory (peak {peak}, request {memory})"
            return Outcome("failed", reason, code, cause=cause)
        if code > 0:
            return Outcome("failed", running.describe() or f"exit code {code}", code, cause=cause)
        if metrics_file is not None:
            try:
                return Outcome("succeeded", "", code, read_metrics(metrics_file), cause=cause)
            except ValueError as exc:
                return Outcome("failed", str(exc), code, cause=Cause.CODE_ERROR)
        return Outcome("succeeded", "", code, cause=cause)

    def _wait(self, attempt: Attempt, running: Running) -> bool:
        """Wait for the job, stopping it on a signal or past its runtime; True on timeout."""
        start = time.monotonic()
        deadline = start + attempt.max_runtime if attempt.max_runtime else None
        timed_out = False
        stopping_since: float | None = None
        last_retention = last_sync = start
        while not running.finished():
            now = time.monotonic()
            if stopping_since is None and self.stop_signal is not None:
                say(f"forwarding signal {describe_signal(self.stop_signal)} to the job")
                running.signal(self.stop_signal)
                stopping_since = now
            elif stopping_since is None and deadline is not None and now >= deadline:
                say(f"max runtime of {attempt.max_runtime}s exceeded: stopping the job")
                running.signal(signal.SIGTERM)
                stopping_since, timed_out = now, True
            elif stopping_since is not None and now - stopping_since >= GRACE_SECONDS:
                running.signal(signal.SIGKILL)
            if self.sync is not None and now - last_sync >= SYNC_EVERY:
                self._publish()
                last_sync = now
            if attempt.kind == "train" and now - last_retention >= RETENTION_EVERY:
                self._retain(attempt)
                last_retention = now
            running.pause(POLL_SECONDS)
        # Whatever the job left running ends with it.
        running.close()
        return timed_out

    def _publish(self) -> None:
        """Publish new checkpoints to S3; a failure is reported and retried next time."""
        assert self.sync is not None
        try:
            for checkpoint in self.sync.publish_new():
                say(f"published {checkpoint.id} to {checkpoint.path}")
        except (OSError, ProviderError) as exc:
            say(f"publishing checkpoints failed (will retry): {exc}")

    def _keep_evaluated(self, attempt: Attempt, store: S3Checkpoints) -> None:
        """Metrics beside the checkpoints; the checkpoint the model came from is kept."""
        suite = suite_name(attempt.suite or "")
        store.put_metrics(suite, Path(attempt.metrics_file))
        newest = latest_valid(store.list())
        if newest is not None:
            store.protect(newest.id, f"evaluated by {suite}")

    def _retain(self, attempt: Attempt, finishing: bool = False) -> None:
        """Retention on the run's checkpoints, sparing what an unfinished attempt resumed
        from (this one too while it runs, but not once it is `finishing`)."""
        protect = {
            other.resume_from
            for other in self.store.by_address(attempt.address)
            if other.run_id == attempt.run_id and other.kind == "train" and not other.finished
            if other.resume_from and not (finishing and other.id == attempt.id)
        }
        try:
            deleted = []
            if self.sync is not None:
                self._publish()
                deleted = self.sync.store.apply_retention(attempt.launch.get("keep_last"), protect)
            deleted += apply_retention(
                Path(attempt.checkpoint_dir), attempt.launch.get("keep_last"), protect
            )
        except (OSError, ProviderError) as exc:
            say(f"checkpoint retention failed: {exc}")
            return
        if deleted:
            say("retention deleted " + ", ".join(checkpoint.id for checkpoint in deleted))


def _checkpoint_refused(attempt: Attempt) -> bool:
    """True when the refused attempt's resume checkpoint is what refused it (missing or
    invalid): a retry from another checkpoint may run, unlike one on mutated data."""
    try:
        resume_variables(attempt)
    except LaunchRefused:
        return True
    return False


def admit_when_eligible(
    store: RunStore, attempt_id: str, stop: Callable[[], bool] = lambda: False
) -> None:
    """Sleep until the queued attempt's `eligible_at`, then run an admission step; return
    early once it is no longer queued (started, cancelled) or `stop()` says so."""
    while not stop() and store.path.exists():
        attempt = store.get(attempt_id)
        if attempt is None or attempt.phase != "queued":
            return
        eligible = parse_utc(attempt.eligible_at)
        remaining = (eligible - datetime.now(UTC)).total_seconds() if eligible else 0.0
        if remaining <= 0:
            admit(store)
            return
        time.sleep(min(remaining + 0.01, WAKE_CHECK_SECONDS))


def main(arguments: list[str] | None = None) -> int:
    values = sys.argv[1:] if arguments is None else arguments
    wake = values[2:] == ["--wake"]
    if len(values) != 2 and not wake:
        print(
            "usage: python -m trainform.providers.local.supervisor DATABASE ATTEMPT_ID [--wake]",
            file=sys.stderr,
        )
        return 2
    store = RunStore(Path(values[0]))
    try:
        if wake:
            admit_when_eligible(store, values[1])
            return 0
        return Supervisor(store, values[1]).run()
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
