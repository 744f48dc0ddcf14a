"""The provider contract for the registry provider, against a real docker-registry.

The spec folder declares a referenced image (pushed by the test) and an image promoted from
it; the contract's sample Image is the promoted one, since only promotions write to the
registry. Its identity is the digest of the promoted tag. Names and repositories are unique
per test because the registry is shared by the session.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem
from trainform.providers.base import Provider
from trainform.providers.oci.provider import RegistryProvider

from tests.providers.contract.contract import ProviderContract
from tests.providers.oci.fixtures import registry_server
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

LABEL = "org.opencontainers.image.source"


class TestRegistryProviderContract(ProviderContract):
    kinds = ("Image",)
    provider_name = "registry"

    @pytest.fixture
    def spec_root(self, tmp_path: Path, registry_server: RegistryServer) -> Path:
        suffix = uuid.uuid4().hex[:10]
        host = registry_server.host
        source_repository, self.target_repository = f"staging/{suffix}", f"ml/{suffix}"
        push_image(registry_server.url, source_repository, "candidate", {LABEL: "contract"})
        root = tmp_path / "specs"
        root.mkdir()
        (root / "trainform.yaml").write_text(
            "apiVersion: trainform/v1\n"
            "providers:\n"
            "  - name: registry\n"
            "    type: registry\n"
            f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
            "state: {backend: local, path: .trainform/state.json}\n",
            encoding="utf-8",
        )
        (root / "images.yaml").write_text(
            "apiVersion: trainform/v1\n"
            "kind: Image\n"
            f"metadata: {{name: candidate-{suffix}}}\n"
            "spec:\n"
            f"  reference: {host}/{source_repository}:candidate\n"
            f"  requiredLabels: [{LABEL}]\n"
            "---\n"
            "apiVersion: trainform/v1\n"
            "kind: Image\n"
            f"metadata: {{name: trainer-{suffix}, labels: {{team: platform}}}}\n"
            "spec:\n"
            f"  reference: {host}/{self.target_repository}:v1\n"
            f"  promotedFrom: candidate-{suffix}\n"
            f"  requiredLabels: [{LABEL}]\n",
            encoding="utf-8",
        )
        return root

    def sample(self, desired: dict[str, DesiredItem], kind: str) -> DesiredItem:
        (promoted,) = [
            item for item in desired.values() if item.document["spec"].get("promotedFrom")
        ]
        return promoted

    def identity(self, provider: Provider, address: str) -> Any:
        assert isinstance(provider, RegistryProvider)
        found = provider.client.head_manifest(self.target_repository, "v1")
        return None if found is None else found.digest
