"""Discovery documents: /version, /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>.

Only the legacy (unaggregated) format is served. Clients that ask for aggregated discovery
(`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, as kubectl does)
list plain `application/json` as a fallback and get the legacy documents, which client-go
recognises by the response's Content-Type.
"""

from __future__ import annotations

from typing import Any

from tests.services.kube_api.resources import Catalog, ResourceType

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "emulationMajor": "1",
    "emulationMinor": "32",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "31",
    "gitVersion": "v1.32.0-trainform-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(catalog: Catalog) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in catalog.groups()],
    }


def api_group(catalog: Catalog, group: str) -> dict[str, Any] | None:
    for name, versions in catalog.groups():
        if name == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}
    return None


def _resource(t: ResourceType, version: str) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": t.plural,
        "singularName": t.singular,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        main["shortNames"] = list(t.short_names)
    if t.categories:
        main["categories"] = list(t.categories)
    main["storageVersionHash"] = t.storage_version_hash(version)
    entries = [main]
    if t.status_subresource:
        entries.append(
            {
                "name": f"{t.plural}/status",
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return entries


def api_resource_list(catalog: Catalog, group: str, version: str) -> dict[str, Any] | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    document: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        document["apiVersion"] = "v1"
    document["groupVersion"] = f"{group}/{version}" if group else version
    document["resources"] = [entry for t in types for entry in _resource(t, version)]
    return document
