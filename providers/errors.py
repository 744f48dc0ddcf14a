"""Errors a provider raises.

    ProviderError                    root of everything `providers` raises
    +-- ProviderConfigError          the provider instance cannot be configured
    +-- TransientProviderError       retry later (throttling, timeout, 5xx, conflict);
    |                                `retry_after` seconds when the backend says so
    +-- PermanentProviderError       retrying will not help (invalid, forbidden, not owned)

Messages carry the backend's own words; the engine adds the address and the verb. A
server's words may echo credentials (an Authorization header, a token, `user:password@`),
so every message is redacted (`specs.secrets.redact`) when the error is made and again
when it is printed, in case a credential was registered in between.
"""

from __future__ import annotations

from typing import Any

from trainform.specs.secrets import redact


class ProviderError(Exception):
    """Root of every error raised by the `providers` package."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))

    def __str__(self) -> str:
        return redact(super().__str__())


class ProviderConfigError(ProviderError):
    """The provider instance's configuration or environment is unusable."""


class TransientProviderError(ProviderError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentProviderError(ProviderError):
    """The request cannot succeed as it stands."""
