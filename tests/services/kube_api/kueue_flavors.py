"""Flavor assignment for the Kueue stand-in, after pkg/scheduler/flavorassigner of Kueue.

`assign(workload, queue, flavors, tree)` tries, for every pod set and every resource it
requests, the flavors of the ClusterQueue's resource group covering that resource, in
order. A flavor is skipped when its ResourceFlavor is missing ("flavor x not found"),
when its nodeTaints are not tolerated ("untolerated taint k=v:NoSchedule in flavor x")
or when the pod's nodeSelector, restricted to the flavor's label keys, does not match
its nodeLabels, or its required node affinity narrowed to the flavor's label keys
matches none of its terms ("flavor x doesn't match node affinity"; flavorSelector), or
when the pod set and the flavor disagree on topology-aware scheduling (a pod set with a
topology request needs a flavor with a topologyName whose Topology has the requested
level: 'Flavor "x" does not support TopologyAwareScheduling', unless the pods request no
resource of that flavor's group; one without a request is
kept off topology flavors: 'Flavor "x" supports only TopologyAwareScheduling', unless
every flavor of the queue has a topology). Then each resource of the group must fit:
beyond the most the queue could ever get it is "insufficient quota for r in flavor x,
previously considered podsets requests (a) + current podset request (b) > maximum
capacity (c)"; beyond what is unused now "insufficient unused quota for r in flavor x, n
more needed"; that flavor is taken in Preempt mode when `oracle`
(kueue_preemption.Preemptor.may_preempt: Kueue's fitsResourceQuota and preemption
oracle) says preemption may free it, but only if no later flavor fits (whenCanPreempt
TryNextFlavor, the default), and the Assignment lists the flavor-resources that need
preemption in `preempting`. A flavor that fits
within the queue's own quota is taken at once; one that needs borrowing is taken at once
under `whenCanBorrow: MayStopSearch` and only if no later flavor fits without borrowing
under `TryNextFlavor`. A queue with a `pods` resource counts one per pod. The failure
message is Kueue's: "couldn't assign flavors to pod set main: " and the sorted reasons.
When the cluster has Node objects, a pod set admitted on a topology flavor (a topology
request, or none on a queue whose flavors all have one: TAS implied) also needs a
topology assignment from kueue_tas.py, else it waits with TAS's reason ('topology "t"
allows to fit only 1 out of 2 pod(s)'); with no Node objects a matching request is
admitted with no assignment. Not modelled: the flavorFungibility preference among
flavors that all need preemption (the first is taken), partial admission.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.services.kube_api import nodes, quantities
from tests.services.kube_api.kueue_quota import Tree
from tests.services.kube_api.kueue_tas import Placer
from tests.services.kube_api.kueue_workloads import pod_requests

Oracle = Callable[[str, str, int], bool]
"""(flavor, resource, amount) -> whether preemption may make room for it."""


@dataclass
class Assignment:
    """The outcome for one workload: flavors per pod set, or the reasons it waits."""

    pod_sets: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[tuple[str, str], int] = field(default_factory=dict)
    message: str = ""
    preempting: set[tuple[str, str]] = field(default_factory=set)
    """(flavor, resource) assigned in Preempt mode: admission needs preemption first."""

    @property
    def fits(self) -> bool:
        return not self.message


def _flavor_problem(name: str, flavor: dict[str, Any] | None, pod_spec: dict[str, Any]) -> str:
    """Kueue's checkFlavorForPodSets: the flavor's nodeTaints against the pod's and the
    flavor's tolerations, its nodeLabels against the pod's nodeSelector and required node
    affinity narrowed to the flavor's label keys (flavorSelector)."""
    if flavor is None:
        return f"flavor {name} not found"
    spec = flavor.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or []) + list(spec.get("tolerations") or [])
    taint = nodes.untolerated_taint(list(spec.get("nodeTaints") or []), tolerations)
    if taint is not None:
        return f"untolerated taint {nodes.taint_text(taint)} in flavor {name}"
    labels = dict(spec.get("nodeLabels") or {})
    if not nodes.affinity_matches(pod_spec, labels, keys=set(labels)):
        return f"flavor {name} doesn't match node affinity"
    return ""


def _topology_problem(
    name: str,
    flavor: dict[str, Any],
    pod_set: dict[str, Any],
    queue: dict[str, Any],
    flavors: dict[str, dict[str, Any]],
    levels: dict[str, list[str]],
) -> str:
    """Kueue's checkPodSetAndFlavorMatchForTAS: topology pod sets go to topology flavors,
    others stay off them, unless every flavor of the queue has a topology (TAS implied)."""
    request = pod_set.get("topologyRequest")
    names = [f["name"] for g in _groups(queue) for f in g.get("flavors") or []]
    tas_only = all(((flavors.get(n) or {}).get("spec") or {}).get("topologyName") for n in names)
    topology = (flavor.get("spec") or {}).get("topologyName")
    if request is None and tas_only:
        return ""
    if request is not None:
        if not topology and not _overlaps(name, pod_set, queue):
            return ""  # hasOverlapWithPodRequestedResources: a group the pods ask nothing of
        if not topology:
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        if topology not in levels:
            return f'Flavor "{name}" information missing in TAS cache'
        level = request.get("required") or request.get("preferred")
        if level and level not in levels[topology]:
            return f'Flavor "{name}" does not contain the requested level'
        return ""
    if topology:
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    return ""


def _overlaps(flavor: str, pod_set: dict[str, Any], queue: dict[str, Any]) -> bool:
    """Whether the pod's own requests name a resource of the flavor's resource group."""
    requested = set(pod_requests(((pod_set.get("template") or {}).get("spec")) or {}))
    for group in _groups(queue):
        if any(f.get("name") == flavor for f in group.get("flavors") or []):
            return bool(requested & set(group.get("coveredResources") or []))
    return True


def _groups(queue: dict[str, Any]) -> list[dict[str, Any]]:
    return list((queue.get("spec") or {}).get("resourceGroups") or [])


def _quota_fit(
    name: str,
    flavor_name: str,
    covered: list[str],
    wanted: dict[str, int],
    tree: Tree,
    taken: dict[tuple[str, str], int],
    reasons: list[str],
    oracle: Oracle | None,
) -> tuple[bool, bool, list[str]]:
    """Kueue's fitsResourceQuota for each covered resource on one flavor: (fits, borrows,
    the resources that fit only by preemption); reasons are appended to `reasons`."""
    fits, borrows, preempting = True, False, []
    for each in covered:
        key = (flavor_name, each)
        before = taken.get(key, 0)
        total = before + wanted[each]
        most = tree.potential(name, key)
        if total > most:
            reasons.append(
                f"insufficient quota for {each} in flavor {flavor_name}, previously "
                f"considered podsets requests ({quantities.render(each, before)}) + "
                f"current podset request ({quantities.render(each, wanted[each])}) > "
                f"maximum capacity ({quantities.render(each, most)})"
            )
            return False, False, []
        free = tree.available(name, key)
        if total > free:
            reasons.append(
                f"insufficient unused quota for {each} in flavor {flavor_name}, "
                f"{quantities.render(each, total - free)} more needed"
            )
            if oracle is not None and oracle(flavor_name, each, total):
                preempting.append(each)
            else:
                fits = False
            continue
        node = tree.queues[name]
        borrows = borrows or node.usage.get(key, 0) + total > node.subtree.get(key, 0)
    return fits, borrows, preempting


def _pod_set(
    pod_set: dict[str, Any],
    queue: dict[str, Any],
    flavors: dict[str, dict[str, Any]],
    tree: Tree,
    taken: dict[tuple[str, str], int],
    levels: dict[str, list[str]],
    oracle: Oracle | None = None,
) -> tuple[dict[str, str], list[str], set[tuple[str, str]]]:
    """Flavors per resource for one pod set, or the reasons none fits (usage in `taken`),
    and the flavor-resources that fit only by preempting."""
    name = queue["metadata"]["name"]
    count = int(pod_set.get("count", 1))
    pod_spec = (pod_set.get("template") or {}).get("spec") or {}
    per_pod = pod_requests(pod_spec)
    groups = _groups(queue)
    if any("pods" in (g.get("coveredResources") or []) for g in groups):
        per_pod["pods"] = 1
    wanted = {resource: value * count for resource, value in per_pod.items()}
    chosen: dict[str, str] = {}
    preempt: set[tuple[str, str]] = set()
    all_reasons: list[str] = []
    for resource in sorted(wanted):
        if resource in chosen:
            continue
        group = next((g for g in groups if resource in (g.get("coveredResources") or [])), None)
        if group is None:
            return {}, [f"resource {resource} unavailable in ClusterQueue"], set()
        covered = [r for r in sorted(wanted) if r in group["coveredResources"]]
        reasons: list[str] = []
        borrowing_choice: str | None = None
        preempt_choice: tuple[str, list[str]] | None = None
        picked: str | None = None
        for flavor in group.get("flavors") or []:
            flavor_name = flavor["name"]
            problem = _flavor_problem(flavor_name, flavors.get(flavor_name), pod_spec)
            if not problem:
                problem = _topology_problem(
                    flavor_name, flavors[flavor_name], pod_set, queue, flavors, levels
                )
            if problem:
                reasons.append(problem)
                continue
            fits, borrows, preempting = _quota_fit(
                name, flavor_name, covered, wanted, tree, taken, reasons, oracle
            )
            if not fits:
                continue
            if preempting:
                preempt_choice = preempt_choice or (flavor_name, preempting)
                continue
            policy = ((queue.get("spec") or {}).get("flavorFungibility") or {}).get(
                "whenCanBorrow", "MayStopSearch"
            )
            if not borrows or policy in ("MayStopSearch", "Borrow"):
                picked = flavor_name
                break
            borrowing_choice = borrowing_choice or flavor_name
        picked = picked or borrowing_choice
        needs: list[str] = []
        if picked is None and preempt_choice is not None:
            picked, needs = preempt_choice
        if picked is None:
            return {}, reasons, set()
        for each in covered:
            chosen[each] = picked
            taken[(picked, each)] = taken.get((picked, each), 0) + wanted[each]
        preempt.update((picked, each) for each in needs)
        all_reasons += reasons if needs else []
    return chosen, all_reasons, preempt


def assign(
    workload: dict[str, Any],
    queue: dict[str, Any],
    flavors: dict[str, dict[str, Any]],
    tree: Tree,
    levels: dict[str, list[str]] | None = None,
    placer: Placer | None = None,
    oracle: Oracle | None = None,
) -> Assignment:
    """Flavors for every pod set of `workload` in `queue`; `levels`: the node labels of each
    Topology object by name (for pod sets that request topology-aware scheduling);
    `placer`: the nodes' topology domains (kueue_tas.py), which then give a pod set on a
    topology flavor its topologyAssignment or the reason it does not fit (and count it);
    `oracle`: whether preemption may free (flavor, resource, amount) for it."""
    result = Assignment()
    taken: dict[tuple[str, str], int] = {}
    placed: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        found = _pod_set(pod_set, queue, flavors, tree, taken, levels or {}, oracle)
        chosen, reasons, preempting = found
        topology, problem = None, ""
        if not preempting:
            topology, problem = _topology(pod_set, chosen, queue, flavors, placer)
        if problem:
            reasons = [problem]
        if reasons:
            name = pod_set.get("name", "main")
            result.message = result.message or (
                f"couldn't assign flavors to pod set {name}: " + ", ".join(sorted(reasons))
            )
        if reasons and not preempting:
            result.preempting = set()
            return result
        result.preempting |= preempting
        count = int(pod_set.get("count", 1))
        per_pod = pod_requests(((pod_set.get("template") or {}).get("spec")) or {})
        if "pods" in chosen:
            per_pod["pods"] = 1
        result.pod_sets.append(
            {
                "name": pod_set.get("name", "main"),
                "flavors": dict(sorted(chosen.items())),
                "resourceUsage": {
                    r: quantities.render(r, per_pod[r] * count) for r in sorted(chosen)
                },
                "count": count,
                **({"topologyAssignment": topology} if topology else {}),
            }
        )
        if topology:
            placed.append((topology, pod_set))
    for topology, pod_set in placed if result.fits else []:
        assert placer is not None
        placer.take(topology, pod_set)
    result.usage = taken
    return result


def _topology(
    pod_set: dict[str, Any],
    chosen: dict[str, str],
    queue: dict[str, Any],
    flavors: dict[str, dict[str, Any]],
    placer: Placer | None,
) -> tuple[dict[str, Any] | None, str]:
    """The pod set's topology assignment when its flavor has a Topology and TAS is asked
    for or implied (WorkloadsTopologyRequests, then FindTopologyAssignmentsForWorkload)."""
    tas = [f for f in sorted(set(chosen.values())) if _spec(flavors, f).get("topologyName")]
    if placer is None or not tas:
        return None, ""
    names = [f["name"] for g in _groups(queue) for f in g.get("flavors") or []]
    implied = pod_set.get("topologyRequest") is None and all(
        _spec(flavors, n).get("topologyName") for n in names
    )
    if pod_set.get("topologyRequest") is None and not implied:
        return None, ""
    return placer.place(pod_set, tas[0], int(pod_set.get("count", 1)), implied)


def _spec(flavors: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return dict((flavors.get(name) or {}).get("spec") or {})
