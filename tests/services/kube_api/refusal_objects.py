"""The objects of the refusal cases (refusals.py): valid Kueue and built-in objects to
start from, and small builders that break one rule each.

`cluster_queue`, `cohort`, `resource_flavor`, `topology`, `local_queue`, `priority_class`,
`workload_priority_class`, `job`,
`labelled_job` and `job_pod` build objects a real server accepts (tests check that) unless
their arguments break a rule; `Refusal` is one case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
QUANTITY = (  # the quantity pattern of the Kueue CRDs
    "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    "([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"
)


@dataclass(frozen=True)
class Refusal:
    id: str
    obj: dict[str, Any]
    code: int
    expect: str
    prior: dict[str, Any] | None = None
    apply: bool = False  # sent as server-side apply instead of a create/update
    source: str = ""  # where the rule lives
    query: dict[str, str] = field(default_factory=dict)


def resource(name: str, nominal: Any, **limits: Any) -> dict[str, Any]:
    """One resource quota of a flavor."""
    return {"name": name, "nominalQuota": nominal, **limits}


def cluster_queue(**spec: Any) -> dict[str, Any]:
    """A valid ClusterQueue (one group: cpu and nvidia.com/gpu on flavor `h100`) with `spec`."""
    base = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "h100",
                        "resources": [resource("cpu", 64), resource("nvidia.com/gpu", 8)],
                    }
                ],
            }
        ],
    }
    base.update(spec)
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "refused"},
        "spec": base,
    }


def with_resources(
    *resources: dict[str, Any], covered: list[str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A ClusterQueue whose one flavor (h100) lists `resources` for `covered`."""
    names = covered if covered is not None else [r["name"] for r in resources]
    group = {"coveredResources": names, "flavors": [{"name": "h100", "resources": list(resources)}]}
    return cluster_queue(resourceGroups=[group], **spec)


def queue_with_groups(*wanted: tuple[list[str], list[str]]) -> dict[str, Any]:
    """A ClusterQueue with one resource group per (covered resources, flavor names)."""
    built = [
        {
            "coveredResources": covered,
            "flavors": [
                {"name": f, "resources": [resource(r, 1) for r in covered]} for f in flavors
            ],
        }
        for covered, flavors in wanted
    ]
    return cluster_queue(resourceGroups=built)


def cohort(**spec: Any) -> dict[str, Any]:
    """A valid Cohort (no quota of its own) with `spec`."""
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "refused"}, "spec": spec}


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def resource_flavor(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "refused"},
        "spec": spec,
    }


def topology(levels: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Topology",
        "metadata": {"name": "refused"},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def local_queue(cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "refused", "namespace": "default"},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def job(**spec: Any) -> dict[str, Any]:
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x:1"}]}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "refused", "namespace": "default"},
        "spec": {"suspend": True, "template": template, **spec},
    }


def labelled_job(
    labels: dict[str, str], annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A Job with metadata labels and pod template annotations."""
    made = job(**spec)
    made["metadata"]["labels"] = labels
    if annotations:
        made["spec"]["template"]["metadata"] = {"annotations": annotations}
    return made


REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
QUEUE = "kueue.x-k8s.io/queue-name"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
PRIORITY = "kueue.x-k8s.io/priority-class"


def job_pod(**pod: Any) -> dict[str, Any]:
    """A Job whose pod template spec has `pod` merged in."""
    made = job()
    made["spec"]["template"]["spec"].update(pod)
    return made


def container(**resources: Any) -> list[dict[str, Any]]:
    return [{"name": "main", "image": "x:1", "resources": resources}]


def many_flavors(count: int) -> dict[str, Any]:
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": f"f{i}", "resources": [resource("cpu", 1)]} for i in range(count)],
    }
    return cluster_queue(resourceGroups=[group])


def hostname_moved() -> dict[str, Any]:
    return topology(["kubernetes.io/hostname", "cloud.google.com/gce-topology-block"])


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": "None", "ports": [{"name": "r", "port": 29500}]},
    }


def indexed_job(name: str, completions: int, **spec: Any) -> dict[str, Any]:
    made = job(completionMode="Indexed", completions=completions, parallelism=completions, **spec)
    made["metadata"]["name"] = name
    return made


def failure_policy(*rules: dict[str, Any]) -> dict[str, Any]:
    """A Job with `podFailurePolicy.rules` = `rules`."""
    return job(podFailurePolicy={"rules": list(rules)})
