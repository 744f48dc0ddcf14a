"""Objects a real API server with Kueue installed refuses, one `Refusal` per case, each with
a stable id so that other suites (trainform's plan checks) can reuse the same cases.

Each case is taken from a rule of the real thing: the Kueue CRD schemas and their CEL rules
(tests/reference/kueue-crds), Kueue's validating webhooks (pkg/webhooks), the apiserver's
built-in validation (PriorityClass, the Go decoder's int32 fields) or server-side apply.
`obj` is the object as a client would send it; `prior` (optional) is created first, and
`obj` is then sent as an update (for transition rules). `code` is the HTTP status the
server answers and `expect` a fragment of its message. tests/services/test_kube_api_refusals.py
asserts that the fake server refuses every case as described.
"""

from __future__ import annotations

import copy

from tests.services.kube_api.refusal_objects import (  # noqa: F401 - builders tests reuse
    KUEUE,
    MAX_EXEC,
    PREFERRED,
    PRIORITY,
    QUANTITY,
    QUEUE,
    REQUIRED,
    Refusal,
    cluster_queue,
    cohort,
    container,
    failure_policy,
    hostname_moved,
    indexed_job,
    job,
    job_pod,
    labelled_job,
    local_queue,
    many_flavors,
    priority_class,
    queue_with_groups,
    resource,
    resource_flavor,
    service,
    topology,
    with_resources,
    workload_priority_class,
)

_CRD, _CEL, _WEBHOOK, _BUILTIN = (
    "Kueue CRD schema",
    "Kueue CRD CEL rule",
    "Kueue webhook",
    "apiserver",
)
_LONG_LABELS = {f"k{i}": "v" for i in range(9)}
_TOLERATIONS = [{"key": f"k{i}", "operator": "Exists", "effect": "NoSchedule"} for i in range(9)]

CASES: list[Refusal] = [
    Refusal(
        "cq-nominal-quota-not-a-quantity",
        with_resources(resource("cpu", "lots")),
        422,
        f"in body should match '{QUANTITY}'",
        source=_CRD,
    ),
    Refusal(
        "cq-nominal-quota-beyond-int64",
        with_resources(resource("cpu", 2**63)),
        422,
        "must be of type integer-or-string",
        source=_CRD,
    ),
    Refusal(
        "cq-duplicate-flavor",
        queue_with_groups((["cpu"], ["h100", "h100"])),
        422,
        'Duplicate value: map[string]interface {}{"name":"h100"}',
        source=_CRD,
    ),
    Refusal(
        "cq-duplicate-resource-in-flavor",
        with_resources(resource("cpu", 1), resource("cpu", 2), covered=["cpu", "memory"]),
        422,
        'Duplicate value: map[string]interface {}{"name":"cpu"}',
        source=_CRD,
    ),
    Refusal(
        "cq-flavor-resources-count-mismatch",
        with_resources(resource("cpu", 1), covered=["cpu", "memory"]),
        422,
        "flavors must have the same number of resources as the coveredResources",
        source=_CEL,
    ),
    Refusal(
        "cq-more-than-64-flavors", many_flavors(65), 422, "must have at most 64 items", source=_CRD
    ),
    Refusal(
        "cq-more-than-16-resource-groups",
        cluster_queue(
            resourceGroups=[
                {
                    "coveredResources": [f"r{i}"],
                    "flavors": [{"name": f"f{i}", "resources": [resource(f"r{i}", 1)]}],
                }
                for i in range(17)
            ]
        ),
        422,
        "must have at most 16 items",
        source=_CRD,
    ),
    Refusal(
        "cq-invalid-flavor-name",
        queue_with_groups((["cpu"], ["H100"])),
        422,
        "spec.resourceGroups[0].flavors[0].name in body should match",
        source=_CRD,
    ),
    Refusal(
        "cq-unknown-queueing-strategy",
        cluster_queue(queueingStrategy="Fastest"),
        422,
        'Unsupported value: "Fastest"',
        source=_CRD,
    ),
    Refusal(
        "cq-unknown-stop-policy",
        cluster_queue(stopPolicy="Pause"),
        422,
        'Unsupported value: "Pause"',
        source=_CRD,
    ),
    Refusal(
        "cq-borrowing-limit-without-cohort",
        with_resources(resource("cpu", 4, borrowingLimit=2)),
        422,
        "borrowingLimit must be nil when cohort is empty",
        source=_CEL,
    ),
    Refusal(
        "cq-fungibility-preference-without-try-next-flavor",
        cluster_queue(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "BorrowingOverPreemption",
            }
        ),
        422,
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        source=_CEL,
    ),
    Refusal(
        "cq-borrow-within-cohort-without-reclaim",
        cluster_queue(
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            }
        ),
        422,
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        source=_CEL,
    ),
    Refusal(
        "cq-lending-limit-without-cohort",
        with_resources(resource("cpu", 4, lendingLimit=2)),
        403,
        'resources[0].lendingLimit: Invalid value: "2": must be nil when cohort is empty',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-lending-limit-over-nominal",
        with_resources(resource("cpu", 4, lendingLimit=6), cohortName="c"),
        403,
        "must be less than or equal to the nominalQuota",
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-negative-nominal-quota",
        with_resources(resource("cpu", "-1")),
        403,
        'nominalQuota: Invalid value: "-1": must be greater than or equal to 0',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-resource-order-mismatch",
        with_resources(resource("memory", 1), resource("cpu", 1), covered=["cpu", "memory"]),
        403,
        "must match the name in coveredResources",
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-resource-in-two-groups",
        queue_with_groups((["cpu"], ["a"]), (["cpu"], ["b"])),
        403,
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-flavor-in-two-groups",
        queue_with_groups((["cpu"], ["a"]), (["memory"], ["a"])),
        403,
        'spec.resourceGroups[1].flavors[0].name: Duplicate value: "a"',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-invalid-resource-name",
        with_resources(resource("nvidia gpu", 1)),
        403,
        'coveredResources[0]: Invalid value: "nvidia gpu"',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-undeclared-field-apply",
        cluster_queue(cohort="v1beta1-field"),
        500,
        ".spec.cohort: field not declared in schema",
        apply=True,
        source="server-side apply",
    ),
    Refusal(
        "cq-undeclared-field-strict-create",
        cluster_queue(cohort="v1beta1-field"),
        400,
        'strict decoding error: unknown field "spec.cohort"',
        query={"fieldValidation": "Strict"},
        source=_CRD,
    ),
    Refusal(
        "cohort-fair-sharing-weight-at-most-1n",
        cohort(fairSharing={"weight": "1e-10"}),
        403,
        'spec.fairSharing: Invalid value: "1e-10": When not 0, weight must be > 10e-9',
        source=_WEBHOOK,
    ),
    Refusal(
        "cq-fair-sharing-weight-negative",
        cluster_queue(fairSharing={"weight": "-1"}),
        403,
        'spec.fairSharing: Invalid value: "-1": must be greater than or equal to 0',
        source=_WEBHOOK,
    ),
    Refusal(
        "cohort-fair-sharing-weight-not-a-quantity",
        cohort(fairSharing={"weight": "inf"}),
        422,
        "spec.fairSharing.weight",
        source=_CRD,
    ),
    Refusal(
        "rf-more-than-8-node-labels",
        resource_flavor(nodeLabels=_LONG_LABELS),
        422,
        "should have at most 8 properties",
        source=_CRD,
    ),
    Refusal(
        "rf-more-than-8-tolerations",
        resource_flavor(tolerations=_TOLERATIONS),
        422,
        "must have at most 8 items",
        source=_CRD,
    ),
    Refusal(
        "rf-toleration-without-key-not-exists",
        resource_flavor(tolerations=[{"operator": "Equal", "value": "x"}]),
        422,
        "operator must be Exists when 'key' is empty",
        source=_CEL,
    ),
    Refusal(
        "rf-toleration-seconds-without-no-execute",
        resource_flavor(
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
            ]
        ),
        422,
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        source=_CEL,
    ),
    Refusal(
        "rf-taint-unknown-effect",
        resource_flavor(nodeTaints=[{"key": "k", "value": "v", "effect": "Sometimes"}]),
        422,
        "supported taint effect values",
        source=_CEL,
    ),
    Refusal(
        "rf-topology-without-node-labels",
        resource_flavor(topologyName="default", nodeLabels={}),
        422,
        "at least one nodeLabel is required when topology is set",
        source=_CEL,
    ),
    Refusal(
        "rf-invalid-node-label-key",
        resource_flavor(nodeLabels={"bad key": "v"}),
        403,
        'spec.nodeLabels: Invalid value: "bad key"',
        source=_WEBHOOK,
    ),
    Refusal(
        "rf-duplicate-taint",
        resource_flavor(
            nodeTaints=[
                {"key": "k", "value": "a", "effect": "NoSchedule"},
                {"key": "k", "value": "b", "effect": "NoSchedule"},
            ]
        ),
        403,
        "taints must be unique by key and effect pair",
        source=_WEBHOOK,
    ),
    Refusal(
        "topology-more-than-16-levels",
        topology([f"level-{i}" for i in range(17)]),
        422,
        "must have at most 16 items",
        source=_CRD,
    ),
    Refusal(
        "topology-hostname-not-lowest",
        hostname_moved(),
        422,
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        source=_CEL,
    ),
    Refusal(
        "topology-duplicate-levels",
        topology(["block", "block"]),
        422,
        "must be unique",
        source=_CEL,
    ),
    Refusal(
        "lq-cluster-queue-changed",
        local_queue("other"),
        422,
        "field is immutable",
        prior=local_queue("first"),
        source=_CEL,
    ),
    Refusal(
        "pc-value-over-user-maximum",
        priority_class("refused-high", 1_000_000_001),
        422,
        "maximum allowed value of a user defined priority is 1000000000",
        source=_BUILTIN,
    ),
    Refusal(
        "pc-system-prefix",
        priority_class("system-trainform", 10),
        422,
        "priority class names with 'system-' prefix are reserved for system use only",
        source=_BUILTIN,
    ),
    Refusal(
        "pc-value-beyond-int32",
        priority_class("refused-overflow", 2**31),
        400,
        "cannot unmarshal number 2147483648 into Go struct field PriorityClass.value of type int32",
        source=_BUILTIN,
    ),
    Refusal(
        "pc-value-changed",
        priority_class("refused-changed", 20),
        422,
        "value: Forbidden: may not be changed in an update.",
        prior=priority_class("refused-changed", 10),
        source=_BUILTIN,
    ),
    Refusal(
        "job-invalid-queue-name",
        labelled_job({QUEUE: "Team_Queue"}),
        403,
        'admission webhook "vjob.kb.io" denied the request: '
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Team_Queue"',
        source=_WEBHOOK,
    ),
    Refusal(
        "job-max-exec-time-not-positive",
        labelled_job({QUEUE: "q", MAX_EXEC: "0"}),
        403,
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: "
        "should be greater than 0",
        source=_WEBHOOK,
    ),
    Refusal(
        "job-max-exec-time-not-a-number",
        labelled_job({QUEUE: "q", MAX_EXEC: "1h"}),
        403,
        'strconv.Atoi: parsing "1h": invalid syntax',
        source=_WEBHOOK,
    ),
    Refusal(
        "job-two-topology-annotations",
        labelled_job({QUEUE: "q"}, {REQUIRED: "kubernetes.io/hostname", PREFERRED: "rack"}),
        403,
        "must not contain more than one topology annotation",
        source=_WEBHOOK,
    ),
    Refusal(
        "job-topology-level-not-a-label",
        labelled_job({QUEUE: "q"}, {REQUIRED: "rack level"}),
        403,
        "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]",
        source=_WEBHOOK,
    ),
    Refusal(
        "job-priority-class-label-changed",
        labelled_job({QUEUE: "q", PRIORITY: "high"}),
        403,
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": field is immutable',
        prior=labelled_job({QUEUE: "q", PRIORITY: "low"}),
        source=_WEBHOOK,
    ),
    Refusal(
        "job-queue-name-changed-while-running",
        labelled_job({QUEUE: "q"}, suspend=False),
        403,
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "q": field is immutable',
        prior=labelled_job({}, suspend=False),
        source=_WEBHOOK,
    ),
    Refusal(
        "job-toleration-key-invalid",
        job_pod(tolerations=[{"key": "gpu type", "operator": "Exists"}]),
        422,
        'spec.template.spec.tolerations[0].key: Invalid value: "gpu type"',
        source=_BUILTIN,
    ),
    Refusal(
        "job-toleration-exists-with-value",
        job_pod(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        422,
        "value must be empty when `operator` is 'Exists'",
        source=_BUILTIN,
    ),
    Refusal(
        "job-toleration-seconds-without-no-execute",
        job_pod(
            tolerations=[
                {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}
            ]
        ),
        422,
        "effect must be 'NoExecute' when `tolerationSeconds` is set",
        source=_BUILTIN,
    ),
    Refusal(
        "job-node-selector-invalid-key",
        job_pod(nodeSelector={"pool name": "a"}),
        422,
        'spec.template.spec.nodeSelector: Invalid value: "pool name"',
        source=_BUILTIN,
    ),
    Refusal(
        "job-unqualified-extended-resource",
        job_pod(containers=container(limits={"gpu": "1"})),
        422,
        'Invalid value: "gpu": must be a standard resource type or fully qualified',
        source=_BUILTIN,
    ),
    Refusal(
        "job-gpu-request-without-limit",
        job_pod(containers=container(requests={"nvidia.com/gpu": "1"})),
        422,
        "Limit must be set for non overcommitable resources",
        source=_BUILTIN,
    ),
    Refusal(
        "job-request-over-limit",
        job_pod(containers=container(requests={"cpu": "4"}, limits={"cpu": "2"})),
        422,
        "must be less than or equal to cpu limit of 2",
        source=_BUILTIN,
    ),
    Refusal(
        "job-restart-policy-always",
        job_pod(restartPolicy="Always"),
        422,
        'spec.template.spec.restartPolicy: Unsupported value: "Always"',
        source=_BUILTIN,
    ),
    Refusal(
        "job-parallelism-beyond-int32",
        job(parallelism=2**31),
        400,
        "of type int32",
        source=_BUILTIN,
    ),
    Refusal(
        "service-name-starts-with-a-digit",
        service("7b-llama-0a1b2c3d-1"),
        422,
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
        "with an alphabetic character",
        source=_BUILTIN,
    ),
    Refusal(
        "indexed-job-last-hostname-too-long",
        indexed_job("a" * 61, 12),
        422,
        f"will not able to create pod with invalid DNS label: {'a' * 61}-11",
        source=_BUILTIN,
    ),
    Refusal(
        "job-name-over-a-label-value",
        indexed_job("b" * 64, 1),
        422,
        f'spec.template.labels: Invalid value: "{"b" * 64}": must be no more than 63 characters',
        source=_BUILTIN,
    ),
    Refusal(
        "job-pod-hostname-not-a-label",
        job_pod(hostname="trainer.0", subdomain="c" * 64),
        422,
        'spec.template.spec.subdomain: Invalid value: "' + "c" * 64 + '": must be no more',
        source=_BUILTIN,
    ),
    Refusal(
        "pod-failure-policy-both-patterns",
        failure_policy(
            {
                "action": "FailJob",
                "onExitCodes": {"operator": "NotIn", "values": [0]},
                "onPodConditions": [{"type": "DisruptionTarget"}],
            }
        ),
        422,
        "specifying both OnExitCodes and OnPodConditions is not supported",
        source=_BUILTIN,
    ),
    Refusal(
        "pod-failure-policy-exit-codes-unordered",
        failure_policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}}),
        422,
        "onExitCodes.values: Invalid value: []int32{3, 1}: must be ordered",
        source=_BUILTIN,
    ),
    Refusal(
        "pod-failure-policy-unknown-container",
        failure_policy(
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "trainer", "operator": "NotIn", "values": [0]},
            }
        ),
        422,
        "must be one of the container or initContainer names in the pod template",
        source=_BUILTIN,
    ),
    Refusal(
        "pod-failure-policy-condition-status",
        failure_policy(
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Yes"}]}
        ),
        422,
        'onPodConditions[0].status: Unsupported value: "Yes"',
        source=_BUILTIN,
    ),
]


def by_id(case_id: str) -> Refusal:
    """One case, for suites that reuse them (a copy: tests may change it)."""
    for case in CASES:
        if case.id == case_id:
            return copy.deepcopy(case)
    raise KeyError(case_id)
