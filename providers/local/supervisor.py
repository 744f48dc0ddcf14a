"""The supervisor of one attempt: `python -m providers.local.supervisor DB ATTEMPT_ID`.

Admission spawns it detached (its own session, output appended to the attempt's log). It

1. claims the attempt: it must be `running` with this process's pid as supervisor;
2. builds the job's environment (providers/local/environment.py), which re-verifies every
   pinned dataset version and the resume checkpoint; a refusal fails the attempt without
   running the command;
3. runs the command (an argument vector, never a shell) in the run's code snapshot, in a
   new process group, output appended to the log, and waits: past the attempt's max
   runtime the group gets SIGTERM, then SIGKILL after a grace period ("exceeded max
   runtime"); SIGTERM or SIGINT to the supervisor is forwarded the same way (cancelled);
4. records the outcome: succeeded (exit 0), failed ("exit code N", "killed by signal N"),
   cancelled; `exit_code` is the return code as Python reports it (negative: a signal).
   An evaluation also needs a metrics file holding a JSON object of numbers;
5. applies checkpoint retention (training; also every minute while the job runs) and
   calls `admit` so waiting attempts start on the capacity just freed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from providers.errors import ProviderError
from providers.local.admission import admit
from providers.local.checkpoint_sync import CheckpointSync, remote_store
from providers.local.checkpoints import apply_retention, latest_valid
from providers.local.environment import LaunchRefused, job_environment
from providers.local.layout import suite_name
from providers.local.processes import describe_signal, signal_group
from providers.local.runs import Attempt, RunStore, utc_now
from providers.objectstore.checkpoints import S3Checkpoints

GRACE_SECONDS = 10.0
POLL_SECONDS = 0.1
RETENTION_EVERY = 60.0
SYNC_EVERY = 1.0


@dataclass
class Outcome:
    phase: str
    reason: str = ""
    exit_code: int | None = None
    metrics: dict[str, float] | None = field(default=None)


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


class Supervisor:
    def __init__(self, store: RunStore, attempt_id: str) -> None:
        self.store = store
        self.attempt_id = attempt_id
        self.stop_signal: int | None = None
        self.sync: CheckpointSync | None = None

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
            outcome = Outcome("failed", str(exc))
        except Exception as exc:  # any failure must be recorded, never lost
            outcome = Outcome("failed", f"supervisor error: {type(exc).__name__}: {exc}")
        if attempt.kind == "train":
            # Before the outcome is recorded: whoever sees the attempt finished also sees
            # its checkpoints as retention leaves them.
            self._retain(attempt, finishing=True)
        self.store.update(
            attempt.id,
            phase=outcome.phase,
            reason=outcome.reason,
            exit_code=outcome.exit_code,
            metrics=outcome.metrics,
            ended_at=utc_now(),
        )
        say(f"attempt {attempt.id} {outcome.phase} {outcome.reason}".rstrip())
        admit(self.store)
        return 0

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
                    attempt.id, phase="cancelled", reason="cancelled", ended_at=utc_now()
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
            return Outcome("cancelled", "cancelled")
        try:
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
        except OSError as exc:
            return Outcome("failed", f"cannot start {command[0]}: {exc.strerror or exc}")
        self.store.update(attempt.id, child_pid=child.pid)
        timed_out = self._wait(attempt, child)
        code = child.returncode
        if self.stop_signal is not None:
            return Outcome("cancelled", "cancelled", code)
        if timed_out:
            return Outcome("failed", f"exceeded max runtime ({attempt.max_runtime}s)", code)
        if code < 0:
            return Outcome("failed", f"killed by signal {describe_signal(-code)}", code)
        if code > 0:
            return Outcome("failed", f"exit code {code}", code)
        if metrics_file is not None:
            try:
                return Outcome("succeeded", "", code, read_metrics(metrics_file))
            except ValueError as exc:
                return Outcome("failed", str(exc), code)
        return Outcome("succeeded", "", code)

    def _wait(self, attempt: Attempt, child: subprocess.Popen[bytes]) -> bool:
        """Wait for the job, stopping it on a signal or past its runtime; True on timeout."""
        start = time.monotonic()
        deadline = start + attempt.max_runtime if attempt.max_runtime else None
        timed_out = False
        stopping_since: float | None = None
        last_retention = last_sync = start
        while child.poll() is None:
            now = time.monotonic()
            if stopping_since is None and self.stop_signal is not None:
                say(f"forwarding signal {describe_signal(self.stop_signal)} to the job")
                signal_group(child.pid, self.stop_signal)
                stopping_since = now
            elif stopping_since is None and deadline is not None and now >= deadline:
                say(f"max runtime of {attempt.max_runtime}s exceeded: stopping the job")
                signal_group(child.pid, signal.SIGTERM)
                stopping_since, timed_out = now, True
            elif stopping_since is not None and now - stopping_since >= GRACE_SECONDS:
                signal_group(child.pid, signal.SIGKILL)
            if self.sync is not None and now - last_sync >= SYNC_EVERY:
                self._publish()
                last_sync = now
            if attempt.kind == "train" and now - last_retention >= RETENTION_EVERY:
                self._retain(attempt)
                last_retention = now
            time.sleep(POLL_SECONDS)
        # Whatever the job left running in its process group ends with it.
        signal_group(child.pid, signal.SIGKILL)
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


def main(arguments: list[str] | None = None) -> int:
    values = sys.argv[1:] if arguments is None else arguments
    if len(values) != 2:
        print("usage: python -m providers.local.supervisor DATABASE ATTEMPT_ID", file=sys.stderr)
        return 2
    store = RunStore(Path(values[0]))
    try:
        return Supervisor(store, values[1]).run()
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
