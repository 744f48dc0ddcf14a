"""Fair sharing for the Kueue stand-in: the order in which pending Workloads of the
ClusterQueues of one Cohort tree are tried, after Kueue's pkg/scheduler/
fair_sharing_iterator.go and pkg/cache/scheduler/fair_sharing.go.

- `dominant_share(node, weights)`: DominantResourceShare of a ClusterQueue or Cohort
  (dominantResourceShare): zero without a parent or when nothing is borrowed; else, per
  resource, what the node uses beyond its subtree quota summed over flavors, divided by
  what its parent could lend of that resource at most (calculateLendable: the parent's
  potentialAvailable summed over the flavors of the root's subtree), times 1000; the
  largest ratio (by name on a tie) divided by the node's `fairSharing.weight` (default
  1). A zero weight that borrows sorts after every other share (CompareDRS).
- `fair_order(...)`: a generator of pending Workloads. Each ClusterQueue keeps its own
  order (priority, then creation); every step runs Kueue's tournament over the heads
  (runTournament): from the root Cohort down, each Cohort picks, among the winners of its
  child Cohorts and the heads of its child ClusterQueues, the one whose share at that
  Cohort (the share of the child it comes through, with the head's own usage added, as
  computeDRS simulates it) is lowest, then the higher priority
  (PrioritySortingWithinCohort), then the older. Heads of ClusterQueues without a Cohort
  and Workloads that cannot be considered come first. The share is recomputed at every
  step, so what the caller admitted meanwhile counts.
The caller (kueue.py) tries each Workload in that order and adds the usage of those it
admits to the tree.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from typing import Any

from tests.services.kube_api import quantities
from tests.services.kube_api.kueue_flavors import assign
from tests.services.kube_api.kueue_quota import FlavorResource, Node, Tree, potential_available

Workload = dict[str, Any]
Request = dict[FlavorResource, int]


def weights_of(objects: list[dict[str, Any]]) -> dict[str, float]:
    """`spec.fairSharing.weight` of ClusterQueues and Cohorts by name (parseFairWeight)."""
    found: dict[str, float] = {}
    for obj in objects:
        weight = ((obj.get("spec") or {}).get("fairSharing") or {}).get("weight")
        if weight is not None:
            found[obj["metadata"]["name"]] = float(quantities.parse(weight))
    return found


def _root(node: Node) -> Node:
    while node.parent is not None:
        node = node.parent
    return node


def dominant_share(node: Node, weights: dict[str, float]) -> tuple[bool, float]:
    """(borrows with a zero weight, weighted share) of the node; sorts like CompareDRS."""
    if node.parent is None:
        return False, 0.0
    borrowed: dict[str, int] = {}
    for key, quota in node.subtree.items():
        over = node.usage.get(key, 0) - quota
        if over > 0:
            borrowed[key[1]] = borrowed.get(key[1], 0) + over
    if not borrowed:
        return False, 0.0
    lendable: dict[str, int] = {}
    for key in _root(node).subtree:
        lendable[key[1]] = lendable.get(key[1], 0) + potential_available(node.parent, key)
    ratio = max(
        (amount * 1000 / lendable[r] for r, amount in borrowed.items() if lendable.get(r, 0) > 0),
        default=0.0,
    )
    weight = weights.get(node.name, 1.0)
    if weight == 0:
        return ratio > 0, ratio if ratio > 0 else 0.0
    return False, ratio / weight


def _path_shares(
    tree: Tree, queue: str, request: Request, weights: dict[str, float]
) -> dict[str, tuple[bool, float]]:
    """The share each ancestor Cohort compares the head by: that of its child on the path,
    with the head's request added to the tree (SimulateUsageAddition)."""
    simulated = copy.deepcopy(tree)
    for key, value in request.items():
        simulated.add_usage(queue, key, value)
    shares: dict[str, tuple[bool, float]] = {}
    node: Node = simulated.queues[queue]
    while node.parent is not None:
        shares[node.parent.name] = dominant_share(node, weights)
        node = node.parent
    return shares


def _order_key(workload: Workload) -> tuple[int, str, str]:
    return (
        -int((workload.get("spec") or {}).get("priority", 0)),
        workload["metadata"]["creationTimestamp"],
        workload["metadata"]["name"],
    )


def _tournament(
    cohort: Node, heads: dict[str, Workload], shares: dict[str, dict[str, tuple[bool, float]]]
) -> tuple[str, Workload] | None:
    candidates: list[tuple[str, Workload]] = []
    for child in cohort.children:
        if child.queue:
            if child.name in heads:
                candidates.append((child.name, heads[child.name]))
        else:
            won = _tournament(child, heads, shares)
            if won is not None:
                candidates.append(won)
    if not candidates:
        return None

    def rank(candidate: tuple[str, Workload]) -> tuple[bool, float, tuple[int, str, str]]:
        zero_weight, share = shares[candidate[0]].get(cohort.name, (False, 0.0))
        return zero_weight, share if not math.isnan(share) else 0.0, _order_key(candidate[1])

    return min(candidates, key=rank)


def fair_order(
    pending: list[Workload],
    queue_of: Callable[[Workload], str | None],
    tree: Tree,
    queues: dict[str, dict[str, Any]],
    flavors: dict[str, dict[str, Any]],
    levels: dict[str, list[str]],
    weights: dict[str, float],
) -> Iterator[Workload]:
    """`pending` in the order Kueue's fair-sharing iterator tries them (module docstring);
    `queue_of`: a Workload's ClusterQueue, None when it cannot be considered."""
    lanes: dict[str, list[Workload]] = {}
    for workload in sorted(pending, key=_order_key):
        queue = queue_of(workload)
        if queue is None or queue not in tree.queues:
            yield workload
        else:
            lanes.setdefault(queue, []).append(workload)
    while lanes:
        heads = {queue: lane[0] for queue, lane in lanes.items()}
        alone = [q for q in heads if tree.queues[q].parent is None]
        if alone:
            chosen = min(alone, key=lambda q: _order_key(heads[q]))
        else:
            shares = {}
            for queue, head in heads.items():
                fitted = assign(head, queues[queue], flavors, tree, levels)
                shares[queue] = _path_shares(tree, queue, fitted.usage, weights)
            roots = sorted({_root(tree.queues[q]).name for q in heads})
            won = _tournament(tree.cohorts[roots[0]], heads, shares)
            assert won is not None
            chosen = won[0]
        lanes[chosen].pop(0)
        if not lanes[chosen]:
            del lanes[chosen]
        yield heads[chosen]
