"""The kinds the fake API server serves: a few built-ins and every CustomResourceDefinition.

Built-ins (core v1 Namespace, ResourceQuota, Pod; batch/v1 Job; scheduling.k8s.io/v1
PriorityClass; apiextensions.k8s.io/v1 CustomResourceDefinition) are listed here. Custom kinds
are not: `catalog()` derives them from the CRD objects in the store, which `start_kube_api`
seeds from tests/reference/kueue-crds/*.yaml, so group, versions, plural, kind, scope and the
status subresource come from the CRD files (and a CRD created or deleted through the API
appears in or disappears from discovery, as on a real server).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CRD_FOLDER = Path(__file__).resolve().parents[2] / "reference" / "kueue-crds"
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class ResourceType:
    """One served resource (e.g. clusterqueues.kueue.x-k8s.io) in all its served versions."""

    group: str
    versions: tuple[str, ...]  # served versions, by Kubernetes version priority
    plural: str
    singular: str
    kind: str
    namespaced: bool
    status_subresource: bool
    custom: bool = False
    generation: bool = False  # whether the server keeps metadata.generation for this kind
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    warnings: dict[str, str] = field(default_factory=dict)  # version -> deprecation warning
    schemas: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    columns: dict[str, list[dict[str, Any]]] = field(
        default_factory=dict, compare=False, hash=False
    )  # additionalPrinterColumns

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def preferred_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def schema(self, version: str) -> dict[str, Any] | None:
        return self.schemas.get(version)

    @property
    def verbs(self) -> tuple[str, ...]:
        if self.kind == "Namespace":
            return tuple(v for v in VERBS if v != "deletecollection")
        return VERBS

    def storage_version_hash(self, version: str) -> str:
        digest = hashlib.sha256(f"{self.group}/{version}/{self.kind}".encode()).digest()
        return base64.b64encode(digest[:8]).decode()


BUILTINS: tuple[ResourceType, ...] = (
    ResourceType(
        "", ("v1",), "namespaces", "namespace", "Namespace", False, True, short_names=("ns",)
    ),
    ResourceType(
        "",
        ("v1",),
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        True,
        True,
        short_names=("quota",),
    ),
    ResourceType(
        "", ("v1",), "pods", "pod", "Pod", True, True, short_names=("po",), categories=("all",)
    ),
    ResourceType(
        "", ("v1",), "configmaps", "configmap", "ConfigMap", True, False, short_names=("cm",)
    ),
    ResourceType("", ("v1",), "secrets", "secret", "Secret", True, False),
    ResourceType("", ("v1",), "services", "service", "Service", True, True, short_names=("svc",)),
    ResourceType("", ("v1",), "nodes", "node", "Node", False, True, short_names=("no",)),
    ResourceType(
        "batch", ("v1",), "jobs", "job", "Job", True, True, categories=("all",), generation=True
    ),
    ResourceType(
        "scheduling.k8s.io",
        ("v1",),
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        False,
        short_names=("pc",),
        generation=True,
    ),
    ResourceType(
        "apiextensions.k8s.io",
        ("v1",),
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        True,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        generation=True,
    ),
)
CRD_TYPE = BUILTINS[-1]
NAMESPACE_TYPE = BUILTINS[0]


def _version_key(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, then higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0)  # non-kube-like versions sort last
    major, stage, minor = int(match[1]), match[2], int(match[3] or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor)


def from_crd(crd: dict[str, Any]) -> ResourceType:
    """The ResourceType a CustomResourceDefinition object defines (served versions only)."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    ordered = sorted((v["name"] for v in served), key=_version_key)
    status = any("status" in (v.get("subresources") or {}) for v in served)
    warnings = {
        v["name"]: v.get("deprecationWarning")
        or f"{spec['group']}/{v['name']} {names['kind']} is deprecated"
        for v in served
        if v.get("deprecated")
    }
    schemas = {v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") for v in served}
    columns = {v["name"]: list(v.get("additionalPrinterColumns") or []) for v in served}
    return ResourceType(
        group=spec["group"],
        versions=tuple(ordered),
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        kind=names["kind"],
        namespaced=spec["scope"] == "Namespaced",
        status_subresource=status,
        custom=True,
        generation=True,
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        warnings=warnings,
        schemas=schemas,
        columns=columns,
    )


def load_crds(folder: Path = CRD_FOLDER) -> list[dict[str, Any]]:
    """The CustomResourceDefinition documents of every *.yaml file in `folder`."""
    documents: list[dict[str, Any]] = []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in sorted(folder.glob("*.yaml")):
        for document in yaml.load_all(path.read_text(), Loader=loader):  # noqa: S506 - safe
            if document and document.get("kind") == "CustomResourceDefinition":
                documents.append(document)
    return documents


class Catalog:
    """The served resources, looked up by (group, version, plural) or listed per group."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self.types = list(types)
        self._by_path = {(t.group, v, t.plural): t for t in self.types for v in t.versions}

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_resource(self, group: str, plural: str) -> ResourceType | None:
        for candidate in self.types:
            if candidate.group == group and candidate.plural == plural:
                return candidate
        return None

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions preferred first) for every named group, core excluded."""
        seen: dict[str, list[str]] = {}
        for t in self.types:
            if not t.group:
                continue
            versions = seen.setdefault(t.group, [])
            for v in t.versions:
                if v not in versions:
                    versions.append(v)
        return [(g, sorted(vs, key=_version_key)) for g, vs in seen.items()]

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self.types if t.group == group and version in t.versions]


def build_catalog(crds: Iterable[dict[str, Any]]) -> Catalog:
    return Catalog([*BUILTINS, *(from_crd(crd) for crd in crds)])
