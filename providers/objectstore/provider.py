"""The `objectstore` provider: datasets on any S3 endpoint (boto3).

A Dataset at `s3://bucket/prefix` keeps each version under `prefix/<version path>/`. The
provider records, in a marker object `prefix/.trainform/dataset.json` that it owns, the
manager, the address, the applied document and every version's manifest (keys, sizes,
ETags, version ids: providers/objectstore/manifests.py); the state keeps each version's
manifest digest. Observing lists each version (paginated) and compares it with the recorded
manifest and with a pinned `manifestDigest`: an object added, removed or changed is a
`data-mutated` finding whose evidence names the key and the old and new ETag.

Readers (projects) are written as the tag `trainform-readers` on the marker and on every
object of every version (so bucket policies can grant reads by tag); observe reads them
back from the marker, so a tag edited by hand shows as a change of `spec.readers`.

Ownership: a marker written by another manager is never changed; an index object
`.trainform/owned/<manager>/<address>` per bucket lets `list_owned` find what is ours.
Credentials come from boto3's chain (environment, profile), never from specs or state.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from trainform.providers.base import (
    DesiredResource,
    Finding,
    KindSchema,
    Observation,
    ObserveRequest,
    Provider,
    ProviderContext,
    ValidationProblem,
)
from trainform.providers.errors import PermanentProviderError
from trainform.providers.objectstore.client import (
    is_not_found,
    is_precondition_failed,
    join_key,
    make_client,
    provider_error,
    split_s3_uri,
)
from trainform.providers.objectstore.manifests import (
    TRAINFORM_FOLDER,
    ObjectEntry,
    S3Manifest,
    describe,
    list_manifest,
)
from trainform.providers.objectstore.releases import RECORD, ReleaseStore, release_place
from trainform.providers.releases import RELEASE_SCHEMA

MARKER = "dataset.json"
READERS_TAG = "trainform-readers"
MANAGER_TAG = "trainform-manager"
OWNED_FOLDER = f"{TRAINFORM_FOLDER}/owned"
TAGGING_THREADS = 16


def _errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


class ObjectStoreProvider(Provider):
    type = "objectstore"
    import_ids = "for a ModelRelease, its registry reference or objectStore prefix/version"
    schemas: ClassVar[dict[str, KindSchema]] = {
        "Dataset": KindSchema(
            "Dataset",
            forces_replacement=("spec.source", "spec.format"),
            computed=("versions",),
            data_bearing=True,
        ),
        "ModelRelease": RELEASE_SCHEMA,
    }

    def __init__(self, client: Any = None) -> None:
        super().__init__()
        self._client = client
        self.connection: Any = None
        self.manager = "trainform"
        self._versioned: dict[str, bool] = {}
        self.requests = 0
        self.object_store: dict[str, Any] | None = None

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        super().configure(name, connection, context)
        self.connection = connection
        self.manager = context.manager
        self.object_store = context.object_store

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(self.connection)
        return self._client

    def close(self) -> None:
        self._client = None

    @property
    def releases(self) -> ReleaseStore:
        """The ModelRelease side of this instance (providers/objectstore/releases.py)."""
        return ReleaseStore(self.client, self.manager, self.object_store)

    # pure ----------------------------------------------------------------------------

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        if resource.kind == "ModelRelease":
            return []
        source = resource.spec.get("source", "")
        if not source.startswith("s3://"):
            return [
                ValidationProblem(
                    resource.address,
                    "spec.source",
                    f"{source} is not an s3:// location; the objectstore provider holds "
                    "datasets on S3 (set storage.datasets in trainform.yaml, or use s3://)",
                )
            ]
        bucket, prefix = split_s3_uri(source)
        if not prefix:
            return [
                ValidationProblem(
                    resource.address,
                    "spec.source",
                    f"{source} names a whole bucket; give the dataset a prefix of its own",
                )
            ]
        return []

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        if resource.kind == "ModelRelease":
            bucket, base = release_place(resource.document)
            return [{"uri": f"s3://{bucket}/{base}/", "record": f"s3://{bucket}/{base}/{RECORD}"}]
        bucket, prefix = split_s3_uri(resource.spec["source"])
        return [
            {
                "marker": f"s3://{bucket}/{join_key(prefix, TRAINFORM_FOLDER, MARKER)}",
                "versions": {
                    v["name"]: f"s3://{bucket}/{join_key(prefix, v.get('path') or v['name'])}/"
                    for v in resource.spec["versions"]
                },
                "tags": {READERS_TAG: " ".join(resource.spec.get("readers", []))},
            }
        ]

    # helpers -------------------------------------------------------------------------

    def _call(self, doing: str, operation: str, **arguments: Any) -> Any:
        self.requests += 1
        try:
            return getattr(self.client, operation)(**arguments)
        except _errors() as exc:
            raise provider_error(exc, doing) from None

    def _versioning(self, bucket: str) -> bool:
        if bucket not in self._versioned:
            answer = self._call(
                f"reading versioning of bucket {bucket}", "get_bucket_versioning", Bucket=bucket
            )
            self._versioned[bucket] = answer.get("Status") == "Enabled"
        return self._versioned[bucket]

    def _manifest(self, bucket: str, prefix: str, version: dict[str, Any]) -> S3Manifest:
        manifest = list_manifest(
            self.client,
            bucket,
            join_key(prefix, version.get("path") or version["name"]),
            self._versioning(bucket),
        )
        self.requests += manifest.requests
        return manifest

    def _read_marker(self, bucket: str, key: str) -> tuple[dict[str, Any], str] | None:
        self.requests += 1
        try:
            answer = self.client.get_object(Bucket=bucket, Key=key)
            body = answer["Body"].read()
        except _errors() as exc:
            if is_not_found(exc):
                return None  # no marker, or no bucket: no dataset either way
            raise provider_error(exc, f"reading s3://{bucket}/{key}") from None
        try:
            return json.loads(body), str(answer["ETag"])
        except ValueError:
            raise PermanentProviderError(
                f"s3://{bucket}/{key} is not trainform's marker (not JSON); remove it or choose "
                "another prefix"
            ) from None

    def _readers(self, bucket: str, key: str) -> list[str]:
        answer = self._call(
            f"reading tags of s3://{bucket}/{key}", "get_object_tagging", Bucket=bucket, Key=key
        )
        for tag in answer.get("TagSet", []):
            if tag["Key"] == READERS_TAG:
                return tag["Value"].split()
        return []

    @staticmethod
    def _where(document: dict[str, Any]) -> tuple[str, str, str]:
        bucket, prefix = split_s3_uri(document["spec"]["source"])
        return bucket, prefix, join_key(prefix, TRAINFORM_FOLDER, MARKER)

    def _owned_key(self, address: str) -> str:
        return join_key(OWNED_FOLDER, self.manager, urllib.parse.quote(address, safe=""))

    # reads ---------------------------------------------------------------------------

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        return {
            request.address: (
                self.releases.observe(request)
                if request.kind == "ModelRelease"
                else self._observe(request)
            )
            for request in requests
        }

    def _observe(self, request: ObserveRequest) -> Observation:
        bucket, prefix, key = self._where(request.document)
        found = self._read_marker(bucket, key)
        if found is None or found[0].get("manager") != self.manager:
            return Observation(exists=False)
        marker, _ = found
        live = marker["document"]
        live = {**live, "spec": {**live["spec"], "readers": self._readers(bucket, key)}}
        findings: list[Finding] = []
        recorded = marker.get("manifests", {})
        for version in live["spec"]["versions"]:
            name = version["name"]
            current = self._manifest(bucket, prefix, version)
            where = f"s3://{bucket}/{join_key(prefix, version.get('path') or name)}/"
            if not current.objects:
                findings.append(
                    Finding(
                        "data-missing",
                        f"version {name}: no objects under {where}",
                        {"version": name, "location": where},
                    )
                )
                continue
            previous = S3Manifest.from_json(recorded[name]) if name in recorded else None
            reference = previous.digest if previous else version.get("manifestDigest")
            if reference and current.digest != reference:
                changes = current.differences(previous) if previous else []
                against = "the recorded manifest" if previous else "the pinned manifestDigest"
                findings.append(
                    Finding(
                        "data-mutated",
                        f"version {name}: objects under {where} differ from {against}"
                        + (f" ({describe(changes)})" if changes else ""),
                        {
                            "version": name,
                            "location": where,
                            "expected": reference,
                            "found": current.digest,
                            "changes": changes,
                        },
                    )
                )
        return Observation(
            exists=True, live=live, outputs=marker.get("outputs", {}), findings=tuple(findings)
        )

    def resolve(self, resource: DesiredResource) -> dict[str, Any]:
        if resource.kind != "Dataset":
            return super().resolve(resource)
        bucket, prefix, _ = self._where(resource.document)
        versions = {}
        for version in resource.spec["versions"]:
            manifest = self._manifest(bucket, prefix, version)
            if not manifest.objects:
                raise PermanentProviderError(
                    f"version {version['name']}: no objects under s3://{bucket}/"
                    f"{join_key(prefix, version.get('path') or version['name'])}/"
                )
            versions[version["name"]] = manifest.summary()
        return {"versions": versions}

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        if request.kind != "ModelRelease":
            return super().adopt(request, identifier)
        return self.releases.adopt(request, identifier)

    def list_owned(self) -> list[tuple[str, str]]:
        buckets = _setting_list(self.connection, "buckets") or [
            bucket["Name"] for bucket in self._call("listing buckets", "list_buckets")["Buckets"]
        ]
        owned = []
        for bucket in buckets:
            base = join_key(OWNED_FOLDER, self.manager) + "/"
            try:
                pages = self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=bucket, Prefix=base
                )
                for page in pages:
                    for item in page.get("Contents", []):
                        address = urllib.parse.unquote(item["Key"][len(base) :])
                        owned.append((address, address.split("/", 1)[0]))
            except _errors() as exc:
                raise provider_error(exc, f"listing owned datasets in {bucket}") from None
        return sorted(owned)

    # writes --------------------------------------------------------------------------

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        return self.update(resource, {})

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        if resource.kind == "ModelRelease":
            return self.releases.publish(resource)
        return self._put(resource)

    def _put(self, resource: DesiredResource) -> dict[str, Any]:
        self.require_valid(resource)
        bucket, prefix, key = self._where(resource.document)
        found = self._read_marker(bucket, key)
        if found is not None and found[0].get("manager") != self.manager:
            raise PermanentProviderError(
                f"s3://{bucket}/{key} is managed by {found[0].get('manager')!r}, not "
                f"{self.manager!r}; trainform never changes another manager's dataset"
            )
        if found is not None and found[0].get("address") != resource.address:
            raise PermanentProviderError(
                f"s3://{bucket}/{prefix} already holds {found[0].get('address')}; two datasets "
                "cannot share a prefix"
            )
        recorded = found[0].get("manifests", {}) if found else {}
        manifests: dict[str, Any] = {}
        summaries: dict[str, Any] = {}
        for version in resource.spec["versions"]:
            name = version["name"]
            manifest = self._checked_manifest(bucket, prefix, version, recorded.get(name))
            manifests[name] = manifest.to_json()
            summaries[name] = manifest.summary()
        readers = list(resource.spec.get("readers", []))
        tagged = found[0].get("taggedReaders", {}) if found else {}
        # Observe reports the marker's tag: one edited by hand no longer says what the
        # objects carry, so every version is tagged again and the marker rewritten.
        retag = found is not None and self._readers(bucket, key) != readers
        if retag:
            tagged = {}
        for version in resource.spec["versions"]:
            name = version["name"]
            if tagged.get(name) != readers:
                self._tag_objects(
                    bucket, prefix, version, S3Manifest.from_json(manifests[name]), readers
                )
                tagged = {**tagged, name: readers}
        outputs = {"source": resource.spec["source"], "versions": summaries}
        marker = {
            "uid": found[0].get("uid") if found else str(uuid.uuid4()),
            "manager": self.manager,
            "address": resource.address,
            "document": resource.document,
            "manifests": manifests,
            "taggedReaders": {name: tagged[name] for name in manifests},
            "outputs": outputs,
        }
        if found is None or found[0] != marker or retag:
            self._write_marker(bucket, key, marker, found[1] if found else None, readers)
        self._call(
            f"recording ownership in {bucket}",
            "put_object",
            Bucket=bucket,
            Key=self._owned_key(resource.address),
            Body=json.dumps({"address": resource.address, "marker": key}).encode(),
        )
        return outputs

    def _checked_manifest(
        self, bucket: str, prefix: str, version: dict[str, Any], recorded: Any
    ) -> S3Manifest:
        name = version["name"]
        manifest = self._manifest(bucket, prefix, version)
        where = f"s3://{bucket}/{join_key(prefix, version.get('path') or name)}/"
        if not manifest.objects:
            raise PermanentProviderError(f"version {name}: no objects under {where}")
        pinned = version.get("manifestDigest")
        if pinned and manifest.digest != pinned:
            raise PermanentProviderError(
                f"version {name}: objects under {where} have manifest digest {manifest.digest}, "
                f"but the spec pins {pinned}; the data was changed under a pinned version"
            )
        if recorded is not None:
            previous = S3Manifest.from_json(recorded)
            if previous.digest != manifest.digest:
                raise PermanentProviderError(
                    f"version {name}: objects under {where} changed since they were recorded "
                    f"({describe(manifest.differences(previous))}); versions are immutable, "
                    "declare a new version instead"
                )
            return previous  # keep the version ids first recorded
        return manifest

    def _tag_objects(
        self,
        bucket: str,
        prefix: str,
        version: dict[str, Any],
        manifest: S3Manifest,
        readers: list[str],
    ) -> None:
        """Set the readers tag on every object of the version, keeping its other tags
        (two requests per object, issued from a small pool of threads)."""
        value = " ".join(readers)
        base = join_key(prefix, version.get("path") or version["name"])

        def tag(entry: ObjectEntry) -> None:
            key = join_key(base, entry.path)
            arguments: dict[str, Any] = {"Bucket": bucket, "Key": key}
            if entry.version_id:
                arguments["VersionId"] = entry.version_id
            try:
                current = self.client.get_object_tagging(**arguments)
                tags = [t for t in current.get("TagSet", []) if t["Key"] != READERS_TAG]
                tags.append({"Key": READERS_TAG, "Value": value})
                self.client.put_object_tagging(**arguments, Tagging={"TagSet": tags})
            except _errors() as exc:
                raise provider_error(exc, f"tagging s3://{bucket}/{key}") from None

        with ThreadPoolExecutor(max_workers=TAGGING_THREADS) as pool:
            for _ in pool.map(tag, manifest.objects):
                pass
        self.requests += 2 * len(manifest.objects)

    def _write_marker(
        self, bucket: str, key: str, marker: dict[str, Any], etag: str | None, readers: list[str]
    ) -> None:
        body = json.dumps(marker, sort_keys=True).encode()
        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        tagging = urllib.parse.urlencode(
            {MANAGER_TAG: self.manager, READERS_TAG: " ".join(readers)}
        )
        self.requests += 1
        try:
            self.client.put_object(
                Bucket=bucket,
                Key=key,
                Body=body,
                ContentType="application/json",
                Tagging=tagging,
                **condition,
            )
        except _errors() as exc:
            if is_precondition_failed(exc):
                raise PermanentProviderError(
                    f"s3://{bucket}/{key} was changed by someone else while trainform wrote "
                    "it; run the apply again"
                ) from None
            raise provider_error(exc, f"writing s3://{bucket}/{key}") from None

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        if kind == "ModelRelease":
            self.releases.unpublish(address, outputs)
            return
        source = outputs.get("source")
        if not source:
            return  # nothing was ever recorded for this address
        bucket, prefix = split_s3_uri(source)
        key = join_key(prefix, TRAINFORM_FOLDER, MARKER)
        found = self._read_marker(bucket, key)
        if found is None:
            self._forget(bucket, address)
            return
        marker, etag = found
        if marker.get("manager") != self.manager or marker.get("address") != address:
            raise PermanentProviderError(
                f"s3://{bucket}/{key} is managed by {marker.get('manager')!r} for "
                f"{marker.get('address')}; trainform deletes only its own datasets"
            )
        spec = marker["document"]["spec"]
        if spec.get("deletionPolicy") == "Delete":
            for version in spec["versions"]:
                manifest = self._manifest(bucket, prefix, version)
                base = join_key(prefix, version.get("path") or version["name"])
                self._delete_keys(bucket, [join_key(base, o.path) for o in manifest.objects])
        self.requests += 1
        try:
            self.client.delete_object(Bucket=bucket, Key=key, IfMatch=etag)
        except _errors() as exc:
            if not is_not_found(exc):
                raise provider_error(exc, f"deleting s3://{bucket}/{key}") from None
        self._forget(bucket, address)

    def _forget(self, bucket: str, address: str) -> None:
        self._call(
            f"removing the ownership record in {bucket}",
            "delete_object",
            Bucket=bucket,
            Key=self._owned_key(address),
        )

    def _delete_keys(self, bucket: str, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            answer = self._call(
                f"deleting objects in {bucket}",
                "delete_objects",
                Bucket=bucket,
                Delete={"Objects": batch, "Quiet": True},
            )
            failed = answer.get("Errors", [])
            if failed:
                raise PermanentProviderError(
                    f"deleting objects in {bucket}: {failed[0].get('Key')}: "
                    f"{failed[0].get('Code')} {failed[0].get('Message', '')}"
                )


def _setting_list(connection: Any, name: str) -> list[str]:
    value = (
        connection.get(name) if isinstance(connection, dict) else getattr(connection, name, None)
    )
    return list(value or [])
