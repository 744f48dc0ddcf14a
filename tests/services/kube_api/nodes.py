"""Nodes for the fake API server: what a pod asks of a node, and a kube-scheduler stand-in
that binds pods to nodes, run by the Kueue stand-in's reconcile (kueue.py) after the Job
controller has made the pods.

Matching, after Kubernetes' own helpers, shared with Kueue's flavor assigner and TAS:
- `untolerated_taint`: the first taint of the given effects no toleration tolerates
  (k8s.io/component-helpers/scheduling/corev1 FindMatchingUntoleratedTaint and
  Toleration.ToleratesTaint: an empty key with Exists tolerates every taint, an empty
  effect every effect, Equal compares values, Exists ignores them);
- `affinity_matches`: the pod's nodeSelector (every pair) and its required node affinity
  (any term; within a term every expression: In, NotIn, Exists, DoesNotExist, Gt, Lt on
  labels, matchFields on metadata.name), as nodeaffinity.GetRequiredNodeAffinity; `keys`
  narrows both to some label keys, as Kueue's flavorSelector does (a term left empty
  matches everything);
- `free`: a node's status.allocatable less the requests of the pods bound to it that have
  not finished, plus one `pods` per pod (the NodeResourcesFit filter).

`PodScheduler.bind()` is kube-scheduler's filter-then-bind for every pending pod with no
node and no scheduling gate (pkg/scheduler: the PreEnqueue gate check, then the filters
NodeUnschedulable, NodeName, TaintToleration for NoSchedule/NoExecute, NodeAffinity,
NodeResourcesFit), in creation order; of the nodes that pass, the one with most free
cpu (NodeResourcesLeastAllocated's preference; names break ties) gets the pod through its
`binding` (spec.nodeName, condition PodScheduled True, as the binding registry sets it).
A pod no node fits keeps PodScheduled False, reason Unschedulable, with a message in the
form of the scheduler's ("0/3 nodes are available: ..."). With no Node objects at all
nothing is bound or marked (tests of a cluster without nodes set pod phases themselves).
Not modelled: scoring plugins besides that preference, pod (anti-)affinity, topology
spread, preemption of pods, volume and port filters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.services.kube_api import fields, operations, quantities
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.kueue_workloads import pod_requests
from tests.services.kube_api.target import Target

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

AGENT = "kube-scheduler/v1.32.0"
SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    if not toleration.get("key"):
        return False  # an empty key tolerates everything only with operator Exists
    return bool(toleration.get("value", "") == taint.get("value", ""))


def untolerated_taint(
    taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") not in SCHEDULING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: dict[str, Any]) -> str:
    value = taint.get("value", "")
    key = f"{taint.get('key', '')}={value}" if value else taint.get("key", "")
    return f"{key}:{taint.get('effect', '')}"


def _requirement(term: dict[str, Any], found: str | None) -> bool:
    operator, values = term.get("operator"), term.get("values") or []
    if operator == "In":
        return found is not None and found in values
    if operator == "NotIn":
        return found is None or found not in values
    if operator == "Exists":
        return found is not None
    if operator == "DoesNotExist":
        return found is None
    if operator in ("Gt", "Lt") and found is not None and found.lstrip("-").isdigit():
        wanted = int(values[0]) if values and values[0].lstrip("-").isdigit() else None
        if wanted is None:
            return False
        return int(found) > wanted if operator == "Gt" else int(found) < wanted
    return False


def _terms(pod_spec: dict[str, Any]) -> list[dict[str, Any]] | None:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if required is None else list(required.get("nodeSelectorTerms") or [])


def affinity_matches(
    pod_spec: dict[str, Any], labels: dict[str, str], name: str = "", keys: set[str] | None = None
) -> bool:
    """Whether a node with these labels (and name) passes the pod's nodeSelector and
    required node affinity; `keys`: consider only these label keys (Kueue's flavorSelector)."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if (keys is None or key in keys) and labels.get(key) != value:
            return False
    terms = _terms(pod_spec)
    if terms is None:
        return True
    if keys is not None:
        narrowed = [
            [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
            for term in terms
        ]
        if not narrowed or any(not expressions for expressions in narrowed):
            return True  # an emptied term matches every node, so the terms (ORed) do
        return any(all(_requirement(e, labels.get(e["key"])) for e in t) for t in narrowed)
    for term in terms:
        expressions = term.get("matchExpressions") or []
        by_field = term.get("matchFields") or []
        if not expressions and not by_field:
            continue  # an empty term matches no node
        if all(_requirement(e, labels.get(e.get("key", ""))) for e in expressions) and all(
            _requirement(f, name if f.get("key") == "metadata.name" else None) for f in by_field
        ):
            return True
    return False


def pod_amounts(pod_spec: dict[str, Any]) -> dict[str, int]:
    """One pod's requests as NodeResourcesFit counts them, `pods` included."""
    return {**pod_requests(pod_spec), "pods": 1}


def allocatable(node: dict[str, Any]) -> dict[str, int]:
    found = (node.get("status") or {}).get("allocatable") or {}
    return {name: quantities.amount(name, value) for name, value in found.items()}


def _active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def bound_usage(pods: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Requests of the unfinished pods bound to each node, by node name."""
    usage: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not _active(pod):
            continue
        total = usage.setdefault(node, {})
        for name, value in pod_amounts(pod.get("spec") or {}).items():
            total[name] = total.get(name, 0) + value
    return usage


def free(node: dict[str, Any], used: dict[str, int]) -> dict[str, int]:
    return {name: value - used.get(name, 0) for name, value in allocatable(node).items()}


def _problem(node: dict[str, Any], pod_spec: dict[str, Any], room: dict[str, int]) -> str:
    """Why the node cannot take the pod, in the scheduler's words ('' if it can)."""
    spec = node.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or [])
    if spec.get("unschedulable") and not any(
        tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
    ):
        return "node(s) were unschedulable"
    wanted = pod_spec.get("nodeName")
    if wanted and wanted != node["metadata"]["name"]:
        return "node(s) didn't match the requested node name"
    taint = untolerated_taint(list(spec.get("taints") or []), tolerations)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint_text(taint).rsplit(':', 1)[0]}}}"
    labels = node["metadata"].get("labels") or {}
    if not affinity_matches(pod_spec, labels, node["metadata"]["name"]):
        return "node(s) didn't match Pod's node affinity/selector"
    for name, value in pod_amounts(pod_spec).items():
        if value > room.get(name, 0):
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return ""


class PodScheduler:
    """kube-scheduler's bind of pending pods (see the module docstring)."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api

    def bind(self) -> None:
        store = self.api.store
        nodes = sorted(store.items("", "nodes", None), key=lambda n: n["metadata"]["name"])
        if not nodes:
            return
        pods = store.items("", "pods", None)
        usage = bound_usage(pods)
        waiting = [
            p
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and not (p.get("spec") or {}).get("schedulingGates")
            and not p["metadata"].get("deletionTimestamp")
            and _active(p)
        ]
        waiting.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        for pod in waiting:
            self._place(pod, nodes, usage)

    def _place(
        self, pod: dict[str, Any], nodes: list[dict[str, Any]], usage: dict[str, dict[str, int]]
    ) -> None:
        pod_spec = pod.get("spec") or {}
        reasons: dict[str, int] = {}
        fitting: list[tuple[int, str, dict[str, Any]]] = []
        for node in nodes:
            name = node["metadata"]["name"]
            room = free(node, usage.get(name, {}))
            problem = _problem(node, pod_spec, room)
            if problem:
                reasons[problem] = reasons.get(problem, 0) + 1
            else:
                fitting.append((-room.get("cpu", 0), name, node))
        if not fitting:
            listed = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
            message = f"0/{len(nodes)} nodes are available: {listed}."
            self._status(pod, "False", "Unschedulable", message)
            return
        _, name, _ = min(fitting)
        pod["spec"]["nodeName"] = name
        self._write(pod, "")
        fresh = self.api.store.get(
            "", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"]
        )
        if fresh is not None:
            self._status(fresh, "True", "", "")
        total = usage.setdefault(name, {})
        for resource, value in pod_amounts(pod_spec).items():
            total[resource] = total.get(resource, 0) + value

    def _status(self, pod: dict[str, Any], status: str, reason: str, message: str) -> None:
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        wanted = {"type": "PodScheduled", "status": status}
        if reason:
            wanted |= {"reason": reason, "message": message}
        found = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if found is not None and all(found.get(k) == v for k, v in wanted.items()):
            return
        conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
        conditions.append({**wanted, "lastProbeTime": None, "lastTransitionTime": fields.now()})
        pod["status"].setdefault("phase", "Pending")
        self._write(pod, "status")

    def _write(self, pod: dict[str, Any], sub: str) -> None:
        found = self.api.catalog().by_resource("", "pods")
        assert found is not None
        metadata = pod["metadata"]
        target = Target(found, "v1", metadata["namespace"], metadata["name"], sub)
        pod["apiVersion"], pod["kind"] = "v1", "Pod"
        try:
            operations.update(
                self.api.store, target, pod, {"fieldManager": "kube-scheduler"}, AGENT
            )
        except ApiError:
            pass  # the pod changed or went away meanwhile: the next reconcile sees it


def node_manifest(
    name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """A Node as a test creates it (its status, Ready and allocatable, is written apart)."""
    spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": spec,
    }


def add_node(
    api: KubeAPI,
    name: str,
    labels: dict[str, str],
    capacity: dict[str, str],
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Create a Ready Node with `capacity` allocatable, through the server's verbs (as a
    kubelet registers its node and then reports its status)."""
    found = api.catalog().by_resource("", "nodes")
    assert found is not None
    body = node_manifest(name, labels, taints)
    created = operations.create(api.store, Target(found, "v1", None, None), body, {}, "kubelet")
    created["status"] = {
        "allocatable": {"pods": "110", **capacity},
        "capacity": {"pods": "110", **capacity},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    target = Target(found, "v1", None, name, "status")
    return operations.update(api.store, target, created, {}, "kubelet")
