"""Local-file state backend: state.json, an append-only journal beside it, and a lock file.

Durability without quadratic cost: every recorded entry is one appended, fsynced line of
`state.json.journal`; the state document is rewritten only on compaction (end of an
operation, and every `compact_every` entries), through a temporary file, fsync and rename.
Before a rename the previous document becomes backup generation 1 (hard link, so a state
file exists at every instant). The journal opens with a header binding it to the lineage
and serial of the document it extends; a journal that does not match (a crash between
rename and truncation) is already contained in the document and is discarded.

`state.json.identity` records the lineage and serial last written (planner.backends.identity):
a document of another lineage, one that went backwards, or a missing one while backups or
a journal exist is refused on read.

The lock is `state.json.lock`, created exclusively; its fencing token is the lock file
itself (its id, inode and change time). Before every write (journal entry, compaction,
restore) the holder checks that the lock file is still the one it created; a lock that was
force-unlocked (and perhaps taken by another run) fails the write with LockLostError.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from trainform.planner.audit_chain import AuditHead, AuditVerdict, chained, head_of, verify_chain
from trainform.planner.backends.base import (
    LockInfo,
    LockLostError,
    StateBackend,
    StateLockedError,
    refuse_live_holder,
)
from trainform.planner.backends.drift_runs import DriftRuns, FolderDriftRuns
from trainform.planner.backends.identity import (
    AcceptRequest,
    Identity,
    StateIdentityError,
    check_identity,
    first_identity,
)
from trainform.planner.state import State, StateCorruptError, StateError, canonical_json


def write_all(fd: int, data: bytes, path: Path) -> None:
    """All of `data` at the end of `fd`; a full disk is an error naming the file."""
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError as exc:
        raise StateError(f"cannot write {path}: {exc.strerror}") from None


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through a temporary file; none is left on failure."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StateError(f"cannot write {path}: {exc.strerror}") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalBackend(StateBackend):
    def __init__(self, path: str | os.PathLike[str], backups: int = 5) -> None:
        super().__init__()
        self.path = Path(path)
        self.location = str(self.path)
        self.journal_path = self.path.with_name(self.path.name + ".journal")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._lock_file: tuple[int, int] | None = None  # (inode, ctime) of the lock we made
        self.identity_path = self.path.with_name(self.path.name + ".identity")
        self.audit_path = self.path.with_name(self.path.name + ".audit.jsonl")
        self.audit_head_path = self.path.with_name(self.path.name + ".audit.head")
        self.accept_state = False
        self._held: LockInfo | None = None
        self.backups = backups
        self._journal: Any = None
        self.compact_every = 1000
        self._entries_since_compaction = 0
        self._rotated = False
        self._on_disk: tuple[str, int] | None = None

    # reading -------------------------------------------------------------------------

    def _read_document(self) -> State | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read state {self.path}: {exc.strerror}") from None
        if not raw.strip():
            raise StateCorruptError(str(self.path), "the file is empty")
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StateCorruptError(str(self.path), f"not valid JSON ({exc})") from None
        return State.from_json(data, str(self.path))

    def _journal_entries(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        try:
            lines = self.journal_path.read_bytes().splitlines()
        except FileNotFoundError:
            return None, []
        parsed: list[dict[str, Any]] = []
        for number, line in enumerate(lines):
            try:
                parsed.append(json.loads(line))
            except (UnicodeDecodeError, json.JSONDecodeError):
                if number == len(lines) - 1:
                    break  # a torn last line: its write never completed
                raise StateCorruptError(
                    str(self.journal_path), f"line {number + 1} is not valid JSON"
                ) from None
        if not parsed:
            return None, []
        return parsed[0], parsed[1:]

    def _backup_path(self, generation: int) -> Path:
        return self.path.with_name(f"{self.path.name}.backup.{generation}")

    def backup_generations(self) -> list[tuple[int, str, int]]:
        """(generation, lineage, serial) of each readable backup, newest first."""
        found = []
        for generation in range(1, max(self.backups, 1) + 100):
            path = self._backup_path(generation)
            if not path.exists():
                if generation > self.backups:
                    break
                continue
            try:
                data = json.loads(path.read_bytes())
                found.append((generation, str(data["lineage"]), int(data["serial"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def read_identity(self) -> Identity | None:
        try:
            return Identity.from_json(json.loads(self.identity_path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None

    def _write_identity(self, identity: Identity) -> None:
        write_atomically(
            self.identity_path, json.dumps(identity.to_json(), indent=1).encode() + b"\n"
        )

    def _check_identity(self, document: State | None, header: dict[str, Any] | None) -> None:
        if self.accept_state:
            return
        recorded = self.read_identity()
        head = self._audit_head()
        witness = head.witness() if head else None
        if recorded is None and document is None and witness is None and not self.backups_exist():
            return  # nothing written here yet (a journal alone is judged by read())
        if recorded is not None and not recorded.lineage:
            return  # a fresh start was accepted
        if (
            document is not None
            and recorded is not None
            and (document.lineage == recorded.lineage and document.serial >= recorded.serial)
            and not (witness and witness[0] == document.lineage and document.serial < witness[1])
        ):
            return
        backups = self.backup_generations()
        check_identity(str(self.path), document, recorded, backups, header is not None, witness)

    def backups_exist(self) -> bool:
        return any(self._backup_path(g).exists() for g in range(1, max(self.backups, 1) + 1))

    def accept(self, reason: str) -> Identity:
        """Make the document now on disk (or its absence) the baseline, and record that."""
        document = self._read_document()
        recorded = self.read_identity()
        if recorded is None:
            identity = first_identity(document) if document else Identity("", 0)
            identity = identity.accepted(document, reason)
        else:
            identity = recorded.accepted(document, reason)
        self._write_identity(identity)
        return identity

    def restore(self, generation: int) -> tuple[State, Path | None]:
        """Put backup `generation` back as the state document; the replaced one is kept."""
        source = self._backup_path(generation)
        if not source.exists():
            known = ", ".join(str(g) for g, _, _ in self.backup_generations()) or "none"
            raise StateError(
                f"cannot restore backup {generation}: {source} does not exist "
                f"(backups kept: {known})"
            )
        restored = State.from_json(json.loads(source.read_bytes()), str(source))
        self.check_fence()
        kept = None
        if self.path.exists():
            kept = self.path.with_name(
                f"{self.path.name}.replaced.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            )
            os.link(self.path, kept)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(source.read_bytes())
        os.replace(temporary, self.path)
        _fsync_dir(self.path.parent)
        recorded = self.read_identity() or first_identity(restored)
        self._write_identity(recorded.accepted(restored, f"restored backup {generation}"))
        return restored, kept

    def read(self) -> State | None:
        try:
            return self._read_checked()
        except StateIdentityError:
            # A writer may have replaced the document and its identity between our two
            # reads; a second look settles it.
            time.sleep(0.05)
            try:
                return self._read_checked()
            except StateIdentityError:
                if AcceptRequest.reason is None:
                    raise
                if self._held is not None:
                    self.accept(AcceptRequest.reason)
                self.accept_state = True
                return self._read_checked()

    def _read_checked(self) -> State | None:
        state = self._read_document()
        header, entries = self._journal_entries()
        self._check_identity(state, header)
        if header is None:
            if state is not None:
                self._on_disk = (state.lineage, state.serial)
            return state
        if state is None:
            if header.get("baseSerial") != 0:
                raise StateCorruptError(
                    str(self.journal_path), "a journal exists but the state file is missing"
                )
            state = State(lineage=header["lineage"], serial=0)
        elif header.get("lineage") != state.lineage or header.get("baseSerial") != state.serial:
            return state  # already compacted into the document
        for entry in entries:
            state.apply_entry(entry)
        return state

    # writing -------------------------------------------------------------------------

    def _open_journal(self, state: State) -> Any:
        if self._journal is None:
            if self.journal_path.exists():
                self.compact(state)  # fold a crashed run's entries in before starting anew
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.journal_path, "wb")  # noqa: SIM115 - kept open across records
            base = {"lineage": state.lineage, "baseSerial": state.serial}
            handle.write(canonical_json(base).encode() + b"\n")
            self._journal = handle
        return self._journal

    def check_fence(self) -> None:
        """Raise LockLostError when the lock this instance holds is no longer in place."""
        if self._held is None:
            return
        try:
            status = os.stat(self.lock_path)
        except FileNotFoundError:
            raise LockLostError(self.location, self._held, None) from None
        if (status.st_ino, status.st_ctime_ns) == self._lock_file:
            return
        now = self._read_lock()
        if now is None or now.id != self._held.id:
            raise LockLostError(self.location, self._held, now)
        self._lock_file = (status.st_ino, status.st_ctime_ns)

    def record(self, state: State, entry: dict[str, Any]) -> None:
        self.check_fence()
        handle = self._open_journal(state)
        try:
            handle.write(canonical_json(entry).encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            raise StateError(f"cannot write {self.journal_path}: {exc.strerror}") from None
        state.apply_entry(entry)
        self._entries_since_compaction += 1
        # Compacting after a number of entries that grows with the state keeps the total
        # rewrite cost linear in the number of changes.
        if self._entries_since_compaction >= max(self.compact_every, len(state.resources)):
            self.compact(state)

    def _rotate_backups(self) -> None:
        if not self.path.exists() or self.backups == 0:
            return
        for generation in range(self.backups, 1, -1):
            older = self.path.with_name(f"{self.path.name}.backup.{generation - 1}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.backup.{generation}"))
        first = self.path.with_name(f"{self.path.name}.backup.1")
        try:
            os.link(self.path, first)
        except OSError:
            first.write_bytes(self.path.read_bytes())

    def compact(self, state: State) -> None:
        if (
            self._on_disk == (state.lineage, state.serial)
            and self._journal is None
            and not self.journal_path.exists()
        ):
            return  # the file already holds exactly this state
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8") + b"\n"
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            self.check_fence()
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise StateError(
                f"cannot write state {self.path}: {exc.strerror}; the journal keeps every "
                "recorded change and the next command folds it in"
            ) from None
        except LockLostError:
            temporary.unlink(missing_ok=True)
            raise
        if not self._rotated:
            self._rotate_backups()  # once per operation: keep the state it started from
            self._rotated = True
        os.replace(temporary, self.path)
        _fsync_dir(self.path.parent)
        recorded = self.read_identity()
        self._write_identity(recorded.advanced(state) if recorded else first_identity(state))
        self._on_disk = (state.lineage, state.serial)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self.journal_path.unlink(missing_ok=True)
        self._entries_since_compaction = 0

    # audit ---------------------------------------------------------------------------

    def append_audit(self, record: dict[str, Any]) -> dict[str, Any]:
        """One line of `state.json.audit.jsonl`, chained to the head in `.audit.head`;
        appenders take turns on an flock of the trail, so two never take one sequence."""
        self.audit_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.audit_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            linked, head = chained(record, self._audit_head() or head_of(self.read_audit()))
            write_all(fd, canonical_json(linked).encode("utf-8") + b"\n", self.audit_path)
            os.fsync(fd)
            write_atomically(self.audit_head_path, json.dumps(head.to_json()).encode() + b"\n")
        finally:
            os.close(fd)
        return linked

    def _audit_head(self) -> AuditHead | None:
        try:
            return AuditHead.from_json(json.loads(self.audit_head_path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None

    def drift_runs(self) -> DriftRuns:
        return FolderDriftRuns(self.path.with_name(self.path.name + ".drift"))

    def _audit_lines(self) -> list[tuple[str, dict[str, Any] | None]]:
        try:
            lines = self.audit_path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        found: list[tuple[str, dict[str, Any] | None]] = []
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                record = None
            readable = record if isinstance(record, dict) else None
            found.append((f"{self.audit_path}:{number}", readable))
        return found

    def read_audit(self) -> list[dict[str, Any]]:
        return [record for _, record in self._audit_lines() if record is not None]

    def verify_audit(self) -> AuditVerdict:
        return verify_chain(self._audit_lines(), self._audit_head())

    # locking -------------------------------------------------------------------------

    def _read_lock(self) -> LockInfo | None:
        try:
            return LockInfo.from_json(json.loads(self.lock_path.read_text()))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return LockInfo("unknown", "unknown", "unknown", 0, "unknown", "unknown")

    def take_lock(self, operation: str) -> LockInfo:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        info = LockInfo.create(operation)
        try:
            fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = self._read_lock()
            if held is None:
                return self.take_lock(operation)
            raise StateLockedError(held, self.unlock_command(held.id)) from None
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(info.to_json()))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            self.lock_path.unlink(missing_ok=True)
            raise StateError(f"cannot lock state {self.path}: {exc.strerror}") from None
        status = os.stat(self.lock_path)
        self._held, self._lock_file = info, (status.st_ino, status.st_ctime_ns)
        return info

    def close(self) -> None:
        """Close the journal file; records after this reopen it."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def release_lock(self, info: LockInfo) -> None:
        self._rotated = False
        self._held, self._lock_file = None, None
        held = self._read_lock()
        if held is not None and held.id == info.id:
            self.lock_path.unlink(missing_ok=True)
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def force_unlock(self, lock_id: str, force: bool = False) -> LockInfo:
        held = self._read_lock()
        if held is None:
            raise StateError(f"cannot force-unlock {lock_id}: the state is not locked")
        if held.id != lock_id:
            raise StateError(
                f"cannot force-unlock {lock_id}: the lock is held under id {held.id} "
                f"by {held.holder}@{held.host}"
            )
        refuse_live_holder(held, lock_id, force)
        self.lock_path.unlink(missing_ok=True)
        return held
