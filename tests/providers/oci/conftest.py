"""Fixtures of the registry provider's tests (defined in fixtures.py; the session's
`registry_server` is registered in tests/conftest.py)."""

from tests.providers.oci.fixtures import provider_for

__all__ = ["provider_for"]
