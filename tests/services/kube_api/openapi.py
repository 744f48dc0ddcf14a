"""OpenAPI v3 documents, just enough for kubectl: PATCH operations that declare
`fieldValidation`, tagged with `x-kubernetes-group-version-kind`.

kubectl (apply, create, replace) asks /openapi/v3 whether the server validates fields
itself; if it cannot tell, it validates on the client, which needs the full schema. These
documents say yes for every served kind, so kubectl leaves validation to the server (which,
here, does none: see the package docstring). Schemas of the kinds are not included, so
`kubectl explain` does not work.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.services.kube_api.resources import Catalog

_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]


def _path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_versions(catalog: Catalog) -> list[tuple[str, str]]:
    seen = [("", "v1")]
    for group, versions in catalog.groups():
        seen.extend((group, v) for v in versions)
    return seen


def document(catalog: Catalog, group: str, version: str) -> dict[str, Any] | None:
    types = catalog.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    for t in types:
        collection = f"/{_path(group, version)}/" + (
            f"namespaces/{{namespace}}/{t.plural}" if t.namespaced else t.plural
        )
        gvk = {"group": group, "version": version, "kind": t.kind}
        for suffix in ("/{name}", "/{name}/status") if t.status_subresource else ("/{name}",):
            paths[collection + suffix] = {
                "patch": {
                    "operationId": f"patch{t.kind}",
                    "parameters": _PARAMETERS,
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                }
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def root(catalog: Catalog) -> dict[str, Any]:
    entries = {}
    for group, version in group_versions(catalog):
        body = json.dumps(document(catalog, group, version), sort_keys=True).encode()
        digest = hashlib.sha512(body).hexdigest()[:32].upper()
        entries[_path(group, version)] = {
            "serverRelativeURL": f"/openapi/v3/{_path(group, version)}?hash={digest}"
        }
    return {"paths": entries}
