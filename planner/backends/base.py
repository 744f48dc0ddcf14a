"""The state backend interface and the lock record every backend writes.

A backend reads the state (replaying its journal), records journal entries durably one at
a time, compacts the journal into the state document atomically, and holds an exclusive
lock that names its holder. `record` must be durable when it returns: apply calls it
before and after every mutating provider call.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any

from trainform.planner.backends.drift_runs import DriftRuns
from trainform.planner.backends.identity import Identity
from trainform.planner.state import State, StateError


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
    def __init__(self, info: LockInfo) -> None:
        self.info = info
        alive = info.process_alive()
        liveness = " (that process is no longer running)" if alive is False else ""
        super().__init__(
            f"cannot lock state: held by {info.holder}@{info.host} pid {info.pid}{liveness} "
            f"for `{info.operation}` since {info.time} (lock id {info.id}). Wait for it to "
            f"finish, or if it is gone run `trainform force-unlock {info.id}`"
        )


class StateBackend(ABC):
    """Where state lives: a local file (planner.backends.local) or S3 (planner.backends.s3)."""

    location: str

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
                return self.take_lock(operation)
            except StateLockedError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(pause, left))
                pause = min(pause * 2, 2.0)

    @abstractmethod
    def take_lock(self, operation: str) -> LockInfo:
        """Take the exclusive lock at once or raise StateLockedError naming the holder."""

    @abstractmethod
    def unlock(self, info: LockInfo) -> None: ...

    @abstractmethod
    def force_unlock(self, lock_id: str) -> LockInfo:
        """Remove the lock if its id is `lock_id`; returns what was removed."""

    @abstractmethod
    def append_audit(self, record: dict[str, Any]) -> None:
        """Append one audit record durably; records are never rewritten or removed."""

    @abstractmethod
    def read_audit(self) -> list[dict[str, Any]]:
        """Every audit record, in the order written."""

    @abstractmethod
    def drift_runs(self) -> DriftRuns:
        """The bounded history of drift runs kept beside the state."""

    @abstractmethod
    def accept(self, reason: str) -> Identity:
        """Make the state now stored (or its absence) the baseline identity; recorded."""
