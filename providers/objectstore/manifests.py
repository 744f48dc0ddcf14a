"""Dataset manifests on S3: every object under a version's prefix with its size and ETag.

A manifest is the sorted list of (key relative to the version prefix, size, ETag), plus
each object's version id where the bucket is versioned; its digest (sha256 of the canonical
JSON of path, size and ETag) pins the version's content. Version ids are kept so readers can
fetch exactly the recorded bytes, but they are not part of the digest: rewriting an object
with identical bytes is not a change of the data. Any object added, removed or changed under
a version changes the digest: "data mutated".

Listing is one paginated ListObjectsV2 (or ListObjectVersions on a versioned bucket) per
version: ceil(N/1000) requests for N objects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainform.providers.objectstore.client import provider_error

TRAINFORM_FOLDER = ".trainform"


@dataclass(frozen=True, order=True)
class ObjectEntry:
    path: str
    size: int
    etag: str
    version_id: str = ""
    last_modified: str = field(default="", compare=False)
    """LastModified as listed (UTC, ISO 8601): evidence of when, never part of the digest."""


@dataclass(frozen=True)
class S3Manifest:
    objects: tuple[ObjectEntry, ...]
    requests: int = field(default=0, compare=False)

    @property
    def digest(self) -> str:
        encoded = json.dumps(
            [{"path": o.path, "size": o.size, "etag": o.etag} for o in self.objects],
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
        return "sha256:" + hashlib.sha256(encoded).hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.objects)

    def summary(self) -> dict[str, Any]:
        return {
            "manifestDigest": self.digest,
            "files": len(self.objects),
            "bytes": self.total_bytes,
        }

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"path": o.path, "size": o.size, "etag": o.etag}
            | ({"versionId": o.version_id} if o.version_id else {})
            for o in self.objects
        ]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> S3Manifest:
        return cls(
            tuple(
                sorted(
                    ObjectEntry(e["path"], int(e["size"]), e["etag"], e.get("versionId", ""))
                    for e in data
                )
            )
        )

    def differences(self, recorded: S3Manifest) -> list[dict[str, Any]]:
        """Each object added, removed or changed since `recorded`, with its evidence: ETags
        and sizes, and where the listing has them the version ids (the recorded one is the
        previous version, still readable on a versioned bucket) and LastModified."""
        now = {o.path: o for o in self.objects}
        then = {o.path: o for o in recorded.objects}
        changes: list[dict[str, Any]] = []
        for path in sorted(set(now) | set(then)):
            new, old = now.get(path), then.get(path)
            if new is not None and old is not None and (new.size, new.etag) == (old.size, old.etag):
                continue
            change = "added" if old is None else "removed" if new is None else "changed"
            changes.append(
                {
                    "change": change,
                    "key": path,
                    "oldEtag": old.etag if old else None,
                    "newEtag": new.etag if new else None,
                    "oldSize": old.size if old else None,
                    "newSize": new.size if new else None,
                }
            )
            if (old and old.version_id) or (new and new.version_id):
                changes[-1]["oldVersionId"] = old.version_id if old else None
                changes[-1]["newVersionId"] = new.version_id if new else None
            if new is not None and new.last_modified:
                changes[-1]["lastModified"] = new.last_modified
        return changes


def describe(changes: list[dict[str, Any]], limit: int = 5) -> str:
    shown = [f"{c['change']} {c['key']}" for c in changes[:limit]]
    return ", ".join(shown) + ("..." if len(changes) > limit else "")


def _pages(client: Any, versioned: bool, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    operation = "list_object_versions" if versioned else "list_objects_v2"
    paginator = client.get_paginator(operation)
    yield from paginator.paginate(Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 1000})


def list_manifest(client: Any, bucket: str, prefix: str, versioned: bool) -> S3Manifest:
    """The manifest of every object under `prefix/` (trainform's own folder excluded)."""
    from botocore.exceptions import BotoCoreError, ClientError

    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    entries: list[ObjectEntry] = []
    requests = 0
    try:
        for page in _pages(client, versioned, bucket, base):
            requests += 1
            items = page.get("Versions", []) if versioned else page.get("Contents", [])
            for item in items:
                if versioned and not item.get("IsLatest", False):
                    continue
                path = item["Key"][len(base) :]
                if not path or path.startswith(TRAINFORM_FOLDER + "/") or path.endswith("/"):
                    continue
                entries.append(
                    ObjectEntry(
                        path,
                        int(item["Size"]),
                        str(item["ETag"]).strip('"'),
                        _version_id(item) if versioned else "",
                        _timestamp(item.get("LastModified")),
                    )
                )
    except (BotoCoreError, ClientError) as exc:
        raise provider_error(exc, f"listing s3://{bucket}/{base}") from None
    return S3Manifest(tuple(sorted(entries)), requests)


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ""


def _version_id(item: dict[str, Any]) -> str:
    version = str(item.get("VersionId") or "")
    return "" if version == "null" else version
