"""A dataset version on S3 copied to this machine for a job, verified, cached by digest.

The version is listed (paginated) and its manifest digest compared with the pin first: data
changed under a pinned version is refused before anything is read. Objects are downloaded by
version id where the bucket records one, so a later overwrite cannot slip in between listing
and reading; each is checked for size and, for single-part uploads (an ETag without '-'),
for its MD5. The copy lands under `<cache>/<digest>/` by an atomic rename, so a finished
folder is always complete and two jobs reading the same version share it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.objectstore.client import join_key, provider_error, split_s3_uri
from trainform.providers.objectstore.manifests import S3Manifest, list_manifest


class DataMutated(PermanentProviderError):
    """The objects under a pinned version no longer match its manifest digest."""


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def version_manifest(client: Any, location: str) -> S3Manifest:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_s3_uri(location)
    try:
        versioned = client.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled"
    except (BotoCoreError, ClientError) as exc:
        raise provider_error(exc, f"reading versioning of bucket {bucket}") from None
    return list_manifest(client, bucket, prefix, versioned)


def stage_version(client: Any, location: str, pinned: str, cache: Path) -> Path:
    """The local folder holding the objects under `location/`, verified against `pinned`."""
    from botocore.exceptions import BotoCoreError, ClientError

    manifest = version_manifest(client, location)
    if not manifest.objects:
        raise PermanentProviderError(f"no objects under {location}/")
    if pinned and manifest.digest != pinned:
        raise DataMutated(
            f"{location}/ changed since it was pinned (data mutated): pinned {pinned}, "
            f"found {manifest.digest}"
        )
    target = cache / manifest.digest.removeprefix("sha256:")
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache))
    bucket, prefix = split_s3_uri(location)
    try:
        for entry in manifest.objects:
            relative = PurePosixPath(entry.path)
            if relative.is_absolute() or ".." in relative.parts or "\x00" in entry.path:
                raise PermanentProviderError(
                    f"cannot stage {location}/: object {entry.path!r} would land outside the "
                    "staging folder"
                )
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            extra = {"VersionId": entry.version_id} if entry.version_id else None
            try:
                client.download_file(
                    bucket, join_key(prefix, entry.path), str(path), ExtraArgs=extra
                )
            except (BotoCoreError, ClientError) as exc:
                raise provider_error(exc, f"downloading {location}/{entry.path}") from None
            size = path.stat().st_size
            if size != entry.size or ("-" not in entry.etag and _md5(path) != entry.etag):
                raise DataMutated(
                    f"{location}/{entry.path}: the bytes read differ from the listing "
                    f"(size {size}, expected {entry.size}); the object changed while reading"
                )
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
