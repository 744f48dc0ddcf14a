"""Render: a project's Quota on a queue as the ClusterQueue Kueue admits its jobs through.

A trainform Queue is a Kueue Cohort holding the queue's quota (manifests.py); each Quota
of a project on it is a ClusterQueue in that Cohort, `<namePrefix><queue>-<project>`,
selecting only the project's namespace, plus the LocalQueue `<queue>` there pointing at
it. The ClusterQueue owns no quota of its own: every flavor's nominalQuota is 0, and the
project's limits are its borrowingLimits, so Kueue lends it at most that much of the
Cohort's quota and keeps the rest of its workloads pending ("insufficient quota") instead
of admitting them:

    gpu     -> borrowingLimit of the accelerator resource of each pool (0 for the other
               accelerators a pool does not have), per pool
    cpu     -> borrowingLimit of cpu, per pool
    memory  -> borrowingLimit of memory, per pool
    runningJobs -> the `pods` resource, which Kueue counts one per pod: nominalQuota N,
               borrowingLimit 0 and lendingLimit 0, so the project runs at most N pods and
               lends no pod count to anyone. A single-node job is one pod, so N pods is N
               jobs; kueue_rules.py refuses runningJobs on a queue where the project has a
               multi-node job (it would count one per node). On a queue with one pool the
               count sits in the pool's flavor; with several it gets a resource group of
               its own with one flavor without labels, `<queue>-<project>-jobs` (a
               ResourceFlavor of the Quota), so it counts across pools (Kueue quotas are
               per flavor); kueue_rules.py refuses that on a queue with topology pools,
               where every flavor of a pod set must have the topology.
    maxWallTime -> annotation trainform.dev/max-wall-time; submitted Jobs get the shortest
               of the job's, the queue's and the quota's limits (pods.py).

Kueue quotas are per flavor, so on a queue with several pools each limit holds on each
pool. A limit the Quota does not set has no borrowingLimit (bounded by the Cohort). The
queue's admission policy (preemption, queueingStrategy, stopPolicy) is a ClusterQueue
field, so it is written here too, from the Queue's outputs (`QueueFacts`); a Queue update
writes it onto all its projects' ClusterQueues (provider.py). Preemption is not copied
as declared: `cluster_queue_preemption` says what makes Kueue preempt as the Queue says
on ClusterQueues that own no quota. Pure; no I/O.
"""

from __future__ import annotations

from typing import Any

from trainform.providers.kubernetes.kinds import KUEUE
from trainform.providers.kubernetes.naming import DOMAIN, Naming, dns_label

QUEUE_LABEL = f"{DOMAIN}/queue"
PREEMPTION_ANNOTATION = f"{DOMAIN}/preemption"
"""On a Queue's Cohort: the preemption the Queue declares (JSON), which the project
ClusterQueues' fields alone cannot tell (cluster_queue_preemption is not one to one)."""
MAX_WALL_TIME_ANNOTATION = f"{DOMAIN}/max-wall-time"
PODS = "pods"
QueueFacts = dict[str, Any]
"""A Queue's outputs: `flavors` (pool names in order), `resourceNames` (the accelerator
resource of each pool, by pool), `policy` (the ClusterQueue fields of the queue)."""


def project_queue_name(naming: Naming, queue: str, project: str) -> str:
    return dns_label(naming.cluster_name(f"{queue}-{project}"))


def declared_preemption(spec: dict[str, Any]) -> dict[str, Any]:
    """A Queue's `preemption` as declared, with its defaults: what the Cohort's
    PREEMPTION_ANNOTATION records and what observe reports back."""
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    borrowing: dict[str, Any] = {"policy": borrow.get("policy", "Never")}
    if borrow.get("maxPriorityThreshold") is not None:
        borrowing["maxPriorityThreshold"] = borrow["maxPriorityThreshold"]
    return {
        "withinQueue": preemption.get("withinQueue", "Never"),
        "reclaimWithinCohort": preemption.get("reclaimWithinCohort", "Never"),
        "borrowWithinCohort": borrowing,
    }


def cluster_queue_preemption(declared: dict[str, Any]) -> dict[str, Any]:
    """The project ClusterQueues' `preemption` for a Queue's declared one.

    Every project ClusterQueue has nominal quota 0, so whatever it admits is borrowed from
    the queue's Cohort. Kueue's flavor assigner (flavorassigner.go fitsResourceQuota) tries
    preemption for a request above nominal only when borrowWithinCohort is not Never, or a
    Cohort on the way up holds the request unused and has a parent; otherwise the flavor
    is noFit and no policy is consulted. And the other projects of the queue are other
    ClusterQueues of the Cohort: the preemptor (classical/hierarchical_preemption.go)
    judges their workloads by reclaimWithinCohort, and since the preemptor always borrows,
    only as ReclaimWhileBorrowing, which needs borrowWithinCohort LowerPriority. So a
    queue with `withinQueue` other than Never gets reclaimWithinCohort LowerPriority
    (unless declared: Any keeps Any) and borrowWithinCohort LowerPriority (unless
    declared, threshold kept): its jobs preempt lower-priority jobs of its own project
    (withinClusterQueue, as declared) and of its other projects (docs/kubernetes.md)."""
    within = declared["withinQueue"]
    reclaim = declared["reclaimWithinCohort"]
    borrowing = dict(declared["borrowWithinCohort"])
    if within != "Never":
        if reclaim == "Never":
            reclaim = "LowerPriority"
        if borrowing.get("policy", "Never") == "Never":
            borrowing = {"policy": "LowerPriority"}
    return {
        "withinClusterQueue": within,
        "reclaimWithinCohort": reclaim,
        "borrowWithinCohort": borrowing,
    }


def queue_policy(spec: dict[str, Any]) -> dict[str, Any]:
    """The ClusterQueue fields a Queue's admission policy becomes."""
    return {
        "preemption": cluster_queue_preemption(declared_preemption(spec)),
        "queueingStrategy": spec.get("queueingStrategy", "BestEffortFIFO"),
        "stopPolicy": spec.get("stopPolicy", "None"),
    }


def counts_jobs_apart(facts: QueueFacts, limits: dict[str, Any]) -> bool:
    """Whether the pod count needs a resource group of its own: on a queue with several
    pools, so that it counts the project's pods on all of them together."""
    return limits.get("runningJobs") is not None and len(facts.get("flavors") or []) > 1


def jobs_flavor_name(naming: Naming, queue: str, project: str) -> str:
    return dns_label(naming.cluster_name(f"{queue}-{project}-jobs"))


def _covered(facts: QueueFacts, limits: dict[str, Any]) -> list[str]:
    accelerators: list[str] = []
    for pool in facts.get("flavors") or []:
        name = (facts.get("resourceNames") or {}).get(pool)
        if name and name not in accelerators:
            accelerators.append(name)
    together = limits.get("runningJobs") is not None and not counts_jobs_apart(facts, limits)
    return ["cpu", "memory", *accelerators, *([PODS] if together else [])]


def _resource(name: str, own: str | None, limits: dict[str, Any]) -> dict[str, Any]:
    if name == PODS:
        count = str(limits["runningJobs"])
        return {"name": name, "nominalQuota": count, "borrowingLimit": "0", "lendingLimit": "0"}
    entry: dict[str, Any] = {"name": name, "nominalQuota": "0"}
    key = name if name in ("cpu", "memory") else "gpu"
    if key == "gpu" and name != own:
        entry["borrowingLimit"] = "0"  # an accelerator this pool does not have
    elif limits.get(key) is not None:
        entry["borrowingLimit"] = str(limits[key])
    return entry


def project_queue_spec(
    naming: Naming, facts: QueueFacts, queue: str, project: str, limits: dict[str, Any]
) -> dict[str, Any]:
    namespace = naming.namespace(project)
    covered = _covered(facts, limits)
    flavors = [
        {
            "name": naming.cluster_name(pool),
            "resources": [
                _resource(name, (facts.get("resourceNames") or {}).get(pool), limits)
                for name in covered
            ],
        }
        for pool in facts.get("flavors") or []
    ]
    groups = [{"coveredResources": covered, "flavors": flavors}] if flavors else []
    if counts_jobs_apart(facts, limits):
        jobs = {"name": jobs_flavor_name(naming, queue, project), "resources": []}
        jobs["resources"].append(_resource(PODS, None, limits))
        groups.append({"coveredResources": [PODS], "flavors": [jobs]})
    spec: dict[str, Any] = {
        "cohortName": naming.cluster_name(queue),
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": namespace},
        },
        "resourceGroups": groups,
        **(facts.get("policy") or queue_policy({})),
    }
    return spec


def render_quota(
    naming: Naming,
    address: str,
    name: str,
    project: str,
    document: dict[str, Any],
    facts: QueueFacts,
    metadata: Any,
) -> list[dict[str, Any]]:
    """The project's ClusterQueue and LocalQueue; `metadata` is manifests.object_metadata."""
    spec = document["spec"]
    limits = spec.get("limits") or {}
    namespace = naming.namespace(project)
    queue = spec["queue"]
    extra = {MAX_WALL_TIME_ANNOTATION: limits["maxWallTime"]} if limits.get("maxWallTime") else {}
    cluster_queue_name = project_queue_name(naming, queue, project)
    cluster_meta = metadata(naming, address, "Quota", cluster_queue_name, document, None, extra)
    cluster_meta["labels"][QUEUE_LABEL] = naming.cluster_name(queue)
    objects = [
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": cluster_meta,
            "spec": project_queue_spec(naming, facts, queue, project, limits),
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": metadata(naming, address, "Quota", dns_label(queue), document, namespace),
            "spec": {"clusterQueue": cluster_queue_name},
        },
    ]
    if counts_jobs_apart(facts, limits):  # a flavor with no labels: any node, no placement
        name = jobs_flavor_name(naming, queue, project)
        flavor_meta = metadata(naming, address, "Quota", name, document)
        objects.append(
            {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": flavor_meta, "spec": {}}
        )
    return objects
