"""Failures are errors, never "missing"; credentials work and never show.

Unreachable and 5xx registries raise TransientProviderError, refused access
PermanentProviderError, unset credential variables ProviderConfigError. Basic auth runs
against docker-registry's htpasswd auth, Bearer against docker-registry's token auth with
a token service started by the test; both registries share the open registry's storage,
so images pushed there are visible through them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from trainform.providers.errors import (
    PermanentProviderError,
    ProviderConfigError,
    ProviderError,
    TransientProviderError,
)

from tests.providers.oci.fixtures import (
    PASSWORD_ENV,
    USERNAME_ENV,
    ProviderFactory,
    image_resource,
    request_of,
)
from tests.services.registry import (
    PASSWORD,
    USERNAME,
    FailingRegistry,
    PushedImage,
    RegistryServer,
    push_image,
    serve_registry,
    start_registry,
    unique_repository,
)


@pytest.fixture(scope="module")
def basic_registry(
    registry_server: RegistryServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryServer]:
    yield from serve_registry(tmp_path_factory.mktemp("htpasswd"), "htpasswd", registry_server.root)


@pytest.fixture(scope="module")
def token_registry(
    registry_server: RegistryServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryServer]:
    yield from serve_registry(tmp_path_factory.mktemp("token"), "token", registry_server.root)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv(USERNAME_ENV, USERNAME)
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    return {"username_env": USERNAME_ENV, "password_env": PASSWORD_ENV}


@pytest.fixture
def pushed(registry_server: RegistryServer) -> tuple[str, PushedImage]:
    repository = unique_repository("auth")
    return repository, push_image(registry_server.url, repository, "v1")


def test_observe_of_a_stopped_registry_is_a_transient_error(
    provider_for: ProviderFactory, tmp_path: Path
) -> None:
    server = start_registry(tmp_path / "doomed")
    provider = provider_for(server.url)
    image = image_resource("Image/app", f"{server.host}/ml/app:v1")
    assert provider.observe([request_of(image)])["Image/app"].exists is False
    server.stop()

    with pytest.raises(TransientProviderError, match=f"cannot reach registry {server.host}"):
        provider.observe([request_of(image)])


@pytest.mark.parametrize(
    ("status", "retry_after"),
    [
        pytest.param(500, None, id="500"),
        pytest.param(503, None, id="503"),
        pytest.param(429, 7.0, id="429"),
    ],
)
def test_a_failing_registry_is_a_transient_error_with_its_own_words(
    provider_for: ProviderFactory, status: int, retry_after: float | None
) -> None:
    failing = FailingRegistry(status, retry_after="7" if retry_after else None)
    try:
        provider = provider_for(failing.url)
        image = image_resource("Image/app", f"{failing.host}/ml/app:v1")
        for call in (
            lambda: provider.observe([request_of(image)]),
            lambda: provider.create(image),
            provider.list_owned,
        ):
            with pytest.raises(TransientProviderError) as raised:
                call()
            assert raised.value.retry_after == retry_after
        with pytest.raises(TransientProviderError, match="storage backend unavailable"):
            provider.list_owned()  # a GET: the registry's error body is quoted
    finally:
        failing.stop()


def test_a_protected_registry_without_credentials_is_access_denied(
    basic_registry: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
) -> None:
    repository, _ = pushed
    provider = provider_for(basic_registry.url)
    image = image_resource("Image/app", f"{basic_registry.host}/{repository}:v1")

    with pytest.raises(PermanentProviderError, match="access denied: .* 401"):
        provider.observe([request_of(image)])


def test_basic_auth_reads_credentials_from_the_environment(
    basic_registry: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
    credentials: dict[str, str],
) -> None:
    repository, image_pushed = pushed
    provider = provider_for(basic_registry.url, **credentials)
    image = image_resource("Image/app", f"{basic_registry.host}/{repository}:v1")

    assert provider.create(image)["digest"] == image_pushed.digest
    assert provider.observe([request_of(image)])["Image/app"].exists


def test_wrong_credentials_are_refused_and_the_password_never_shows(
    basic_registry: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
    credentials: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrong = "wrong-" + PASSWORD
    monkeypatch.setenv(PASSWORD_ENV, wrong)
    repository, _ = pushed
    provider = provider_for(basic_registry.url, **credentials)
    image = image_resource("Image/app", f"{basic_registry.host}/{repository}:v1")

    with pytest.raises(PermanentProviderError, match="access denied") as raised:
        provider.create(image)

    shown = " ".join([str(raised.value), repr(raised.value), repr(provider), repr(provider.client)])
    shown += repr(provider.client.auth)
    assert wrong not in shown and PASSWORD not in shown
    assert "d3JvbmctczNjcjN0" not in shown  # nor its base64 in a header


def test_an_unset_credential_variable_is_a_configuration_error(
    provider_for: ProviderFactory, registry_server: RegistryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.setenv(USERNAME_ENV, USERNAME)
    provider = provider_for(
        registry_server.url, username_env=USERNAME_ENV, password_env=PASSWORD_ENV
    )
    image = image_resource("Image/app", f"{registry_server.host}/ml/app:v1")

    assert provider.validate(image) == []
    with pytest.raises(ProviderConfigError, match=PASSWORD_ENV):
        provider.observe([request_of(image)])


def test_bearer_tokens_are_fetched_with_basic_credentials_and_cached_per_scope(
    token_registry: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
    credentials: dict[str, str],
) -> None:
    assert token_registry.tokens is not None
    repository, image_pushed = pushed
    provider = provider_for(token_registry.url, **credentials)
    image = image_resource("Image/app", f"{token_registry.host}/{repository}:v1")
    before = len(token_registry.tokens.requests)

    for _ in range(3):
        assert provider.observe([request_of(image)])["Image/app"].exists
    assert provider.create(image)["digest"] == image_pushed.digest

    asked = token_registry.tokens.requests[before:]
    assert asked == [[f"repository:{repository}:pull"]]


def test_promotion_works_through_bearer_tokens(
    token_registry: RegistryServer,
    registry_server: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
    credentials: dict[str, str],
) -> None:
    from dataclasses import replace

    from tests.services.registry import head_digest

    repository, image_pushed = pushed
    target_repository = unique_repository("ml")
    provider = provider_for(token_registry.url, **credentials)
    source = image_resource("Image/src", f"{token_registry.host}/{repository}:v1")
    target = image_resource(
        "Image/dst", f"{token_registry.host}/{target_repository}:v1", promotedFrom="src"
    )
    target = replace(target, outputs_of_dependencies={"Image/src": provider.create(source)})

    outputs = provider.create(target)
    provider.delete(target.address, "Image", outputs)

    assert outputs["digest"] == image_pushed.digest
    assert head_digest(registry_server.url, target_repository, "v1") is None
    assert head_digest(registry_server.url, repository, "v1") == image_pushed.digest


def test_a_token_service_that_grants_nothing_is_access_denied(
    token_registry: RegistryServer,
    provider_for: ProviderFactory,
    pushed: tuple[str, PushedImage],
) -> None:
    repository, _ = pushed
    provider = provider_for(token_registry.url)
    image = image_resource("Image/app", f"{token_registry.host}/{repository}:v1")

    with pytest.raises(ProviderError, match="access denied"):
        provider.observe([request_of(image)])
