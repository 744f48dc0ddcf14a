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


def seed(store: Store, crd_folder: Path | None) -> None:
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
        operations.create(store, target, copy.deepcopy(crd), {}, "kubectl/v1.32.0")
