"""Names and ownership marks of the objects the kubernetes provider writes.

Every object carries:

- label `trainform.dev/manager`: the trainform manager (one per trainform instance);
- label `trainform.dev/address-hash`: a label-safe hash of the trainform address (label
  values stop at 63 characters and forbid `/`), and annotation `trainform.dev/address`
  holding the full address, which is what ownership is checked against;
- label `trainform.dev/kind`: the trainform kind the object belongs to.

Project namespaces also carry `trainform.dev/project`, which ClusterQueues select on.
Jobs carry the run id, attempt, launch kind and spec hash (providers/kubernetes/jobs.py).
Cluster-scoped names get the connection's `namePrefix`, namespaces its `namespacePrefix`,
so several trainform instances can share one cluster. Pure; no I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DOMAIN = "trainform.dev"
MANAGER_LABEL = f"{DOMAIN}/manager"
ADDRESS_HASH_LABEL = f"{DOMAIN}/address-hash"
KIND_LABEL = f"{DOMAIN}/kind"
PROJECT_LABEL = f"{DOMAIN}/project"
ADDRESS_ANNOTATION = f"{DOMAIN}/address"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def short_hash(text: str, length: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def label_safe(value: str) -> str:
    """`value` when it is a valid label value, else a hash of it (stable, 16 hex digits)."""
    return value if len(value) <= 63 and _LABEL_VALUE.match(value) else short_hash(value)


def dns_label(text: str, limit: int = 63) -> str:
    """A DNS-1123 label made from `text`: lower case, `-` for anything else, and a hash
    suffix when it had to be cut, so two long names never meet."""
    cleaned = _DNS_LABEL.sub("-", text.lower()).strip("-") or "x"
    if len(cleaned) <= limit:
        return cleaned
    return f"{cleaned[: limit - 9].rstrip('-')}-{short_hash(text, 8)}"


@dataclass(frozen=True)
class Naming:
    """How one provider instance names and marks what it writes."""

    manager: str = "trainform"
    namespace_prefix: str = ""
    name_prefix: str = ""

    def namespace(self, project: str) -> str:
        return f"{self.namespace_prefix}{project}"

    def project_of(self, namespace: str) -> str | None:
        if not namespace.startswith(self.namespace_prefix):
            return None
        return namespace[len(self.namespace_prefix) :] or None

    def cluster_name(self, name: str) -> str:
        """Name of a cluster-scoped object (ClusterQueue, ResourceFlavor, ...)."""
        return f"{self.name_prefix}{name}"

    def spec_name(self, cluster_name: str) -> str | None:
        if not cluster_name.startswith(self.name_prefix):
            return None
        return cluster_name[len(self.name_prefix) :] or None

    def labels(self, address: str, kind: str) -> dict[str, str]:
        return {
            MANAGER_LABEL: label_safe(self.manager),
            ADDRESS_HASH_LABEL: short_hash(address),
            KIND_LABEL: kind,
        }

    def annotations(self, address: str) -> dict[str, str]:
        return {ADDRESS_ANNOTATION: address}

    @property
    def selector(self) -> str:
        """Label selector of everything this instance owns."""
        return f"{MANAGER_LABEL}={label_safe(self.manager)}"

    def owns(self, obj: dict[str, object], address: str | None = None) -> bool:
        """Whether `obj` carries this instance's mark (for `address`, when given)."""
        metadata = obj.get("metadata") or {}
        assert isinstance(metadata, dict)
        labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        if labels.get(MANAGER_LABEL) != label_safe(self.manager):
            return False
        owner = annotations.get(ADDRESS_ANNOTATION)
        return owner is not None and (address is None or owner == address)


def address_of(obj: dict[str, object]) -> str | None:
    metadata = obj.get("metadata") or {}
    assert isinstance(metadata, dict)
    annotations = metadata.get("annotations") or {}
    value = annotations.get(ADDRESS_ANNOTATION)
    return value if isinstance(value, str) else None
