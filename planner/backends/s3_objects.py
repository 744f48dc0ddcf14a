"""The bucket under the S3 state backend: object calls with their failures as state errors, and
the start-up check that the bucket keeps versions and the endpoint enforces conditional writes.
Used by planner.backends.s3 only.

Every failed call becomes an S3StateError in the endpoint's own words (never with
credentials), except the two answers callers act on: `PreconditionFailed` (412: a
conditional write or delete lost) and `Absent` (NoSuchKey for exactly the object asked
about; a missing bucket is an error, not an absent object).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trainform.planner.state import StateError
from trainform.providers.errors import ProviderError
from trainform.providers.objectstore.client import error_code, is_precondition_failed, make_client
from trainform.providers.objectstore.client import provider_error as s3_error

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


class PreconditionFailed(Exception):
    """412: a conditional write or delete lost."""


class Absent(Exception):
    """NoSuchKey for exactly the object asked about."""


@dataclass(frozen=True)
class Version:
    """One version of one object: what a write produced and what a delete removes."""

    key: str
    version_id: str | None
    etag: str = ""


@dataclass(frozen=True)
class Listed:
    version: Version
    latest: bool  # the current version of its key (not under a delete marker)
    delete_marker: bool


class Bucket:
    def __init__(
        self,
        name: str,
        connection: Any = None,
        client: Any = None,
        *,
        timeout: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        self.name = name
        self.connection = connection
        self._client = client
        self.timeout = timeout
        self.max_attempts = max_attempts

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = make_client(
                    self.connection,
                    max_attempts=self.max_attempts,
                    timeout=self.timeout,
                    read_timeout=self.timeout,
                )
            except ProviderError as exc:
                raise S3StateError(f"cannot open S3 bucket {self.name}: {exc}") from None
        return self._client

    @property
    def endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    def call(self, doing: str, operation: str, **arguments: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, operation)(Bucket=self.name, **arguments)
        except ClientError as exc:
            if is_precondition_failed(exc):
                raise PreconditionFailed from None
            if operation == "get_object" and error_code(exc) in ABSENT_CODES:
                raise Absent from None
            raise S3StateError(f"{s3_error(exc, doing)} (endpoint {self.endpoint})") from None
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, doing))) from None

    def get(self, key: str, doing: str) -> tuple[bytes, Version] | None:
        """The body and version of `key`, or None when it does not exist."""
        from botocore.exceptions import BotoCoreError

        try:
            response = self.call(doing, "get_object", Key=key)
        except Absent:
            return None
        try:
            body = bytes(response["Body"].read())
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, doing))) from None
        return body, Version(key, response.get("VersionId"), str(response.get("ETag", "")))

    def get_version(self, version: Version, doing: str) -> bytes:
        """The body of one exact (older) version of an object."""
        from botocore.exceptions import BotoCoreError

        response = self.call(doing, "get_object", Key=version.key, VersionId=version.version_id)
        try:
            return bytes(response["Body"].read())
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, doing))) from None

    def put(self, key: str, body: bytes, doing: str, **condition: str) -> Version:
        """Write `key` under `condition` (IfMatch / IfNoneMatch); PreconditionFailed on 412."""
        response = self.call(
            doing, "put_object", Key=key, Body=body, ContentType="application/json", **condition
        )
        return Version(key, response.get("VersionId"), str(response.get("ETag", "")))

    def delete(self, version: Version, doing: str) -> None:
        """Delete exactly this version (or, without a version id, only if its ETag matches)."""
        if version.version_id:
            self.call(doing, "delete_object", Key=version.key, VersionId=version.version_id)
        else:
            self.call(doing, "delete_object", Key=version.key, IfMatch=version.etag)

    def delete_versions(self, versions: list[Version], doing: str) -> list[Version]:
        """Delete these object versions for good; returns those that could not be deleted."""
        failed: list[Version] = []
        for start in range(0, len(versions), DELETE_BATCH):
            batch = versions[start : start + DELETE_BATCH]
            objects = [
                {"Key": v.key, **({"VersionId": v.version_id} if v.version_id else {})}
                for v in batch
            ]
            delete = {"Objects": objects, "Quiet": True}
            response = self.call(doing, "delete_objects", Delete=delete)
            errors = {(e.get("Key"), e.get("VersionId")) for e in response.get("Errors", [])}
            failed.extend(v for v in batch if (v.key, v.version_id) in errors)
        return failed

    def versions(self, prefix: str, doing: str) -> Iterator[Listed]:
        """Every object version and delete marker under `prefix`."""
        marker: dict[str, str] = {}
        while True:
            page = self.call(doing, "list_object_versions", Prefix=prefix, **marker)
            for item in page.get("Versions", []):
                version = Version(item["Key"], item.get("VersionId"), str(item.get("ETag", "")))
                yield Listed(version, bool(item.get("IsLatest", True)), delete_marker=False)
            for item in page.get("DeleteMarkers", []):
                version = Version(item["Key"], item.get("VersionId"))
                yield Listed(version, bool(item.get("IsLatest", True)), delete_marker=True)
            if not page.get("IsTruncated"):
                return
            marker = {
                "KeyMarker": page["NextKeyMarker"],
                "VersionIdMarker": page.get("NextVersionIdMarker", ""),
            }

    # the start-up check ------------------------------------------------------------------

    def check_safe(self, probe_prefix: str, location: str) -> None:
        """Refuse a bucket without versioning and an endpoint that accepts conditional writes
        that must fail (a lock there would not exclude anybody)."""
        doing = f"cannot use state bucket {self.name}"
        status = self.call(doing, "get_bucket_versioning").get("Status")
        if status != "Enabled":
            raise S3StateError(
                f"{doing}: versioning is {(status or 'not enabled').lower()}, so compactions "
                "would overwrite state history. Enable it (aws s3api put-bucket-versioning "
                f"--bucket {self.name} --versioning-configuration Status=Enabled) or use "
                "another bucket"
            )
        probe = f"{probe_prefix}{uuid.uuid4()}"
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
        self.delete_versions(list(dict.fromkeys(written)), f"cannot remove probe object {probe}")
        if unsafe:
            raise UnsafeEndpointError(
                f"cannot use state {location}: the S3 endpoint at {self.endpoint} does not "
                f"enforce conditional writes ({', '.join(unsafe)}); trainform cannot lock state "
                "safely there. Use an endpoint that supports conditional writes (AWS S3, or a "
                "recent MinIO, Ceph RGW or SeaweedFS), or the local state backend"
            )

    def _probe_write(self, key: str, condition: dict[str, str]) -> Version | None:
        """The version written, or None when the endpoint refused the write (412)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.put_object(
                Bucket=self.name, Key=key, Body=b"trainform conditional-write probe", **condition
            )
        except ClientError as exc:
            if is_precondition_failed(exc):
                return None
            if error_code(exc) in UNSUPPORTED_CODES:
                return Version(key, None)  # the header is not implemented: not enforced
            raise S3StateError(f"{s3_error(exc, 'cannot probe the endpoint')}") from None
        except BotoCoreError as exc:
            raise S3StateError(str(s3_error(exc, "cannot probe the endpoint"))) from None
        return Version(key, response.get("VersionId"))
