"""Defaulting, off unless the server starts with `defaults=True` (`start_kube_api`).

A real API server fills in defaults the client never sent, and a provider that compares
what it wants with what it reads must cope with them. With defaulting on:
- custom resources get every `default` of their CRD's structural schema (for the version
  the request uses): a missing property with a default is set, recursively, through objects,
  `additionalProperties` and array items, as the apiextensions server does;
- batch/v1 Jobs get what SetDefaults_Job and the Job strategy add: completions/parallelism
  1, backoffLimit 6, completionMode NonIndexed, suspend false, podReplacementPolicy, status
  True in a podFailurePolicy's onPodConditions, the generated selector and
  controller-uid/job-name labels; their pod templates (and Pods) get
  the common pod and container defaults (dnsPolicy, restartPolicy, schedulerName,
  terminationGracePeriodSeconds, securityContext, terminationMessage*, imagePullPolicy,
  port protocol); Services get type ClusterIP, an allocated clusterIP (10.96.x.y, kept
  "None" for a headless Service), sessionAffinity, IP families, port protocol and
  targetPort. Other built-in defaults are not applied (gap).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.services.kube_api.resources import ResourceType


def schema_defaults(obj: Any, schema: dict[str, Any] | None, root: bool = False) -> None:
    """Set, in place, every default the structural schema declares for missing fields."""
    if not schema:
        return
    if isinstance(obj, dict):
        properties = schema.get("properties") or {}
        for key, child in properties.items():
            if root and key in ("metadata", "apiVersion", "kind"):
                continue  # the object's metadata is not defaulted from the schema
            if key not in obj and "default" in child:
                obj[key] = copy.deepcopy(child["default"])
            if key in obj:
                schema_defaults(obj[key], child)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in obj.items():
                if key not in properties:
                    schema_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            schema_defaults(item, schema["items"])


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("imagePullPolicy", _image_pull_policy(container.get("image", "")))
            container.setdefault("resources", {})
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")


def job_defaults(job: dict[str, Any], creating: bool) -> None:
    spec = job.setdefault("spec", {})
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if "backoffLimitPerIndex" in spec else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if "podFailurePolicy" in spec else "TerminatingOrFailed"
    )
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pattern in (rule or {}).get("onPodConditions") or []:
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"  # SetDefaults_Job
    template = spec.setdefault("template", {})
    pod_spec_defaults(template.setdefault("spec", {}))
    metadata = job["metadata"]
    if creating and not spec.get("manualSelector"):
        uid, name = metadata["uid"], metadata["name"]
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            }
        )
    template_labels = (template.get("metadata") or {}).get("labels")
    if template_labels and not metadata.get("labels"):
        metadata["labels"] = copy.deepcopy(template_labels)


def service_defaults(service: dict[str, Any], cluster_ip: str) -> None:
    """What the Service strategy and SetDefaults_Service add; `cluster_ip` is allocated
    for a Service that asks for none (a headless one keeps clusterIP "None")."""
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] != "ExternalName":
        spec.setdefault("clusterIP", cluster_ip)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))


def apply_defaults(
    resource: ResourceType, version: str, obj: dict[str, Any], creating: bool
) -> None:
    """Fill in the defaults of one object about to be stored (in place)."""
    if resource.custom:
        schema_defaults(obj, resource.schema(version), root=True)
    elif resource.kind == "Job":
        job_defaults(obj, creating)
    elif resource.kind == "Pod":
        pod_spec_defaults(obj.setdefault("spec", {}))
    elif resource.kind == "Service" and not resource.group:
        uid = obj["metadata"].get("uid", "")
        digest = int(uid.replace("-", "")[:8] or "0", 16)
        service_defaults(obj, f"10.96.{digest >> 8 & 255}.{digest & 255 or 1}")
