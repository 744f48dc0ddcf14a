"""Checkpoints of one run on S3: publishing, listing with validation, fetching, retention.

A run's checkpoints live under `s3://bucket/<prefix>/<run id>/step-<N>/`. The job writes
each checkpoint to a local folder as everywhere (providers/jobs.py); trainform publishes a
valid one by uploading every file, then `manifest.json` last, which is the job's manifest
with each file's ETag added. A checkpoint on S3 is valid only if that manifest parses and
every listed object is present with the listed size and ETag; `evidence` of an invalid one
names the key and the expected and found ETag. Fetching downloads the files and checks their
sha256 against the manifest, so what a job resumes from is byte-for-byte what was written.

Evaluation results are kept beside the checkpoints, `evaluations/<suite>/metrics.json`.
Retention is the same rule as on local disk (providers/local/checkpoints.py); deleting
removes the manifest first, so a half-deleted checkpoint is never taken for a valid one. A
lifecycle rule on the job's prefix expires noncurrent versions and aborts stale multipart
uploads where the endpoint supports lifecycle configuration.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import UTC
from pathlib import Path, PurePosixPath
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import CheckpointStatus
from trainform.providers.objectstore.client import (
    is_not_found,
    join_key,
    make_client,
    provider_error,
    split_s3_uri,
)

STEP = re.compile(r"^step-(\d+)$")
MANIFEST = "manifest.json"
PROTECTED = ".trainform/protected.json"
NONCURRENT_DAYS = 7


def _errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class S3Checkpoints:
    """The checkpoints of one run under `uri` (s3://bucket/prefix/<run id>)."""

    def __init__(self, uri: str, connection: Any = None, client: Any = None) -> None:
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = split_s3_uri(self.uri)
        self.client = client if client is not None else make_client(connection)

    def _call(self, doing: str, operation: str, **arguments: Any) -> Any:
        try:
            return getattr(self.client, operation)(**arguments)
        except _errors() as exc:
            raise provider_error(exc, doing) from None

    def _key(self, *parts: str) -> str:
        return join_key(self.prefix, *parts)

    def _objects(self) -> dict[str, dict[str, Any]]:
        """Every object under the run's prefix: relative key -> {size, etag, modified}."""
        base = self.prefix + "/"
        found: dict[str, dict[str, Any]] = {}
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base
            )
            for page in pages:
                for item in page.get("Contents", []):
                    found[item["Key"][len(base) :]] = {
                        "size": int(item["Size"]),
                        "etag": str(item["ETag"]).strip('"'),
                        "modified": item.get("LastModified"),
                    }
        except _errors() as exc:
            raise provider_error(exc, f"listing {self.uri}/") from None
        return found

    def _read_json(self, key: str) -> Any:
        answer = self._call(
            f"reading s3://{self.bucket}/{key}", "get_object", Bucket=self.bucket, Key=key
        )
        return json.loads(answer["Body"].read())

    # reading -------------------------------------------------------------------------

    def list(self) -> list[CheckpointStatus]:
        """Every `step-<N>` of the run, validated, oldest step first (one listing plus one
        GET per manifest)."""
        objects = self._objects()
        steps = sorted(
            {key.split("/", 1)[0] for key in objects if STEP.match(key.split("/", 1)[0])},
            key=lambda name: int(name.split("-")[1]),
        )
        return [self._check(name, objects) for name in steps]

    def _check(self, name: str, objects: dict[str, dict[str, Any]]) -> CheckpointStatus:
        step = int(name.split("-")[1])
        path = f"{self.uri}/{name}"

        manifest_key = f"{name}/{MANIFEST}"
        modified = objects.get(manifest_key, {}).get("modified")  # complete once its manifest is
        written = modified.astimezone(UTC).isoformat(timespec="milliseconds") if modified else ""

        def invalid(problem: str, **evidence: Any) -> CheckpointStatus:
            found = CheckpointStatus(name, step, False, problem, path, evidence)
            found.written_at = written.replace("+00:00", "Z")
            return found

        if manifest_key not in objects:
            return invalid(f"{MANIFEST} is missing (incomplete checkpoint)", key=manifest_key)
        try:
            manifest = self._read_json(self._key(manifest_key))
        except ValueError as exc:
            return invalid(f"{MANIFEST} cannot be parsed: {exc}", key=manifest_key)
        except PermanentProviderError as exc:
            if "NoSuchKey" in str(exc):
                return invalid(f"{MANIFEST} is missing (incomplete checkpoint)", key=manifest_key)
            raise
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, list):
            return invalid(f'{MANIFEST} has no "files" list', key=manifest_key)
        if manifest.get("step", step) != step:
            return invalid(f"{MANIFEST} says step {manifest.get('step')!r}, the prefix {name}")
        for entry in files:
            if not isinstance(entry, dict) or not {"path", "size", "etag"} <= set(entry):
                return invalid(f"{MANIFEST} has an entry without path, size and etag: {entry!r}")
            key = f"{name}/{entry['path']}"
            found = objects.get(key)
            full_key = self._key(key)
            if found is None:
                return invalid(
                    f"object {entry['path']} is missing",
                    key=full_key,
                    expectedEtag=entry["etag"],
                    foundEtag=None,
                )
            if found["size"] != entry["size"] or found["etag"] != entry["etag"]:
                return invalid(
                    f"object {entry['path']} has {found['size']} bytes and ETag {found['etag']}, "
                    f"the manifest says {entry['size']} bytes and ETag {entry['etag']}",
                    key=full_key,
                    expectedEtag=entry["etag"],
                    foundEtag=found["etag"],
                )
        checkpoint = CheckpointStatus(name, step, True, "", path)
        checkpoint.written_at = written.replace("+00:00", "Z")
        checkpoint.size = sum(int(entry["size"]) for entry in files)
        return checkpoint

    def protected(self) -> set[str]:
        """Checkpoint ids a release or a passed evaluation pinned (`.trainform/protected.json`)."""
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(PROTECTED))
            data = json.loads(answer["Body"].read())
        except _errors() as exc:
            if is_not_found(exc):
                return set()
            raise provider_error(exc, f"reading {self.uri}/{PROTECTED}") from None
        return {str(item) for item in data.get("checkpoints", [])}

    def protect(self, checkpoint: str, reason: str) -> None:
        current = self.protected()
        if checkpoint in current:
            return
        body = {"checkpoints": sorted(current | {checkpoint}), "reason": {checkpoint: reason}}
        self._call(
            f"writing {self.uri}/{PROTECTED}",
            "put_object",
            Bucket=self.bucket,
            Key=self._key(PROTECTED),
            Body=json.dumps(body, sort_keys=True).encode(),
        )

    # writing -------------------------------------------------------------------------

    def publish(self, folder: Path) -> CheckpointStatus:
        """Upload a valid local checkpoint folder: its files, then the manifest with ETags."""
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        entries = []
        for entry in manifest["files"]:
            relative = PurePosixPath(str(entry["path"]))
            if relative.is_absolute() or ".." in relative.parts:
                raise PermanentProviderError(f"{folder}: manifest lists {entry['path']}")
            with open(folder / relative, "rb") as body:
                answer = self._call(
                    f"uploading {folder.name}/{relative}",
                    "put_object",
                    Bucket=self.bucket,
                    Key=self._key(folder.name, str(relative)),
                    Body=body,
                )
            entries.append({**entry, "etag": str(answer["ETag"]).strip('"')})
        document = {**manifest, "files": entries}
        self._call(
            f"uploading {folder.name}/{MANIFEST}",
            "put_object",
            Bucket=self.bucket,
            Key=self._key(folder.name, MANIFEST),
            Body=json.dumps(document, sort_keys=True).encode(),
            ContentType="application/json",
        )
        step = int(folder.name.split("-")[1])
        return CheckpointStatus(folder.name, step, True, "", f"{self.uri}/{folder.name}")

    def fetch(self, name: str, destination: Path) -> Path:
        """Download checkpoint `name` into `destination/name`, sha256-checked; the manifest
        (without ETags, as the job wrote it) is written last."""
        manifest = self._read_json(self._key(name, MANIFEST))
        target = destination / name
        target.mkdir(parents=True, exist_ok=True)
        for entry in manifest["files"]:
            relative = PurePosixPath(str(entry["path"]))
            if relative.is_absolute() or ".." in relative.parts:
                raise PermanentProviderError(f"{self.uri}/{name}: manifest lists {entry['path']}")
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.client.download_file(self.bucket, self._key(name, str(relative)), str(path))
            except _errors() as exc:
                raise provider_error(exc, f"downloading {name}/{relative}") from None
            if "sha256" in entry and _sha256(path) != entry["sha256"]:
                raise PermanentProviderError(
                    f"{self.uri}/{name}/{relative}: sha256 differs from the manifest"
                )
        local = {**manifest, "files": [_without_etag(e) for e in manifest["files"]]}
        (target / MANIFEST).write_text(json.dumps(local, sort_keys=True), encoding="utf-8")
        return target

    def delete(self, name: str) -> None:
        """Remove checkpoint `name`: the manifest first, then every object under it."""
        self._call(
            f"deleting {name}/{MANIFEST}",
            "delete_object",
            Bucket=self.bucket,
            Key=self._key(name, MANIFEST),
        )
        keys = [self._key(key) for key in self._objects() if key.startswith(name + "/")]
        for start in range(0, len(keys), 1000):
            self._call(
                f"deleting {name}",
                "delete_objects",
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in keys[start : start + 1000]], "Quiet": True},
            )

    def apply_retention(
        self, keep_last: int | None, protect: Iterable[str] = ()
    ) -> list[CheckpointStatus]:
        from trainform.providers.local.checkpoints import retention_victims

        if not keep_last:
            return []
        protected = set(protect) | self.protected()
        victims = retention_victims(self.list(), keep_last, protected)
        for victim in victims:
            self.delete(victim.id)
        return victims

    def put_metrics(self, suite: str, path: Path) -> None:
        self._call(
            f"uploading metrics of {suite}",
            "put_object",
            Bucket=self.bucket,
            Key=self._key("evaluations", suite, "metrics.json"),
            Body=path.read_bytes(),
            ContentType="application/json",
        )

    def metrics(self, suite: str) -> dict[str, Any] | None:
        try:
            data = self._read_json(self._key("evaluations", suite, "metrics.json"))
        except PermanentProviderError as exc:
            if "NoSuchKey" in str(exc) or "404" in str(exc):
                return None
            raise
        return data if isinstance(data, dict) else None


def _without_etag(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key != "etag"}


def ensure_lifecycle(client: Any, uri: str) -> bool:
    """A lifecycle rule on `uri/` expiring noncurrent versions and stale multipart uploads,
    merged with the bucket's other rules; False where the endpoint has no lifecycle API."""
    bucket, prefix = split_s3_uri(uri)
    rule_id = "trainform-" + hashlib.sha256(prefix.encode()).hexdigest()[:16]
    try:
        rules = client.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
    except _errors() as exc:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("NotImplemented", "501"):
            return False
        if code != "NoSuchLifecycleConfiguration":
            raise provider_error(exc, f"reading the lifecycle rules of {bucket}") from None
        rules = []
    if any(rule.get("ID") == rule_id for rule in rules):
        return True
    rule = {
        "ID": rule_id,
        "Filter": {"Prefix": prefix + "/"},
        "Status": "Enabled",
        "NoncurrentVersionExpiration": {"NoncurrentDays": NONCURRENT_DAYS},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    }
    try:
        client.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [*rules, rule]}
        )
    except _errors() as exc:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        if code in ("NotImplemented", "501"):
            return False
        raise provider_error(exc, f"writing the lifecycle rules of {bucket}") from None
    return True
