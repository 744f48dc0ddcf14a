"""Fixtures of the registry provider's tests (defined in fixtures.py, shared with the
contract module)."""

from tests.providers.oci.fixtures import provider_for, registry_server

__all__ = ["provider_for", "registry_server"]
