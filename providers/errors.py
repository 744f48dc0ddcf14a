"""Errors a provider raises.

    ProviderError                    root of everything `providers` raises
    +-- ProviderConfigError          the provider instance cannot be configured
    +-- TransientProviderError       retry later (throttling, timeout, 5xx, conflict);
    |                                `retry_after` seconds when the backend says so
    +-- PermanentProviderError       retrying will not help (invalid, forbidden, not owned)

Messages carry the backend's own words; the engine adds the address and the verb.
"""

from __future__ import annotations


class ProviderError(Exception):
    """Root of every error raised by the `providers` package."""


class ProviderConfigError(ProviderError):
    """The provider instance's configuration or environment is unusable."""


class TransientProviderError(ProviderError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentProviderError(ProviderError):
    """The request cannot succeed as it stands."""
