"""A kubernetes instance's connection settings as trainform.yaml gives them: a mapping
with camelCase keys (`namespacePrefix`) or an object with snake_case attributes. Pure;
called by provider.py.
"""

from __future__ import annotations

from typing import Any


def connection_settings(connection: Any) -> Any:
    """`setting(name, default)` for a connection given as a mapping (snake_case or
    camelCase keys) or an object with attributes; `default` when it is None."""

    def setting(name: str, default: Any) -> Any:
        if connection is None:
            return default
        if isinstance(connection, dict):
            camel = "".join(
                part if i == 0 else part.title() for i, part in enumerate(name.split("_"))
            )
            return connection.get(name, connection.get(camel, default))
        return getattr(connection, name, default)

    return setting
