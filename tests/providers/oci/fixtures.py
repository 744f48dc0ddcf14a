"""Registry fixtures shared by the registry provider's tests and its contract module (which
imports them): one open docker-registry for the session, protected ones on the same storage,
and configured providers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.base import DesiredResource, ObserveRequest, ProviderContext
from trainform.providers.oci.provider import RegistryProvider
from trainform.specs.models.config import RegistryConnection

from tests.services.registry import RegistryServer, serve_registry

USERNAME_ENV = "TRAINFORM_TEST_REGISTRY_USER"
PASSWORD_ENV = "TRAINFORM_TEST_REGISTRY_PASSWORD"


@pytest.fixture(scope="session")
def registry_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """An open docker-registry for the whole session; tests use repositories of their own."""
    yield from serve_registry(tmp_path_factory.mktemp("registry"))


def make_provider(
    url: str,
    tmp_path: Path,
    manager: str = "trainform",
    name: str = "registry",
    **connection: Any,
) -> RegistryProvider:
    provider = RegistryProvider()
    settings = RegistryConnection(url=url, insecure=True, **connection)
    provider.configure(name, settings, ProviderContext(spec_root=tmp_path, manager=manager))
    return provider


ProviderFactory = Callable[..., RegistryProvider]


@pytest.fixture
def provider_for(tmp_path: Path) -> Iterator[ProviderFactory]:
    """Make providers (closed at the end of the test): `provider_for(url, **connection)`."""
    made: list[RegistryProvider] = []

    def make(url: str, manager: str = "trainform", **connection: Any) -> RegistryProvider:
        provider = make_provider(url, tmp_path, manager, **connection)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()


def image_resource(
    address: str,
    reference: str,
    dependencies: dict[str, dict[str, Any]] | None = None,
    **spec: Any,
) -> DesiredResource:
    """A normalized Image document as the engine passes it to the provider."""
    document = {
        "metadata": {"labels": {}, "annotations": {}},
        "spec": {
            "reference": reference,
            "runtime": "container",
            "class": "standard",
            "requiredLabels": [],
            **spec,
        },
    }
    parts = address.split("/")
    project = parts[1] if len(parts) == 3 else None
    return DesiredResource(address, "Image", parts[-1], project, document, dependencies or {})


def request_of(resource: DesiredResource, outputs: dict[str, Any] | None = None) -> ObserveRequest:
    return ObserveRequest(
        resource.address,
        resource.kind,
        resource.name,
        resource.project,
        resource.document,
        outputs or {},
    )
