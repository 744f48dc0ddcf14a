"""The session fixture `kube_api`: one fake API server for the whole test session.

Register it in tests/conftest.py with
`from tests.services.kube_api.fixtures import kube_api  # noqa: F401`.
Tests share the server: use unique names (or namespaces) and read `kube_api.requests`
after `kube_api.reset_requests()`. The server is strict, like a real one: it defaults and
enforces CRD schemas, CEL rules and list uniqueness (`defaults=True, schema=True`); there
is no lax mode for the shared server, so what passes here passes a real API server's
validation.

`kueue` is the exception: a server of its own per test module, with the Kueue controller
stand-in running during each test. The stand-in reconciles every object in the store after
each write, as Kueue's controllers watch the whole cluster, so on the shared server each
Kueue test paid for every object the rest of the session had left there (8 s a test
instead of 0.4 s). Its server is as strict as the shared one.
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


@pytest.fixture(scope="module")
def kueue_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPI]:
    """The module's own strict server for the tests that run the Kueue stand-in."""
    api = start_kube_api(tmp_path_factory.mktemp("kueue-api"), defaults=True, schema=True)
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def kueue(kueue_api: KubeAPI) -> Iterator[KubeAPI]:
    """The module's server with the Kueue stand-in running for one test (kueue.py)."""
    kueue_api.kueue.errors.clear()
    kueue_api.kueue.start()
    try:
        yield kueue_api
    finally:
        kueue_api.kueue.stop()
    assert kueue_api.kueue.errors == [], "the server refused the Kueue stand-in's writes"
