"""Topology-aware scheduling (TAS) for the Kueue stand-in, after Kueue's
pkg/cache/scheduler (tas_flavor_snapshot.go, tas_nodes_cache.go, tas_non_tas_pod_cache.go)
and pkg/controller/tas/topology_ungater.go.

`Placer` holds, for one scheduling pass, the nodes of every topology flavor and what is
used on them; `place(pod_set, flavor, count, implied)` finds the pod set's topology
assignment as FindTopologyAssignmentsForFlavor does with its default BestFit profile:
- a flavor's nodes are those with all its nodeLabels and a label for every level of its
  Topology that are schedulable and Ready (nodesCache.find); a leaf domain is a node when
  the lowest level is `kubernetes.io/hostname`, else the nodes sharing all level values;
- what is free on a leaf is allocatable less the usage of TAS workloads holding quota
  (their topology assignments) and of bound, unfinished pods without a TAS annotation
  (the non-TAS pod cache); a leaf holds as many pods as its free amount of every
  requested resource, and one `pods`, allows (fillInCounts), none when a node's taint is
  not tolerated by the pod's and the flavor's tolerations, or (hostname leaves) the node
  fails the pod's nodeSelector or required node affinity;
- at the requested level (required or preferred; the lowest level for an unconstrained or
  implied request), domains sorted by pod count (most first, then by level values): when
  the largest holds the pod set the one with the fewest pods that still holds it is
  taken (findBestFitDomain); when none holds it a required request fails with `topology
  "t" allows to fit only n out of m pod(s)` (or "doesn't allow to fit any of"), a
  preferred one climbs a level (findLevelWithFitDomains), and at the top or for an
  unconstrained one domains are taken greedily, most pods first, the last by best fit;
- then level by level down to the leaves, the chosen domains' children are filled the same
  greedy way (updateCountsToMinimumGeneric), and the leaves with pods make the assignment
  (levels: only the hostname when it is the lowest level; buildAssignment).
`take` adds an admitted assignment's usage, so later workloads of the pass see it.

`gate(pod_spec, assignments)` is what Kueue's podset.FromAssignment adds to the Job's pod
template at start when a pod set has a topology assignment: the scheduling gate
`kueue.x-k8s.io/topology`. `ungate(api)` is the TopologyUngater: each gated pod of an
admitted TAS workload gets a domain (by its completion index when every pod has one,
assignGatedPodsToDomainsByRanks; else greedily where room is left), the domain's level
values as nodeSelector, and loses the gate; the scheduler (nodes.py) then binds it there.
Not modelled: slices, leader pod sets, balanced placement, the LeastFreeCapacity profile,
node affinity scores, replacement of failed nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.services.kube_api import nodes, operations
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.job_controller import UID_LABEL, pod_index
from tests.services.kube_api.kueue_workloads import (
    JOB_UID_LABEL,
    TOPOLOGY_ANNOTATIONS,
    UNCONSTRAINED_ANNOTATION,
)
from tests.services.kube_api.target import Target

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

HOSTNAME = "kubernetes.io/hostname"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
AGENT = "kueue/v0.14.0"


@dataclass
class Domain:
    values: tuple[str, ...]
    pods: int = 0
    children: list[Domain] = field(default_factory=list)


def is_tas_pod(pod: dict[str, Any]) -> bool:
    """utiltas.IsTAS: a pod with a topology annotation."""
    annotations = pod["metadata"].get("annotations") or {}
    return any(a in annotations for a in (*TOPOLOGY_ANNOTATIONS, UNCONSTRAINED_ANNOTATION))


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not (node.get("spec") or {}).get("unschedulable")


def encode(levels: list[str], domains: list[tuple[tuple[str, ...], int]]) -> dict[str, Any]:
    """A v1beta2 topologyAssignment: one slice, every value and count listed."""
    return {
        "levels": levels,
        "slices": [
            {
                "domainCount": len(domains),
                "valuesPerLevel": [
                    {"individual": {"roots": [values[i] for values, _ in domains]}}
                    for i in range(len(levels))
                ],
                "podCounts": {"individual": [count for _, count in domains]},
            }
        ],
    }


def decode(assignment: dict[str, Any]) -> list[tuple[tuple[str, ...], int]]:
    """The (level values, pod count) of every domain of a v1beta2 topologyAssignment."""
    found: list[tuple[tuple[str, ...], int]] = []
    for part in assignment.get("slices") or []:
        size = int(part.get("domainCount", 0))
        columns = []
        for level in part.get("valuesPerLevel") or []:
            if "universal" in level:
                columns.append([level["universal"]] * size)
            else:
                each = level.get("individual") or {}
                prefix, suffix = each.get("prefix", ""), each.get("suffix", "")
                columns.append([prefix + root + suffix for root in each.get("roots") or []])
        counts = part.get("podCounts") or {}
        numbers = counts.get("individual") or [counts.get("universal", 0)] * size
        for i in range(size):
            found.append((tuple(column[i] for column in columns), int(numbers[i])))
    return found


def _sorted(domains: list[Domain]) -> list[Domain]:
    return sorted(domains, key=lambda d: (-d.pods, d.values))


def _best_fit(domains: list[Domain], needed: int) -> Domain:
    """The first domain with the fewest pods that still holds `needed` (else the first)."""
    best = None
    for domain in domains:
        if domain.pods >= needed and (best is None or domain.pods < best.pods):
            best = domain
    return best or domains[0]


def _fill(domains: list[Domain], count: int) -> list[Domain]:
    """updateCountsToMinimumGeneric: most pods first, the last by best fit."""
    taken: list[Domain] = []
    remaining = count
    for i, domain in enumerate(domains):
        if remaining <= 0:
            break
        if domain.pods >= remaining:
            chosen = _best_fit(domains[i:], remaining)
            chosen.pods = remaining
            taken.append(chosen)
            return taken
        remaining -= domain.pods
        taken.append(domain)
    return taken


def _fit_message(topology: str, fit: int, count: int) -> str:
    if fit == 0:
        return f'topology "{topology}" doesn\'t allow to fit any of {count} pod(s)'
    return f'topology "{topology}" allows to fit only {fit} out of {count} pod(s)'


class Placer:
    """Topology assignments for one scheduling pass (see the module docstring)."""

    def __init__(
        self,
        all_nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        workloads: list[dict[str, Any]],
        flavors: dict[str, dict[str, Any]],
        levels: dict[str, list[str]],
    ) -> None:
        self.nodes = sorted(all_nodes, key=lambda n: n["metadata"]["name"])
        self.flavors, self.levels = flavors, levels
        self.used = nodes.bound_usage([p for p in pods if not is_tas_pod(p)])
        self.domain_used: dict[tuple[tuple[str, ...], tuple[str, ...]], dict[str, int]] = {}
        for workload in workloads:
            for pod_set, assignment in _admitted(workload):
                self.take(assignment, pod_set)

    def _levels(self, flavor: str) -> list[str]:
        spec = (self.flavors.get(flavor) or {}).get("spec") or {}
        return list(self.levels.get(str(spec.get("topologyName")), []))

    def take(self, assignment: dict[str, Any], pod_set: dict[str, Any]) -> None:
        """Count an admitted topology assignment's pods as used."""
        per_pod = nodes.pod_amounts((pod_set.get("template") or {}).get("spec") or {})
        levels = tuple(assignment.get("levels") or [])
        for values, count in decode(assignment):
            if levels == (HOSTNAME,):
                total = self.used.setdefault(values[0], {})
            else:
                total = self.domain_used.setdefault((levels, values), {})
            for name, value in per_pod.items():
                total[name] = total.get(name, 0) + value * count

    def _members(self, flavor: str, levels: list[str]) -> list[dict[str, Any]]:
        """nodesCache.find: the flavor's labels, every level labelled, schedulable, Ready."""
        wanted = ((self.flavors.get(flavor) or {}).get("spec") or {}).get("nodeLabels") or {}
        found = []
        for node in self.nodes:
            labels = node["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()) and all(
                level in labels for level in levels
            ):
                if _ready(node):
                    found.append(node)
        return found

    def _leaves(self, flavor: str, levels: list[str], pod_spec: dict[str, Any]) -> list[Domain]:
        """fillInCounts at the leaves: how many of the pod set's pods each leaf holds."""
        flavor_spec = (self.flavors.get(flavor) or {}).get("spec") or {}
        tolerations = [
            *(pod_spec.get("tolerations") or []),
            *(flavor_spec.get("tolerations") or []),
        ]
        by_node = levels[-1] == HOSTNAME
        room: dict[tuple[str, ...], dict[str, int]] = {}
        for node in self._members(flavor, levels):
            labels, name = node["metadata"].get("labels") or {}, node["metadata"]["name"]
            if by_node and (
                nodes.untolerated_taint(
                    list((node.get("spec") or {}).get("taints") or []), tolerations
                )
                or not nodes.affinity_matches(pod_spec, labels, name)
            ):
                continue
            values = tuple(labels[level] for level in levels)
            total = room.setdefault(values, {})
            for resource, value in nodes.free(node, self.used.get(name, {})).items():
                total[resource] = total.get(resource, 0) + value
        per_pod = nodes.pod_amounts(pod_spec)
        leaves = []
        for values, total in sorted(room.items()):
            for resource, value in self.domain_used.get((tuple(levels), values), {}).items():
                total[resource] = total.get(resource, 0) - value
            pods = min(max(total.get(r, 0), 0) // amount for r, amount in per_pod.items() if amount)
            leaves.append(Domain(values, pods))
        return leaves

    def place(
        self, pod_set: dict[str, Any], flavor: str, count: int, implied: bool = False
    ) -> tuple[dict[str, Any] | None, str]:
        """The pod set's topology assignment on `flavor`, or why it does not fit."""
        levels = self._levels(flavor)
        topology = str(((self.flavors.get(flavor) or {}).get("spec") or {}).get("topologyName"))
        request = pod_set.get("topologyRequest") or {}
        level = request.get("required") or request.get("preferred") or levels[-1]
        if level not in levels:
            return None, f"no requested topology level: {level}"
        pod_spec = (pod_set.get("template") or {}).get("spec") or {}
        tiers = _tiers(self._leaves(flavor, levels, pod_spec), len(levels))
        required = bool(request.get("required"))
        unconstrained = implied or not (required or request.get("preferred"))
        found = _fit_level(tiers, levels.index(level), count, required, unconstrained)
        if isinstance(found, int):
            return None, _fit_message(topology, found, count)
        index, chosen = found
        chosen = _fill(chosen, count)
        for _ in range(index, len(levels) - 1):
            chosen = _fill(_sorted([c for d in chosen for c in d.children]), count)
        domains = sorted((d.values, d.pods) for d in chosen if d.pods)
        if levels[-1] == HOSTNAME:
            return encode([HOSTNAME], [((v[-1],), n) for v, n in domains]), ""
        return encode(levels, domains), ""


def _tiers(leaves: list[Domain], depth: int) -> list[list[Domain]]:
    """The domains of every level (widest first), each with the pods of its leaves."""
    tiers: list[list[Domain]] = [[] for _ in range(depth)]
    tiers[-1] = leaves
    for level in range(depth - 2, -1, -1):
        parents: dict[tuple[str, ...], Domain] = {}
        for child in tiers[level + 1]:
            parent = parents.setdefault(
                child.values[: level + 1], Domain(child.values[: level + 1])
            )
            parent.pods += child.pods
            parent.children.append(child)
        tiers[level] = list(parents.values())
    return tiers


def _fit_level(
    tiers: list[list[Domain]], index: int, count: int, required: bool, unconstrained: bool
) -> tuple[int, list[Domain]] | int:
    """findLevelWithFitDomains: the level and domains that hold `count` pods, or how many
    pods the best try held."""
    domains = _sorted(tiers[index])
    if not domains:
        return 0
    if domains[0].pods >= count:
        return index, [_best_fit(domains, count)]
    if required:
        return domains[0].pods
    if index > 0 and not unconstrained:
        return _fit_level(tiers, index - 1, count, required, unconstrained)
    taken, remaining = [], count
    for i, domain in enumerate(domains):
        if remaining <= 0:
            break
        chosen = _best_fit(domains[i:], remaining) if domain.pods >= remaining else domain
        taken.append(chosen)
        remaining -= chosen.pods
    return (index, taken) if remaining <= 0 else count - remaining


def _admitted(workload: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod set, topology assignment) of a workload holding quota."""
    conditions = {
        c.get("type"): c.get("status")
        for c in (workload.get("status") or {}).get("conditions") or []
    }
    if conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True":
        return []
    pod_sets = {p.get("name"): p for p in (workload.get("spec") or {}).get("podSets") or []}
    admission = (workload.get("status") or {}).get("admission") or {}
    return [
        (pod_sets.get(a.get("name"), {}), a["topologyAssignment"])
        for a in admission.get("podSetAssignments") or []
        if a.get("topologyAssignment")
    ]


def gate(pod_spec: dict[str, Any], assignments: list[dict[str, Any]]) -> None:
    """podset.FromAssignment: a pod set with a topology assignment starts gated."""
    if any(a.get("topologyAssignment") for a in assignments):
        gates = pod_spec.setdefault("schedulingGates", [])
        if {"name": TOPOLOGY_GATE} not in gates:
            gates.append({"name": TOPOLOGY_GATE})


def _domain_of(pod: dict[str, Any], levels: list[str]) -> tuple[str, ...] | None:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    values = tuple(selector.get(level) for level in levels)
    return values if all(v is not None for v in values) else None  # type: ignore[return-value]


def _targets(
    pods: list[dict[str, Any]], levels: list[str], domains: list[tuple[tuple[str, ...], int]]
) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    """The domain of every gated pod: by rank when all have an index, else where room is."""
    gated = [
        p
        for p in pods
        if {"name": TOPOLOGY_GATE} in ((p.get("spec") or {}).get("schedulingGates") or [])
    ]
    ranks = [values for values, count in domains for _ in range(count)]
    indexes = [pod_index(p) for p in pods]
    if indexes and all(i is not None and i < len(ranks) for i in indexes):
        return [(p, ranks[pod_index(p) or 0]) for p in gated]
    room = dict(domains)
    for pod in pods:
        taken = _domain_of(pod, levels)
        if pod not in gated and taken in room:
            room[taken] -= 1
    found = []
    for pod in sorted(gated, key=lambda p: p["metadata"]["name"]):
        free = next((values for values, left in room.items() if left > 0), None)
        if free is None:
            break
        room[free] -= 1
        found.append((pod, free))
    return found


def ungate(api: KubeAPI) -> None:
    """The TopologyUngater over every admitted TAS workload's gated pods."""
    store = api.store
    pods_of: dict[str, list[dict[str, Any]]] = {}
    for pod in store.items("", "pods", None):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        uid = (pod["metadata"].get("labels") or {}).get(UID_LABEL)
        if uid:
            pods_of.setdefault(uid, []).append(pod)
    found = api.catalog().by_resource("", "pods")
    assert found is not None
    for workload in store.items("kueue.x-k8s.io", "workloads", None):
        uid = (workload["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "")
        for _, assignment in _admitted(workload):
            levels = list(assignment.get("levels") or [])
            for pod, values in _targets(pods_of.get(uid, []), levels, decode(assignment)):
                spec = pod["spec"]
                spec["schedulingGates"] = [
                    g for g in spec["schedulingGates"] if g != {"name": TOPOLOGY_GATE}
                ]
                if not spec["schedulingGates"]:
                    spec.pop("schedulingGates")
                spec.setdefault("nodeSelector", {}).update(dict(zip(levels, values, strict=True)))
                metadata = pod["metadata"]
                target = Target(found, "v1", metadata["namespace"], metadata["name"])
                pod["apiVersion"], pod["kind"] = "v1", "Pod"
                try:
                    operations.update(store, target, pod, {"fieldManager": "kueue"}, AGENT)
                except ApiError:
                    pass  # changed meanwhile: the next reconcile ungates it


def placer_for(
    api: KubeAPI, flavors: dict[str, dict[str, Any]], levels: dict[str, list[str]]
) -> Placer | None:
    """A Placer over the cluster's nodes; None when there are no Node objects (then a
    matching topology request is admitted with no assignment, as before nodes existed)."""
    store = api.store
    found = store.items("", "nodes", None)
    if not found:
        return None
    workloads = store.items("kueue.x-k8s.io", "workloads", None)
    return Placer(found, store.items("", "pods", None), workloads, flavors, levels)
