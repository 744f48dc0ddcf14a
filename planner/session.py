"""Configured provider instances for one run, created on first use and closed at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainform.providers.base import Provider, ProviderContext
from trainform.providers.errors import ProviderConfigError
from trainform.providers.registry import provider_class
from trainform.specs import RootConfig
from trainform.specs.data_sources import trusted_data_roots


class ProviderSet:
    def __init__(
        self,
        config: RootConfig,
        spec_root: Path,
        classes: dict[str, type[Provider]] | None = None,
        manager: str = "trainform",
    ) -> None:
        self.config = config
        store = config.object_store()
        self.context = ProviderContext(
            spec_root=spec_root.resolve(),
            manager=manager,
            object_store=store.connection.model_dump(mode="json") if store else None,
            data_roots=trusted_data_roots(config),
        )
        self._classes = classes or {}
        self._providers: dict[str, Provider] = {}

    def get(self, name: str) -> Provider:
        provider = self._providers.get(name)
        if provider is not None:
            return provider
        instance = self.config.provider(name)
        if instance is None:
            raise ProviderConfigError(f"provider instance `{name}` is not in trainform.yaml")
        cls = self._classes.get(instance.type) or provider_class(instance.type)
        provider = cls()
        provider.configure(name, instance.connection, self.context)
        self._providers[name] = provider
        return provider

    def close(self) -> None:
        for provider in self._providers.values():
            provider.close()
        self._providers.clear()


def config_as_data(config: RootConfig) -> dict[str, Any]:
    return config.model_dump(mode="json", by_alias=True)


def config_from_data(data: dict[str, Any]) -> RootConfig:
    return RootConfig.model_validate(data)
