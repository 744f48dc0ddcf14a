"""Publishing a ModelRelease on an OCI registry (called by the registry provider).

Publish: build the artifact manifest from the planned `release` section (its digest must be
the planned one), refuse a tag that exists unmarked or is marked by another owner, upload
the empty config, the files manifest and every file (re-hashed while read: a file that
changed since the plan is refused), write the ownership marker `<tag>.trainform`
(providers/oci/ownership.py), push the manifest under the tag, and verify: the tag must
resolve to the planned digest and the manifest read back must be the bytes pushed. A
publish of what is already there only re-reads it.

Observe: the marker must be ours; a tag gone (or its manifest deleted) is a missing
release; a tag that points elsewhere is shown as `release.digest` changed (drift
"modified") with a `tag-moved` finding naming both digests.

Unpublish (delete): remove the tag (where the registry deletes by digest only, the manifest;
the blobs stay) and the marker; with `deleteArtifacts` the file blobs as well.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from trainform.providers.base import DesiredResource, Finding, Observation, ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.client import RegistryClient
from trainform.providers.oci.manifests import EMPTY_BLOB, Manifest, Ownership, marker_tag
from trainform.providers.oci.ownership import claim, read_mark, untag
from trainform.providers.oci.promotion import copy_image, fetch
from trainform.providers.oci.references import ImageTarget
from trainform.providers.oci.release_manifest import ARTIFACT_TYPE, is_release, release_manifest
from trainform.providers.releases import (
    CHUNK,
    check_adoptable,
    check_file,
    files_manifest,
    open_model_file,
    section_from_annotations,
)


def release_target(document: dict[str, Any], host: str) -> ImageTarget:
    spec = document["spec"]
    registry = spec["registry"]
    return ImageTarget(host, registry["repository"], registry.get("tag") or spec["version"], None)


def planned_manifest(address: str, document: dict[str, Any]) -> Manifest:
    section = document.get("release")
    if not section:
        raise PermanentProviderError(f"{address}: the plan resolved no release; plan again")
    built_as = str(section.get("artifactAddress") or address)  # a promotion: its source's
    manifest = release_manifest(built_as, document["spec"]["version"], section)
    if manifest.digest != section["digest"]:
        raise PermanentProviderError(
            f"{address}: the artifact would be {manifest.digest}, not the planned "
            f"{section['digest']}; plan again"
        )
    return manifest


def adoptable_names(document: dict[str, Any], target: ImageTarget) -> set[str]:
    """What `trainform import` may name a release by: one of the targets its spec declares."""
    names = {target.name(), f"{target.registry}/{target.repository}:{target.tag}"}
    store = document["spec"].get("objectStore")
    if store:
        base = f"{store['prefix'].rstrip('/')}/{document['spec']['version']}"
        names |= {base, base + "/"}
    return names


class ReleasePublisher:
    """The registry side of ModelRelease for one provider instance."""

    def __init__(
        self, client: RegistryClient, host: str, manager: str, object_store: dict[str, Any] | None
    ) -> None:
        self.client = client
        self.host = host
        self.manager = manager
        self.object_store = object_store

    def _ours(self, ownership: Ownership | None, address: str) -> bool:
        return (
            ownership is not None
            and ownership.manager == self.manager
            and ownership.address == address
        )

    def observe(self, request: ObserveRequest) -> Observation:
        document = request.document
        if not document.get("release"):
            return Observation(exists=False)
        target = release_target(document, self.host)
        tag = target.tag or ""
        ownership, marker = read_mark(self.client, target.repository, tag)
        adopted = marker is None and request.outputs.get("adopted")
        if not adopted and not self._ours(ownership, request.address):
            return Observation(exists=False)
        current = self.client.head_manifest(target.repository, tag)
        if current is None:
            return Observation(exists=False)
        planned = document["release"]["digest"]
        live = copy.deepcopy(document)
        live["release"]["digest"] = current.digest
        findings: tuple[Finding, ...] = ()
        if current.digest != planned:
            findings = (
                Finding(
                    "tag-moved",
                    f"{target.name()}: the released tag now points at {current.digest}, not "
                    f"the released {planned}",
                    {"reference": target.name(), "released": planned, "current": current.digest},
                ),
            )
        elif self.client.head_manifest(target.repository, planned) is None:
            return Observation(exists=False)
        return Observation(exists=True, live=live, outputs=dict(request.outputs), findings=findings)

    def publish(self, resource: DesiredResource) -> dict[str, Any]:
        document = resource.document
        manifest = planned_manifest(resource.address, document)
        target = release_target(document, self.host)
        tag = target.tag or ""
        client = self.client
        ownership, marker = read_mark(client, target.repository, tag)
        if marker is not None and ownership is None:
            raise PermanentProviderError(
                f"{target.name()}: {marker_tag(tag)} exists and is not a trainform ownership "
                "marker; remove that tag or release under another tag"
            )
        if ownership is not None and not self._ours(ownership, resource.address):
            raise PermanentProviderError(
                f"{target.name()} belongs to manager `{ownership.manager}` as "
                f"{ownership.address}; a release never takes a tag it does not own"
            )
        current = client.head_manifest(target.repository, tag)
        if ownership is None and current is not None and current.digest != manifest.digest:
            raise PermanentProviderError(
                f"{target.name()} already points at {current.digest}; the release is "
                f"{manifest.digest}: a release never moves a tag it does not own (choose "
                "another version or tag)"
            )
        promoted = document["release"].get("promotedFrom")
        if promoted:
            source = fetch(client, str(promoted["repository"]), manifest.digest)
            if source.body != manifest.body:
                raise PermanentProviderError(
                    f"{promoted['reference']} holds other bytes than the planned promotion"
                )
        else:
            self._upload(resource, target.repository, document["release"])
        outputs = self._outputs(target, manifest)
        claim(
            client,
            target,
            manifest,
            Ownership(
                self.manager, resource.address, target.name(), manifest.digest, document, outputs
            ),
            marker,
        )
        if promoted:
            copy_image(client, str(promoted["repository"]), target.repository, manifest, tag)
        elif current is None or current.digest != manifest.digest:
            client.put_manifest(target.repository, tag, manifest)
        self._verify(target, manifest)
        return outputs

    def _upload(self, resource: DesiredResource, repository: str, section: dict[str, Any]) -> None:
        client = self.client
        client.upload_blob(repository, EMPTY_BLOB)
        client.upload_blob(repository, files_manifest(section))
        location = section["source"].get("location") or ""
        for file in section["files"]:
            if client.blob_exists(repository, file["digest"]):
                continue
            if not location:
                raise PermanentProviderError(
                    f"{resource.address}: blob {file['digest']} ({file['path']}) is gone from "
                    f"{repository} and the release records no source to upload it from"
                )
            with open_model_file(location, file["path"], self.object_store) as handle:
                data = _read_checked(handle, file)
            client.upload_blob(repository, data)

    def _verify(self, target: ImageTarget, manifest: Manifest) -> None:
        tagged = self.client.head_manifest(target.repository, target.tag or "")
        stored = self.client.get_manifest(target.repository, manifest.digest)
        if tagged is None or tagged.digest != manifest.digest:
            found = tagged.digest if tagged else "nothing"
            raise PermanentProviderError(
                f"{target.name()} resolves to {found} after the push, not {manifest.digest}"
            )
        if stored is None or stored.body != manifest.body:
            raise PermanentProviderError(
                f"{target.name()}@{manifest.digest} reads back other bytes than were pushed"
            )

    def _outputs(self, target: ImageTarget, manifest: Manifest) -> dict[str, Any]:
        return {
            "digest": manifest.digest,
            "reference": target.name(manifest.digest),
            "registry": target.registry,
            "repository": target.repository,
            "tag": target.tag or "",
            "artifactType": ARTIFACT_TYPE,
            "mediaType": manifest.kind,
        }

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        """Read a published release under `request.address` (trainform import); an artifact
        without trainform's marker is recorded as adopted and marked by the next publish."""
        document = request.document
        target = release_target(document, self.host)
        if identifier not in adoptable_names(document, target):
            raise PermanentProviderError(
                f"cannot adopt {identifier} as {request.address}: its spec publishes "
                f"{target.name()}; import the object the spec declares"
            )
        tag = target.tag or ""
        ownership, marker = read_mark(self.client, target.repository, tag)
        if marker is not None and (ownership is None or not self._ours(ownership, request.address)):
            owner = f"{ownership.manager} as {ownership.address}" if ownership else "no trainform"
            raise PermanentProviderError(
                f"cannot adopt {target.name()}: its marker {marker_tag(tag)} names {owner}"
            )
        manifest = self.client.get_manifest(target.repository, tag)
        if manifest is None:
            return Observation(exists=False)
        if not is_release(manifest):
            raise PermanentProviderError(
                f"cannot adopt {target.name()}: it is no trainform model artifact"
            )
        annotations = manifest.document.get("annotations") or {}
        check_adoptable(request.address, document["spec"]["version"], annotations, target.name())
        layers = manifest.document.get("layers") or []
        listing = self.client.get_blob(target.repository, layers[0]["digest"]) if layers else None
        files = json.loads(listing)["files"] if listing else []
        section = section_from_annotations(annotations, files, manifest.digest)
        if release_manifest(request.address, document["spec"]["version"], section).body != (
            manifest.body
        ):
            raise PermanentProviderError(
                f"cannot adopt {target.name()}: its manifest is not one trainform would publish"
            )
        outputs = self._outputs(target, manifest) | {
            "deleteArtifacts": bool(document["spec"].get("deleteArtifacts")),
            "adopted": marker is None,
        }
        return Observation(exists=True, live={**document, "release": section}, outputs=outputs)

    def unpublish(self, address: str, outputs: dict[str, Any], delete_artifacts: bool) -> None:
        repository, tag = str(outputs.get("repository") or ""), str(outputs.get("tag") or "")
        if not repository or not tag:
            return
        client = self.client
        ownership, marker = read_mark(client, repository, tag)
        if ownership is None or marker is None or not self._ours(ownership, address):
            return  # not ours (or gone): nothing of ours to remove
        current = client.head_manifest(repository, tag)
        if current is not None and current.digest == ownership.digest:
            untag(client, repository, tag, current.digest)
        if not client.delete_tag(repository, marker_tag(tag)):
            client.delete_manifest(repository, marker.digest)
        if delete_artifacts:
            document = ownership.document.get("release") or {}
            client.delete_manifest(repository, ownership.digest)
            for file in document.get("files", []):
                client.delete_blob(repository, file["digest"])


def _read_checked(handle: Any, file: dict[str, Any]) -> bytes:
    hasher = hashlib.sha256()
    parts = []
    while chunk := handle.read(CHUNK):
        hasher.update(chunk)
        parts.append(chunk)
    data = b"".join(parts)
    check_file("sha256:" + hasher.hexdigest(), file, len(data))
    return data
