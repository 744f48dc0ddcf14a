"""The `registry` provider: Images on an OCI distribution registry.

Two kinds of Image live here:

- referenced (no `promotedFrom`): read-only. Create and update resolve the tag to a digest,
  verify a pinned digest exists and that the image carries its required labels, and record
  outputs; nothing is written to the registry, and delete removes nothing from it.
- promoted (`promotedFrom: <image>`): create copies the source image (by the digest recorded
  for it) to the target `repository:tag`, keeping its digest, and claims the tag with an
  ownership marker under `<tag>.trainform` (providers/oci/manifests.py). The marker is
  written before the image, so an interrupted create is resumed, not refused. Only a tag
  whose marker names this manager and address is ever overwritten or deleted.

Import (`adopt`) only reads. A promoted tag without a marker is adopted by recording it in
state: its outputs say `adopted` and keep the digest seen then. Until the first write the plan
shows (an update or replace writes the marker, a delete untags), the tag counts as
trainform's only while it still points at that digest (providers/oci/adoption.py).

Observe reports a `tag-moved` finding when a tag no longer points at the pinned digest
(the spec's, else the one recorded at create or import).
"""

from __future__ import annotations

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
from trainform.providers.errors import PermanentProviderError, ProviderConfigError
from trainform.providers.oci.adoption import adopted_digest, check_unmarked, untag_adopted
from trainform.providers.oci.auth import credentials_from_env
from trainform.providers.oci.client import RegistryClient
from trainform.providers.oci.manifests import (
    MARKER_SUFFIX,
    MAX_TAG_LENGTH,
    Manifest,
    Ownership,
    marker_tag,
)
from trainform.providers.oci.ownership import claim, owned_marks, read_mark, untag
from trainform.providers.oci.promotion import copy_image, fetch, image_labels
from trainform.providers.oci.references import (
    ImageTarget,
    image_target,
    normal_host,
    reference_problems,
    url_host,
)
from trainform.providers.oci.release_manifest import ARTIFACT_TYPE
from trainform.providers.oci.releases import ReleasePublisher, release_target
from trainform.providers.releases import RELEASE_SCHEMA


class RegistryProvider(Provider):
    type = "registry"
    import_ids = (
        "the image reference the Image spec declares (<registry>/<repository>:<tag>); for a "
        "ModelRelease, its registry reference (or its objectStore prefix/version)"
    )
    schemas: ClassVar[dict[str, KindSchema]] = {
        "Image": KindSchema(
            "Image",
            forces_replacement=(
                "spec.reference",
                "spec.promotedFrom",
                "spec.runtime",
                "spec.provider",
            ),
            computed=("digest",),
        ),
        "ModelRelease": RELEASE_SCHEMA,
    }

    def __init__(self) -> None:
        super().__init__()
        self.manager = "trainform"
        self.url = ""
        self.scheme = "https"
        self.host = ""
        self.allowed: list[str] = []
        self._connection: Any = None
        self._client: RegistryClient | None = None
        self.object_store: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"RegistryProvider(name={self.name!r}, url={self.url!r})"

    def configure(self, name: str, connection: Any, context: ProviderContext) -> None:
        super().configure(name, connection, context)
        self.manager = context.manager
        self.url = str(connection.url).rstrip("/")
        self.scheme, self.host = url_host(self.url)
        if self.scheme not in ("http", "https") or not self.host:
            raise ProviderConfigError(
                f"cannot configure registry provider `{name}`: url {self.url!r} is not an "
                "http(s) URL"
            )
        if self.scheme == "http" and not connection.insecure:
            raise ProviderConfigError(
                f"cannot configure registry provider `{name}`: {self.url} is plain HTTP; "
                "set `insecure: true` to allow it"
            )
        self.allowed = [normal_host(host, self.scheme) for host in connection.allowed]
        self._connection = connection
        self.object_store = context.object_store

    @property
    def client(self) -> RegistryClient:
        """The HTTP client, made on first use (reading credentials then, not in validate)."""
        if self._client is None:
            credentials = credentials_from_env(
                self._connection.username_env, self._connection.password_env
            )
            self._client = RegistryClient(self.url, credentials)
        return self._client

    @property
    def releases(self) -> ReleasePublisher:
        """The ModelRelease side of this instance (providers/oci/releases.py)."""
        return ReleasePublisher(self.client, self.host, self.manager, self.object_store)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # pure --------------------------------------------------------------------------------

    def validate(self, resource: DesiredResource) -> list[ValidationProblem]:
        if resource.kind == "ModelRelease":
            return release_problems(resource)
        problems = reference_problems(
            resource.spec, self.host, self.scheme, self.allowed, self.name
        )
        return [ValidationProblem(resource.address, field, text) for field, text in problems]

    def render(self, resource: DesiredResource) -> list[dict[str, Any]]:
        if resource.kind == "ModelRelease":
            target = release_target(resource.document, self.host)
            section = resource.document.get("release") or {}
            return [
                {
                    "registry": target.registry,
                    "repository": target.repository,
                    "tag": target.tag,
                    "artifactType": ARTIFACT_TYPE,
                    "digest": section.get("digest") or "(known after plan)",
                    "ownershipTag": marker_tag(target.tag or ""),
                }
            ]
        target = image_target(resource.spec, self.scheme)
        rendered: dict[str, Any] = {
            "registry": target.registry,
            "repository": target.repository,
            "tag": target.tag,
            "digest": target.digest or "(known after apply)",
        }
        source = resource.spec.get("promotedFrom")
        if source:
            rendered |= {"promotedFrom": source, "ownershipTag": marker_tag(target.tag or "")}
        return [rendered]

    # reads -------------------------------------------------------------------------------

    def observe(self, requests: list[ObserveRequest]) -> dict[str, Observation]:
        return {
            request.address: (
                self.releases.observe(request)
                if request.kind == "ModelRelease"
                else self._observe_promoted(request)
                if request.document["spec"].get("promotedFrom")
                else self._observe_referenced(request)
            )
            for request in requests
        }

    def _observe_referenced(self, request: ObserveRequest) -> Observation:
        target = image_target(request.document["spec"], self.scheme)
        pinned = target.digest or request.outputs.get("digest")
        current = self.client.head_manifest(target.repository, target.tag) if target.tag else None
        if pinned and (current is None or current.digest != pinned):
            if self.client.head_manifest(target.repository, pinned) is None:
                return Observation(exists=False)
        elif current is None:
            return Observation(exists=False)
        findings = []
        if pinned and target.tag:
            findings.append(_tag_finding(target, pinned, current.digest if current else None))
        return Observation(
            exists=True,
            live=request.document,
            outputs=dict(request.outputs),
            findings=tuple(f for f in findings if f is not None),
        )

    def _observe_promoted(self, request: ObserveRequest) -> Observation:
        target = image_target(request.document["spec"], self.scheme)
        tag = target.tag or ""
        ownership, marker = read_mark(self.client, target.repository, tag)
        adopted = adopted_digest(request.outputs)
        if marker is None and adopted:
            return self._observe_adopted(request, target, adopted)
        if not self._ours(ownership, request.address):
            return Observation(exists=False)
        assert ownership is not None
        current = self.client.head_manifest(target.repository, tag)
        if current is None:
            return Observation(exists=False)
        finding = _tag_finding(target, target.digest or ownership.digest, current.digest)
        return Observation(
            exists=True,
            live=ownership.document,
            outputs=ownership.outputs,
            findings=(finding,) if finding else (),
        )

    def _observe_adopted(
        self, request: ObserveRequest, target: ImageTarget, adopted: str
    ) -> Observation:
        """An imported tag not marked yet: as state recorded it, while the tag exists."""
        current = self.client.head_manifest(target.repository, target.tag or "")
        if current is None:
            return Observation(exists=False)
        finding = _tag_finding(target, target.digest or adopted, current.digest)
        return Observation(
            exists=True,
            live=request.document,
            outputs=dict(request.outputs),
            findings=(finding,) if finding else (),
        )

    def resolve(self, resource: DesiredResource) -> dict[str, Any]:
        self.require_valid(resource)
        target = image_target(resource.spec, self.scheme)
        if target.digest:
            if not _promoted(resource) and (
                self.client.head_manifest(target.repository, target.digest) is None
            ):
                raise PermanentProviderError(f"{target.name()}: the pinned digest is missing")
            return {"digest": target.digest}
        current = self.client.head_manifest(target.repository, target.tag or "")
        if current is None and _promoted(resource):
            source = self._resolved_source(resource)
            if source:
                return {"digest": source}  # promotion copies the manifest: same digest
        if current is None:
            hint = "; apply the promotion first or pin its digest" if _promoted(resource) else ""
            raise PermanentProviderError(f"{target.name()}: the tag does not exist{hint}")
        return {"digest": current.digest}

    def _resolved_source(self, resource: DesiredResource) -> str:
        """The digest its source image resolved to, when the engine passed it along."""
        name = resource.spec["promotedFrom"]
        for address, outputs in resource.outputs_of_dependencies.items():
            if address.startswith("Image/") and address.rsplit("/", 1)[-1] == name:
                return str(self._image_outputs(outputs).get("digest") or "")
        return ""

    def adopt(self, request: ObserveRequest, identifier: str) -> Observation:
        """Take an existing tag (`identifier`, the spec's own reference) under
        `request.address`, reading only: an unmarked promoted tag is recorded as adopted
        (outputs `adopted` and the digest it has now); the first planned write marks it."""
        resource = DesiredResource(
            request.address, request.kind, request.name, request.project, request.document
        )
        self.require_valid(resource)
        if request.kind == "ModelRelease":
            return self.releases.adopt(request, identifier)
        target = image_target(resource.spec, self.scheme)
        try:
            named = image_target({"reference": identifier}, self.scheme)
        except ValueError as exc:
            raise PermanentProviderError(f"cannot adopt {identifier}: {exc}") from None
        if (named.registry, named.repository, named.tag) != (
            target.registry,
            target.repository,
            target.tag,
        ):
            raise PermanentProviderError(
                f"cannot adopt {identifier} as {request.address}: its spec names "
                f"{target.name()}; import the object the spec declares"
            )
        if not _promoted(resource):
            try:
                outputs = self._reference(resource)
            except PermanentProviderError:
                return Observation(exists=False)
            return Observation(exists=True, live=request.document, outputs=outputs)
        tag = target.tag or ""
        ownership, marker = read_mark(self.client, target.repository, tag)
        if marker is not None and ownership is None:
            raise PermanentProviderError(
                f"cannot adopt {identifier}: {marker_tag(tag)} is not a trainform marker"
            )
        if ownership is not None and ownership.manager != self.manager:
            raise PermanentProviderError(_not_ours(target, ownership))
        if ownership is not None and ownership.address != request.address:
            raise PermanentProviderError(
                f"cannot adopt {identifier} as {request.address}: trainform's marker "
                f"{marker_tag(tag)} names {ownership.address}; import it as that address, or "
                "delete the marker tag first"
            )
        if ownership is not None:
            return self._observe_promoted(request)  # already ours: state takes the marker's
        current = self.client.get_manifest(target.repository, tag)
        if current is None:
            return Observation(exists=False)
        labels = self._required_labels(resource, target.repository, current)
        outputs = self._outputs(target, current, labels) | {
            "promoted": True,
            "source": "",
            "adopted": True,
        }
        return Observation(exists=True, live=request.document, outputs=outputs)

    def list_owned(self) -> list[tuple[str, str]]:
        owned = {ownership.address for _, _, ownership in owned_marks(self.client, self.manager)}
        return [(address, address.split("/", 1)[0]) for address in sorted(owned)]

    # writes ------------------------------------------------------------------------------

    def create(self, resource: DesiredResource) -> dict[str, Any]:
        return self.update(resource, {})

    def update(self, resource: DesiredResource, outputs: dict[str, Any]) -> dict[str, Any]:
        self.require_valid(resource)
        if resource.kind == "ModelRelease":
            published = self.releases.publish(resource)
            return published | {"deleteArtifacts": bool(resource.spec.get("deleteArtifacts"))}
        if _promoted(resource):
            return self._promote(resource, outputs)
        return self._reference(resource)

    def _reference(self, resource: DesiredResource) -> dict[str, Any]:
        target = image_target(resource.spec, self.scheme)
        client = self.client
        current = client.head_manifest(target.repository, target.tag) if target.tag else None
        digest = target.digest or (current.digest if current else None)
        if digest is None:
            raise PermanentProviderError(f"{target.name()}: the tag does not exist")
        manifest = client.get_manifest(target.repository, digest)
        if manifest is None:
            raise PermanentProviderError(
                f"{target.name()}: the pinned digest {digest} does not exist in "
                f"{target.registry}/{target.repository}"
            )
        labels = self._required_labels(resource, target.repository, manifest)
        return self._outputs(target, manifest, labels)

    def _promote(self, resource: DesiredResource, recorded: dict[str, Any]) -> dict[str, Any]:
        """Copy the source to the tag, marker first; `recorded` are the outputs in state (an
        adopted tag not marked yet is taken only while it has the digest seen at import)."""
        target = image_target(resource.spec, self.scheme)
        tag = target.tag or ""
        source = self._source_of(resource)
        if target.digest and target.digest != source["digest"]:
            raise PermanentProviderError(
                f"{target.name()}: promoting {source['reference']} gives digest "
                f"{source['digest']}, not the pinned {target.digest}"
            )
        client = self.client
        ownership, marker = read_mark(self.client, target.repository, tag)
        if marker is not None and ownership is None:
            raise PermanentProviderError(
                f"{target.registry}/{target.repository}:{marker_tag(tag)} exists and is not a "
                "trainform ownership marker; remove that tag or promote to another one"
            )
        if ownership is not None and not self._ours(ownership, resource.address):
            raise PermanentProviderError(_not_ours(target, ownership))
        current = client.head_manifest(target.repository, tag) if ownership is None else None
        if current is not None:
            check_unmarked(target, resource.address, recorded, current)
        manifest = fetch(client, source["repository"], source["digest"])
        labels = self._required_labels(resource, source["repository"], manifest)
        outputs = self._outputs(target, manifest, labels) | {
            "promoted": True,
            "source": source["reference"],
        }
        claim(
            self.client, target, manifest, self._ownership_of(resource, manifest, outputs), marker
        )
        copy_image(client, source["repository"], target.repository, manifest, tag)
        return outputs

    def delete(self, address: str, kind: str, outputs: dict[str, Any]) -> None:
        if kind == "ModelRelease":
            self.releases.unpublish(address, outputs, bool(outputs.get("deleteArtifacts")))
            return
        if outputs and not outputs.get("promoted"):
            return  # a referenced image: nothing of it was written
        if outputs.get("repository") and outputs.get("tag"):
            repository, tag = str(outputs["repository"]), str(outputs["tag"])
        else:
            found = next(
                (m for m in owned_marks(self.client, self.manager) if m[2].address == address), None
            )
            if found is None:
                return
            repository, tag = found[0], found[1]
        ownership, marker = read_mark(self.client, repository, tag)
        adopted = adopted_digest(outputs)
        if marker is None and adopted:
            untag_adopted(self.client, address, repository, tag, adopted)
            return
        if ownership is None or marker is None:
            return
        if not self._ours(ownership, address):
            target = ImageTarget(self.host, repository, tag, None)
            raise PermanentProviderError(_not_ours(target, ownership))
        client = self.client
        current = client.head_manifest(repository, tag)
        if current is not None and current.digest == ownership.digest:
            untag(self.client, repository, tag, current.digest)
        if not client.delete_tag(repository, marker_tag(tag)):
            client.delete_manifest(repository, marker.digest)

    # helpers -----------------------------------------------------------------------------

    def _ownership_of(
        self, resource: DesiredResource, image: Manifest, outputs: dict[str, Any]
    ) -> Ownership:
        target = image_target(resource.spec, self.scheme)
        return Ownership(
            self.manager, resource.address, target.name(), image.digest, resource.document, outputs
        )

    def _ours(self, ownership: Ownership | None, address: str) -> bool:
        return (
            ownership is not None
            and ownership.manager == self.manager
            and ownership.address == address
        )

    def _source_of(self, resource: DesiredResource) -> dict[str, Any]:
        name = resource.spec["promotedFrom"]
        candidates = [
            (address, self._image_outputs(outputs))
            for address, outputs in resource.outputs_of_dependencies.items()
            if address.startswith("Image/") and address.rsplit("/", 1)[-1] == name
        ]
        if not candidates or not candidates[0][1].get("digest"):
            raise PermanentProviderError(
                f"cannot promote from image {name}: no digest is recorded for it; apply it first"
            )
        address, outputs = candidates[0]
        if outputs.get("registry") != self.host or not outputs.get("repository"):
            raise PermanentProviderError(
                f"cannot promote from {address} ({outputs.get('reference')}): promotion copies "
                f"within one registry, and provider instance `{self.name}` serves {self.host}"
            )
        return outputs

    def _image_outputs(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """An image's outputs, given flat or per provider instance (as state keeps them)."""
        if "digest" in outputs:
            return outputs
        nested = [value for value in outputs.values() if isinstance(value, dict)]
        mine = outputs.get(self.name)
        return mine if isinstance(mine, dict) else (nested[0] if nested else {})

    def _required_labels(
        self, resource: DesiredResource, repository: str, manifest: Manifest
    ) -> dict[str, str]:
        required = list(resource.spec.get("requiredLabels") or [])
        if not required:
            return {}
        labels = image_labels(self.client, repository, manifest)
        missing = [label for label in required if label not in labels]
        if missing:
            raise PermanentProviderError(
                f"{resource.spec['reference']} ({repository}@{manifest.digest}) lacks required "
                f"label{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            )
        return {label: labels[label] for label in required}

    def _outputs(
        self, target: ImageTarget, manifest: Manifest, labels: dict[str, str]
    ) -> dict[str, Any]:
        return {
            "digest": manifest.digest,
            "reference": target.name(manifest.digest),
            "registry": target.registry,
            "repository": target.repository,
            "tag": target.tag or "",
            "mediaType": manifest.kind,
            "labels": labels,
            "promoted": False,
        }


def release_problems(resource: DesiredResource) -> list[ValidationProblem]:
    """A release tag must leave room for its marker and must not look like one."""
    tag = release_target(resource.document, "").tag or ""
    field = "spec.registry.tag" if resource.spec["registry"].get("tag") else "spec.version"
    if tag.endswith(MARKER_SUFFIX):
        return [
            ValidationProblem(
                resource.address,
                field,
                f"{tag}: tags ending {MARKER_SUFFIX} are trainform's ownership markers",
            )
        ]
    if len(marker_tag(tag)) > MAX_TAG_LENGTH:
        return [
            ValidationProblem(
                resource.address,
                field,
                f"{tag}: at most "
                f"{MAX_TAG_LENGTH - len(MARKER_SUFFIX)} characters (its marker tag adds "
                f"{MARKER_SUFFIX})",
            )
        ]
    return []


def _promoted(resource: DesiredResource) -> bool:
    return bool(resource.spec.get("promotedFrom"))


def _tag_finding(target: ImageTarget, pinned: str, current: str | None) -> Finding | None:
    if current == pinned:
        return None
    evidence = {"reference": target.name(), "tag": target.tag, "pinned": pinned, "current": current}
    if current is None:
        return Finding(
            "tag-missing",
            f"{target.name()}: tag {target.tag} no longer exists; the pinned {pinned} does",
            evidence,
        )
    return Finding(
        "tag-moved",
        f"{target.name()}: tag {target.tag} now points at {current}, not the pinned {pinned}",
        evidence,
    )


def _not_ours(target: ImageTarget, ownership: Ownership) -> str:
    return (
        f"{target.registry}/{target.repository}:{target.tag} belongs to manager "
        f"`{ownership.manager}` as {ownership.address}; trainform changes only what it owns"
    )
