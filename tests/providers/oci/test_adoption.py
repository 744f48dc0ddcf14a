"""`trainform import` of promoted images on a real docker-registry reads and never writes:
an unmarked tag is recorded as adopted, observed as state recorded it, marked by the first
planned update, and neither overwritten nor deleted once someone has moved it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import requests
from trainform.providers.base import DesiredResource
from trainform.providers.errors import PermanentProviderError
from trainform.providers.oci.provider import RegistryProvider

from tests.providers.oci.fixtures import ProviderFactory, request_of
from tests.providers.oci.test_promotion import LABEL, Promotion, promotion
from tests.services.registry import RegistryServer, head_digest, push_image

WRITES = ("put_manifest", "delete_manifest", "delete_tag", "copy_blob", "upload_blob")


def forbid_writes(provider: RegistryProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every writing call of the provider's client fail the test."""

    def refuse(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"import wrote to the registry: {name}{args}")

        return call

    for name in WRITES:
        monkeypatch.setattr(provider.client, name, refuse(name))


def tags_of(server: RegistryServer, repository: str) -> dict[str, str | None]:
    """Every tag of `repository` and the digest it points at."""
    response = requests.get(f"{server.url}/v2/{repository}/tags/list", timeout=10)
    response.raise_for_status()
    tags = response.json().get("tags") or []
    return {tag: head_digest(server.url, repository, tag) for tag in tags}


def promoted_by_hand(server: RegistryServer) -> Promotion:
    """A promotion whose target tag someone already copied from the source, unmarked."""
    case = promotion(server)
    push_image(server.url, case.target_repository, "v1", labels={LABEL: "abc123"})
    assert head_digest(server.url, case.target_repository, "v1") == case.pushed.digest
    return case


def adopted(
    case: Promotion, provider: RegistryProvider, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Adopt the target tag with writes forbidden; its outputs as state keeps them."""
    with monkeypatch.context() as patched:
        forbid_writes(provider, patched)
        observation = provider.adopt(request_of(case.target), case.target.spec["reference"])
    assert observation.exists and observation.live == case.target.document
    return observation.outputs


def relabelled(target: DesiredResource) -> DesiredResource:
    """The same Image with a changed metadata label: the plan shows an update."""
    document = {**target.document, "metadata": {"labels": {"team": "ml"}, "annotations": {}}}
    return replace(target, document=document)


def test_import_of_an_unmarked_promoted_tag_writes_nothing_and_plans_nothing(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promoted_by_hand(registry_server)
    provider = provider_for(registry_server.url)
    before = tags_of(registry_server, case.target_repository)

    outputs = adopted(case, provider, monkeypatch)
    observation = provider.observe([request_of(case.target, outputs)])[case.target.address]

    assert outputs["adopted"] is True and outputs["digest"] == case.pushed.digest
    assert tags_of(registry_server, case.target_repository) == before == {"v1": case.pushed.digest}
    assert observation.exists and observation.findings == ()
    assert observation.live == case.target.document and observation.outputs == outputs
    assert case.target.address not in [a for a, _ in provider.list_owned()]


def test_import_refuses_foreign_markers_and_other_references_without_writing(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promoted_by_hand(registry_server)
    provider = provider_for(registry_server.url)
    forbid_writes(provider, monkeypatch)
    request, reference = request_of(case.target), case.target.spec["reference"]

    with pytest.raises(PermanentProviderError, match="its spec names"):
        provider.adopt(request, f"{registry_server.host}/elsewhere/app:v1")
    push_image(registry_server.url, case.target_repository, "v1.trainform", payload=b"x\n")
    with pytest.raises(PermanentProviderError, match="is not a trainform marker"):
        provider.adopt(request, reference)


def test_import_of_a_marked_tag_refuses_other_managers_and_addresses_and_reads_our_own(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promotion(registry_server)
    ours = provider_for(registry_server.url)
    stranger = provider_for(registry_server.url, manager="platform-b")
    target = case.with_source_outputs(ours)
    created = ours.create(target)
    marker = head_digest(registry_server.url, case.target_repository, "v1.trainform")
    forbid_writes(ours, monkeypatch)
    forbid_writes(stranger, monkeypatch)
    reference = target.spec["reference"]

    with pytest.raises(PermanentProviderError, match="belongs to manager `trainform`"):
        stranger.adopt(request_of(target), reference)
    with pytest.raises(PermanentProviderError, match=f"names {target.address}"):
        ours.adopt(request_of(replace(target, address="Image/other")), reference)
    again = ours.adopt(request_of(target), reference)

    assert again.exists and again.live == target.document and again.outputs == created
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform") == marker


def test_the_first_update_after_import_marks_the_tag(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promoted_by_hand(registry_server)
    provider = provider_for(registry_server.url)
    outputs = adopted(case, provider, monkeypatch)
    changed = relabelled(case.with_source_outputs(provider))

    updated = provider.update(changed, outputs)
    observation = provider.observe([request_of(changed, updated)])[changed.address]

    assert "adopted" not in updated and updated["digest"] == case.pushed.digest
    assert head_digest(registry_server.url, case.target_repository, "v1") == case.pushed.digest
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform")
    assert changed.address in [a for a, _ in provider.list_owned()]
    assert observation.exists and observation.live == changed.document
    assert observation.outputs == updated and observation.findings == ()


def test_a_tag_moved_after_import_is_a_finding_and_update_and_delete_refuse(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promoted_by_hand(registry_server)
    provider = provider_for(registry_server.url)
    outputs = adopted(case, provider, monkeypatch)
    moved = push_image(registry_server.url, case.target_repository, "v1", payload=b"moved\n")

    observation = provider.observe([request_of(case.target, outputs)])[case.target.address]
    with pytest.raises(PermanentProviderError, match="someone moved it"):
        provider.update(relabelled(case.with_source_outputs(provider)), outputs)
    with pytest.raises(PermanentProviderError, match="not .* as when it was imported"):
        provider.delete(case.target.address, "Image", outputs)

    (finding,) = observation.findings
    assert observation.exists and finding.kind == "tag-moved"
    assert (finding.evidence["pinned"], finding.evidence["current"]) == (
        case.pushed.digest,
        moved.digest,
    )
    assert tags_of(registry_server, case.target_repository) == {"v1": moved.digest}


def test_delete_of_an_adopted_tag_still_unmoved_untags_it(
    registry_server: RegistryServer, provider_for: ProviderFactory, monkeypatch: Any
) -> None:
    case = promoted_by_hand(registry_server)
    provider = provider_for(registry_server.url)
    outputs = adopted(case, provider, monkeypatch)

    provider.delete(case.target.address, "Image", outputs)
    provider.delete(case.target.address, "Image", outputs)

    assert head_digest(registry_server.url, case.target_repository, "v1") is None
    assert head_digest(registry_server.url, case.target_repository, "v1.trainform") is None
    assert provider.observe([request_of(case.target, outputs)])[case.target.address].exists is False
