"""What a new cluster holds: the system namespaces and, optionally, CRDs from a folder.

Called by `KubeAPI` at start and on `reset()`. Objects are created through the same code
path as API requests, so they carry uid, resourceVersion and managedFields.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.services.kube_api import operations
from tests.services.kube_api.resources import CRD_TYPE, NAMESPACE_TYPE, load_crds
from tests.services.kube_api.store import Store
from tests.services.kube_api.target import Target

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_CRDS: dict[Path, list[dict[str, Any]]] = {}  # parsed once per folder: the files are large


def served_only(crd: dict[str, Any], versions: tuple[str, ...]) -> dict[str, Any]:
    """The CRD as an older installation serves it: only `versions` (the last one stored)."""
    kept = copy.deepcopy(crd)
    chosen = [v for v in kept["spec"]["versions"] if v["name"] in versions]
    for index, version in enumerate(chosen):
        version["storage"] = index == len(chosen) - 1
    kept["spec"]["versions"] = chosen
    return kept


def seed(store: Store, crd_folder: Path | None, versions: tuple[str, ...] | None = None) -> None:
    """System namespaces, then the CRDs of `crd_folder` (with only `versions` served, if
    given: e.g. ("v1beta1",) for a cluster with a Kueue older than v1beta2)."""
    for name in SYSTEM_NAMESPACES:
        target = Target(NAMESPACE_TYPE, "v1", None, None)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        operations.create(store, target, body, {}, "kube-apiserver/v1.32.0")
    if crd_folder is None:
        return
    if crd_folder not in _CRDS:
        _CRDS[crd_folder] = load_crds(crd_folder)
    for crd in _CRDS[crd_folder]:
        target = Target(CRD_TYPE, "v1", None, None)
        body = served_only(crd, versions) if versions else copy.deepcopy(crd)
        if body["spec"]["versions"]:
            operations.create(store, target, body, {}, "kubectl/v1.32.0")
