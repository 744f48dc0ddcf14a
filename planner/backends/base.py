"""The state backend interface and the lock record every backend writes.

A backend reads the state (replaying its journal), records journal entries durably one at
a time, compacts the journal into the state document atomically, and holds an exclusive
lock that names its holder. `record` must be durable when it returns: apply calls it
before and after every mutating provider call.

Locks are fenced: every lock has a token (the lock file's identity, or the lock object's
version on S3), and every state write first proves the lock it was taken under is still
the one in place. A holder whose lock was force-unlocked (and maybe
taken by another run) fails its next write with `LockLostError` and stops; it never
overwrites what the newer holder wrote. From the moment a lock exists until it is
released it is `held` with planner.signals, so no signal, however timed, leaves it behind.

Every state-changing operation (AUDITED_OPERATIONS) is audited from its lock: a `started`
record is appended when the lock is taken (no record, no lock), and a `completed` one when
it ends: with the command's own details (`finish_audit`), or, if the command never got
there, at release with how it ended (failed, interrupted, or killed by a second signal).
A run killed outright leaves its `started` record alone, which `state audit` shows.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any

from trainform.planner import signals
from trainform.planner.audit import audit_record
from trainform.planner.audit_chain import AuditVerdict
from trainform.planner.backends.drift_runs import DriftRuns
from trainform.planner.backends.identity import Identity
from trainform.planner.state import State, StateError
from trainform.specs.secrets import redact

AUDITED_OPERATIONS = frozenset(
    {"apply", "destroy", "state rm", "state restore", "state accept", "import", "drill"}
)


@dataclass(frozen=True)
class LockInfo:
    id: str
    holder: str
    host: str
    pid: int
    operation: str
    time: str

    @classmethod
    def create(cls, operation: str) -> LockInfo:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = str(os.getuid())
        return cls(
            id=str(uuid.uuid4()),
            holder=user,
            host=socket.gethostname(),
            pid=os.getpid(),
            operation=operation,
            time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> LockInfo:
        """A lock record as written; an unreadable one is held by `unknown`."""
        try:
            return cls(**data)
        except TypeError:
            return cls("unknown", "unknown", "unknown", 0, "unknown", "unknown")

    def describe(self) -> str:
        return (
            f"{self.holder}@{self.host} pid {self.pid} for `{self.operation}` since "
            f"{self.time} (lock id {self.id})"
        )

    def process_alive(self) -> bool | None:
        """Whether the holding process still runs; None when it is on another host."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class StateLockedError(StateError):
    def __init__(self, info: LockInfo, unlock: str | None = None) -> None:
        self.info = info
        alive = info.process_alive()
        liveness = " (that process is no longer running)" if alive is False else ""
        super().__init__(
            f"cannot lock state: held by {info.holder}@{info.host} pid {info.pid}{liveness} "
            f"for `{info.operation}` since {info.time} (lock id {info.id}). Wait for it to "
            f"finish, or if it is gone run `{unlock or 'trainform force-unlock ' + info.id}`"
        )


class LockLostError(StateError):
    """This run's lock was released or taken over by another: it must write nothing more."""

    def __init__(self, location: str, ours: LockInfo, now: LockInfo | None) -> None:
        self.ours = ours
        self.now = now
        held = f"it is now held by {now.describe()}" if now else "the state is not locked now"
        super().__init__(
            f"cannot write state {location}: this run's lock {ours.id} was force-unlocked "
            f"and {held}. This run stops and writes nothing more; every change it finished "
            "is in its journal or the newer state. Run `trainform plan` once the other run "
            "is done"
        )


def refuse_live_holder(held: LockInfo, lock_id: str, force: bool) -> None:
    """force-unlock of a process still running on this host needs `--force`."""
    if held.process_alive() is True and not force:
        raise StateError(
            f"cannot force-unlock {lock_id}: its holder {held.describe()} is still running "
            "on this host. Stop that process, or pass --force to take the lock away from it "
            "(its next state write then fails and it stops)"
        )


def ending_outcome() -> dict[str, Any]:
    """How the command releasing a lock ends, read from the exception on its way out."""
    error = sys.exc_info()[1]
    if error is None or (isinstance(error, SystemExit) and error.code in (0, None)):
        return {"outcome": "succeeded"}
    if isinstance(error, KeyboardInterrupt):
        return {"outcome": "interrupted"}
    if isinstance(error, SystemExit):
        return {"outcome": "failed", "exitCode": error.code}
    return {"outcome": "failed", "error": redact(f"{type(error).__name__}: {error}")[:500]}


class StateBackend(ABC):
    """Where state lives: a local file (planner.backends.local) or S3 (planner.backends.s3)."""

    location: str

    unlock_arguments: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    """What `force-unlock` needs besides the lock id to reach this state: options before it
    (`--env prod`) and the spec folder after it; set by planner.workspace.make_backend."""

    def unlock_command(self, lock_id: str) -> str:
        """The `trainform force-unlock` command that releases `lock_id`, as a shell line."""
        import shlex

        before, after = self.unlock_arguments
        return shlex.join(["trainform", "force-unlock", *before, lock_id, *after])

    def __init__(self) -> None:
        self.audits_open: dict[str, int] = {}  # lock id -> sequence of its `started` record

    @abstractmethod
    def read(self) -> State | None:
        """The current state with the journal replayed; None if no state exists yet."""

    @abstractmethod
    def record(self, state: State, entry: dict[str, Any]) -> None:
        """Append one journal entry durably and apply it to `state`."""

    @abstractmethod
    def compact(self, state: State) -> None:
        """Write `state` as the new state document atomically and empty the journal."""

    lock_timeout: float = 0.0
    """Seconds `lock` keeps retrying a lock another run holds (`--lock-timeout`); set for
    the whole process by the CLI, as Terraform's -lock-timeout."""

    def lock(self, operation: str) -> LockInfo:
        """Take the exclusive lock, waiting up to `lock_timeout` seconds for a holder to
        release it; then raise StateLockedError naming the holder."""
        deadline = time.monotonic() + self.lock_timeout
        pause = 0.1
        while True:
            try:
                with signals.deferred():
                    info = self.take_lock(operation)
                    self.hold_until_released(info)
                    if operation in AUDITED_OPERATIONS:
                        self.begin_audit(info)
                return info
            except StateLockedError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(pause, left))
                pause = min(pause * 2, 2.0)

    @abstractmethod
    def take_lock(self, operation: str) -> LockInfo:
        """Take the exclusive lock at once or raise StateLockedError naming the holder."""

    def hold_until_released(self, info: LockInfo) -> None:
        def release() -> None:
            try:
                self.finish_audit(info, outcome="killed by a second signal")
            finally:
                self.release_lock(info)

        signals.hold(f"{self.location} {info.id}", release)

    def unlock(self, info: LockInfo) -> None:
        """Release the lock `info` if it is still ours (and never anybody else's)."""
        with signals.deferred():
            try:
                if info.id in self.audits_open:
                    self.finish_audit_quietly(info, ending_outcome())
                self.release_lock(info)
            finally:
                signals.let_go(f"{self.location} {info.id}")

    def begin_audit(self, info: LockInfo) -> None:
        """Append the `started` record of the operation `info` locks; without it, no lock."""
        identity = self.read_identity()
        try:
            started = self.append_audit(
                audit_record(
                    info.operation,
                    phase="started",
                    lock={"id": info.id, "operation": info.operation},
                    state={
                        "location": self.location,
                        "lineage": identity.lineage if identity else None,
                        "serial": identity.serial if identity else 0,
                    },
                )
            )
        except BaseException:
            self.release_lock(info)
            raise
        self.audits_open[info.id] = started["sequence"]

    def finish_audit(self, info: LockInfo, **fields: Any) -> None:
        """Append the `completed` record of the operation `info` locks (once)."""
        started = self.audits_open.pop(info.id, None)
        if started is None:
            return
        operation = fields.pop("operation", info.operation)
        fields.setdefault("lock", {"id": info.id, "operation": info.operation})
        if "state" not in fields:
            identity = self.read_identity()
            fields["state"] = {
                "location": self.location,
                "lineage": identity.lineage if identity else None,
                "serial": identity.serial if identity else 0,
            }
        self.append_audit(audit_record(operation, phase="completed", started=started, **fields))

    def finish_audit_quietly(self, info: LockInfo, fields: dict[str, Any]) -> None:
        try:
            self.finish_audit(info, **fields)
        except StateError as exc:
            sys.stderr.write(
                f"warning: the audit record of `{info.operation}` was not "
                f"written: {redact(str(exc))}\n"
            )

    @abstractmethod
    def read_identity(self) -> Identity | None:
        """The identity record (lineage and serial last written), None if there is none."""

    @abstractmethod
    def verify_audit(self) -> AuditVerdict:
        """Check the whole audit trail: chain, head, and (where kept) object versions."""

    @abstractmethod
    def release_lock(self, info: LockInfo) -> None: ...

    @abstractmethod
    def force_unlock(self, lock_id: str, force: bool = False) -> LockInfo:
        """Remove the lock if its id is `lock_id` (a live holder on this host only with
        `force`, see refuse_live_holder); returns what was removed."""

    @abstractmethod
    def append_audit(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one audit record durably as the next link of the chain
        (planner.audit_chain) and return it as stored; records are never rewritten or
        removed. A write whose response was lost is recognised, not repeated."""

    @abstractmethod
    def read_audit(self) -> list[dict[str, Any]]:
        """Every audit record, in the order written."""

    @abstractmethod
    def drift_runs(self) -> DriftRuns:
        """The bounded history of drift runs kept beside the state."""

    @abstractmethod
    def accept(self, reason: str) -> Identity:
        """Make the state now stored (or its absence) the baseline identity; recorded."""
