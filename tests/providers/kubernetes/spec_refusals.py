"""The spec classes a real cluster with Kueue refuses or never runs (issue 30), one
`SpecClass` each: an edit of a valid platform (`BASE`), the diagnostic `trainform plan`
gives (address, field, words), and what the strict fake API server and its Kueue stand-in
(tests/services/kube_api) do with the objects trainform would write for it (`Outcome`).
test_refusals_agree.py checks both sides; docs/kubernetes.md lists the same classes.

Outcomes:
- `refused`: the server answers `code` with `words` when the object of `kind` is sent
  (CRD schema and CEL rules, Kueue's webhooks, the apiserver's built-in validation);
- `pending`: every object is accepted, and Kueue keeps the job's Workload pending with
  `words` in its QuotaReserved message (a workload larger than its queues can ever hold);
- `start_refused`: Kueue admits the Workload but the API server refuses Kueue's write
  that would start the Job (the flavor's tolerations in its pod template);
- `overwritten`: the API server stores the namespace with the label `words` set to the
  namespace's name, not to what trainform declared (so the plan would never be empty);
- `deadline`: Kueue admits the Workload and the Job controller fails the Job as soon as
  it starts, with reason DeadlineExceeded (an activeDeadlineSeconds of 0).
"""

from __future__ import annotations

from dataclasses import dataclass

LONG_PREFIX = ".".join(c * 63 for c in "abcd")  # 255 characters: a DNS prefix is at most 253
GPU_JOB = "resources: {nodes: 1, acceleratorsPerNode: 1, cpu: 8, memory: 32Gi}"
LIMITS = "limits: {gpu: 8, cpu: 64, memory: 256Gi}"
QUOTAS = "nominalQuota: {gpu: 16, cpu: 128, memory: 1Ti}"
POOL_GPUS = "accelerator: {type: h100, count: 8}"
PROJECT = "metadata: {name: vision}"
QUEUE = "metadata: {name: train}\nspec:\n"
POOL = "  nodeSelector: {pool: gpus}\n"
JOB_QUEUE = "  queue: train\n  image: trainer\n"
EVAL_COMMAND = "  command: [python, eval.py]\n"

BASE = f"""\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: gpus}}
spec:
  provider: k8s
  nodes: 2
  {POOL_GPUS}
  cpu: 64
  memory: 512Gi
{POOL}---
apiVersion: trainform/v1
kind: Queue
{QUEUE}  pools:
    - pool: gpus
      {QUOTAS}
---
apiVersion: trainform/v1
kind: Project
{PROJECT}
spec: {{owners: [a@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: q, project: vision}}
spec:
  queue: train
  {LIMITS}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "registry.example.com/t@sha256:{"1" * 64}"}}
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: job, project: vision}}
spec:
{JOB_QUEUE}  command: [python, train.py]
  checkpoint: {{interval: 30m}}
  evaluations: [{{suite: heldout}}]
  {GPU_JOB}
---
apiVersion: trainform/v1
kind: EvalSuite
metadata: {{name: heldout, project: vision}}
spec:
  image: trainer
{EVAL_COMMAND}  metrics: [{{name: loss, goal: minimize}}]
"""


@dataclass(frozen=True)
class Outcome:
    what: str  # refused, pending, start_refused, deadline
    words: str = ""
    kind: str = ""
    code: int = 0


@dataclass(frozen=True)
class SpecClass:
    id: str
    edits: tuple[tuple[str, str], ...]
    address: str
    field: str
    words: str
    outcome: Outcome
    source: str = ""
    attempt: str = "train"  # the attempt whose Job the stand-in gets: train or eval
    namespace_prefix: str = "ml-"  # the connection's namespacePrefix

    def text(self) -> str:
        text = BASE
        for old, new in self.edits:
            assert old in text, old
            text = text.replace(old, new, 1)
        return text


JOB = "TrainingJob/vision/job"
NEVER = Outcome("pending", "maximum capacity")
PODS = Outcome("pending", "insufficient quota for pods")
ZERO = Outcome("deadline", "DeadlineExceeded")


def _job(resources: str) -> tuple[tuple[str, str], ...]:
    return ((GPU_JOB, f"resources: {resources}"),)


def _after(anchor: str, line: str) -> tuple[tuple[str, str], ...]:
    return ((anchor, anchor + line),)


CLASSES: list[SpecClass] = [
    SpecClass(
        "job-over-quota-gpu",
        _job("{nodes: 2, acceleratorsPerNode: 8, cpu: 8, memory: 32Gi}"),
        JOB,
        "spec.resources.acceleratorsPerNode",
        "more than Quota/vision/q allows (gpu: 8",
        NEVER,
        "Kueue flavorassigner: borrowingLimit of the project's ClusterQueue",
    ),
    SpecClass(
        "gpu-job-under-quota-gpu-0",
        ((LIMITS, "limits: {gpu: 0, cpu: 64, memory: 256Gi}"),),
        JOB,
        "spec.resources.acceleratorsPerNode",
        "sets gpu: 0",
        NEVER,
        "Kueue flavorassigner: borrowingLimit 0",
    ),
    SpecClass(
        "job-over-quota-cpu",
        _job("{nodes: 2, acceleratorsPerNode: 1, cpu: 48, memory: 32Gi}"),
        JOB,
        "spec.resources.cpu",
        "more than Quota/vision/q allows (cpu: 64",
        NEVER,
        "Kueue flavorassigner: borrowingLimit of the project's ClusterQueue",
    ),
    SpecClass(
        "job-over-quota-memory",
        _job("{nodes: 2, acceleratorsPerNode: 1, cpu: 8, memory: 200Gi}"),
        JOB,
        "spec.resources.memory",
        "400Gi memory in all: more than Quota/vision/q allows (memory: 256Gi",
        NEVER,
        "Kueue flavorassigner: borrowingLimit of the project's ClusterQueue",
    ),
    SpecClass(
        "job-under-quota-running-jobs-0",
        ((LIMITS, "limits: {runningJobs: 0, gpu: 8, cpu: 64, memory: 256Gi}"),),
        JOB,
        "spec.queue",
        "sets runningJobs: 0",
        PODS,
        "Kueue flavorassigner: pods nominalQuota 0",
    ),
    SpecClass(
        "job-over-queue-gpu",
        ((QUOTAS, "nominalQuota: {gpu: 0, cpu: 128, memory: 1Ti}"),),
        JOB,
        "spec.resources.acceleratorsPerNode",
        "more than queue train can ever admit",
        NEVER,
        "Kueue flavorassigner: the queue's Cohort quota",
    ),
    SpecClass(
        "job-over-queue-cpu",
        ((QUOTAS, "nominalQuota: {gpu: 16, cpu: 4, memory: 1Ti}"),),
        JOB,
        "spec.resources.cpu",
        "more than queue train can ever admit",
        NEVER,
        "Kueue flavorassigner: the queue's Cohort quota",
    ),
    SpecClass(
        "job-over-queue-memory",
        ((QUOTAS, "nominalQuota: {gpu: 16, cpu: 128, memory: 16Gi}"),),
        JOB,
        "spec.resources.memory",
        "more than queue train can ever admit",
        NEVER,
        "Kueue flavorassigner: the queue's Cohort quota",
    ),
    SpecClass(
        "fair-share-weight-below-1e-9",
        _after(QUEUE, "  fairShareWeight: 0.0000000001\n"),
        "Queue/train",
        "spec.fairShareWeight",
        "is in (0, 1e-9]",
        Outcome("refused", "When not 0, weight must be > 10e-9", "Cohort", 403),
        "Kueue webhook validateFairSharing",
    ),
    SpecClass(
        "fair-share-weight-infinite",
        _after(QUEUE, "  fairShareWeight: .inf\n"),
        "Queue/train",
        "spec.fairShareWeight",
        "not a finite number",
        Outcome("refused", "spec.fairSharing.weight", "Cohort", 422),
        "Kueue CRD quantity pattern",
    ),
    SpecClass(
        "accelerator-not-qualified",
        ((POOL_GPUS, "accelerator: {type: h100, count: 8, resourceName: gpu}"),),
        "ResourcePool/gpus",
        "spec.accelerator.resourceName",
        "is not an extended resource name",
        Outcome("refused", "must be a standard resource type or fully qualified", "Job", 422),
        "apiserver validateContainerResourceName",
    ),
    SpecClass(
        "accelerator-standard-resource",
        ((POOL_GPUS, "accelerator: {type: h100, count: 8, resourceName: cpu}"),),
        "ResourcePool/gpus",
        "spec.accelerator.resourceName",
        "is a standard resource, not an accelerator",
        Outcome("refused", "Duplicate value", "Cohort", 422),
        "Kueue CRD: coveredResources and resources unique",
    ),
    SpecClass(
        "accelerator-invalid-name",
        ((POOL_GPUS, "accelerator: {type: h100, count: 8, resourceName: Example.com/gpu}"),),
        "ResourcePool/gpus",
        "spec.accelerator.resourceName",
        "is not a qualified name",
        Outcome("refused", 'Invalid value: "Example.com/gpu"', "Cohort", 403),
        "Kueue webhook: covered resources are qualified names",
    ),
    SpecClass(
        "toleration-value-not-a-label-value",
        _after(POOL, "  tolerations: [{key: dedicated, value: gpu pool, effect: NoSchedule}]\n"),
        "ResourcePool/gpus",
        "spec.tolerations[0].value",
        "is not a label value",
        Outcome("start_refused", 'tolerations[0].operator: Invalid value: "gpu pool"'),
        "apiserver ValidateTolerations (the Job Kueue starts)",
    ),
    SpecClass(
        "job-max-runtime-zero",
        _after(JOB_QUEUE, "  maxRuntime: 0s\n"),
        JOB,
        "spec.maxRuntime",
        "is no time at all",
        ZERO,
        "kubernetes Job controller pastActiveDeadline (activeDeadlineSeconds 0)",
    ),
    SpecClass(
        "queue-max-runtime-zero",
        _after(QUEUE, "  maxRuntime: 0s\n"),
        "Queue/train",
        "spec.maxRuntime",
        "is no time at all",
        ZERO,
        "kubernetes Job controller pastActiveDeadline (activeDeadlineSeconds 0)",
    ),
    SpecClass(
        "quota-max-wall-time-zero",
        ((LIMITS, "limits: {maxWallTime: 0s, gpu: 8, cpu: 64, memory: 256Gi}"),),
        "Quota/vision/q",
        "spec.limits.maxWallTime",
        "is no time at all",
        ZERO,
        "kubernetes Job controller pastActiveDeadline (activeDeadlineSeconds 0)",
    ),
    SpecClass(
        "eval-timeout-zero",
        _after(EVAL_COMMAND, "  timeout: 0s\n"),
        "EvalSuite/vision/heldout",
        "spec.timeout",
        "is no time at all",
        ZERO,
        "kubernetes Job controller pastActiveDeadline (the evaluation's Job)",
        attempt="eval",
    ),
    SpecClass(
        "evaluation-over-quota-cpu",
        _after(EVAL_COMMAND, "  resources: {nodes: 2, cpu: 48, memory: 8Gi}\n"),
        "EvalSuite/vision/heldout",
        "spec.resources.cpu",
        "more than Quota/vision/q allows (cpu: 64",
        NEVER,
        "Kueue flavorassigner: the evaluation's Job on the project's ClusterQueue",
        attempt="eval",
    ),
    SpecClass(
        "project-namespace-kubernetes-keeps",
        _after(
            "  metrics: [{name: loss, goal: minimize}]\n",
            "---\napiVersion: trainform/v1\nkind: Project\nmetadata: {name: kube-public}\n"
            "spec: {owners: [a@example.com]}\n",
        ),
        "Project/kube-public",
        "metadata.name",
        "is one Kubernetes creates and keeps itself",
        Outcome("refused", "already exists", "Namespace", 409),
        "apiserver NamespaceLifecycle (kube-system, kube-public, kube-node-lease, default)",
        namespace_prefix="",
    ),
    SpecClass(
        "namespace-name-label-not-the-name",
        ((PROJECT, "metadata: {name: vision, labels: {kubernetes.io/metadata.name: ml}}"),),
        "Project/vision",
        "metadata.labels",
        "would never converge",
        Outcome("overwritten", "kubernetes.io/metadata.name"),
        "apiserver namespace strategy (label kubernetes.io/metadata.name = the name)",
    ),
    SpecClass(
        "label-key-prefix-too-long",
        ((PROJECT, f"metadata: {{name: vision, labels: {{{LONG_PREFIX}/team: ml}}}}"),),
        "Project/vision",
        "metadata.labels",
        "has 255 characters",
        Outcome("refused", "metadata.labels", "Namespace", 422),
        "apiserver ValidateLabels (IsQualifiedName)",
    ),
    SpecClass(
        "annotation-key-prefix-too-long",
        ((PROJECT, f"metadata: {{name: vision, annotations: {{{LONG_PREFIX}/note: x}}}}"),),
        "Project/vision",
        "metadata.annotations",
        "has 255 characters",
        Outcome("refused", "metadata.annotations", "Namespace", 422),
        "apiserver ValidateAnnotations (IsQualifiedName)",
    ),
    SpecClass(
        "annotations-over-256-kib",
        ((PROJECT, f"metadata: {{name: vision, annotations: {{note: {'x' * 270_000}}}}}"),),
        "Project/vision",
        "metadata.annotations",
        "the API server allows 262,144",
        Outcome("refused", "Too long", "Namespace", 422),
        "apiserver ValidateAnnotations (TotalAnnotationSizeLimitB)",
    ),
    SpecClass(
        "node-selector-key-prefix-too-long",
        ((POOL, f"  nodeSelector: {{pool: gpus, {LONG_PREFIX}/rack: r1}}\n"),),
        "ResourcePool/gpus",
        "spec.nodeSelector",
        "has 255 characters",
        Outcome("refused", "spec.nodeLabels: Invalid value", "ResourceFlavor", 403),
        "Kueue ResourceFlavor webhook (ValidateLabels)",
    ),
    SpecClass(
        "topology-level-prefix-too-long",
        _after(POOL, f"  topology: [{LONG_PREFIX}/block]\n"),
        "ResourcePool/gpus",
        "spec.topology[0]",
        "has 255 characters",
        Outcome("refused", "podset-required-topology", "Job", 403),
        "Kueue Job webhook (topology annotation is a qualified name)",
    ),
]

STALE: list[SpecClass] = [
    SpecClass(
        "priority-above-1e9-and-system-queue-name",
        (
            (QUEUE, "metadata: {name: system-train}\nspec:\n  defaultPriority: 2000000000\n"),
            ("  queue: train\n  limits", "  queue: system-train\n  limits"),
            (JOB_QUEUE, "  queue: system-train\n  image: trainer\n"),
        ),
        "Queue/system-train",
        "",
        "",
        Outcome("admitted"),
        "WorkloadPriorityClass CRD: value int32, any DNS subdomain name",
    ),
]
