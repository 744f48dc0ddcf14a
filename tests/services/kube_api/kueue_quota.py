"""Kueue's quota arithmetic over ClusterQueues and (hierarchical) Cohorts, for the stand-in.

Follows pkg/cache/scheduler/resource_node.go of kubernetes-sigs/kueue: every node (a
ClusterQueue or a Cohort) has per (flavor, resource) quotas (nominal, borrowingLimit,
lendingLimit), a subtree quota and a usage. A ClusterQueue's subtree quota is its nominal
quota; a Cohort's is its own nominal quota plus what each child lends (the child's subtree
quota minus its local quota, the part a lendingLimit keeps back). Usage bubbles up past a
child's local quota (`remove_usage` takes it back off). `available` is what a node can
still use now (bounded by the borrowingLimits on the way up); `potential` is the most it
could ever use. A ClusterQueue naming a cohort that has no Cohort object gets an
implicit, quota-less one, as in Kueue. All amounts are integers from `quantities.amount`
(milli-cpu, units otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.services.kube_api import quantities

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass
class Quota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass
class Node:
    """A ClusterQueue or a Cohort in the tree."""

    name: str
    queue: bool = False  # a ClusterQueue (a leaf), not a Cohort
    parent: Node | None = None
    quotas: dict[FlavorResource, Quota] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    def local(self, key: FlavorResource) -> int:
        """Capacity the lendingLimit keeps for this subtree (never lent to the parent)."""
        quota = self.quotas.get(key)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(key, 0) - quota.lending_limit)

    def local_available(self, key: FlavorResource) -> int:
        return max(0, self.local(key) - self.usage.get(key, 0))


def read_quotas(spec: dict[str, Any]) -> dict[FlavorResource, Quota]:
    """The quotas of a ClusterQueue or Cohort spec's resourceGroups."""
    found: dict[FlavorResource, Quota] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                name = resource["name"]

                def limit(key: str, name: str = name, resource: dict[str, Any] = resource) -> Any:
                    value = resource.get(key)
                    return None if value is None else quantities.amount(name, value)

                found[(flavor["name"], name)] = Quota(
                    quantities.amount(name, resource.get("nominalQuota", 0)),
                    limit("borrowingLimit"),
                    limit("lendingLimit"),
                )
    return found


class Tree:
    """The cohort forest of one moment: build it, add usage, ask what fits."""

    def __init__(self, queues: list[dict[str, Any]], cohorts: list[dict[str, Any]]) -> None:
        self.queues: dict[str, Node] = {}
        self.cohorts: dict[str, Node] = {}
        for cohort in cohorts:
            name = cohort["metadata"]["name"]
            self.cohorts[name] = Node(name, quotas=read_quotas(cohort.get("spec") or {}))
        for cohort in cohorts:
            parent = (cohort.get("spec") or {}).get("parentName")
            if parent:
                self._attach(self.cohorts[cohort["metadata"]["name"]], parent)
        for queue in queues:
            spec = queue.get("spec") or {}
            node = Node(queue["metadata"]["name"], True, quotas=read_quotas(spec))
            self.queues[node.name] = node
            if spec.get("cohortName"):
                self._attach(node, spec["cohortName"])
        for root in [c for c in self.cohorts.values() if c.parent is None]:
            if not _has_cycle(root):
                _accumulate(root)
        for node in self.queues.values():
            if node.parent is None:
                node.subtree = {k: q.nominal for k, q in node.quotas.items()}

    def _attach(self, node: Node, parent_name: str) -> None:
        parent = self.cohorts.setdefault(parent_name, Node(parent_name))
        node.parent = parent
        parent.children.append(node)

    def add_usage(self, queue: str, key: FlavorResource, value: int) -> None:
        node: Node | None = self.queues[queue]
        while node is not None and value > 0:
            local_available = node.local_available(key)
            node.usage[key] = node.usage.get(key, 0) + value
            value = value - local_available
            node = node.parent

    def remove_usage(self, queue: str, key: FlavorResource, value: int) -> None:
        """Kueue's removeUsage: take usage off the node, and off its parent the part that
        was stored there (past the node's local quota)."""
        node: Node | None = self.queues[queue]
        while node is not None and value > 0:
            stored = node.usage.get(key, 0) - node.local(key)
            node.usage[key] = node.usage.get(key, 0) - value
            if stored <= 0:
                return
            value = min(value, stored)
            node = node.parent

    def available(self, queue: str, key: FlavorResource) -> int:
        return max(0, _available(self.queues[queue], key))

    def potential(self, queue: str, key: FlavorResource) -> int:
        return _potential(self.queues[queue], key)


def _has_cycle(node: Node, seen: frozenset[str] = frozenset()) -> bool:
    if node.name in seen:
        return True
    return any(_has_cycle(child, seen | {node.name}) for child in node.children)


def _accumulate(node: Node) -> None:
    node.subtree = {k: q.nominal for k, q in node.quotas.items()}
    for child in node.children:
        if child.queue:
            child.subtree = {k: q.nominal for k, q in child.quotas.items()}
        else:
            _accumulate(child)
        for key, value in child.subtree.items():
            node.subtree[key] = node.subtree.get(key, 0) + value - child.local(key)


def _available(node: Node, key: FlavorResource) -> int:
    if node.parent is None:
        return node.subtree.get(key, 0) - node.usage.get(key, 0)
    from_parent = _available(node.parent, key)
    quota = node.quotas.get(key)
    if quota is not None and quota.borrowing_limit is not None:
        stored = node.subtree.get(key, 0) - node.local(key)
        used = max(0, node.usage.get(key, 0) - node.local(key))
        from_parent = min(stored - used + quota.borrowing_limit, from_parent)
    return node.local_available(key) + from_parent


def potential_available(node: Node, key: FlavorResource) -> int:
    """The most a ClusterQueue or Cohort could ever use of `key` (potentialAvailable)."""
    return _potential(node, key)


def _potential(node: Node, key: FlavorResource) -> int:
    if node.parent is None:
        return node.subtree.get(key, 0)
    most = node.local(key) + _potential(node.parent, key)
    quota = node.quotas.get(key)
    if quota is not None and quota.borrowing_limit is not None:
        most = min(node.subtree.get(key, 0) + quota.borrowing_limit, most)
    return most
