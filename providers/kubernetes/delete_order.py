"""The order the provider deletes a resource's objects in, and the skeleton documents it
renders to name the objects of an address whose outputs do not list them. Pure; called
by provider.py.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.kinds import ApiKind


def delete_order(
    found: list[tuple[ApiKind, dict[str, Any]]],
) -> list[tuple[ApiKind, dict[str, Any]]]:
    """Dependents first: a LocalQueue before the ClusterQueue it points at, that before
    the flavor only it uses, a ResourceFlavor before the Topology it names, a Cohort
    before its priority class."""
    rank = {"LocalQueue": 0, "ClusterQueue": 1, "Cohort": 1, "ResourceFlavor": 2}
    return sorted(found, key=lambda item: rank.get(item[0].kind, 3))


SKELETON: dict[str, dict[str, Any]] = {  # a document of each kind that renders every object
    "Project": {"metadata": {}, "spec": {}},
    "ResourcePool": {"metadata": {}, "spec": {"topology": ["x"]}},
    "Queue": {"metadata": {}, "spec": {"pools": []}},
    "Quota": {"metadata": {}, "spec": {"queue": "", "limits": {}}},
}
