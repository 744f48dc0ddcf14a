"""The Kubernetes API kinds the provider reads and writes, and their REST paths.

One `ApiKind` per kind: API version, plural, scope. Kueue kinds use the storage version
v1beta2 (v1beta1 is deprecated). Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

KUEUE = "kueue.x-k8s.io/v1beta2"
MINIMUM_KUEUE = "v0.15.0"  # the first release serving kueue.x-k8s.io/v1beta2


@dataclass(frozen=True)
class ApiKind:
    kind: str
    api_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """`/api/v1/namespaces/ns/resourcequotas/name`, the collection when `name` is None,
        every namespace when a namespaced kind is given no namespace."""
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


NAMESPACE = ApiKind("Namespace", "v1", "namespaces", False)
RESOURCE_QUOTA = ApiKind("ResourceQuota", "v1", "resourcequotas", True)
NODE = ApiKind("Node", "v1", "nodes", False)
CONFIG_MAP = ApiKind("ConfigMap", "v1", "configmaps", True)
SERVICE = ApiKind("Service", "v1", "services", True)
JOB = ApiKind("Job", "batch/v1", "jobs", True)
RESOURCE_FLAVOR = ApiKind("ResourceFlavor", KUEUE, "resourceflavors", False)
TOPOLOGY = ApiKind("Topology", KUEUE, "topologies", False)
CLUSTER_QUEUE = ApiKind("ClusterQueue", KUEUE, "clusterqueues", False)
COHORT = ApiKind("Cohort", KUEUE, "cohorts", False)
LOCAL_QUEUE = ApiKind("LocalQueue", KUEUE, "localqueues", True)
WORKLOAD_PRIORITY_CLASS = ApiKind("WorkloadPriorityClass", KUEUE, "workloadpriorityclasses", False)
WORKLOAD = ApiKind("Workload", KUEUE, "workloads", True)
PRIORITY_CLASS = ApiKind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False)

BY_KIND = {
    api.kind: api
    for api in (
        NAMESPACE,
        RESOURCE_QUOTA,
        NODE,
        CONFIG_MAP,
        SERVICE,
        JOB,
        RESOURCE_FLAVOR,
        TOPOLOGY,
        CLUSTER_QUEUE,
        COHORT,
        LOCAL_QUEUE,
        WORKLOAD_PRIORITY_CLASS,
        WORKLOAD,
        PRIORITY_CLASS,
    )
}

# What each trainform kind becomes, primary object first (the one observe reads the spec from).
# ResourceQuota and PriorityClass are only read (import of clusters set up by hand).
OBJECTS_OF = {
    "Project": (NAMESPACE,),
    "ResourcePool": (RESOURCE_FLAVOR, TOPOLOGY),
    "Queue": (COHORT, WORKLOAD_PRIORITY_CLASS),
    "Quota": (CLUSTER_QUEUE, LOCAL_QUEUE),  # and a ResourceFlavor for runningJobs on pools
}
