"""Copying an image between repositories of one registry, byte for byte.

Blobs are mounted across repositories where the registry allows it and copied otherwise;
manifests are pushed with their exact bytes (an index's children first, by digest), so the
promoted image has the source's digest. Called by the registry provider's create/update.
"""

from __future__ import annotations

import json
from typing import Any

from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.client import RegistryClient
from trainform.providers.oci.manifests import Manifest, pick_platform


def fetch(client: RegistryClient, repository: str, digest: str) -> Manifest:
    manifest = client.get_manifest(repository, digest)
    if manifest is None:
        raise PermanentProviderError(f"manifest {digest} does not exist in {repository}")
    return manifest


def copy_image(
    client: RegistryClient, source: str, target: str, manifest: Manifest, tag: str
) -> dict[str, int]:
    """Copy `manifest` (from `source`) and everything it references to `target:tag`.

    Returns how many blobs were already present, mounted and uploaded.
    """
    counts = {"present": 0, "mounted": 0, "uploaded": 0}
    for child in manifest.children():
        if client.head_manifest(target, child["digest"]) is not None:
            continue
        child_manifest = fetch(client, source, child["digest"])
        _copy_blobs(client, source, target, child_manifest, counts)
        client.put_manifest(target, child_manifest.digest, child_manifest)
    _copy_blobs(client, source, target, manifest, counts)
    current = client.head_manifest(target, tag)
    if current is None or current.digest != manifest.digest:
        pushed = client.put_manifest(target, tag, manifest)
        if pushed != manifest.digest:
            raise PermanentProviderError(
                f"the registry stored {target}:{tag} as {pushed}, not {manifest.digest}"
            )
    return counts


def _copy_blobs(
    client: RegistryClient,
    source: str,
    target: str,
    manifest: Manifest,
    counts: dict[str, int],
) -> None:
    for blob in manifest.blobs():
        counts[client.copy_blob(source, target, blob["digest"])] += 1


def image_labels(client: RegistryClient, repository: str, manifest: Manifest) -> dict[str, str]:
    """`config.Labels` of an image (of its linux/amd64 or first manifest, for an index)."""
    if manifest.is_index:
        try:
            chosen = pick_platform(manifest)
        except ValueError as exc:
            raise PermanentProviderError(f"{repository}@{manifest.digest}: {exc}") from None
        manifest = fetch(client, repository, chosen["digest"])
    config = manifest.document.get("config")
    if not isinstance(config, dict) or "digest" not in config:
        return {}
    body = client.get_blob(repository, config["digest"])
    if body is None:
        raise PermanentProviderError(
            f"the config blob {config['digest']} of {repository}@{manifest.digest} is missing"
        )
    try:
        document: dict[str, Any] = json.loads(body)
    except ValueError:
        return {}
    labels = (document.get("config") or {}).get("Labels") or {}
    return {str(key): str(value) for key, value in labels.items()}
