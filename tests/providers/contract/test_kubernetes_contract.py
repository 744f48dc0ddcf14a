"""The provider contract for `kubernetes`, against the fake Kubernetes API server with the
official client. Names are unique per test (prefixes), since the server is shared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trainform.providers.base import Provider
from trainform.providers.kubernetes.kinds import (
    CLUSTER_QUEUE,
    NAMESPACE,
    RESOURCE_FLAVOR,
    RESOURCE_QUOTA,
)
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.providers.contract.contract import ProviderContract
from tests.providers.kubernetes.fixtures import INSTANCE, platform_folder, unique_prefix
from tests.services.kube_api import KubeAPI


class TestKubernetesContract(ProviderContract):
    kinds = ("Project", "ResourcePool", "Queue", "Quota")
    provider_name = INSTANCE

    @pytest.fixture
    def spec_root(self, tmp_path: Path, kube_api: KubeAPI) -> Path:
        self.prefix = unique_prefix()
        return platform_folder(tmp_path / "specs", kube_api, self.prefix)

    def identity(self, provider: Provider, address: str) -> Any:
        """The uid of the resource's primary object."""
        assert isinstance(provider, KubernetesProvider)
        kind, *rest = address.split("/")
        name = rest[-1]
        api, namespace = {
            "Project": (NAMESPACE, None),
            "ResourcePool": (RESOURCE_FLAVOR, None),
            "Queue": (CLUSTER_QUEUE, None),
            "Quota": (RESOURCE_QUOTA, f"{self.prefix}{rest[0]}" if len(rest) == 2 else None),
        }[kind]
        if api.namespaced:
            found = provider.client.get(api, name, namespace)
        else:
            found = provider.client.get(api, f"{self.prefix}{name}")
        return (found or {}).get("metadata", {}).get("uid")
