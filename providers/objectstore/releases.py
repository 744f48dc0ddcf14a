"""Publishing a ModelRelease under an object-store prefix (called by the objectstore provider).

Layout, under `<spec.objectStore.prefix>/<version>/`: every released file at its relative
path (object metadata `sha256` holds its digest), the files manifest `trainform-files.json`
(providers/releases.py), and the release record `.trainform/release.json`: manager,
address, version, the artifact digest (the same as the registry's), the provenance
annotations and the files. The record is the ownership mark: a prefix whose record names
another manager or address is never written or removed.

Publish uploads what is missing or different (a file is re-hashed while read: one changed
since the plan is refused), writes the record last, then verifies: the record reads back
byte for byte and every file has its size and digest. Publishing what is there only reads.
Observe: no record (or not ours), or a file gone, is a missing release; a record with
another digest is shown as `release.digest` changed. Unpublish removes the record; with
`deleteArtifacts`, the files too.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from trainform.providers.base import DesiredResource, Observation, ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.objectstore.client import (
    is_not_found,
    join_key,
    provider_error,
    split_s3_uri,
)
from trainform.providers.releases import (
    CHUNK,
    FILES_MANIFEST,
    check_adoptable,
    check_file,
    compact,
    files_manifest,
    open_model_file,
    release_annotations,
    section_from_annotations,
)

RECORD = ".trainform/release.json"


def _errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def release_place(document: dict[str, Any]) -> tuple[str, str]:
    """(bucket, key prefix of this version) of a release document."""
    spec = document["spec"]
    bucket, prefix = split_s3_uri(spec["objectStore"]["prefix"])
    return bucket, join_key(prefix, spec["version"])


class ReleaseStore:
    """The object-store side of ModelRelease for one provider instance."""

    def __init__(self, client: Any, manager: str, object_store: dict[str, Any] | None) -> None:
        self.client = client
        self.manager = manager
        self.object_store = object_store

    def record_body(self, address: str, document: dict[str, Any]) -> bytes:
        section = document["release"]
        version = document["spec"]["version"]
        return compact(
            {
                "formatVersion": 1,
                "manager": self.manager,
                "address": address,
                "version": version,
                "digest": section["digest"],
                "annotations": release_annotations(address, version, section),
                "files": section["files"],
            }
        ).encode()

    def _read_record(self, bucket: str, base: str) -> dict[str, Any] | None:
        try:
            body = self.client.get_object(Bucket=bucket, Key=join_key(base, RECORD))["Body"]
            data = body.read()
        except _errors() as exc:
            if is_not_found(exc):
                return None
            raise provider_error(exc, f"cannot read s3://{bucket}/{base}/{RECORD}") from None
        try:
            record: dict[str, Any] = json.loads(data)
        except ValueError:
            return {"raw": data}
        return record | {"raw": data}

    def _ours(self, record: dict[str, Any] | None, address: str) -> bool:
        return (
            record is not None
            and record.get("manager") == self.manager
            and record.get("address") == address
        )

    def _present(self, bucket: str, base: str) -> dict[str, int]:
        """key -> size of the objects under the version's prefix."""
        found: dict[str, int] = {}
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=base + "/"
            )
            for page in pages:
                for entry in page.get("Contents", []):
                    found[entry["Key"]] = int(entry["Size"])
        except _errors() as exc:
            raise provider_error(exc, f"cannot list s3://{bucket}/{base}/") from None
        return found

    def observe(self, request: ObserveRequest) -> Observation:
        document = request.document
        if not document.get("release"):
            return Observation(exists=False)
        bucket, base = release_place(document)
        record = self._read_record(bucket, base)
        if not self._ours(record, request.address):
            return Observation(exists=False)
        assert record is not None
        present = self._present(bucket, base)
        for file in document["release"]["files"]:
            if present.get(join_key(base, file["path"])) != file["size"]:
                return Observation(exists=False)
        live = copy.deepcopy(document)
        live["release"]["digest"] = record.get("digest")
        return Observation(exists=True, live=live, outputs=dict(request.outputs))

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        """Read the release published under the spec's prefix (trainform import). Its record
        is its ownership: one naming another manager or address is refused."""
        document = request.document
        bucket, base = release_place(document)
        place = f"s3://{bucket}/{base}"
        if identifier.startswith("s3://") and identifier.rstrip("/") != place:
            raise PermanentProviderError(
                f"cannot adopt {identifier} as {request.address}: its spec publishes {place}/"
            )
        record = self._read_record(bucket, base)
        if record is None:
            return Observation(exists=False)
        if not self._ours(record, request.address):
            raise PermanentProviderError(
                f"cannot adopt s3://{bucket}/{base}/ as {request.address}: its record names "
                f"{record.get('manager')} as {record.get('address')}"
            )
        version = document["spec"]["version"]
        annotations = record.get("annotations") or {}
        check_adoptable(request.address, version, annotations, f"s3://{bucket}/{base}/")
        section = section_from_annotations(
            annotations, record.get("files") or [], str(record.get("digest"))
        )
        outputs = {
            "uri": f"s3://{bucket}/{base}/",
            "record": f"s3://{bucket}/{join_key(base, RECORD)}",
            "digest": section["digest"],
            "files": len(section["files"]),
            "deleteArtifacts": bool(document["spec"].get("deleteArtifacts")),
        }
        return Observation(exists=True, live={**document, "release": section}, outputs=outputs)

    def publish(self, resource: DesiredResource) -> dict[str, Any]:
        document = resource.document
        section = document["release"]
        bucket, base = release_place(document)
        record = self._read_record(bucket, base)
        if record is not None and not self._ours(record, resource.address):
            owner = f"{record.get('manager')} as {record.get('address')}"
            raise PermanentProviderError(
                f"s3://{bucket}/{base}/ holds a release of {owner}; a release never takes a "
                "prefix it does not own (choose another version or prefix)"
            )
        body = self.record_body(resource.address, document)
        present = self._present(bucket, base)
        try:
            for file in section["files"]:
                key = join_key(base, file["path"])
                if (
                    present.get(key) == file["size"]
                    and self._digest_of(bucket, key) == file["digest"]
                ):
                    continue
                self._upload(bucket, key, section, file)
            listing = files_manifest(section)
            self.client.put_object(Bucket=bucket, Key=join_key(base, FILES_MANIFEST), Body=listing)
            if record is None or record.get("raw") != body:
                self.client.put_object(Bucket=bucket, Key=join_key(base, RECORD), Body=body)
        except _errors() as exc:
            raise provider_error(exc, f"cannot publish s3://{bucket}/{base}/") from None
        self._verify(bucket, base, section, body)
        return {
            "uri": f"s3://{bucket}/{base}/",
            "record": f"s3://{bucket}/{join_key(base, RECORD)}",
            "digest": section["digest"],
            "files": len(section["files"]),
            "deleteArtifacts": bool(document["spec"].get("deleteArtifacts")),
        }

    def _digest_of(self, bucket: str, key: str) -> str:
        head = self.client.head_object(Bucket=bucket, Key=key)
        return str((head.get("Metadata") or {}).get("sha256") or "")

    def _upload(self, bucket: str, key: str, section: dict[str, Any], file: dict[str, Any]) -> None:
        location = section["source"].get("location") or ""
        if not location:
            raise PermanentProviderError(
                f"s3://{bucket}/{key} is gone and the release records no source to copy it from"
            )
        hasher = hashlib.sha256()
        parts = []
        with open_model_file(location, file["path"], self.object_store) as handle:
            while chunk := handle.read(CHUNK):
                hasher.update(chunk)
                parts.append(chunk)
        data = b"".join(parts)
        check_file("sha256:" + hasher.hexdigest(), file, len(data))
        self.client.put_object(
            Bucket=bucket, Key=key, Body=data, Metadata={"sha256": file["digest"]}
        )

    def _verify(self, bucket: str, base: str, section: dict[str, Any], body: bytes) -> None:
        record = self._read_record(bucket, base)
        if record is None or record.get("raw") != body:
            raise PermanentProviderError(
                f"s3://{bucket}/{join_key(base, RECORD)} reads back other bytes than were written"
            )
        for file in section["files"]:
            key = join_key(base, file["path"])
            try:
                head = self.client.head_object(Bucket=bucket, Key=key)
            except _errors() as exc:
                raise provider_error(exc, f"cannot verify s3://{bucket}/{key}") from None
            digest = (head.get("Metadata") or {}).get("sha256")
            if int(head["ContentLength"]) != file["size"] or digest != file["digest"]:
                raise PermanentProviderError(
                    f"s3://{bucket}/{key} reads back as {head['ContentLength']} bytes "
                    f"({digest}), not {file['size']} bytes ({file['digest']})"
                )

    def unpublish(self, address: str, outputs: dict[str, Any]) -> None:
        uri = str(outputs.get("uri") or "")
        if not uri:
            return
        bucket, base = split_s3_uri(uri)
        record = self._read_record(bucket, base)
        if not self._ours(record, address):
            return
        assert record is not None
        keys = [join_key(base, RECORD)]
        if outputs.get("deleteArtifacts"):
            keys += [join_key(base, f["path"]) for f in record.get("files", [])]
            keys.append(join_key(base, FILES_MANIFEST))
        try:
            for key in keys:
                self.client.delete_object(Bucket=bucket, Key=key)
        except _errors() as exc:
            raise provider_error(exc, f"cannot unpublish s3://{bucket}/{base}/") from None
