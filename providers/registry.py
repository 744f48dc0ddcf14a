"""Provider types by name, imported only when a spec folder uses them."""

from __future__ import annotations

import importlib

from trainform.providers.base import Provider
from trainform.providers.errors import ProviderConfigError

PROVIDER_CLASSES = {
    "local": "trainform.providers.local.provider:LocalProvider",
    "objectstore": "trainform.providers.objectstore.provider:ObjectStoreProvider",
    "registry": "trainform.providers.oci.provider:RegistryProvider",
    "kubernetes": "trainform.providers.kubernetes.provider:KubernetesProvider",
    "slurm": "trainform.providers.slurm.provider:SlurmProvider",
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
