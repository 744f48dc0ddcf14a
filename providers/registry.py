"""Provider types by name, imported only when a spec folder uses them."""

from __future__ import annotations

import importlib

from providers.base import Provider
from providers.errors import ProviderConfigError

PROVIDER_CLASSES = {
    "local": "providers.local.provider:LocalProvider",
    "objectstore": "providers.objectstore.provider:ObjectStoreProvider",
    "registry": "providers.oci.provider:RegistryProvider",
    "kubernetes": "providers.kubernetes.provider:KubernetesProvider",
    "slurm": "providers.slurm.provider:SlurmProvider",
}


def provider_class(type_name: str) -> type[Provider]:
    target = PROVIDER_CLASSES.get(type_name)
    if target is None:
        known = ", ".join(sorted(PROVIDER_CLASSES))
        raise ProviderConfigError(
            f"cannot use provider type `{type_name}`: unknown type (known: {known})"
        )
    module_name, _, class_name = target.partition(":")
    cls: type[Provider] = getattr(importlib.import_module(module_name), class_name)
    return cls
