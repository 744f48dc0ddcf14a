"""Referenced images on a real docker-registry: tag -> digest, pinned digests, moved tags,
required labels and allowed registries. Nothing here writes to the registry through the
provider; images are pushed by the tests with plain HTTP."""

from __future__ import annotations

import pytest
from trainform.providers.errors import PermanentProviderError

from tests.providers.oci.fixtures import ProviderFactory, image_resource, request_of
from tests.services.registry import RegistryServer, push_image, unique_repository

SOURCE_LABEL = "org.opencontainers.image.source"
MISSING = "sha256:" + "0" * 64


def test_a_tag_resolves_to_the_digest_the_registry_serves(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    repository = unique_repository()
    pushed = push_image(registry_server.url, repository, "v1")
    provider = provider_for(registry_server.url)
    image = image_resource("Image/app", f"{registry_server.host}/{repository}:v1")

    outputs = provider.create(image)

    assert outputs["digest"] == pushed.digest
    assert outputs["reference"] == f"{registry_server.host}/{repository}:v1@{pushed.digest}"
    assert provider.resolve(image) == {"digest": pushed.digest}
    observation = provider.observe([request_of(image, outputs)])["Image/app"]
    assert observation.exists and observation.live == image.document
    assert observation.findings == ()


def test_a_pinned_digest_is_verified(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    repository = unique_repository()
    pushed = push_image(registry_server.url, repository, "v1")
    provider = provider_for(registry_server.url)
    present = image_resource("Image/app", f"{registry_server.host}/{repository}:v1@{pushed.digest}")
    absent = image_resource("Image/app", f"{registry_server.host}/{repository}:v1@{MISSING}")
    digest_only = image_resource(
        "Image/app", f"{registry_server.host}/{repository}@{pushed.digest}"
    )

    assert provider.create(present)["digest"] == pushed.digest
    assert provider.create(digest_only)["digest"] == pushed.digest
    with pytest.raises(PermanentProviderError, match="does not exist"):
        provider.create(absent)
    with pytest.raises(PermanentProviderError, match="pinned digest is missing"):
        provider.resolve(absent)
    assert provider.observe([request_of(absent)])["Image/app"].exists is False


def test_a_missing_tag_does_not_exist_and_cannot_be_created(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    provider = provider_for(registry_server.url)
    image = image_resource("Image/app", f"{registry_server.host}/{unique_repository()}:v1")

    assert provider.observe([request_of(image)])["Image/app"].exists is False
    with pytest.raises(PermanentProviderError, match="tag does not exist"):
        provider.create(image)
    provider.delete(image.address, image.kind, {})


def test_observe_reports_a_moved_tag_with_evidence(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    repository = unique_repository()
    first = push_image(registry_server.url, repository, "v1", payload=b"first\n")
    provider = provider_for(registry_server.url)
    by_tag = image_resource("Image/by-tag", f"{registry_server.host}/{repository}:v1")
    pinned = image_resource(
        "Image/pinned", f"{registry_server.host}/{repository}:v1@{first.digest}"
    )
    recorded = provider.create(by_tag)
    second = push_image(registry_server.url, repository, "v1", payload=b"second\n")

    seen = provider.observe([request_of(by_tag, recorded), request_of(pinned)])

    for address in ("Image/by-tag", "Image/pinned"):
        observation = seen[address]
        assert observation.exists, address
        (finding,) = observation.findings
        assert finding.kind == "tag-moved"
        assert finding.evidence["tag"] == "v1"
        assert finding.evidence["pinned"] == first.digest
        assert finding.evidence["current"] == second.digest
        assert repository in finding.evidence["reference"]
    assert seen["Image/by-tag"].outputs == recorded


@pytest.mark.parametrize(
    ("labels", "required", "missing"),
    [
        pytest.param({SOURCE_LABEL: "https://git"}, [SOURCE_LABEL], None, id="present"),
        pytest.param({}, [SOURCE_LABEL], SOURCE_LABEL, id="missing"),
        pytest.param({SOURCE_LABEL: "x"}, [SOURCE_LABEL, "revision"], "revision", id="one-of-two"),
    ],
)
def test_required_labels_are_checked_against_the_image_config(
    registry_server: RegistryServer,
    provider_for: ProviderFactory,
    labels: dict[str, str],
    required: list[str],
    missing: str | None,
) -> None:
    repository = unique_repository()
    push_image(registry_server.url, repository, "v1", labels=labels)
    provider = provider_for(registry_server.url)
    image = image_resource(
        "Image/app", f"{registry_server.host}/{repository}:v1", requiredLabels=required
    )

    if missing is None:
        assert provider.create(image)["labels"] == {label: labels[label] for label in required}
    else:
        with pytest.raises(PermanentProviderError, match=f"lacks required label.*{missing}"):
            provider.create(image)


def test_labels_of_an_index_come_from_its_linux_amd64_manifest(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    from tests.services.registry import push_index

    repository = unique_repository()
    arm = push_image(registry_server.url, repository, "arm", {}, b"arm\n", "arm64")
    amd = push_image(registry_server.url, repository, "amd", {SOURCE_LABEL: "amd"}, b"amd\n")
    index = push_index(registry_server.url, repository, "multi", {"arm64": arm, "amd64": amd})
    provider = provider_for(registry_server.url)
    image = image_resource(
        "Image/app", f"{registry_server.host}/{repository}:multi", requiredLabels=[SOURCE_LABEL]
    )

    outputs = provider.create(image)

    assert outputs["digest"] == index
    assert outputs["labels"] == {SOURCE_LABEL: "amd"}
    assert outputs["mediaType"] == "application/vnd.oci.image.index.v1+json"


def test_delete_of_a_referenced_image_removes_nothing(
    registry_server: RegistryServer, provider_for: ProviderFactory
) -> None:
    repository = unique_repository()
    pushed = push_image(registry_server.url, repository, "v1")
    provider = provider_for(registry_server.url)
    image = image_resource("Image/app", f"{registry_server.host}/{repository}:v1")
    outputs = provider.create(image)

    provider.delete(image.address, image.kind, outputs)

    observation = provider.observe([request_of(image, outputs)])["Image/app"]
    assert observation.exists
    assert provider.resolve(image) == {"digest": pushed.digest}


@pytest.mark.parametrize(
    ("reference", "allowed", "message"),
    [
        pytest.param("elsewhere.example.com/ml/app:v1", [], "is not the one", id="other-host"),
        pytest.param(
            "elsewhere.example.com/ml/app:v1", ["{host}"], "is not allowed", id="not-allowed"
        ),
        pytest.param("ml/app:v1", [], "names no registry host", id="no-host"),
    ],
)
def test_a_reference_to_another_registry_is_refused_without_io(
    provider_for: ProviderFactory, reference: str, allowed: list[str], message: str
) -> None:
    url = "http://127.0.0.1:9"  # nothing listens: validate must not connect
    provider = provider_for(url, allowed=[a.format(host="127.0.0.1:9") for a in allowed])
    image = image_resource("Image/app", reference)

    (problem,) = provider.validate(image)

    assert problem.field == "spec.reference"
    assert reference in problem.message and message in problem.message
    with pytest.raises(PermanentProviderError, match=message):
        provider.create(image)


def test_the_provider_host_is_allowed_when_listed(provider_for: ProviderFactory) -> None:
    provider = provider_for("https://Registry.Example.com:443", allowed=["registry.example.com"])

    assert provider.validate(image_resource("Image/a", "registry.example.com/ml/a:v1")) == []


def test_a_host_runtime_image_is_refused(provider_for: ProviderFactory) -> None:
    provider = provider_for("http://127.0.0.1:9")
    image = image_resource("Image/a", "127.0.0.1:9/ml/a:v1", runtime="host")

    assert [p.field for p in provider.validate(image)] == ["spec.runtime"]
