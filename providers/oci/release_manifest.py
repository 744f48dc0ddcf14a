"""The OCI artifact of a ModelRelease: an OCI 1.1 image manifest with an artifactType.

Layout (following the OCI image spec's guidance for artifacts, manifest.md "Guidelines for
Artifact Usage"): `artifactType` names a trainform model; the config is the empty
descriptor (`application/vnd.oci.empty.v1+json`, content `{}`); the first layer is the
files manifest (path, size, sha256 of every file; providers/releases.py) and each further
layer one released file, its path in `org.opencontainers.image.title`; the manifest's
annotations carry the provenance. The bytes are compact JSON with sorted keys, so the same
release gives the same digest at plan and at apply. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.oci.manifests import (
    EMPTY_BLOB,
    EMPTY_MEDIA_TYPE,
    OCI_MANIFEST,
    Manifest,
    sha256_digest,
)
from trainform.providers.releases import (
    FILES_MANIFEST,
    compact,
    files_manifest,
    release_annotations,
)

ARTIFACT_TYPE = "application/vnd.trainform.model.v1"
FILES_MEDIA_TYPE = "application/vnd.trainform.model.files.v1+json"
FILE_MEDIA_TYPE = "application/vnd.trainform.model.file.v1"
TITLE = "org.opencontainers.image.title"


def release_manifest(address: str, version: str, section: dict[str, Any]) -> Manifest:
    """The artifact manifest of a resolved release section."""
    listing = files_manifest(section)
    layers = [
        {
            "mediaType": FILES_MEDIA_TYPE,
            "digest": sha256_digest(listing),
            "size": len(listing),
            "annotations": {TITLE: FILES_MANIFEST},
        }
    ]
    layers += [
        {
            "mediaType": FILE_MEDIA_TYPE,
            "digest": file["digest"],
            "size": file["size"],
            "annotations": {TITLE: file["path"]},
        }
        for file in section["files"]
    ]
    document = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {
            "mediaType": EMPTY_MEDIA_TYPE,
            "digest": sha256_digest(EMPTY_BLOB),
            "size": len(EMPTY_BLOB),
        },
        "layers": layers,
        "annotations": release_annotations(address, version, section),
    }
    body = compact(document).encode()
    return Manifest(body, OCI_MANIFEST, sha256_digest(body))


def is_release(manifest: Manifest) -> bool:
    try:
        return manifest.document.get("artifactType") == ARTIFACT_TYPE
    except ValueError:
        return False
