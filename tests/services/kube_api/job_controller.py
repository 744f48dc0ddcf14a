"""A minimal Job controller, run with the Kueue stand-in (kueue.py), so that what happens
after admission can be seen: pods are created through the server's own create verb, so
ResourceQuota admission applies to them as on a real cluster.

For every running (not suspended, not finished, not terminating) Job it keeps as many
pods as it should run: `parallelism`, fewer when fewer completions remain. Pods get the
template's labels and spec, the Job's controller-uid/job-name labels and a controller
reference, and the name `<job>-<5 random chars>` (generateName). An Indexed Job's pods
get their identity as the real controller gives it (pkg/controller/job/indexed_job_utils.go
and job_controller.go): one pod per index not running nor succeeded, lowest first; the
annotation and label `batch.kubernetes.io/job-completion-index`, the env var
JOB_COMPLETION_INDEX (a fieldRef to that annotation) in every container, `spec.hostname`
`<job>-<index>` (the template's `subdomain` kept), and generateName `<job>-<index>-` (cut
to 58 characters, the index kept, as podGenerateNameWithIndex does). A create the server
refuses (a ResourceQuota's 403, say) is recorded in `refused` (the real controller emits
a FailedCreate event) and retried at the next reconcile. `status.active` counts the pods
that have not finished. A suspended Job loses its running pods; a deleted Job's pods are
deleted (garbage collection). A running Job gets its `status.startTime` and fails with
DeadlineExceeded past its `activeDeadlineSeconds` (job_deadline.py). Nothing schedules or
runs the pods: tests set their phase.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tests.services.kube_api import deletion, job_deadline, operations
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.target import Target

if TYPE_CHECKING:
    from tests.services.kube_api.server import KubeAPI

UID_LABEL = "batch.kubernetes.io/controller-uid"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
MAX_GENERATED_NAME = 58  # names.MaxGeneratedNameLength
AGENT = "kube-controller-manager/v1.32.0"


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _wanted(job: dict[str, Any]) -> int:
    spec = job.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    done = int((job.get("status") or {}).get("succeeded", 0))
    return max(0, min(parallelism, int(completions) - done))


def _indexed(job: dict[str, Any]) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def pod_index(pod: dict[str, Any]) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def generate_name_with_index(job: str, index: int) -> str:
    """podGenerateNameWithIndex: `<job>-<index>-`, cut to 58 with the index kept."""
    suffix = f"-{index}-"
    prefix = job + suffix
    if len(prefix) > MAX_GENERATED_NAME:
        prefix = prefix[: MAX_GENERATED_NAME - len(suffix)] + suffix
    return prefix


def _with_index(pod: dict[str, Any], job: str, index: int) -> dict[str, Any]:
    metadata, spec = pod["metadata"], pod["spec"]
    metadata["annotations"][INDEX_ANNOTATION] = str(index)
    metadata["labels"][INDEX_ANNOTATION] = str(index)
    metadata["generateName"] = generate_name_with_index(job, index)
    spec["hostname"] = f"{job}-{index}"
    reference = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            env = container.setdefault("env", [])
            if not any(item.get("name") == INDEX_ENV for item in env):
                env.append({"name": INDEX_ENV, "valueFrom": reference})
    return pod


def _pod_for(job: dict[str, Any], index: int | None = None) -> dict[str, Any]:
    metadata = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update({UID_LABEL: metadata["uid"], "batch.kubernetes.io/job-name": metadata["name"]})
    pod_metadata = {
        "generateName": f"{metadata['name']}-",
        "labels": labels,
        "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
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
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": template["spec"]}
    return pod if index is None else _with_index(pod, metadata["name"], index)


def _missing_indexes(job: dict[str, Any], pods: list[dict[str, Any]]) -> list[int]:
    """The indexes of an Indexed Job with no pod running or succeeded, lowest first."""
    taken = {
        pod_index(p)
        for p in pods
        if (p.get("status") or {}).get("phase") != "Failed"
        and not p["metadata"].get("deletionTimestamp")
    }
    return [
        i for i in range(int((job.get("spec") or {}).get("completions") or 0)) if i not in taken
    ]


class JobController:
    """Pods for running Jobs; `refused` holds the server's answers to failed pod creates."""

    def __init__(self, api: KubeAPI) -> None:
        self.api = api
        self.refused: list[str] = []

    def _pods(self, namespace: str | None, name: str | None = None) -> Target:
        found = self.api.catalog().by_resource("", "pods")
        assert found is not None
        return Target(found, "v1", namespace, name)

    def sync(self) -> None:
        store = self.api.store
        jobs = {j["metadata"]["uid"]: j for j in store.items("batch", "jobs", None)}
        by_job: dict[str, list[dict[str, Any]]] = {}
        for pod in store.items("", "pods", None):
            owner = next(
                (o for o in pod["metadata"].get("ownerReferences") or [] if o.get("kind") == "Job"),
                None,
            )
            if owner is None:
                continue
            job = jobs.get(owner["uid"])
            running = (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            if job is None or (running and (job.get("spec") or {}).get("suspend")):
                self._delete(pod)
                continue
            by_job.setdefault(owner["uid"], []).append(pod)
        for uid, job in jobs.items():
            if job["metadata"].get("deletionTimestamp") or _finished(job):
                continue
            if (job.get("spec") or {}).get("suspend"):
                self._active(job, 0)
                continue
            active = [
                p
                for p in by_job.get(uid, [])
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            started = job_deadline.mark_started(job)
            if job_deadline.past_deadline(job):
                for pod in active:
                    self._delete(pod)
                job_deadline.fail_for_deadline(job, len(active))
                self._write_status(job)
                continue
            count = len(active)
            indexes: list[int | None] = [None] * (_wanted(job) - count)
            if _indexed(job):
                room = int((job.get("spec") or {}).get("parallelism", 1)) - count
                indexes = list(_missing_indexes(job, by_job.get(uid, [])))[: max(room, 0)]
            for index in indexes:
                namespace = job["metadata"]["namespace"]
                pod = _pod_for(job, index)
                try:
                    operations.create(store, self._pods(namespace), pod, {}, AGENT)
                    count += 1
                except ApiError as error:
                    self.refused.append(error.message)
                    break
            self._active(job, count, started)

    def _delete(self, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        try:
            deletion.delete(
                self.api.store, self._pods(metadata["namespace"], metadata["name"]), {}, None
            )
        except ApiError:
            pass  # already gone

    def _active(self, job: dict[str, Any], count: int, started: bool = False) -> None:
        status = job.get("status") or {}
        if int(status.get("active", 0)) == count and not started:
            return
        job["status"] = {**status, "active": count}
        if not count:
            job["status"].pop("active")
        self._write_status(job)

    def _write_status(self, job: dict[str, Any]) -> None:
        found = self.api.catalog().by_resource("batch", "jobs")
        assert found is not None
        metadata = job["metadata"]
        target = Target(found, "v1", metadata["namespace"], metadata["name"], "status")
        job["apiVersion"] = "batch/v1"
        operations.update(self.api.store, target, job, {"fieldManager": "job-controller"}, AGENT)
