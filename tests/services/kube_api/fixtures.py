"""The session fixture `kube_api`: one fake API server for the whole test session.

Register it in tests/conftest.py with
`from tests.services.kube_api.fixtures import kube_api  # noqa: F401`.
Tests share the server: use unique names (or namespaces) and read `kube_api.requests`
after `kube_api.reset_requests()`. With KUBE_API_STRICT=1 in the environment the server
also defaults and enforces CRD schemas (`defaults=True, schema=True`), like a real one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.services.kube_api import KubeAPI, start_kube_api


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPI]:
    strict = os.environ.get("KUBE_API_STRICT", "") == "1"
    api = start_kube_api(tmp_path_factory.mktemp("kube-api"), defaults=strict, schema=strict)
    try:
        yield api
    finally:
        api.stop()
