"""Kueue's classical preemption, for the Kueue stand-in (kueue.py, kueue_flavors.py).

After kubernetes-sigs/kueue v0.15 pkg/scheduler/preemption (preemption.go, classical/,
common/) and the preemption half of pkg/scheduler/flavorassigner/flavorassigner.go.
`Preemptor` holds one scheduling moment: the ClusterQueues, the quota tree (kueue_quota.Tree,
with the usage of every Workload holding quota) and those Workloads (`Admitted`).

- `may_preempt` is the flavor assigner's gate and oracle for one flavor and resource a
  workload does not fit now (fitsResourceQuota + PreemptionOracle.SimulatePreemption):
  preemption is only tried when the request is within the ClusterQueue's nominal quota,
  or some Cohort on the way up could hold it without borrowing and has a parent
  (FindHeightOfLowestSubtreeThatFits), or borrowWithinCohort is not Never; otherwise the
  flavor is noFit, whatever the policies say. It answers whether candidates exist.
- `targets` is classicalPreemptions: candidates from the same ClusterQueue
  (withinClusterQueue), and, when the queue has a parent and reclaimWithinCohort is not
  Never, from the ClusterQueues of every Cohort on the way to the root that are over their
  nominal quota (collectCandidatesForHierarchicalReclaim); each classified
  (classifyPreemptionVariant) as WithinCQ, HierarchicalReclaim (the preemptor's subtree
  holds the request within quota), ReclaimWithoutBorrowing (only usable if the preemptor
  ends up not borrowing: borrowWithinCohort Never, or the candidate's priority not below
  the preemptor's or above maxPriorityThreshold) or ReclaimWhileBorrowing. Candidates are
  ordered as CandidatesOrdering says (already evicted first, other ClusterQueues before
  the preemptor's own, lower priority, then the most recently reserved), evicted ones of
  each class before the others; removed one by one while valid (candidateIsValid: a
  candidate of another queue only while its ClusterQueue, and each Cohort up to the common
  ancestor, is over nominal), until the workload fits; then given back in reverse while it
  still fits (fillBackWorkloads). The attempts with and without borrowing are tried in
  Kueue's order.
- `reason` of each target: InClusterQueue, InCohortReclamation or
  InCohortReclaimWhileBorrowing, and `message` is preemptionMessage's text.
Not modelled: fair sharing (fairPreemptions), topology-aware preemption, admission fair
sharing, workload slices.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.services.kube_api import quantities
from tests.services.kube_api.kueue_quota import FlavorResource, Node, Tree
from tests.services.kube_api.kueue_workloads import find_condition, is_true

WITHIN_QUEUE = "InClusterQueue"
RECLAIM = "InCohortReclamation"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
HUMAN = {
    WITHIN_QUEUE: "prioritization in the ClusterQueue",
    RECLAIM: "reclamation within the cohort",
    RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}
# classical/hierarchical_preemption.go preemptionVariant
NEVER, WITHIN_CQ, HIERARCHICAL, WITHOUT_BORROWING, WHILE_BORROWING = range(5)
VARIANT_REASON = {
    WITHIN_CQ: WITHIN_QUEUE,
    HIERARCHICAL: RECLAIM,
    WITHOUT_BORROWING: RECLAIM,
    WHILE_BORROWING: RECLAIM_WHILE_BORROWING,
}


@dataclass
class Admitted:
    """A Workload holding quota (workload.Info): its ClusterQueue and usage per flavor."""

    obj: dict[str, Any]
    queue: str
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    @property
    def priority(self) -> int:
        return int((self.obj.get("spec") or {}).get("priority", 0))

    @property
    def created(self) -> str:
        return str(self.obj["metadata"].get("creationTimestamp", ""))

    @property
    def evicted(self) -> bool:
        return is_true(self.obj, "Evicted")

    @property
    def reserved_at(self) -> str:
        found = find_condition(self.obj, "QuotaReserved") or {}
        return str(found.get("lastTransitionTime", "")) if found.get("status") == "True" else ""

    @property
    def key(self) -> tuple[str, str]:
        return self.obj["metadata"]["namespace"], self.obj["metadata"]["name"]


def admitted(workload: dict[str, Any]) -> Admitted:
    """The Admitted view of a Workload from its status.admission."""
    admission = (workload.get("status") or {}).get("admission") or {}
    found = Admitted(workload, str(admission.get("clusterQueue", "")))
    for pod_set in admission.get("podSetAssignments") or []:
        for resource, flavor in (pod_set.get("flavors") or {}).items():
            value = (pod_set.get("resourceUsage") or {}).get(resource, 0)
            key = (flavor, resource)
            found.usage[key] = found.usage.get(key, 0) + quantities.amount(resource, value)
    return found


@dataclass
class Target:
    """A workload to evict, why (a Preempted condition reason) and its ClusterQueue."""

    workload: Admitted
    reason: str


@dataclass
class _Candidate:
    workload: Admitted
    lca: Node | None
    variant: int


def _priority(workload: dict[str, Any]) -> int:
    return int((workload.get("spec") or {}).get("priority", 0))


def satisfies(preemptor: dict[str, Any], candidate: dict[str, Any], policy: str) -> bool:
    """common/preemption_policy.go SatisfiesPreemptionPolicy; the queue order timestamp is
    the creation time (GetQueueOrderTimestamp with PrioritySortingWithinCohort on)."""
    mine, theirs = _priority(preemptor), _priority(candidate)
    if policy == "LowerPriority":
        return mine > theirs
    if policy == "LowerOrNewerEqualPriority":
        newer = mine == theirs and str(preemptor["metadata"].get("creationTimestamp", "")) < str(
            candidate["metadata"].get("creationTimestamp", "")
        )
        return mine > theirs or newer
    return policy == "Any"


def _path_up(node: Node) -> Iterator[Node]:
    """PathParentToRoot: the node's Cohorts, nearest first."""
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _borrowing_with(node: Node, key: FlavorResource, value: int) -> bool:
    """BorrowingWith: usage plus `value` beyond the node's subtree quota (its nominal
    quota for a ClusterQueue)."""
    return node.usage.get(key, 0) + value > node.subtree.get(key, 0)


def _within_nominal(node: Node, keys: set[FlavorResource]) -> bool:
    """IsWithinNominalInResources."""
    return all(node.usage.get(k, 0) <= node.subtree.get(k, 0) for k in keys)


def _fits_in_quota(
    node: Node, requests: dict[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """QuantitiesFitInQuota: whether the requests fit the node's subtree quota, and what is
    left over once its local quota is used."""
    fits = all(node.usage.get(k, 0) + v <= node.subtree.get(k, 0) for k, v in requests.items())
    return fits, {k: max(0, v - node.local_available(k)) for k, v in requests.items()}


def may_reclaim_in_hierarchy(node: Node, key: FlavorResource, value: int) -> bool:
    """The second answer of classical.FindHeightOfLowestSubtreeThatFits: whether the
    lowest subtree that holds `value` without borrowing has a parent."""
    if not _borrowing_with(node, key, value) or node.parent is None:
        return node.parent is not None
    remaining = value - node.local_available(key)
    for cohort in _path_up(node):
        if not _borrowing_with(cohort, key, remaining):
            return cohort.parent is not None
        remaining -= cohort.local_available(key)
    return False


class Preemptor:
    """Classical preemption over one scheduling moment."""

    def __init__(
        self, queues: dict[str, dict[str, Any]], tree: Tree, holding: list[Admitted]
    ) -> None:
        self.queues, self.tree, self.holding = queues, tree, holding
        self._needing: set[FlavorResource] = set()

    def _policy(self, queue: str) -> dict[str, Any]:
        return (self.queues[queue].get("spec") or {}).get("preemption") or {}

    def _borrow_forbidden(self, queue: str) -> tuple[bool, int | None]:
        """IsBorrowingWithinCohortForbidden, and the maxPriorityThreshold."""
        borrow = self._policy(queue).get("borrowWithinCohort") or {}
        if borrow.get("policy", "Never") == "Never":
            return True, None
        threshold = borrow.get("maxPriorityThreshold")
        return False, None if threshold is None else int(threshold)

    def tries(self, queue: str, key: FlavorResource, value: int) -> bool:
        """fitsResourceQuota's gate: whether the flavor assigner simulates preemption for
        `value` of `key` at all (else the flavor is noFit, whatever the policies say)."""
        node = self.tree.queues[queue]
        quota = node.quotas.get(key)
        nominal = quota.nominal if quota is not None else 0
        forbidden, _ = self._borrow_forbidden(queue)
        return value <= nominal or may_reclaim_in_hierarchy(node, key, value) or not forbidden

    def may_preempt(
        self, workload: dict[str, Any], queue: str, key: FlavorResource, value: int
    ) -> bool:
        """The gate, then the oracle (SimulatePreemption): whether targets exist."""
        if not self.tries(queue, key, value):
            return False
        return bool(self.targets(workload, queue, {key: value}, {key}))

    # -- classicalPreemptions ---------------------------------------------------------

    def targets(
        self,
        workload: dict[str, Any],
        queue: str,
        usage: dict[FlavorResource, int],
        needing: set[FlavorResource],
    ) -> list[Target]:
        """The workloads to evict so `workload` fits with `usage` in `queue` (none: it
        cannot be made to fit); `needing` are the flavor-resources assigned in Preempt mode."""
        node = self.tree.queues[queue]
        self._needing = needing
        same = self._same_queue(workload, queue, needing)
        hierarchy, priority = self._hierarchical(workload, queue, usage, needing)
        ordered = [self._sorted(group, queue) for group in (hierarchy, priority, same)]
        evicted = [c for group in ordered for c in group if c.workload.evicted]
        rest = [c for group in ordered for c in group if not c.workload.evicted]
        candidates = evicted + rest
        forbidden, _ = self._borrow_forbidden(queue)
        under_nominal = all(
            node.usage.get(k, 0) < (node.quotas[k].nominal if k in node.quotas else 0)
            for k in needing
        )
        if (not hierarchy and not priority) or (forbidden and not under_nominal):
            attempts = [True]
        elif forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            chosen: list[_Candidate] = []
            for candidate in candidates:
                if not self._valid(candidate, queue, borrowing, needing):
                    continue
                self._remove(candidate.workload)
                chosen.append(candidate)
                if self._fits(queue, usage, borrowing):
                    chosen = self._fill_back(queue, usage, chosen, borrowing)
                    for each in chosen:
                        self._add(each.workload)
                    return [Target(c.workload, VARIANT_REASON[c.variant]) for c in chosen]
            for each in chosen:
                self._add(each.workload)
        return []

    def _sorted(self, group: list[_Candidate], queue: str) -> list[_Candidate]:
        """CandidatesOrdering: evicted first, other ClusterQueues first, lower priority,
        the most recently reserved, then uid."""

        def key(candidate: _Candidate) -> tuple[Any, ...]:
            workload = candidate.workload
            return (
                not workload.evicted,
                workload.queue == queue,
                workload.priority,
                _negated(workload.reserved_at),
                str(workload.obj["metadata"].get("uid", "")),
            )

        return sorted(group, key=key)

    def _classify(
        self, preemptor: dict[str, Any], queue: str, candidate: Admitted, advantage: bool
    ) -> int:
        """classifyPreemptionVariant."""
        if not any(k in candidate.usage for k in self._needing):
            return NEVER
        policy = self._policy(queue)
        within = candidate.queue == queue
        rule = policy.get("withinClusterQueue" if within else "reclaimWithinCohort", "Never")
        if not satisfies(preemptor, candidate.obj, rule):
            return NEVER
        if within:
            return WITHIN_CQ
        if advantage:
            return HIERARCHICAL
        forbidden, threshold = self._borrow_forbidden(queue)
        if forbidden:
            return WITHOUT_BORROWING
        mine = _priority(preemptor)
        if candidate.priority >= mine or (threshold is not None and candidate.priority > threshold):
            return WITHOUT_BORROWING
        return WHILE_BORROWING

    def _from_queue(
        self,
        preemptor: dict[str, Any],
        queue: str,
        source: str,
        lca: Node | None,
        advantage: bool,
    ) -> list[_Candidate]:
        """getCandidatesFromCQ."""
        found = []
        for workload in self.holding:
            if workload.queue != source:
                continue
            variant = self._classify(preemptor, queue, workload, advantage)
            if variant != NEVER:
                found.append(_Candidate(workload, lca, variant))
        return found

    def _same_queue(
        self, preemptor: dict[str, Any], queue: str, needing: set[FlavorResource]
    ) -> list[_Candidate]:
        """collectSameQueueCandidates."""
        if self._policy(queue).get("withinClusterQueue", "Never") == "Never":
            return []
        return self._from_queue(preemptor, queue, queue, None, False)

    def _hierarchical(
        self,
        preemptor: dict[str, Any],
        queue: str,
        usage: dict[FlavorResource, int],
        needing: set[FlavorResource],
    ) -> tuple[list[_Candidate], list[_Candidate]]:
        """collectCandidatesForHierarchicalReclaim: (hierarchy, priority) candidates."""
        node = self.tree.queues[queue]
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if node.parent is None or self._policy(queue).get("reclaimWithinCohort") in (
            None,
            "Never",
        ):
            return hierarchy, priority
        advantage, remaining = _fits_in_quota(node, usage)
        previous: Node | None = None
        for root in _path_up(node):
            into = hierarchy if advantage else priority
            self._in_subtree(preemptor, queue, root, root, previous, advantage, into)
            fits, remaining = _fits_in_quota(root, remaining)
            advantage = advantage or fits
            previous = root
        return hierarchy, priority

    def _in_subtree(
        self,
        preemptor: dict[str, Any],
        queue: str,
        current: Node,
        root: Node,
        skip: Node | None,
        advantage: bool,
        into: list[_Candidate],
    ) -> None:
        """collectCandidatesInSubtree: ClusterQueues over nominal, in Cohorts over nominal."""
        for child in current.children:
            if child.queue or child is skip or _within_nominal(child, self._needing):
                continue
            self._in_subtree(preemptor, queue, child, root, skip, advantage, into)
        for child in current.children:
            if not child.queue or child.name == queue:
                continue
            if not _within_nominal(child, self._needing):
                into += self._from_queue(preemptor, queue, child.name, root, advantage)

    def _valid(
        self, candidate: _Candidate, queue: str, borrowing: bool, needing: set[FlavorResource]
    ) -> bool:
        """candidateIsValid."""
        if candidate.workload.queue == queue:
            return True
        if borrowing and candidate.variant == WITHOUT_BORROWING:
            return False
        node = self.tree.queues[candidate.workload.queue]
        if _within_nominal(node, needing):
            return False
        for cohort in _path_up(node):
            if cohort is candidate.lca:
                break
            if _within_nominal(cohort, needing):
                return False
        return True

    def _fits(self, queue: str, usage: dict[FlavorResource, int], borrowing: bool) -> bool:
        """workloadFits."""
        node = self.tree.queues[queue]
        for key, value in usage.items():
            quota = node.quotas.get(key)
            nominal = quota.nominal if quota is not None else 0
            if not borrowing and node.usage.get(key, 0) + value > nominal:
                return False
            if value > self.tree.available(queue, key):
                return False
        return True

    def _fill_back(
        self,
        queue: str,
        usage: dict[FlavorResource, int],
        chosen: list[_Candidate],
        borrowing: bool,
    ) -> list[_Candidate]:
        """fillBackWorkloads: give back, last removed first (but the last), what is not
        needed for the workload to fit."""
        for index in range(len(chosen) - 2, -1, -1):
            self._add(chosen[index].workload)
            if self._fits(queue, usage, borrowing):
                chosen[index] = chosen[-1]
                chosen.pop()
            else:
                self._remove(chosen[index].workload)
        return chosen

    def _remove(self, workload: Admitted) -> None:
        for key, value in workload.usage.items():
            if workload.queue in self.tree.queues:
                self.tree.remove_usage(workload.queue, key, value)

    def _add(self, workload: Admitted) -> None:
        for key, value in workload.usage.items():
            if workload.queue in self.tree.queues:
                self.tree.add_usage(workload.queue, key, value)


def _negated(text: str) -> tuple[int, ...]:
    """A sort key that puts later RFC 3339 times first ("" is now: first of all)."""
    if not text:
        return (-(1 << 40),)
    return tuple(-ord(ch) for ch in text)


def message(preemptor: dict[str, Any], reason: str, preemptor_path: str, path: str) -> str:
    """preemptionMessage: what the Evicted and Preempted conditions of a victim say."""
    metadata = preemptor["metadata"]
    uid = metadata.get("uid") or "UNKNOWN"
    job_uid = (metadata.get("labels") or {}).get("kueue.x-k8s.io/job-uid") or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
        f"{HUMAN.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path}; "
        f"preemptee path: {path}"
    )


def queue_path(tree: Tree, queue: str) -> str:
    """buildCQPath: `/root/.../queue`."""
    node = tree.queues[queue]
    names = [node.name, *(cohort.name for cohort in _path_up(node))]
    return "/" + "/".join(reversed(names))
