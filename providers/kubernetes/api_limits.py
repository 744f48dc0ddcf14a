"""What the Kubernetes API server and Kueue's CRD rules and webhooks would refuse in the
objects one resource becomes, found at plan time so apply never fails half-way. Called by
kueue_rules.py; each problem names the field (the engine adds file:line). The table of
docs/kubernetes.md ("Plan-time checks") lists every rule with its source.

One resource at a time (`limit_problems`):

- ResourcePool: more than 8 nodeSelector labels or tolerations (ResourceFlavor
  `nodeLabels` maxProperties, `tolerations` maxItems), more than 16 topology levels
  (Topology `levels` maxItems), a toleration key that is not a qualified name, a
  toleration value that is not a label value (core/validation ValidateTolerations: the
  Job Kueue adds the flavor's tolerations to at admission is refused, so it never starts),
  an accelerator `resourceName` that is not an extended resource name (core/validation
  validateContainerResourceName and helper.IsExtendedResourceName: `vendor/name`, a
  qualified name outside kubernetes.io, `requests.<name>` a qualified name too; a
  standard name such as `cpu` would also repeat a covered resource of the queue);
- Queue: a maxPriorityThreshold outside int32, a fairShareWeight that is not a finite
  quantity or lies in (0, 1e-9] (Kueue pkg/webhooks/common.go validateFairSharing: "When
  not 0, weight must be > 10e-9");
- TrainingJob and EvalSuite: a priority outside int32 (WorkloadPriorityClass `value`);
- time limits (TrainingJob and Queue `maxRuntime`, Quota `maxWallTime`, EvalSuite
  `timeout`) of 0 seconds: the
  limit is the Job's `activeDeadlineSeconds` (docs/kubernetes.md, "Time limits"), and a
  Job with 0 fails as soon as it starts (kubernetes pkg/controller/job/job_controller.go,
  pastActiveDeadline: active for at least 0 seconds). Longer limits are fine: the field is
  64 bits (Kueue's 32-bit `max-exec-time-seconds` label is not written);
- Project: a namespace Kubernetes creates itself (default, kube-system, kube-public,
  kube-node-lease: the NamespaceLifecycle admission plugin keeps them), and a label
  `kubernetes.io/metadata.name` other than the namespace's name (the namespace strategy
  sets it to the name on every write, so it would never converge);
- any kind: a label or annotation key whose DNS prefix is over 253 characters
  (apimachinery IsQualifiedName; also a nodeSelector key, refused by Kueue's
  ResourceFlavor webhook, and a topology level, refused by its Job webhook in the pod
  template's topology annotation), and annotations over 256 KiB in all
  (ValidateAnnotations, TotalAnnotationSizeLimitB), trainform's own included.

No limit holds any more for WorkloadPriorityClass values inside int32 or for names
starting with `system-`: those were PriorityClass rules, and trainform writes none.

Across resources (`queue_size_problems`): a ClusterQueue with more than 512 flavor x
resource pairs (Kueue's webhook limit). What Kueue's scheduler never admits is in
admission_fit.py. Pure; no I/O.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from trainform.providers.base import DesiredResource, ValidationProblem
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import duration_seconds

MAX_NODE_LABELS = 8
MAX_TOLERATIONS = 8
MAX_TOPOLOGY_LEVELS = 16
MAX_FLAVOR_RESOURCES = 512
MAX_PREFIX = 253
MAX_ANNOTATIONS = 256 * 1024
SMALLEST_WEIGHT = Decimal("1e-9")
INT32 = (-(2**31), 2**31 - 1)
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods", "storage"})
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
Found = list[tuple[str, str]]


def qualified_name(text: str) -> bool:
    """A Kubernetes qualified name: `[prefix/]name`, prefix a DNS subdomain."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_PREFIX or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def label_value(text: str) -> bool:
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))


def _int32(value: Any) -> bool:
    return isinstance(value, int) and INT32[0] <= value <= INT32[1]


def _long_prefixes(keys: Any, field: str, what: str) -> Found:
    found: Found = []
    for key in keys:
        prefix, slash, _ = str(key).rpartition("/")
        if slash and len(prefix) > MAX_PREFIX:
            found.append(
                (
                    field,
                    f"the prefix of {what} {key!r} has {len(prefix)} characters: a key's "
                    f"DNS prefix is at most {MAX_PREFIX}, and the API server refuses it",
                )
            )
    return found


def _accelerator_name(spec: dict[str, Any]) -> Found:
    accelerator = spec.get("accelerator") or {}
    name = accelerator.get("resourceName")
    if not accelerator or name is None:
        return []
    field = "spec.accelerator.resourceName"
    if "/" not in name:
        if name in STANDARD_RESOURCES or name.startswith("hugepages-"):
            return [
                (
                    field,
                    f"{name!r} is a standard resource, not an accelerator: the queue's "
                    "ClusterQueues would cover it twice, which Kueue refuses",
                )
            ]
        return [
            (
                field,
                f"{name!r} is not an extended resource name: the API server refuses a "
                "container resource that is neither standard nor fully qualified "
                "(vendor/name, e.g. nvidia.com/gpu)",
            )
        ]
    if not qualified_name(name) or not qualified_name(f"requests.{name}"):
        return [
            (
                field,
                f"{name!r} is not a qualified name (a lower-case DNS prefix of at most "
                f"{MAX_PREFIX - len('requests.')} characters, '/', a name of at most 63): "
                "Kueue's webhooks refuse it as a covered resource",
            )
        ]
    return []


def _tolerations(spec: dict[str, Any]) -> Found:
    found: Found = []
    tolerations = spec.get("tolerations") or []
    if len(tolerations) > MAX_TOLERATIONS:
        found.append(
            ("spec.tolerations", f"a ResourceFlavor holds at most {MAX_TOLERATIONS} tolerations")
        )
    for index, toleration in enumerate(tolerations):
        key = toleration.get("key") or ""
        if key and not qualified_name(key):
            found.append(
                (
                    f"spec.tolerations[{index}].key",
                    f"{key!r} is not a qualified name ([prefix/]name, name at most 63 "
                    "characters of letters, digits, '-', '_' and '.')",
                )
            )
        value = toleration.get("value") or ""
        if toleration.get("operator") != "Exists" and not label_value(value):
            found.append(
                (
                    f"spec.tolerations[{index}].value",
                    f"{value!r} is not a label value (at most 63 letters, digits, '-', '_' "
                    "or '.', starting and ending with a letter or digit): the API server "
                    "refuses the Job Kueue gives this toleration at admission",
                )
            )
    return found


def _pool_limits(spec: dict[str, Any]) -> Found:
    found: Found = []
    selector = spec.get("nodeSelector") or {}
    if len(selector) > MAX_NODE_LABELS:
        found.append(
            ("spec.nodeSelector", f"a ResourceFlavor holds at most {MAX_NODE_LABELS} nodeLabels")
        )
    found += _long_prefixes(selector, "spec.nodeSelector", "node label")
    found += _tolerations(spec)
    levels = spec.get("topology") or []
    if len(levels) > MAX_TOPOLOGY_LEVELS:
        found.append(
            ("spec.topology", f"a Kueue Topology holds at most {MAX_TOPOLOGY_LEVELS} levels")
        )
    for index, level in enumerate(levels):
        found += _long_prefixes([level], f"spec.topology[{index}]", "topology level")
    return found + _accelerator_name(spec)


def _weight(spec: dict[str, Any]) -> Found:
    weight = spec.get("fairShareWeight")
    if not isinstance(weight, int | float):
        return []
    if not math.isfinite(weight):
        return [
            (
                "spec.fairShareWeight",
                f"{weight} is not a finite number; Kueue's fairSharing.weight is a quantity",
            )
        ]
    if 0 < Decimal(repr(float(weight))) <= SMALLEST_WEIGHT:
        return [
            (
                "spec.fairShareWeight",
                f"{weight} is in (0, 1e-9]: Kueue's webhook refuses it (a weight that small "
                "would collapse the queue's share); use 0 or more than 1e-9",
            )
        ]
    return []


def _queue_limits(spec: dict[str, Any]) -> Found:
    found = _weight(spec)
    threshold = ((spec.get("preemption") or {}).get("borrowWithinCohort") or {}).get(
        "maxPriorityThreshold"
    )
    if threshold is not None and not _int32(threshold):
        found.append(
            (
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                f"{threshold} does not fit a 32-bit integer",
            )
        )
    return found


TIME_LIMITS = {
    "TrainingJob": "spec.maxRuntime",
    "Queue": "spec.maxRuntime",
    "Quota": "spec.limits.maxWallTime",
    "EvalSuite": "spec.timeout",  # the limit of its evaluation attempts
}


def _time_limit(resource: DesiredResource) -> Found:
    field = TIME_LIMITS.get(resource.kind)
    if field is None:
        return []
    value: Any = resource.document
    for part in field.split("."):
        value = (value or {}).get(part)
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds != 0:
        return []
    return [
        (
            field,
            f"{value} is no time at all: the limit becomes the Job's activeDeadlineSeconds, "
            "and the Job controller fails a Job with 0 as soon as it starts; remove the "
            "limit or give it a length",
        )
    ]


def _metadata(resource: DesiredResource, naming: Naming) -> Found:
    metadata = resource.document.get("metadata") or {}
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    found = _long_prefixes(labels, "metadata.labels", "label")
    found += _long_prefixes(annotations, "metadata.annotations", "annotation")
    written = dict(annotations) | naming.annotations(resource.address)
    if resource.kind == "Project":
        spec = resource.spec
        written["trainform.dev/display-name"] = spec.get("displayName", "")
        written["trainform.dev/owners"] = json.dumps(spec.get("owners", []))
    size = sum(len(str(key)) + len(str(value)) for key, value in written.items())
    if size > MAX_ANNOTATIONS:
        found.append(
            (
                "metadata.annotations",
                f"the annotations trainform writes come to {size:,} bytes (display name "
                f"and owners included); the API server allows {MAX_ANNOTATIONS:,}",
            )
        )
    return found


def _project_limits(resource: DesiredResource, naming: Naming) -> Found:
    namespace = naming.namespace(resource.name)
    found: Found = []
    if namespace in SYSTEM_NAMESPACES:
        found.append(
            (
                "metadata.name",
                f"namespace {namespace} is one Kubernetes creates and keeps itself (the API "
                "server never deletes it), so trainform could not own it; choose another "
                "name or a namespacePrefix",
            )
        )
    labels = (resource.document.get("metadata") or {}).get("labels") or {}
    declared = labels.get(NAMESPACE_NAME_LABEL)
    if declared is not None and declared != namespace:
        found.append(
            (
                "metadata.labels",
                f"{NAMESPACE_NAME_LABEL}: {declared}: the API server sets this label of a "
                f"namespace to its name ({namespace}), so the label would never converge",
            )
        )
    return found


def limit_problems(resource: DesiredResource, naming: Naming) -> Found:
    found = _metadata(resource, naming) + _time_limit(resource)
    if resource.kind == "Project":
        found += _project_limits(resource, naming)
    elif resource.kind == "ResourcePool":
        found += _pool_limits(resource.spec)
    elif resource.kind == "Queue":
        found += _queue_limits(resource.spec)
    elif resource.kind in ("TrainingJob", "EvalSuite"):
        priority = resource.spec.get("priority")
        if priority is not None and not _int32(priority):
            found.append(
                (
                    "spec.priority",
                    f"{priority} does not fit a 32-bit integer (a WorkloadPriorityClass value)",
                )
            )
    return found


def _accelerator(pool: dict[str, Any]) -> str | None:
    accelerator = pool.get("accelerator") or {}
    return (accelerator.get("resourceName") or "nvidia.com/gpu") if accelerator else None


def queue_size_problems(
    queue: DesiredResource, pools: dict[str, dict[str, Any]]
) -> list[ValidationProblem]:
    entries = queue.spec.get("pools", [])
    accelerators = {_accelerator(pools.get(e.get("pool"), {})) for e in entries} - {None}
    pairs = len(entries) * (2 + len(accelerators))
    if pairs <= MAX_FLAVOR_RESOURCES:
        return []
    return [
        ValidationProblem(
            queue.address,
            "spec.pools",
            f"{len(entries)} pools x {2 + len(accelerators)} resources = {pairs} flavor "
            f"resource pairs; Kueue accepts at most {MAX_FLAVOR_RESOURCES} in a ClusterQueue",
        )
    ]
