"""Reading, writing and finding ownership markers, and removing a promoted tag safely.

Called by the registry provider; the marker's format is in providers/oci/manifests.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.client import RegistryClient
from trainform.providers.oci.manifests import (
    EMPTY_BLOB,
    MARKER_SUFFIX,
    OCI_MANIFEST,
    Manifest,
    Ownership,
    marker_tag,
    ownership_of,
    sha256_digest,
)
from trainform.providers.oci.references import ImageTarget


def read_mark(
    client: RegistryClient, repository: str, tag: str
) -> tuple[Ownership | None, Manifest | None]:
    """What the marker of `repository:tag` says (None if it is no marker) and the marker."""
    marker = client.get_manifest(repository, marker_tag(tag))
    return (ownership_of(marker) if marker else None), marker


def claim(
    client: RegistryClient,
    target: ImageTarget,
    image: Manifest,
    ownership: Ownership,
    existing: Manifest | None,
) -> None:
    """Write the marker of `target` (unless `existing` is the same one)."""
    body = ownership.manifest_body(image.kind, len(image.body))
    if existing is not None and existing.body == body:
        return
    client.upload_blob(target.repository, EMPTY_BLOB)
    marker = Manifest(body, OCI_MANIFEST, sha256_digest(body))
    client.put_manifest(target.repository, marker_tag(target.tag or ""), marker)


def owned_marks(client: RegistryClient, manager: str) -> Iterator[tuple[str, str, Ownership]]:
    """(repository, tag, ownership) of every marker of `manager` in the registry."""
    for repository in client.repositories():
        for tag in client.tags(repository):
            if not tag.endswith(MARKER_SUFFIX):
                continue
            manifest = client.get_manifest(repository, tag)
            ownership = ownership_of(manifest) if manifest else None
            if ownership is not None and ownership.manager == manager:
                yield repository, tag[: -len(MARKER_SUFFIX)], ownership


def untag(client: RegistryClient, repository: str, tag: str, digest: str) -> None:
    """Remove `tag`. Where the registry deletes by digest only, refuse when other tags share
    the digest: they would go too."""
    if client.delete_tag(repository, tag):
        return
    others = [
        other
        for other in client.tags(repository)
        if other not in (tag, marker_tag(tag))
        and (found := client.head_manifest(repository, other)) is not None
        and found.digest == digest
    ]
    if others:
        raise PermanentProviderError(
            f"cannot delete {client.host}/{repository}:{tag}: the registry deletes manifests "
            f"by digest only, and tags {', '.join(sorted(others))} also point at {digest}"
        )
    client.delete_manifest(repository, digest)
