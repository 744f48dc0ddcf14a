"""What a ModelRelease publishes, the same on every target.

The planner (planner/releases.py) resolves a release into a `release` section of its
document: the job and run, the source folder (the run's output, or a checkpoint), each file
with its size and sha256, the run's provenance and the gate results relied on, and the
artifact digest. Providers publish exactly that: the registry as an OCI artifact
(providers/oci/release_manifest.py), the object store as files plus a record
(providers/objectstore/releases.py). This module holds what both share: the kind's schema,
reading the source files (a local folder the job's provider wrote, or an s3:// prefix),
the files manifest and the provenance annotations. Annotation values are strings; nested
values are compact JSON. Nothing here depends on when or where it runs, so the plan's
digest is the one the registry stores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from trainform.providers.base import KindSchema
from trainform.providers.errors import PermanentProviderError

RELEASE_SCHEMA = KindSchema(
    "ModelRelease",
    forces_replacement=(
        "spec.version",
        "spec.registry",
        "spec.objectStore",
        "spec.job",
        "release.runId",
        "release.source",
    ),
)
FILES_MANIFEST = "trainform-files.json"
ANNOTATION = "dev.trainform.release"
CHUNK = 1 << 20


def compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def files_manifest(section: dict[str, Any]) -> bytes:
    """The manifest of the released files: path, size and sha256 digest of each."""
    return compact({"formatVersion": 1, "files": section["files"]}).encode()


def release_annotations(address: str, version: str, section: dict[str, Any]) -> dict[str, str]:
    """The provenance a published release carries (OCI annotations, the S3 record)."""
    provenance = section.get("provenance") or {}
    source = section.get("source") or {}
    values: dict[str, Any] = {
        "address": address,
        "version": version,
        "job": section["job"],
        "run": section["runId"],
        "source": f"checkpoint {source['checkpoint']}" if source.get("checkpoint") else "output",
        "specCommit": provenance.get("specCommit") or "",
        "specDigest": provenance.get("specDigest") or "",
        "lockDigest": provenance.get("lockDigest") or "",
        "environment": provenance.get("environment") or "",
        "image": compact(provenance.get("image") or {}),
        "datasets": compact(provenance.get("datasets") or []),
        "code": compact(provenance.get("code") or {}),
        "parameters": compact(provenance.get("parameters") or {}),
        "evaluations": compact(section.get("evaluations") or []),
    }
    annotations = {f"{ANNOTATION}.{key}": str(value) for key, value in values.items()}
    annotations["org.opencontainers.image.version"] = version
    annotations["org.opencontainers.image.title"] = address
    if provenance.get("endedAt"):
        annotations["org.opencontainers.image.created"] = str(provenance["endedAt"])
    if provenance.get("specCommit"):
        annotations["org.opencontainers.image.revision"] = str(provenance["specCommit"])
    return annotations


def provenance_of(annotations: dict[str, str]) -> dict[str, Any]:
    """The provenance `release_annotations` wrote, read back (JSON values decoded)."""
    found: dict[str, Any] = {}
    for key, value in annotations.items():
        if not key.startswith(ANNOTATION + "."):
            continue
        name = key[len(ANNOTATION) + 1 :]
        if name in ("image", "datasets", "code", "parameters", "evaluations"):
            try:
                found[name] = json.loads(value)
            except ValueError:
                found[name] = value
        else:
            found[name] = value
    return found


# reading the source ----------------------------------------------------------------------


def list_model_files(location: str, object_store: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every file under `location` (relative path, size, sha256 digest), sorted by path."""
    if location.startswith("s3://"):
        return _s3_files(location, object_store)
    root = Path(location)
    if not root.is_dir():
        raise PermanentProviderError(f"{location} is not a folder (gone, or never written)")
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise PermanentProviderError(f"{path} is a symbolic link; a release copies files only")
        if not path.is_file():
            continue
        hasher = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                hasher.update(chunk)
        relative = path.relative_to(root).as_posix()
        files.append(
            {
                "path": relative,
                "size": path.stat().st_size,
                "digest": "sha256:" + hasher.hexdigest(),
            }
        )
    return files


@contextmanager
def open_model_file(
    location: str, relative: str, object_store: dict[str, Any] | None
) -> Iterator[IO[bytes]]:
    """A released file opened for reading (from the folder or the s3:// prefix)."""
    if location.startswith("s3://"):
        from trainform.providers.objectstore.client import join_key, split_s3_uri

        bucket, prefix = split_s3_uri(location)
        body = _s3_client(object_store).get_object(Bucket=bucket, Key=join_key(prefix, relative))
        stream = body["Body"]
        try:
            yield stream
        finally:
            stream.close()
        return
    root = Path(location).resolve()
    path = (root / relative).resolve()
    if root not in path.parents:
        raise PermanentProviderError(f"{relative} is not inside {location}")
    with path.open("rb") as handle:
        yield handle


def check_file(data_digest: str, expected: dict[str, Any], size: int) -> None:
    """Refuse a file whose content is no longer what the plan recorded."""
    if data_digest != expected["digest"] or size != expected["size"]:
        raise PermanentProviderError(
            f"{expected['path']} changed since the plan: {data_digest} ({size} bytes), "
            f"planned {expected['digest']} ({expected['size']} bytes); plan again"
        )


def _s3_client(object_store: dict[str, Any] | None) -> Any:
    from trainform.providers.objectstore.client import make_client

    return make_client(object_store)


def _s3_files(location: str, object_store: dict[str, Any] | None) -> list[dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError
    from trainform.providers.objectstore.client import provider_error, split_s3_uri

    bucket, prefix = split_s3_uri(location)
    client = _s3_client(object_store)
    files = []
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for page in pages:
            for entry in page.get("Contents", []):
                hasher = hashlib.sha256()
                body = client.get_object(Bucket=bucket, Key=entry["Key"])["Body"]
                for chunk in iter(lambda b=body: b.read(CHUNK), b""):
                    hasher.update(chunk)
                files.append(
                    {
                        "path": entry["Key"][len(prefix) + 1 :],
                        "size": int(entry["Size"]),
                        "digest": "sha256:" + hasher.hexdigest(),
                    }
                )
    except (BotoCoreError, ClientError) as exc:
        raise provider_error(exc, f"cannot read {location}") from None
    if not files:
        raise PermanentProviderError(f"{location} holds no files")
    return sorted(files, key=lambda f: f["path"])


def section_from_annotations(
    annotations: dict[str, str], files: list[dict[str, Any]], digest: str
) -> dict[str, Any]:
    """The `release` section a published artifact was made from, read back from its
    provenance annotations and files (trainform import); the source folder is not known."""
    found = provenance_of(annotations)
    source = str(found.get("source") or "")
    return {
        "job": found.get("job"),
        "runId": found.get("run"),
        "source": {"checkpoint": source[len("checkpoint ") :]}
        if source.startswith("checkpoint ")
        else {},
        "files": files,
        "provenance": {
            "specCommit": found.get("specCommit") or None,
            "specDigest": found.get("specDigest") or None,
            "lockDigest": found.get("lockDigest") or None,
            "environment": found.get("environment") or None,
            "image": found.get("image") or None,
            "datasets": found.get("datasets") or [],
            "code": found.get("code") or None,
            "parameters": found.get("parameters") or {},
            "endedAt": annotations.get("org.opencontainers.image.created") or None,
        },
        "evaluations": found.get("evaluations") or [],
        "digest": digest,
    }


def check_adoptable(address: str, version: str, annotations: dict[str, str], where: str) -> None:
    """Refuse to import an artifact another release (address or version) published."""
    found = provenance_of(annotations)
    if found.get("address") != address or found.get("version") != version:
        raise PermanentProviderError(
            f"cannot adopt {where} as {address} version {version}: it was published as "
            f"{found.get('address')} version {found.get('version')}"
        )
