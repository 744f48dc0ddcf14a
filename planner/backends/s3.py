"""S3 state backend: a state object written by compare-and-swap, one journal object per entry,
and a lock object created only if absent. Called by planner.workspace.make_backend for
`state: {backend: s3}`.

Objects, all beside `key` in one versioned bucket:

    key                                              the state document (every version kept)
    key.lock                                         LockInfo JSON of the holder
    key.journal/<lineage>/<baseSerial>/<seq>.json    journal entries since that document
    key.probe/<uuid>                                 short-lived, written by the start-up probe

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
  instance wrote, so a release can never remove somebody else's lock.
- Before its first lock or write an instance proves the bucket is versioned and the endpoint
  enforces conditional writes (`_check_endpoint`); otherwise it refuses to run.
- A failed read (endpoint down, access denied, 5xx, missing bucket) is an error, never "no
  state": only NoSuchKey for the document itself means absent.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from planner.backends.base import LockInfo, StateBackend, StateLockedError
from planner.state import State, StateError, canonical_json
from providers.errors import ProviderError
from providers.objectstore.client import error_code, is_precondition_failed, make_client
from providers.objectstore.client import provider_error as s3_error

ABSENT_CODES = {"NoSuchKey", "404", "NotFound"}
UNSUPPORTED_CODES = {"NotImplemented", "501"}
NEVER_MATCHES = '"trainform-probe-never-matches"'
DELETE_BATCH = 1000  # DeleteObjects takes at most 1000 keys


class S3StateError(StateError):
    """The S3 state backend cannot read, write or lock state."""


class StateChangedError(S3StateError):
    def __init__(self, location: str, what: str) -> None:
        super().__init__(
            f"cannot write {what} of state {location}: the state changed under us (another "
            "writer wrote it since it was read); nothing was overwritten. Make sure every "
            "writer takes the state lock, then run the command again"
        )


class UnsafeEndpointError(S3StateError):
    """The endpoint accepts writes it should refuse, so a lock there would not exclude."""


class S3StateCorruptError(S3StateError):
    def __init__(self, location: str, cause: str) -> None:
        super().__init__(
            f"cannot read state {location}: {cause}. Nothing was changed; restore an earlier "
            "version of the object (the bucket is versioned) or fix it by hand"
        )


class _PreconditionFailed(Exception):
    """412: a conditional write or delete lost."""


class _Absent(Exception):
    """404 for exactly the object asked about."""


class _Moved(Exception):
    """The journal was compacted away while being read (by a writer holding the lock)."""


@dataclass(frozen=True)
class _Version:
    key: str
    version_id: str | None
    etag: str = ""


@dataclass(frozen=True)
class _JournalObject:
    lineage: str
    base: int
    seq: int
    version: _Version


class S3Backend(StateBackend):
    def __init__(
        self,
        bucket: str,
        key: str,
        connection: Any = None,
        *,
        client: Any = None,
        compact_every: int = 1000,
    ) -> None:
        self.bucket = bucket
        self.key = key.strip("/")
        self.location = f"s3://{bucket}/{self.key}"
        self.lock_key = f"{self.key}.lock"
        self.journal_prefix = f"{self.key}.journal/"
        self.compact_every = compact_every
        self._connection = connection
        self._client = client
        self._checked = False
        self._etag: str | None = None  # the document as last read or written; None: absent
        self._stored: tuple[str, int] | None = None  # (lineage, serial) of that document
        self._journal: tuple[str, int] | None = None  # (lineage, base serial) being written
        self._next_seq = 0
        self._written: list[_Version] = []  # entries of the journal being written
        self._unfolded: list[_Version] = []  # a crashed run's entries, replayed by read()
        self._stale: list[_Version] = []  # journals already in the document
        self._entries_since_compaction = 0
        self._locks: dict[str, _Version] = {}  # lock id -> the lock object version we wrote

    # S3 calls --------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = make_client(self._connection)
            except ProviderError as exc:
                raise S3StateError(f"cannot open state {self.location}: {exc}") from None
        return self._client

    @property
    def endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    def _call(self, doing: str, operation: str, **arguments: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, operation)(Bucket=self.bucket, **arguments)
        except ClientError as exc:
            if is_precondition_failed(exc):
                raise _PreconditionFailed from None
            if operation == "get_object" and error_code(exc) in ABSENT_CODES:
                raise _Absent from None
            raise S3StateError(f"{s3_error(exc, doing)} (endpoint {self.endpoint})") from None
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, doing))) from None

    def _get(self, key: str, doing: str) -> tuple[bytes, str, str | None] | None:
        """(body, ETag, version id) of `key`, or None when it does not exist."""
        try:
            response = self._call(doing, "get_object", Key=key)
        except _Absent:
            return None
        body = self._read_body(response, doing)
        return body, str(response.get("ETag", "")), response.get("VersionId")

    def _read_body(self, response: dict[str, Any], doing: str) -> bytes:
        from botocore.exceptions import BotoCoreError

        try:
            return bytes(response["Body"].read())
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, doing))) from None

    def _put(self, key: str, body: bytes, doing: str, **condition: str) -> dict[str, Any]:
        response: dict[str, Any] = self._call(
            doing, "put_object", Key=key, Body=body, ContentType="application/json", **condition
        )
        return response

    def _delete_versions(self, versions: list[_Version], doing: str) -> list[_Version]:
        """Delete these object versions for good; returns those that could not be deleted."""
        failed: list[_Version] = []
        for start in range(0, len(versions), DELETE_BATCH):
            batch = versions[start : start + DELETE_BATCH]
            objects = [
                {"Key": v.key, **({"VersionId": v.version_id} if v.version_id else {})}
                for v in batch
            ]
            response = self._call(
                doing, "delete_objects", Delete={"Objects": objects, "Quiet": True}
            )
            errors = {(e.get("Key"), e.get("VersionId")) for e in response.get("Errors", [])}
            failed.extend(v for v in batch if (v.key, v.version_id) in errors)
        return failed

    # the start-up check ------------------------------------------------------------------

    def _check_endpoint(self) -> None:
        """Once per instance, before the first lock or write: the bucket keeps versions and
        the endpoint refuses conditional writes that must fail (else locks would not lock)."""
        if self._checked:
            return
        doing = f"cannot use state bucket {self.bucket}"
        status = self._call(doing, "get_bucket_versioning").get("Status")
        if status != "Enabled":
            raise S3StateError(
                f"{doing}: versioning is {(status or 'not enabled').lower()}, so compactions "
                "would overwrite state history. Enable it (aws s3api put-bucket-versioning "
                f"--bucket {self.bucket} --versioning-configuration Status=Enabled) or use "
                "another bucket"
            )
        probe = f"{self.key}.probe/{uuid.uuid4()}"
        first = self._probe_write(probe, {"IfNoneMatch": "*"})
        written = [first] if first is not None else []
        unsafe: list[str] = []
        for header, condition in (
            ("If-None-Match", {"IfNoneMatch": "*"}),
            ("If-Match", {"IfMatch": NEVER_MATCHES}),
        ):
            version = self._probe_write(probe, condition)
            if version is not None:
                written.append(version)
                unsafe.append(header)
        self._delete_versions(list(dict.fromkeys(written)), f"cannot remove probe object {probe}")
        if unsafe:
            raise UnsafeEndpointError(
                f"cannot use state {self.location}: the S3 endpoint at {self.endpoint} does not "
                f"enforce conditional writes ({', '.join(unsafe)}); trainform cannot lock state "
                "safely there. Use an endpoint that supports conditional writes (AWS S3, or a "
                "recent MinIO, Ceph RGW or SeaweedFS), or the local state backend"
            )
        self._checked = True

    def _probe_write(self, key: str, condition: dict[str, str]) -> _Version | None:
        """The version written, or None when the endpoint refused the write (412)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.put_object(
                Bucket=self.bucket, Key=key, Body=b"trainform conditional-write probe", **condition
            )
        except ClientError as exc:
            if is_precondition_failed(exc):
                return None
            if error_code(exc) in UNSUPPORTED_CODES:
                return _Version(key, None)  # the header is not implemented: not enforced
            raise S3StateError(f"{s3_error(exc, 'cannot probe the endpoint')}") from None
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, "cannot probe the endpoint"))) from None
        return _Version(key, response.get("VersionId"))

    # reading -----------------------------------------------------------------------------

    def _journal_objects(self) -> Iterator[_JournalObject]:
        """Live journal entry objects (the latest version of each key, not a delete marker)."""
        doing = f"cannot list the journal of state {self.location}"
        marker: dict[str, str] = {}
        while True:
            page = self._call(doing, "list_object_versions", Prefix=self.journal_prefix, **marker)
            for item in page.get("Versions", []):
                parsed = self._parse_journal_key(item["Key"], item.get("VersionId"))
                if parsed is not None and item.get("IsLatest", True):
                    yield parsed
                elif parsed is not None:
                    self._stale.append(parsed.version)  # under a delete marker
            for item in page.get("DeleteMarkers", []):
                if self._parse_journal_key(item["Key"], None) is not None:
                    self._stale.append(_Version(item["Key"], item.get("VersionId")))
            if not page.get("IsTruncated"):
                return
            marker = {
                "KeyMarker": page["NextKeyMarker"],
                "VersionIdMarker": page.get("NextVersionIdMarker", ""),
            }

    def _parse_journal_key(self, key: str, version_id: str | None) -> _JournalObject | None:
        parts = key[len(self.journal_prefix) :].split("/")
        if len(parts) != 3 or not parts[2].endswith(".json"):
            return None  # not ours: left alone
        try:
            base, seq = int(parts[1]), int(parts[2].removesuffix(".json"))
        except ValueError:
            return None
        return _JournalObject(parts[0], base, seq, _Version(key, version_id))

    def _read_document(self) -> State | None:
        found = self._get(self.key, f"cannot read state {self.location}")
        if found is None:
            self._etag, self._stored = None, None
            return None
        raw, etag, _ = found
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise S3StateCorruptError(self.location, f"not valid JSON ({exc})") from None
        state = State.from_json(data, self.location)
        self._etag, self._stored = etag, (state.lineage, state.serial)
        return state

    def read(self) -> State | None:
        # Readers take no lock (`state list`, drift): if the holder compacts while the
        # journal is being read, its entries vanish; reading again gives the newer document.
        for _ in range(3):
            try:
                return self._read_once()
            except _Moved:
                continue
        raise S3StateError(
            f"cannot read state {self.location}: its journal kept changing while being read; "
            "run the command again"
        )

    def _read_once(self) -> State | None:
        self._journal, self._written, self._unfolded, self._stale = None, [], [], []
        self._entries_since_compaction = 0
        state = self._read_document()
        journals: dict[tuple[str, int], list[_JournalObject]] = {}
        for item in self._journal_objects():
            journals.setdefault((item.lineage, item.base), []).append(item)
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
        found = self._get(self.key, f"cannot read state {self.location}")
        if (found[1] if found else None) != self._etag:
            raise _Moved
        raise S3StateCorruptError(self.location, f"{problem} from the journal")

    def _read_entry(self, item: _JournalObject) -> dict[str, Any]:
        doing = f"cannot read journal entry {item.version.key}"
        try:
            response = self._call(doing, "get_object", Key=item.version.key)
        except _Absent:
            self._check_document_unchanged(f"{item.version.key} vanished")
        try:
            entry = json.loads(self._read_body(response, doing))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise S3StateCorruptError(
                self.location, f"journal entry {item.version.key} is not valid JSON ({exc})"
            ) from None
        if not isinstance(entry, dict):
            raise S3StateCorruptError(self.location, f"{item.version.key} is not an object")
        return entry

    # writing -----------------------------------------------------------------------------

    def record(self, state: State, entry: dict[str, Any]) -> None:
        self._check_endpoint()
        if self._journal is None:
            if self._unfolded:
                self.compact(state)  # fold a crashed run's entries in before starting anew
            self._journal, self._next_seq = (state.lineage, state.serial), 0
        lineage, base = self._journal
        key = f"{self.journal_prefix}{lineage}/{base}/{self._next_seq:08d}.json"
        try:
            response = self._put(
                key,
                canonical_json(entry).encode("utf-8"),
                f"cannot record a journal entry of state {self.location}",
                IfNoneMatch="*",
            )
        except _PreconditionFailed:
            raise StateChangedError(self.location, "a journal entry") from None
        self._written.append(_Version(key, response.get("VersionId")))
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
                self._stale = self._delete_versions(garbage, doing)
            except S3StateError:
                self._stale = garbage

    def _write_document(self, state: State) -> None:
        body = json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8") + b"\n"
        condition = {"IfMatch": self._etag} if self._etag else {"IfNoneMatch": "*"}
        try:
            response = self._put(self.key, body, f"cannot write state {self.location}", **condition)
        except _PreconditionFailed:
            raise StateChangedError(self.location, "the document") from None
        self._etag = str(response.get("ETag", ""))
        self._stored = (state.lineage, state.serial)

    # locking -----------------------------------------------------------------------------

    def _read_lock(self) -> tuple[LockInfo, _Version] | None:
        found = self._get(self.lock_key, f"cannot read the lock of state {self.location}")
        if found is None:
            return None
        raw, etag, version_id = found
        version = _Version(self.lock_key, version_id, etag)
        try:
            return LockInfo(**json.loads(raw)), version
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError):
            return LockInfo("unknown", "unknown", "unknown", 0, "unknown", "unknown"), version

    def lock(self, operation: str) -> LockInfo:
        self._check_endpoint()
        info = LockInfo.create(operation)
        body = json.dumps(info.to_json()).encode("utf-8")
        for _ in range(5):
            try:
                response = self._put(
                    self.lock_key, body, f"cannot lock state {self.location}", IfNoneMatch="*"
                )
            except _PreconditionFailed:
                held = self._read_lock()
                if held is None:
                    continue  # released between our write and our read: try again
                raise StateLockedError(held[0]) from None
            self._locks[info.id] = _Version(
                self.lock_key, response.get("VersionId"), str(response.get("ETag", ""))
            )
            return info
        raise S3StateError(
            f"cannot lock state {self.location}: the lock object keeps being taken and released"
        )

    def unlock(self, info: LockInfo) -> None:
        version = self._locks.pop(info.id, None)
        if version is None:
            held = self._read_lock()
            if held is None or held[0].id != info.id:
                return  # not ours (any more): leave it
            version = held[1]
        self._remove_lock(version, f"cannot unlock state {self.location}")

    def _remove_lock(self, version: _Version, doing: str) -> bool:
        """Delete exactly this lock version; False if the lock object is another one now.

        With a version id the delete removes our lock and nothing else: if it was
        force-unlocked and taken by someone since, that version is already gone.
        """
        if version.version_id:
            condition = {"VersionId": version.version_id}
        else:
            condition = {"IfMatch": version.etag}
        try:
            self._call(doing, "delete_object", Key=self.lock_key, **condition)
        except _PreconditionFailed:
            return False
        return True

    def force_unlock(self, lock_id: str) -> LockInfo:
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
        if not self._remove_lock(version, f"cannot force-unlock state {self.location}"):
            raise S3StateError(f"cannot force-unlock {lock_id}: the lock changed meanwhile")
        return info
