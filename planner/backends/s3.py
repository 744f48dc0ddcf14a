"""S3 state backend: a state object written by compare-and-swap, one journal object per entry,
and a lock object created only if absent. Called by planner.workspace.make_backend for
`state: {backend: s3}`.

Objects, all beside `key` in one versioned bucket:

    key                                              the state document (every version kept)
    key.lock                                         LockInfo JSON of the holder
    key.identity                                     lineage and serial last written here
    key.journal/<lineage>/<baseSerial>/<seq>.json    journal entries since that document
    key.probe/<uuid>                                 short-lived, written by the start-up probe
    key.drift/<time_ns>-<random>.json                drift runs (planner.backends.drift_runs)
    key.audit/chain-<N>.json                         audit record N (planner.audit_chain)
    key.audit-head                                   sequence and digest of the last record

Invariants:
- The document is only ever written with If-Match (the ETag last read or written) or, when
  there is none yet, If-None-Match: *. A 412 means another writer got there first: the write
  is refused (StateChangedError), never retried blindly and never an overwrite.
- Each journal entry is its own object, created with If-None-Match: * before `record`
  returns. A journal extends exactly one document (lineage and base serial are in its key);
  one whose base is older than the document was already compacted and is ignored, then
  deleted at the next compaction. Compaction writes the document first, then deletes the
  journal's object versions (a crash in between is harmless).
- The lock is taken with If-None-Match: * and released by deleting exactly the version this
  instance wrote, so a release can never remove somebody else's lock. A lock PUT whose
  response was lost meets its own object on the retry (or on the look after a timeout):
  that lock is ours, never "held by" ourselves.
- Fencing: the lock object's version is the token. Every journal entry and document write
  first reads the lock object and proceeds only if it is still the version this instance
  wrote; otherwise LockLostError, and the document's If-Match refuses a late write anyway.
- Before its first lock or write an instance proves the bucket is versioned and the endpoint
  enforces conditional writes (planner.backends.s3_objects); otherwise it refuses to run.
- A failed read (endpoint down, access denied, 5xx, missing bucket) is an error, never "no
  state": only NoSuchKey for the document itself means absent.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from trainform.planner.audit_chain import AuditHead, AuditVerdict, chained, head_of, verify_chain
from trainform.planner.backends.base import (
    LockInfo,
    LockLostError,
    StateBackend,
    StateLockedError,
    refuse_live_holder,
)
from trainform.planner.backends.drift_runs import DriftRuns, PrefixDriftRuns
from trainform.planner.backends.identity import (
    AcceptRequest,
    Identity,
    StateIdentityError,
    check_identity,
    first_identity,
)
from trainform.planner.backends.s3_objects import (
    Bucket,
    PreconditionFailed,
    S3StateCorruptError,
    S3StateError,
    StateChangedError,
    UnsafeEndpointError,
    Version,
)
from trainform.planner.state import State, canonical_json

__all__ = [
    "S3Backend",
    "S3StateCorruptError",
    "S3StateError",
    "StateChangedError",
    "UnsafeEndpointError",
]


class _Moved(Exception):
    """The journal was compacted away while being read (by a writer holding the lock)."""


@dataclass(frozen=True)
class _JournalObject:
    lineage: str
    base: int
    seq: int
    version: Version


class S3Backend(StateBackend):
    def __init__(
        self,
        bucket: str,
        key: str,
        connection: Any = None,
        *,
        client: Any = None,
        compact_every: int = 1000,
        timeout: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        super().__init__()
        self.bucket = Bucket(bucket, connection, client, timeout=timeout, max_attempts=max_attempts)
        self.key = key.strip("/")
        self.location = f"s3://{bucket}/{self.key}"
        self.lock_key = f"{self.key}.lock"
        self.identity_key = f"{self.key}.identity"
        self.audit_prefix = f"{self.key}.audit/"
        self.audit_head_key = f"{self.key}.audit-head"
        self.accept_state = False
        self.journal_prefix = f"{self.key}.journal/"
        self.compact_every = compact_every
        self._checked = False
        self._etag: str | None = None  # the document as last read or written; None: absent
        self._stored: tuple[str, int] | None = None  # (lineage, serial) of that document
        self._journal: tuple[str, int] | None = None  # (lineage, base serial) being written
        self._next_seq = 0
        self._written: list[Version] = []  # entries of the journal being written
        self._unfolded: list[Version] = []  # a crashed run's entries, replayed by read()
        self._stale: list[Version] = []  # journals already in the document
        self._entries_since_compaction = 0
        self._locks: dict[str, Version] = {}  # lock id -> the lock object version we wrote

    def _check_endpoint(self) -> None:
        """Once per instance, before the first lock or write."""
        if not self._checked:
            self.bucket.check_safe(f"{self.key}.probe/", self.location)
            self._checked = True

    # reading -----------------------------------------------------------------------------

    def read(self) -> State | None:
        # Readers take no lock (`state list`, drift): if the holder compacts while the
        # journal is being read, its entries vanish; reading again gives the newer document.
        for attempt in range(3):
            try:
                return self._read_once()
            except _Moved:
                continue
            except StateIdentityError:
                # a writer may have replaced the document and its identity between our two
                # reads; a second look settles it
                if attempt == 2:
                    raise
                time.sleep(0.05)
        raise S3StateError(
            f"cannot read state {self.location}: its journal kept changing while being read; "
            "run the command again"
        )

    def _read_document(self) -> State | None:
        found = self.bucket.get(self.key, f"cannot read state {self.location}")
        if found is None:
            self._etag, self._stored = None, None
            return None
        raw, version = found
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise S3StateCorruptError(self.location, f"not valid JSON ({exc})") from None
        state = State.from_json(data, self.location)
        self._etag, self._stored = version.etag, (state.lineage, state.serial)
        return state

    def _journals(self) -> dict[tuple[str, int], list[_JournalObject]]:
        """Live journal entries by (lineage, base serial); other versions are stale."""
        journals: dict[tuple[str, int], list[_JournalObject]] = {}
        doing = f"cannot list the journal of state {self.location}"
        for listed in self.bucket.versions(self.journal_prefix, doing):
            item = self._parse_journal_key(listed.version)
            if item is None:
                continue  # not ours: left alone
            if listed.latest and not listed.delete_marker:
                journals.setdefault((item.lineage, item.base), []).append(item)
            else:
                self._stale.append(listed.version)
        return journals

    def _parse_journal_key(self, version: Version) -> _JournalObject | None:
        parts = version.key[len(self.journal_prefix) :].split("/")
        if len(parts) != 3 or not parts[2].endswith(".json"):
            return None
        try:
            base, seq = int(parts[1]), int(parts[2].removesuffix(".json"))
        except ValueError:
            return None
        return _JournalObject(parts[0], base, seq, version)

    def read_identity(self) -> Identity | None:
        found = self.bucket.get(self.identity_key, f"cannot read the identity of {self.location}")
        if found is None:
            return None
        try:
            return Identity.from_json(json.loads(found[0]))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None

    def _write_identity(self, identity: Identity) -> None:
        body = json.dumps(identity.to_json()).encode("utf-8")
        self.bucket.put(self.identity_key, body, f"cannot write the identity of {self.location}")

    def _check_identity(self, document: State | None, journals: dict[Any, Any]) -> None:
        if self.accept_state:
            return
        recorded = self.read_identity()
        witness = self._witness()
        if (recorded is not None and not recorded.lineage) or (
            document is not None
            and recorded is not None
            and document.lineage == recorded.lineage
            and document.serial >= recorded.serial
            and not (witness and witness[0] == document.lineage and document.serial < witness[1])
        ):
            return
        if recorded is None and witness is None and document is None:
            return  # nothing written here yet (a journal alone is judged by _read_once)
        try:
            check_identity(self.location, document, recorded, [], bool(journals), witness)
        except StateIdentityError as refused:
            if AcceptRequest.reason is None:
                raise self._with_versions(refused) from None
            self.accept_state = True
            if self._locks:
                self.accept(AcceptRequest.reason)

    def _witness(self) -> tuple[str, int] | None:
        head = self._audit_head()
        return head.witness() if head else None

    def _with_versions(self, refused: StateIdentityError) -> StateIdentityError:
        """The refusal, naming the older versions of the document the bucket keeps."""
        doing = f"cannot list the versions of state {self.location}"
        older = [
            listed.version
            for listed in self.bucket.versions(self.key, doing)
            if listed.version.key == self.key and not listed.delete_marker and not listed.latest
        ]
        if not older:
            return refused
        described = []
        for version in older[:3]:
            try:
                data = json.loads(self.bucket.get_version(version, doing))
                described.append(
                    f"{version.version_id} (lineage {data.get('lineage')} serial "
                    f"{data.get('serial')})"
                )
            except (UnicodeDecodeError, json.JSONDecodeError):
                described.append(f"{version.version_id} (not readable)")
        return StateIdentityError(
            self.location,
            refused.found,
            refused.expected,
            f"The bucket keeps {len(older)} older version{'s' if len(older) > 1 else ''} of "
            f"the state, newest first: {', '.join(described)}. Copy the right one back over "
            f"{self.key} (for example `aws s3api copy-object --copy-source "
            f"{self.bucket.name}/{self.key}?versionId=ID --bucket {self.bucket.name} --key "
            f"{self.key}`), then run `trainform state accept --reason WHY`",
        )

    def accept(self, reason: str) -> Identity:
        document = self._read_document()
        recorded = self.read_identity()
        base = recorded or (first_identity(document) if document else Identity("", 0))
        identity = base.accepted(document, reason)
        self._write_identity(identity)
        return identity

    def _read_once(self) -> State | None:
        self._journal, self._written, self._unfolded, self._stale = None, [], [], []
        self._entries_since_compaction = 0
        state = self._read_document()
        journals = self._journals()
        self._check_identity(state, journals)
        if state is None:
            current = [identity for identity in journals if identity[1] == 0]
            if len(current) > 1 or len(journals) > len(current):
                raise S3StateCorruptError(
                    self.location, "journal objects exist but the state object is missing"
                )
            identity = current[0] if current else None
        else:
            identity = (state.lineage, state.serial)
        for other, items in journals.items():
            if other != identity:
                self._stale.extend(item.version for item in items)
        entries = sorted(journals.get(identity, []), key=lambda item: item.seq) if identity else []
        if not entries:
            return state
        if state is None:
            state = State(lineage=entries[0].lineage, serial=0)
        for expected, item in enumerate(entries):
            if item.seq != expected:
                self._check_document_unchanged(f"entry {expected} is missing")
            state.apply_entry(self._read_entry(item))
        self._unfolded = [item.version for item in entries]
        return state

    def _check_document_unchanged(self, problem: str) -> NoReturn:
        """A journal hole: raise _Moved if the document moved on meanwhile, else corrupt."""
        found = self.bucket.get(self.key, f"cannot read state {self.location}")
        if (found[1].etag if found else None) != self._etag:
            raise _Moved
        raise S3StateCorruptError(self.location, f"{problem} from the journal")

    def _read_entry(self, item: _JournalObject) -> dict[str, Any]:
        key = item.version.key
        found = self.bucket.get(key, f"cannot read journal entry {key}")
        if found is None:
            self._check_document_unchanged(f"{key} vanished")
        try:
            entry = json.loads(found[0])
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise S3StateCorruptError(
                self.location, f"journal entry {key} is not valid JSON ({exc})"
            ) from None
        if not isinstance(entry, dict):
            raise S3StateCorruptError(self.location, f"journal entry {key} is not an object")
        return entry

    # writing -----------------------------------------------------------------------------

    def check_fence(self) -> None:
        """Raise LockLostError when a lock this instance holds is no longer in place."""
        if not self._locks:
            return
        lock_id, ours = next(iter(self._locks.items()))
        held = self._read_lock()
        if held is None or held[1].version_id != ours.version_id:
            mine = LockInfo(lock_id, "this run", "", 0, "", "")
            raise LockLostError(self.location, mine, held[0] if held else None)

    def record(self, state: State, entry: dict[str, Any]) -> None:
        self._check_endpoint()
        try:
            self.check_fence()
        except S3StateError as exc:
            raise self._while_locked(exc) from None
        if self._journal is None:
            if self._unfolded:
                self.compact(state)  # fold a crashed run's entries in before starting anew
            self._journal, self._next_seq = (state.lineage, state.serial), 0
        lineage, base = self._journal
        key = f"{self.journal_prefix}{lineage}/{base}/{self._next_seq:08d}.json"
        doing = f"cannot record a journal entry of state {self.location}"
        body = canonical_json(entry).encode("utf-8")
        try:
            written = self._put_checked(key, body, doing, {"IfNoneMatch": "*"}, "a journal entry")
        except S3StateError as exc:
            raise self._while_locked(exc) from None
        self._written.append(written)
        self._next_seq += 1
        state.apply_entry(entry)
        self._entries_since_compaction += 1
        # Compacting after a number of entries that grows with the state keeps the total
        # rewrite cost linear in the number of changes.
        if self._entries_since_compaction >= max(self.compact_every, len(state.resources)):
            self.compact(state)

    def compact(self, state: State) -> None:
        unchanged = self._stored == (state.lineage, state.serial)
        if unchanged and self._journal is None and not self._unfolded and not self._stale:
            return  # the object already holds exactly this state
        self._check_endpoint()
        if not unchanged:
            self._write_document(state)
        garbage = self._written + self._unfolded + self._stale
        self._journal, self._written, self._unfolded, self._stale = None, [], [], []
        self._entries_since_compaction = 0
        if garbage:
            # The document holds all of it now, so a failed delete is no error: what is
            # left is ignored on read (its base serial is older) and tried again next time.
            doing = f"cannot remove compacted journal entries of state {self.location}"
            try:
                self._stale = self.bucket.delete_versions(garbage, doing)
            except S3StateError:
                self._stale = garbage

    def _write_document(self, state: State) -> None:
        try:
            self.check_fence()
        except S3StateError as exc:
            raise self._while_locked(exc) from None
        body = json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8") + b"\n"
        condition = {"IfMatch": self._etag} if self._etag else {"IfNoneMatch": "*"}
        try:
            written = self._put_checked(
                self.key, body, f"cannot write state {self.location}", condition, "the document"
            )
        except S3StateError as exc:
            raise self._while_locked(exc) from None
        self._etag = written.etag
        self._stored = (state.lineage, state.serial)
        recorded = self.read_identity()
        self._write_identity(recorded.advanced(state) if recorded else first_identity(state))

    def _put_checked(
        self, key: str, body: bytes, doing: str, condition: dict[str, str], what: str
    ) -> Version:
        """A conditional write; a 412 whose object now holds exactly `body` succeeded.

        When the response to a conditional write is lost, the client retries and the
        retry meets its own earlier write: that is a success, not another writer."""
        try:
            return self.bucket.put(key, body, doing, **condition)
        except PreconditionFailed:
            found = self.bucket.get(key, doing)
            if found is not None and found[0] == body:
                return found[1]
            raise StateChangedError(self.location, what) from None

    def _while_locked(self, error: S3StateError) -> S3StateError:
        """`error`, with the lock this run holds and what to do next, when it holds one."""
        if not self._locks or isinstance(error, StateChangedError):
            return error
        lock_id = next(iter(self._locks))
        return S3StateError(
            f"{error}. The state lock {lock_id} is held by this run: every change recorded so "
            "far is kept in the journal. This run releases the lock on exit if the endpoint "
            f"answers; if it could not, run `{self.unlock_command(lock_id)}` and then "
            "`trainform plan` to see what is left"
        )

    # audit -------------------------------------------------------------------------------

    def append_audit(self, record: dict[str, Any]) -> dict[str, Any]:
        """Record N is the object `KEY.audit/chain-<N>.json`, created only if absent; the
        head (`KEY.audit-head`) follows it. A 412 whose object holds exactly our record is
        our own write whose response was lost; another record there means another writer
        took N first, so we chain after it."""
        self._check_endpoint()
        doing = f"cannot write an audit record of state {self.location}"
        head = self._audit_head() or head_of([r for _, r in self._audit_objects() if r])
        for _ in range(10):
            linked, after = chained(record, head)
            body = canonical_json(linked).encode("utf-8")
            key = f"{self.audit_prefix}chain-{linked['sequence']:012d}.json"
            try:
                self.bucket.put(key, body, doing, IfNoneMatch="*")
            except PreconditionFailed:
                found = self.bucket.get(key, doing)
                if found is None or found[0] != body:
                    head = head_of([r for _, r in self._audit_objects() if r])
                    continue
            self.bucket.put(self.audit_head_key, json.dumps(after.to_json()).encode(), doing)
            return linked
        raise S3StateError(f"{doing}: other writers keep taking the next record")

    def _audit_head(self) -> AuditHead | None:
        doing = f"cannot read the audit head of {self.location}"
        found = self.bucket.get(self.audit_head_key, doing)
        if found is None:
            return None
        try:
            return AuditHead.from_json(json.loads(found[0]))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None

    def drift_runs(self) -> DriftRuns:
        return PrefixDriftRuns(
            self.bucket, f"{self.key}.drift/", self.location, self._check_endpoint
        )

    def _audit_objects(
        self, problems: list[str] | None = None
    ) -> list[tuple[str, dict[str, Any] | None]]:
        """Every live audit record in key order; with `problems`, also what the version
        history says was edited or deleted (S3 keeps every version)."""
        doing = f"cannot read the audit records of state {self.location}"
        versions: dict[str, list[Any]] = {}
        for listed in self.bucket.versions(self.audit_prefix, doing):
            versions.setdefault(listed.version.key, []).append(listed)
        records: list[tuple[str, dict[str, Any] | None]] = []
        for key in sorted(versions):
            listed = versions[key]
            live = [item for item in listed if item.latest and not item.delete_marker]
            if problems is not None and key.rsplit("/", 1)[-1].startswith("chain-"):
                if not live:
                    problems.append(f"{key}: deleted (only older versions are left)")
                elif len(listed) > 1:
                    problems.append(f"{key}: rewritten ({len(listed)} versions)")
            if not live:
                continue
            found = self.bucket.get(key, doing)
            try:
                record = json.loads(found[0]) if found else None
            except (UnicodeDecodeError, json.JSONDecodeError):
                record = None
            records.append((key, record if isinstance(record, dict) else None))
        return records

    def read_audit(self) -> list[dict[str, Any]]:
        return [record for _, record in self._audit_objects() if record is not None]

    def verify_audit(self) -> AuditVerdict:
        history: list[str] = []
        verdict = verify_chain(self._audit_objects(history), self._audit_head())
        verdict.problems[:0] = history
        return verdict

    # locking -----------------------------------------------------------------------------

    def _read_lock(self) -> tuple[LockInfo, Version] | None:
        found = self.bucket.get(self.lock_key, f"cannot read the lock of state {self.location}")
        if found is None:
            return None
        raw, version = found
        try:
            return LockInfo.from_json(json.loads(raw)), version
        except (json.JSONDecodeError, UnicodeDecodeError):
            return LockInfo("unknown", "unknown", "unknown", 0, "unknown", "unknown"), version

    def _put_lock(self, body: bytes) -> Version | None:
        """Write the lock object if absent; its version, or None when another holds it.

        A lost response (the client retried and met its own write, or gave up) leaves
        our lock in place: the object then holds exactly `body`, and it is ours."""
        doing = f"cannot lock state {self.location}"
        try:
            return self.bucket.put(self.lock_key, body, doing, IfNoneMatch="*")
        except PreconditionFailed:
            found = self.bucket.get(self.lock_key, doing)
        except S3StateError:
            found = self.bucket.get(self.lock_key, doing)
            if found is None or found[0] != body:
                raise
        if found is not None and found[0] == body:
            return found[1]
        return None

    def take_lock(self, operation: str) -> LockInfo:
        self._check_endpoint()
        info = LockInfo.create(operation)
        body = json.dumps(info.to_json()).encode("utf-8")
        for _ in range(5):
            written = self._put_lock(body)
            if written is None:
                held = self._read_lock()
                if held is None:
                    continue  # released between our write and our read: try again
                raise StateLockedError(held[0], self.unlock_command(held[0].id))
            self._locks[info.id] = written
            return info
        raise S3StateError(
            f"cannot lock state {self.location}: the lock object keeps being taken and released"
        )

    def release_lock(self, info: LockInfo) -> None:
        version = self._locks.pop(info.id, None)
        if version is None:
            held = self._read_lock()
            if held is None or held[0].id != info.id:
                return  # not ours (any more): leave it
            version = held[1]
        try:
            self._remove_lock(version, f"cannot unlock state {self.location}")
        except S3StateError as exc:
            raise S3StateError(
                f"{exc}. The state lock {info.id} is still held: once the endpoint answers, "
                f"run `{self.unlock_command(info.id)}`"
            ) from None

    def _remove_lock(self, version: Version, doing: str) -> bool:
        """Delete exactly this lock version; False if the lock object is another one now.

        Deleting by version id removes our lock and nothing else: if it was force-unlocked
        and taken by someone since, that version is already gone.
        """
        try:
            self.bucket.delete(version, doing)
        except PreconditionFailed:
            return False
        return True

    def force_unlock(self, lock_id: str, force: bool = False) -> LockInfo:
        self._check_endpoint()
        held = self._read_lock()
        if held is None:
            raise S3StateError(f"cannot force-unlock {lock_id}: the state is not locked")
        info, version = held
        if info.id != lock_id:
            raise S3StateError(
                f"cannot force-unlock {lock_id}: the lock is held under id {info.id} "
                f"by {info.holder}@{info.host}"
            )
        refuse_live_holder(info, lock_id, force)
        if not self._remove_lock(version, f"cannot force-unlock state {self.location}"):
            raise S3StateError(f"cannot force-unlock {lock_id}: the lock changed meanwhile")
        return info
