"""Promoted images on a real docker-registry: the copy keeps the digest, blobs are mounted or
uploaded, re-creating changes nothing, the ownership marker guards overwrite and delete,
and list_owned finds exactly this manager's promotions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import requests
from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.provider import RegistryProvider

from tests.providers.oci.fixtures import ProviderFactory, image_resource, request_of
from tests.services.registry import (
    MountDecliningProxy,
    PushedImage,
    RegistryServer,
    head_digest,
    push_image,
    push_index,
    unique_repository,
)

LABEL = "org.opencontainers.image.revision"


@dataclass
class Promotion:
    """A source image pushed by the test and the promoted Image that copies it."""

    source_repository: str
    target_repository: str
    pushed: PushedImage
    source: DesiredResource
    target: DesiredResource

    def with_source_outputs(self, provider: RegistryProvider) -> DesiredResource:
        outputs = provider.create(self.source)
        return replace(self.target, outputs_of_dependencies={self.source.address: outputs})


def promotion(server: RegistryServer, host: str | None = None, **spec: Any) -> Promotion:
    host = host or server.host
    source_repository, target_repository = unique_repository("staging"), unique_repository("ml")
    pushed = push_image(server.url, source_repository, "candidate", labels={LABEL: "abc123"})
    suffix = uuid.uuid4().hex[:8]  # the registry is shared: addresses differ per test
    source = image_resource(f"Image/candidate-{suffix}", f"{host}/{source_repository}:candidate")
    target = image_resource(
        f"Image/trainer-{suffix}",
        f"{host}/{target_repository}:v1",
        promotedFrom=f"candidate-{suffix}",
        **spec,
    )
    return Promotion(source_repository, target_repository, pushed, source, target)


def blob_in(server: RegistryServer, repository: str, digest: str) -> bool:
    response = requests.head(f"{server.url}/v2/{repository}/blobs/{digest}", timeout=10)
    return response.status_code == 200


def test_promotion_copies_manifest_and_blobs_keeping_the_digest(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server, requiredLabels=[LABEL])
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)

    outputs = provider.create(target)

    assert head_digest(registry_server.url, case.target_repository, "v1") == case.pushed.digest
    assert outputs["digest"] == case.pushed.digest
    assert outputs["promoted"] is True and outputs["labels"] == {LABEL: "abc123"}
    assert all(blob_in(registry_server, case.target_repository, b) for b in case.pushed.blobs)
    assert head_digest(registry_server.url, case.source_repository, "candidate") == (
        case.pushed.digest
    )
    observation = provider.observe([request_of(target, outputs)])[target.address]
    assert observation.exists and observation.live == target.document
    assert observation.outputs == outputs and observation.findings == ()


def test_blobs_are_uploaded_when_the_registry_declines_the_mount(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    proxy = MountDecliningProxy(registry_server.url)
    try:
        case = promotion(registry_server, host=proxy.host)
        provider = provider_for(proxy.url)

        provider.create(case.with_source_outputs(provider))

        assert proxy.mount_attempts == len(case.pushed.blobs)
        assert head_digest(registry_server.url, case.target_repository, "v1") == (
            case.pushed.digest
        )
        assert all(blob_in(registry_server, case.target_repository, b) for b in case.pushed.blobs)
    finally:
        proxy.stop()


def test_an_index_is_promoted_with_its_child_manifests(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    source_repository, target_repository = unique_repository("staging"), unique_repository("ml")
    arm = push_image(registry_server.url, source_repository, "arm", {}, b"arm\n", "arm64")
    amd = push_image(registry_server.url, source_repository, "amd", {}, b"amd\n")
    index = push_index(
        registry_server.url, source_repository, "multi", {"arm64": arm, "amd64": amd}
    )
    provider = provider_for(registry_server.url)
    source = image_resource("Image/multi", f"{registry_server.host}/{source_repository}:multi")
    target = image_resource(
        "Image/multi-ml", f"{registry_server.host}/{target_repository}:v1", promotedFrom="multi"
    )
    target = replace(target, outputs_of_dependencies={source.address: provider.create(source)})

    provider.create(target)

    assert head_digest(registry_server.url, target_repository, "v1") == index
    for child in (arm, amd):
        assert head_digest(registry_server.url, target_repository, child.digest) == child.digest
        assert all(blob_in(registry_server, target_repository, b) for b in child.blobs)


def test_create_again_changes_nothing(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    first = provider.create(target)
    marker = head_digest(registry_server.url, case.target_repository, "v1.trainform")

    second = provider.create(target)

    assert second == first
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform") == marker
    assert [a for a, _ in provider.list_owned()].count(target.address) == 1


def test_a_pinned_target_digest_must_match_the_source(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    wrong = "sha256:" + "1" * 64
    document = {
        **target.document,
        "spec": {**target.spec, "reference": f"{target.spec['reference']}@{wrong}"},
    }

    with pytest.raises(PermanentProviderError, match="not the pinned"):
        provider.create(replace(target, document=document))
    assert head_digest(registry_server.url, case.target_repository, "v1") is None


def test_a_tag_pushed_by_hand_is_never_overwritten(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    theirs = push_image(registry_server.url, case.target_repository, "v1", payload=b"theirs\n")
    provider = provider_for(registry_server.url)

    with pytest.raises(PermanentProviderError, match="without trainform's ownership marker"):
        provider.create(case.with_source_outputs(provider))

    assert head_digest(registry_server.url, case.target_repository, "v1") == theirs.digest
    assert provider.observe([request_of(case.target)])[case.target.address].exists is False


def test_another_managers_promotion_is_never_overwritten_or_deleted(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    ours = provider_for(registry_server.url)
    theirs = provider_for(registry_server.url, manager="platform-b")
    target = case.with_source_outputs(theirs)
    outputs = theirs.create(target)

    with pytest.raises(PermanentProviderError, match="belongs to manager `platform-b`"):
        ours.create(target)
    with pytest.raises(PermanentProviderError, match="belongs to manager `platform-b`"):
        ours.delete(target.address, "Image", outputs)

    assert ours.observe([request_of(target)])[target.address].exists is False
    assert target.address not in [a for a, _ in ours.list_owned()]
    assert theirs.observe([request_of(target, outputs)])[target.address].exists
    assert head_digest(registry_server.url, case.target_repository, "v1") == case.pushed.digest


def test_delete_removes_the_promoted_tag_and_its_marker_only(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    outputs = provider.create(target)

    provider.delete(target.address, "Image", outputs)
    provider.delete(target.address, "Image", outputs)

    assert head_digest(registry_server.url, case.target_repository, "v1") is None
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform") is None
    assert head_digest(registry_server.url, case.source_repository, "candidate") == (
        case.pushed.digest
    )
    assert provider.observe([request_of(target, outputs)])[target.address].exists is False
    assert target.address not in [a for a, _ in provider.list_owned()]


def test_delete_without_recorded_outputs_finds_the_promotion_by_its_marker(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    provider.create(target)

    provider.delete(target.address, "Image", {})

    assert head_digest(registry_server.url, case.target_repository, "v1") is None


def test_delete_refuses_when_another_tag_shares_the_digest(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    """distribution 2.8 deletes manifests by digest only, which would take other tags."""
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    outputs = provider.create(target)
    push_image(registry_server.url, case.target_repository, "latest", labels={LABEL: "abc123"})

    with pytest.raises(PermanentProviderError, match="tags latest also point at"):
        provider.delete(target.address, "Image", outputs)

    assert head_digest(registry_server.url, case.target_repository, "latest") == (
        case.pushed.digest
    )


def test_a_tag_moved_over_a_promotion_is_found_and_not_deleted(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    provider = provider_for(registry_server.url)
    target = case.with_source_outputs(provider)
    outputs = provider.create(target)
    moved = push_image(registry_server.url, case.target_repository, "v1", payload=b"moved\n")

    observation = provider.observe([request_of(target, outputs)])[target.address]
    provider.delete(target.address, "Image", outputs)

    (finding,) = observation.findings
    assert finding.kind == "tag-moved"
    assert (finding.evidence["pinned"], finding.evidence["current"]) == (
        case.pushed.digest,
        moved.digest,
    )
    assert head_digest(registry_server.url, case.target_repository, "v1") == moved.digest
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform") is None


def test_list_owned_pages_through_catalog_and_tags(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    from trainform.providers.oci import client

    monkeypatch.setattr(client, "PAGE_SIZE", 2)
    provider = provider_for(registry_server.url, manager=f"pager-{unique_repository('x')[2:]}")
    addresses = []
    for number in range(3):
        case = promotion(registry_server)
        target = case.with_source_outputs(provider)
        address = f"Image/team-{number}/trainer"
        provider.create(replace(target, address=address, project=f"team-{number}"))
        addresses.append(address)

    assert provider.list_owned() == [(address, "Image") for address in addresses]


@pytest.fixture
def source_and_target(registry_server: RegistryServer) -> Iterator[Promotion]:
    yield promotion(registry_server)


def test_resolve_of_a_promotion_gives_the_source_digest_before_and_the_target_after(
    registry_server: RegistryServer, provider_for: ProviderFactory, source_and_target: Promotion
) -> None:
    """Before the promotion runs, `trainform lock` pins the digest it will copy (the source's,
    passed by the engine as a resolved dependency); without it the tag is simply missing."""
    provider = provider_for(registry_server.url)
    target = source_and_target.with_source_outputs(provider)
    unresolved = replace(target, outputs_of_dependencies={})

    with pytest.raises(PermanentProviderError, match="apply the promotion first"):
        provider.resolve(unresolved)
    assert provider.resolve(target) == {"digest": source_and_target.pushed.digest}
    provider.create(target)
    assert provider.resolve(unresolved) == {"digest": source_and_target.pushed.digest}


def test_blobs_are_mounted_across_repositories_where_the_registry_allows(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    case = promotion(registry_server)
    client = provider_for(registry_server.url).client
    config, layer = case.pushed.blobs

    assert client.copy_blob(case.source_repository, case.target_repository, layer) == "mounted"
    assert client.copy_blob(case.source_repository, case.target_repository, layer) == "present"
    assert blob_in(registry_server, case.target_repository, layer)
    assert not blob_in(registry_server, case.target_repository, config)
