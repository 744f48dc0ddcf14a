"""What a URL addresses (`Target`) and how a stored object is shown at the requested version.

Shared by every verb module (operations, listing, deletion, watch, tables). Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.services.kube_api import errors
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.resources import ResourceType

Query = dict[str, str]


@dataclass(frozen=True)
class Target:
    """What a URL addresses."""

    type: ResourceType
    version: str
    namespace: str | None  # None: cluster-scoped, or a list across all namespaces
    name: str | None
    subresource: str = ""

    @property
    def api_version(self) -> str:
        return self.type.api_version(self.version)

    def not_found(self) -> ApiError:
        return errors.not_found(self.type.group, self.type.plural, self.name or "")


def present(target: Target, obj: dict[str, Any]) -> dict[str, Any]:
    """The stored object as the client sees it at the requested version."""
    shown = {"apiVersion": target.api_version, "kind": target.type.kind}
    shown.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    return shown
