"""OCI and Docker manifest documents: media types, what a manifest references, and the
ownership marker trainform pushes next to each image it promotes.

The marker is a small OCI artifact manifest under the companion tag `<tag>.trainform` of
the promoted tag. Its annotations hold the manager, the address, the tag it claims and the
digest trainform put there; its `subject` names that digest, so registries with the OCI
1.1 referrers API also list it as a referrer of the image. Its config and only layer are
the OCI empty blob `{}`. Registries without tag deletion or referrers (distribution 2.8)
handle it like any other manifest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))

EMPTY_BLOB = b"{}"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
MARKER_ARTIFACT_TYPE = "application/vnd.trainform.ownership.v1+json"
MARKER_SUFFIX = ".trainform"
ANNOTATION = "dev.trainform"
MAX_TAG_LENGTH = 128


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def marker_tag(tag: str) -> str:
    return tag + MARKER_SUFFIX


@dataclass(frozen=True)
class Manifest:
    """A manifest as the registry serves it: the exact bytes, their digest and media type."""

    body: bytes
    media_type: str
    digest: str

    @property
    def document(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    @property
    def kind(self) -> str:
        """The media type, from the document when the registry's header was generic."""
        declared = self.document.get("mediaType")
        if self.media_type in INDEX_TYPES + MANIFEST_TYPES:
            return self.media_type
        if isinstance(declared, str):
            return declared
        return OCI_INDEX if "manifests" in self.document else OCI_MANIFEST

    @property
    def is_index(self) -> bool:
        return self.kind in INDEX_TYPES

    def children(self) -> list[dict[str, Any]]:
        """Descriptors of an index's manifests."""
        return list(self.document.get("manifests", [])) if self.is_index else []

    def blobs(self) -> list[dict[str, Any]]:
        """Descriptors of an image manifest's config and layers (foreign layers left out)."""
        if self.is_index:
            return []
        document = self.document
        layers = [
            layer
            for layer in document.get("layers", [])
            if not layer.get("urls") and "foreign" not in str(layer.get("mediaType", ""))
        ]
        return [document["config"], *layers] if "config" in document else layers


def pick_platform(index: Manifest) -> dict[str, Any]:
    """The linux/amd64 manifest of an index, else its first one."""
    children = index.children()
    if not children:
        raise ValueError("the image index lists no manifests")
    for child in children:
        platform = child.get("platform") or {}
        if platform.get("os") == "linux" and platform.get("architecture") == "amd64":
            return child
    return children[0]


@dataclass(frozen=True)
class Ownership:
    """What a marker says: who promoted which digest to which tag, for which address."""

    manager: str
    address: str
    reference: str
    digest: str
    document: dict[str, Any]
    outputs: dict[str, Any]

    def annotations(self) -> dict[str, str]:
        return {
            f"{ANNOTATION}.manager": self.manager,
            f"{ANNOTATION}.address": self.address,
            f"{ANNOTATION}.reference": self.reference,
            f"{ANNOTATION}.digest": self.digest,
            f"{ANNOTATION}.document": _compact(self.document),
            f"{ANNOTATION}.outputs": _compact(self.outputs),
        }

    def manifest_body(self, target_media_type: str, target_size: int) -> bytes:
        empty = {
            "mediaType": EMPTY_MEDIA_TYPE,
            "digest": sha256_digest(EMPTY_BLOB),
            "size": len(EMPTY_BLOB),
        }
        document = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": MARKER_ARTIFACT_TYPE,
            "config": empty,
            "layers": [empty],
            "subject": {"mediaType": target_media_type, "digest": self.digest, "size": target_size},
            "annotations": self.annotations(),
        }
        return _compact(document).encode()


def ownership_of(marker: Manifest) -> Ownership | None:
    """The ownership a marker manifest records, or None when it is not a trainform marker."""
    try:
        document = marker.document
        if document.get("artifactType") != MARKER_ARTIFACT_TYPE:
            return None
        values = document["annotations"]
        return Ownership(
            manager=values[f"{ANNOTATION}.manager"],
            address=values[f"{ANNOTATION}.address"],
            reference=values[f"{ANNOTATION}.reference"],
            digest=values[f"{ANNOTATION}.digest"],
            document=json.loads(values[f"{ANNOTATION}.document"]),
            outputs=json.loads(values[f"{ANNOTATION}.outputs"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
