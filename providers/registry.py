"""Provider types by name, imported only when a spec folder uses them."""

from __future__ import annotations

import importlib

from providers.base import Provider
from providers.errors import ProviderConfigError

PROVIDER_CLASSES = {
    "local": "providers.local.provider:LocalProvider",
    "objectstore": "providers.objectstore.provider:ObjectStoreProvider",
    "registry": "providers.oci.provider:RegistryProvider",
}
PLANNED = {
    "kubernetes": "the Kubernetes/Kueue provider (issue 7)",
    "slurm": "the Slurm provider (issue 6)",
}


def provider_class(type_name: str) -> type[Provider]:
    target = PROVIDER_CLASSES.get(type_name)
    if target is None:
        pending = PLANNED.get(type_name)
        detail = f"{pending} is not part of this release" if pending else "unknown type"
        raise ProviderConfigError(f"cannot use provider type `{type_name}`: {detail}")
    module_name, _, class_name = target.partition(":")
    cls: type[Provider] = getattr(importlib.import_module(module_name), class_name)
    return cls
