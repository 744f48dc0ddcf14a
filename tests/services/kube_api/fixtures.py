"""The session fixture `kube_api`: one fake API server for the whole test session.

Register it in tests/conftest.py with
`from tests.services.kube_api.fixtures import kube_api  # noqa: F401`.
Tests share the server: use unique names (or namespaces) and read `kube_api.requests`
after `kube_api.reset_requests()`. The server is strict, like a real one: it defaults and
enforces CRD schemas, CEL rules and list uniqueness (`defaults=True, schema=True`); there
is no lax mode for the shared server, so what passes here passes a real API server's
validation.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.services.kube_api import KubeAPI, start_kube_api


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPI]:
    api = start_kube_api(tmp_path_factory.mktemp("kube-api"), defaults=True, schema=True)
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def kueue(kube_api: KubeAPI) -> Iterator[KubeAPI]:  # noqa: F811 - the session fixture
    """The shared server with the Kueue stand-in running for one test (kueue.py)."""
    kube_api.kueue.errors.clear()
    kube_api.kueue.start()
    try:
        yield kube_api
    finally:
        kube_api.kueue.stop()
    assert kube_api.kueue.errors == [], "the server refused the Kueue stand-in's writes"
