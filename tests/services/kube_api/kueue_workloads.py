"""What Kueue's batch/v1 Job integration derives from a Job, for the Kueue stand-in (kueue.py).

- `workload_name`: `job-<job name>-<5 hex>` (Kueue's GetWorkloadNameForOwnerWithGVK: the
  owner kind, its name and a short hash of name, kind and group; cut to fit 253 chars).
- `workload_for`: the v1beta2 Workload a queued Job gets: owned by the Job (controller
  reference), labelled with the Job's uid, one pod set `main` of `parallelism` pods (fewer
  when fewer completions remain) with the pod template (and a topologyRequest from its
  `kueue.x-k8s.io/podset-{required,preferred,unconstrained}-topology` annotation), the
  queue name and the priority, and `maximumExecutionTimeSeconds` from the label
  `kueue.x-k8s.io/max-exec-time-seconds` when it parses as a positive 32-bit integer
  (jobframework MaximumExecutionTimeSecondsForObject: ParseInt(.., 10, 32); a longer or
  malformed limit is dropped, the Workload runs without one).
- `pod_requests`: one pod's requests as the scheduler counts them (each container's
  requests, its limits where a request is missing; the largest init container wins when it
  asks more; plus the pod overhead).
- `condition`: set one status condition the way apimachinery's SetStatusCondition does
  (lastTransitionTime only moves when the status changes).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from tests.services.kube_api import fields, quantities

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
WORKLOAD_FINALIZER = "kueue.x-k8s.io/resource-in-use"


def workload_name(job: dict[str, Any]) -> str:
    name = job["metadata"]["name"]
    digest = hashlib.sha1(f"{name}\x00Job\x00batch".encode()).hexdigest()[:5]
    prefix = f"job-{name}"[: 253 - 6]
    return f"{prefix}-{digest}"


def queue_name(job: dict[str, Any]) -> str | None:
    metadata = job["metadata"]
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    return labels.get(QUEUE_LABEL) or annotations.get(QUEUE_LABEL)


def pod_count(job: dict[str, Any]) -> int:
    spec = job.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    done = int((job.get("status") or {}).get("succeeded", 0))
    return max(0, min(parallelism, int(completions) - done))


TOPOLOGY_ANNOTATIONS = {
    "kueue.x-k8s.io/podset-required-topology": "required",
    "kueue.x-k8s.io/podset-preferred-topology": "preferred",
}
UNCONSTRAINED_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"


def topology_request(template: dict[str, Any]) -> dict[str, Any] | None:
    """The pod set's topologyRequest, from the pod template's Kueue TAS annotations."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    for annotation, key in TOPOLOGY_ANNOTATIONS.items():
        if annotation in annotations:
            return {key: annotations[annotation]}
    if annotations.get(UNCONSTRAINED_ANNOTATION, "").lower() == "true":
        return {"unconstrained": True}
    return None


def max_exec_seconds(job: dict[str, Any]) -> int | None:
    """The Job's time limit as Kueue's Workload carries it, or None (dropped)."""
    text = ((job.get("metadata") or {}).get("labels") or {}).get(MAX_EXEC_LABEL)
    try:
        value = int(text, 10) if isinstance(text, str) and text.strip() == text else None
    except ValueError:
        return None
    return value if value is not None and 0 < value <= 2**31 - 1 else None


def workload_for(
    job: dict[str, Any], priority: int | None, priority_class: dict[str, str] | None
) -> dict[str, Any]:
    metadata = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template.setdefault("metadata", {})
    pod_set: dict[str, Any] = {"name": "main", "count": pod_count(job), "template": template}
    request = topology_request(template)
    if request is not None:
        pod_set["topologyRequest"] = request
    spec: dict[str, Any] = {
        "active": True,
        "podSets": [pod_set],
        "queueName": queue_name(job),
    }
    if priority_class is not None:
        spec["priorityClassRef"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    limit = max_exec_seconds(job)
    if limit is not None:
        spec["maximumExecutionTimeSeconds"] = limit
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job),
            "namespace": metadata["namespace"],
            "labels": {JOB_UID_LABEL: metadata["uid"]},
            "finalizers": [WORKLOAD_FINALIZER],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    wanted = dict(resources.get("limits") or {})
    wanted.update(resources.get("requests") or {})
    return {name: quantities.amount(name, value) for name, value in wanted.items()}


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, 0) + value
    for container in pod_spec.get("initContainers") or []:
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, 0), value)
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + quantities.amount(name, value)
    return {name: value for name, value in total.items() if value}


def find_condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return item  # type: ignore[no-any-return]
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    found = find_condition(obj, kind)
    return found is not None and found.get("status") == "True"


def condition(obj: dict[str, Any], kind: str, status: str, reason: str, message: str) -> bool:
    """Set the condition; True if anything about it changed."""
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    generation = obj["metadata"].get("generation", 1)
    wanted = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }
    for item in conditions:
        if item.get("type") == kind:
            if all(item.get(k) == v for k, v in wanted.items()):
                return False
            if item.get("status") != status:
                item["lastTransitionTime"] = fields.now()
            item.update(wanted)
            return True
    conditions.append({**wanted, "lastTransitionTime": fields.now()})
    return True
