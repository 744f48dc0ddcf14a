"""Spec models: one valid document per kind, and the ways each kind can be wrong."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError
from trainform.specs import KINDS, RootConfig
from trainform.specs.models.kinds import DOCUMENT_ADAPTER

DIGEST = "sha256:" + "ab" * 32
COMMIT = "0123456789abcdef0123456789abcdef01234567"

VALID: dict[str, dict[str, Any]] = {
    "Project": {
        "apiVersion": "trainform/v1",
        "kind": "Project",
        "metadata": {"name": "research", "labels": {"team.example.com/cost-center": "ml-42"}},
        "spec": {
            "displayName": "Research",
            "owners": ["ml-platform@example.com"],
            "users": ["alice", "bob"],
            "specPaths": ["teams/research/**"],
        },
    },
    "ResourcePool": {
        "apiVersion": "trainform/v1",
        "kind": "ResourcePool",
        "metadata": {"name": "h100"},
        "spec": {
            "provider": "cluster",
            "nodes": 16,
            "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
            "cpu": 192,
            "memory": "2Ti",
            "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "topology": ["topology.kubernetes.io/block", "kubernetes.io/hostname"],
        },
    },
    "Queue": {
        "apiVersion": "trainform/v1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {
            "pools": [
                {
                    "pool": "h100",
                    "nominalQuota": {"gpu": 64, "cpu": "1536", "memory": "16Ti"},
                    "borrowingLimit": {"gpu": 32},
                    "lendingLimit": {"gpu": 16},
                }
            ],
            "cohort": "training",
            "defaultPriority": 100,
            "preemption": {
                "withinQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 50},
            },
            "fairShareWeight": 2.5,
            "queueingStrategy": "StrictFIFO",
            "maxRuntime": "36h",
        },
    },
    "Quota": {
        "apiVersion": "trainform/v1",
        "kind": "Quota",
        "metadata": {"name": "research-on-research", "project": "research"},
        "spec": {
            "queue": "research",
            "limits": {
                "gpu": 32,
                "memory": "4Ti",
                "runningJobs": 4,
                "maxWallTime": "2d",
            },
        },
    },
    "Dataset": {
        "apiVersion": "trainform/v1",
        "kind": "Dataset",
        "metadata": {"name": "corpus"},
        "spec": {
            "source": "s3://ml-data/corpus",
            "format": "jsonl",
            "versions": [
                {"name": "v1", "manifestDigest": DIGEST},
                {"name": "2024-06-01", "path": "snapshots/2024-06-01"},
            ],
            "readers": ["research"],
            "deletionPolicy": "Abandon",
        },
    },
    "Image": {
        "apiVersion": "trainform/v1",
        "kind": "Image",
        "metadata": {"name": "trainer"},
        "spec": {
            "reference": f"registry.example.com:5000/ml/trainer:v1@{DIGEST}",
            "class": "project",
            "requiredLabels": ["org.opencontainers.image.source"],
        },
    },
    "TrainingJob": {
        "apiVersion": "trainform/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "llama-8b", "project": "research"},
        "spec": {
            "queue": "research",
            "image": "trainer",
            "datasets": ["corpus@v1"],
            "code": {"repo": "https://git.example.com/ml/train.git", "commit": COMMIT},
            "command": ["torchrun", "train.py"],
            "parameters": {"lr": 0.0003, "steps": 1000, "warmup": True, "layers": [1, 2]},
            "env": {"NCCL_DEBUG": "WARN"},
            "resources": {"nodes": 4, "acceleratorsPerNode": 8, "cpu": 96, "memory": "1Ti"},
            "checkpoint": {"prefix": "s3://ckpt/llama", "interval": "30m", "keepLast": 5},
            "resume": {"policy": "latest"},
            "retries": {"limit": 3, "backoff": "5m"},
            "maxRuntime": "36h",
            "evaluations": [{"suite": "mmlu", "when": "every-checkpoint"}],
            "initFrom": {"job": "llama-8b-base"},
        },
    },
    "EvalSuite": {
        "apiVersion": "trainform/v1",
        "kind": "EvalSuite",
        "metadata": {"name": "mmlu", "project": "research"},
        "spec": {
            "image": "trainer",
            "command": ["python", "eval.py"],
            "datasets": ["mmlu@v1"],
            "metrics": [
                {"name": "accuracy", "goal": "maximize"},
                {"name": "loss/val", "goal": "minimize"},
            ],
            "gates": [
                {"metric": "accuracy", "op": ">=", "threshold": 0.6},
                {
                    "metric": "loss/val",
                    "op": "<=",
                    "threshold": 0.1,
                    "baseline": {"job": "other-team/llama-8b-base"},
                },
            ],
            "timeout": "2h",
        },
    },
    "ModelRelease": {
        "apiVersion": "trainform/v1",
        "kind": "ModelRelease",
        "metadata": {"name": "llama-8b", "project": "research"},
        "spec": {
            "job": "llama-8b",
            "run": "r-0123456789ab",
            "evaluations": ["mmlu"],
            "version": "1.0.0",
            "registry": {"repository": "models/llama-8b"},
            "objectStore": {"prefix": "s3://models/releases/llama-8b"},
            "approval": {"required": True},
        },
    },
}

VALID_CONFIG: dict[str, Any] = {
    "apiVersion": "trainform/v1",
    "providers": [
        {"name": "local", "type": "local"},
        {"name": "cluster", "type": "kubernetes", "connection": {"context": "gpu"}},
        {"name": "hpc", "type": "slurm", "connection": {"cluster": "hpc"}},
        {"name": "s3", "type": "objectstore", "connection": {"endpointUrl": "http://s3:9000"}},
        {
            "name": "registry",
            "type": "registry",
            "connection": {"url": "https://registry.example.com", "passwordEnv": "REG_TOKEN"},
        },
    ],
    "state": {"backend": "s3", "bucket": "tf-state", "provider": "s3"},
    "variables": {"team": "research"},
    "environments": {"dev": {"variables": {"steps": 10}}, "prod": {"variables": {"steps": 1000}}},
    "defaultEnvironment": "dev",
    "policies": {"disabled": ["max-gpus"]},
}


def changed(document: dict[str, Any], path: str, value: Any = None, *, delete: bool = False):
    """A deep copy of `document` with the dotted `path` set to `value` (or deleted)."""
    result = copy.deepcopy(document)
    *parents, last = [int(step) if step.isdigit() else step for step in path.split(".")]
    node: Any = result
    for step in parents:
        node = node[step]
    if delete:
        del node[last]
    else:
        node[last] = value
    return result


def error_locations(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    with pytest.raises(ValidationError) as info:
        DOCUMENT_ADAPTER.validate_python(document)
    return [tuple(error["loc"]) for error in info.value.errors()]


def error_text(document: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        DOCUMENT_ADAPTER.validate_python(document)
    return str(info.value)


def test_every_kind_has_a_valid_example() -> None:
    assert set(VALID) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_document_validates_to_its_kind(kind: str) -> None:
    model = DOCUMENT_ADAPTER.validate_python(VALID[kind])
    assert type(model) is KINDS[kind]
    assert model.kind == kind


@pytest.mark.parametrize("kind", sorted(VALID))
def test_models_are_frozen(kind: str) -> None:
    model = DOCUMENT_ADAPTER.validate_python(VALID[kind])
    with pytest.raises(ValidationError):
        model.metadata.name = "renamed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        model.spec = None  # type: ignore[misc,assignment]


@pytest.mark.parametrize("kind", sorted(VALID))
def test_extra_field_is_forbidden_at_every_level(kind: str) -> None:
    for path in ("surplus", "metadata.surplus", "spec.surplus"):
        document = changed(VALID[kind], path, 1)
        assert (kind, *path.split(".")) in error_locations(document)


@pytest.mark.parametrize("kind", sorted(VALID))
def test_document_round_trips_through_its_aliases(kind: str) -> None:
    model = DOCUMENT_ADAPTER.validate_python(VALID[kind])
    dumped = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert DOCUMENT_ADAPTER.validate_python(dumped) == model


def test_address_is_kind_and_name_or_kind_project_and_name() -> None:
    assert DOCUMENT_ADAPTER.validate_python(VALID["Queue"]).address == "Queue/research"
    job = DOCUMENT_ADAPTER.validate_python(VALID["TrainingJob"])
    assert job.address == "TrainingJob/research/llama-8b"


def test_training_job_declares_every_reference_with_its_path() -> None:
    job = DOCUMENT_ADAPTER.validate_python(VALID["TrainingJob"])
    references = {(ref.kind, ref.name, ref.path, ref.version) for ref in job.references()}
    assert references == {
        ("Project", "research", ("metadata", "project"), None),
        ("Queue", "research", ("spec", "queue"), None),
        ("Image", "trainer", ("spec", "image"), None),
        ("Dataset", "corpus", ("spec", "datasets", 0), "v1"),
        ("EvalSuite", "mmlu", ("spec", "evaluations", 0, "suite"), None),
        ("TrainingJob", "llama-8b-base", ("spec", "initFrom", "job"), None),
    }


INVALID = [
    # Project
    pytest.param(changed(VALID["Project"], "spec.owners", []), "owners", id="project-no-owners"),
    pytest.param(
        changed(VALID["Project"], "metadata.name", "Research"),
        "should match pattern",
        id="project-uppercase",
    ),
    pytest.param(
        changed(VALID["Project"], "spec.users", ["Alice"]), "users", id="project-bad-user-name"
    ),
    pytest.param(
        changed(VALID["Project"], "apiVersion", "trainform/v2"),
        "apiVersion",
        id="project-wrong-api-version",
    ),
    pytest.param(
        changed(VALID["Project"], "metadata.labels", {"k": "-bad-"}),
        "labels",
        id="project-bad-label-value",
    ),
    # ResourcePool
    pytest.param(
        changed(VALID["ResourcePool"], "spec.memory", "2TB"), "quantity", id="pool-bad-memory"
    ),
    pytest.param(changed(VALID["ResourcePool"], "spec.nodes", 0), "nodes", id="pool-zero-nodes"),
    pytest.param(
        changed(VALID["ResourcePool"], "spec.accelerator.count", 65),
        "count",
        id="pool-too-many-accelerators",
    ),
    pytest.param(
        changed(VALID["ResourcePool"], "spec.cpu", delete=True), "cpu", id="pool-missing-cpu"
    ),
    pytest.param(
        changed(VALID["ResourcePool"], "spec.tolerations.0.operator", "In"),
        "operator",
        id="pool-bad-toleration-operator",
    ),
    # Queue
    pytest.param(changed(VALID["Queue"], "spec.pools", []), "pools", id="queue-no-pools"),
    pytest.param(
        changed(VALID["Queue"], "spec.cohort", delete=True),
        "borrowingLimit requires a cohort",
        id="queue-borrowing-without-cohort",
    ),
    pytest.param(
        changed(VALID["Queue"], "spec.preemption.withinQueue", "Always"),
        "withinQueue",
        id="queue-bad-preemption",
    ),
    pytest.param(
        changed(VALID["Queue"], "spec.fairShareWeight", -1),
        "fairShareWeight",
        id="queue-negative-weight",
    ),
    pytest.param(
        changed(VALID["Queue"], "spec.maxRuntime", "forever"), "duration", id="queue-bad-duration"
    ),
    pytest.param(
        changed(VALID["Queue"], "spec.pools.0.nominalQuota.gpu", "-8"),
        "quantity",
        id="queue-negative-quota",
    ),
    # Quota
    pytest.param(
        changed(VALID["Quota"], "spec.limits.runningJobs", -1),
        "runningJobs",
        id="quota-negative-running-jobs",
    ),
    pytest.param(
        changed(VALID["Quota"], "spec.queue", delete=True), "queue", id="quota-missing-queue"
    ),
    pytest.param(
        changed(VALID["Quota"], "spec.limits.maxWallTime", 3600),
        "duration",
        id="quota-wall-time-without-unit",
    ),
    # Dataset
    pytest.param(
        changed(VALID["Dataset"], "spec.source", "gs://bucket/x"),
        "unsupported scheme",
        id="dataset-unsupported-scheme",
    ),
    pytest.param(
        changed(VALID["Dataset"], "spec.versions.1.name", "v1"),
        "declared twice",
        id="dataset-duplicate-version",
    ),
    pytest.param(
        changed(VALID["Dataset"], "spec.versions.0.manifestDigest", "md5:abc"),
        "sha256",
        id="dataset-bad-digest",
    ),
    pytest.param(
        changed(VALID["Dataset"], "spec.versions.1.path", "../outside"),
        "relative path",
        id="dataset-path-escapes",
    ),
    pytest.param(
        changed(VALID["Dataset"], "spec.versions", []), "versions", id="dataset-no-versions"
    ),
    pytest.param(
        changed(VALID["Dataset"], "spec.format", "xlsx"), "format", id="dataset-bad-format"
    ),
    # Image
    pytest.param(
        changed(VALID["Image"], "spec.reference", "ml/Trainer:v1"),
        "OCI image reference",
        id="image-uppercase-reference",
    ),
    pytest.param(
        changed(VALID["Image"], "spec.reference", "ml/trainer"),
        "needs a tag, a digest or both",
        id="image-neither-tag-nor-digest",
    ),
    pytest.param(
        changed(VALID["Image"], "spec.reference", delete=True),
        "needs a reference",
        id="image-container-without-reference",
    ),
    pytest.param(changed(VALID["Image"], "spec.class", "gold"), "class", id="image-bad-class"),
    # TrainingJob
    pytest.param(
        changed(VALID["TrainingJob"], "spec.datasets", ["corpus@"]),
        "spec.datasets.0",
        id="job-dataset-empty-version",
    ),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.code.ref", "main"),
        "either commit or ref",
        id="job-commit-and-ref",
    ),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.code.commit", "abc123"),
        "commit",
        id="job-short-commit",
    ),
    pytest.param(changed(VALID["TrainingJob"], "spec.command", []), "command", id="job-no-command"),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.env", {"1BAD": "x"}), "env", id="job-bad-env-name"
    ),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.parameters", {"nested": {"a": 1}}),
        "parameters",
        id="job-nested-parameter",
    ),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.checkpoint.interval", delete=True),
        "interval",
        id="job-checkpoint-without-interval",
    ),
    pytest.param(
        changed(VALID["TrainingJob"], "spec.resources.acceleratorsPerNode", 65),
        "acceleratorsPerNode",
        id="job-too-many-accelerators",
    ),
    # EvalSuite
    pytest.param(
        changed(VALID["EvalSuite"], "spec.gates.0.metric", "acuracy"),
        "gate reads metric 'acuracy', which the suite does not declare",
        id="eval-gate-reads-undeclared-metric",
    ),
    pytest.param(changed(VALID["EvalSuite"], "spec.metrics", []), "metrics", id="eval-no-metrics"),
    pytest.param(
        changed(VALID["ModelRelease"], "spec.run", "latest"), "run", id="release-bad-run-id"
    ),
    pytest.param(
        changed(changed(VALID["ModelRelease"], "spec.registry", None), "spec.objectStore", None),
        "a release needs a target",
        id="release-no-target",
    ),
    pytest.param(
        changed(VALID["ModelRelease"], "spec.promoteFrom", "llama-8b-staging"),
        "a promotion (promoteFrom) copies the source's artifact to a registry: it takes "
        "registry and no job, run, evaluations, objectStore",
        id="release-promotion-with-a-source",
    ),
    pytest.param(
        changed(VALID["ModelRelease"], "spec.evaluations", []),
        "a release needs job and evaluations (or promoteFrom)",
        id="release-no-evaluations",
    ),
    pytest.param(
        changed(
            VALID["EvalSuite"],
            "spec.gates.0",
            {
                "metric": "accuracy",
                "op": ">=",
                "threshold": -0.01,
                "baseline": {"job": "llama-8b"},
                "compareTo": {"release": "llama-8b"},
            },
        ),
        "a gate compares with a baseline or a release, not both",
        id="eval-gate-baseline-and-release",
    ),
    pytest.param(
        changed(VALID["EvalSuite"], "spec.gates.0.op", "=="), "op", id="eval-bad-operator"
    ),
    pytest.param(
        changed(VALID["EvalSuite"], "spec.gates.1.baseline.job", "a/b/c"),
        "job",
        id="eval-baseline-too-many-parts",
    ),
    # Any kind
    pytest.param(changed(VALID["Queue"], "kind", "Queu"), "Queu", id="unknown-kind"),
    pytest.param(changed(VALID["Queue"], "kind", delete=True), "kind", id="missing-kind"),
]


@pytest.mark.parametrize(("document", "message"), INVALID)
def test_invalid_document_is_rejected(document: dict[str, Any], message: str) -> None:
    assert message in error_text(document)


@pytest.mark.parametrize("kind", ["Project", "Queue"])
@pytest.mark.parametrize("name", ["default", "all", "root", "none"])
def test_slurm_reserved_name_is_rejected_for_accounts_and_partitions(kind: str, name: str) -> None:
    document = changed(VALID[kind], "metadata.name", name)
    assert "reserved by Slurm" in error_text(document)


@pytest.mark.parametrize("kind", ["ResourcePool", "Image", "Dataset"])
def test_slurm_reserved_name_is_allowed_for_other_kinds(kind: str) -> None:
    document = changed(VALID[kind], "metadata.name", "default")
    assert DOCUMENT_ADAPTER.validate_python(document).metadata.name == "default"


def test_queue_without_borrowing_needs_no_cohort() -> None:
    document = changed(VALID["Queue"], "spec.cohort", delete=True)
    document = changed(document, "spec.pools.0.borrowingLimit", delete=True)
    assert DOCUMENT_ADAPTER.validate_python(document).spec.cohort is None


def test_host_image_needs_no_reference() -> None:
    document = changed(VALID["Image"], "spec", {"runtime": "host"})
    assert DOCUMENT_ADAPTER.validate_python(document).spec.reference is None


def test_gate_reading_a_declared_metric_is_accepted() -> None:
    document = changed(
        VALID["EvalSuite"], "spec.gates", [{"metric": "loss/val", "op": "<", "threshold": 1}]
    )
    assert len(DOCUMENT_ADAPTER.validate_python(document).spec.gates) == 1


def test_quantities_in_models_keep_exact_values() -> None:
    pool = DOCUMENT_ADAPTER.validate_python(VALID["ResourcePool"])
    assert pool.spec.memory.value == 2 * 2**40
    assert pool.spec.gpus() == 128


# trainform.yaml


def test_root_config_validates() -> None:
    config = RootConfig.model_validate(VALID_CONFIG)
    assert config.kind == "Config"
    assert config.provider("cluster").type == "kubernetes"
    assert config.provider("missing") is None
    assert config.default_environment == "dev"


def test_root_config_defaults_to_local_state() -> None:
    config = RootConfig.model_validate({"apiVersion": "trainform/v1"})
    assert config.state.backend == "local"
    assert config.providers == []


INVALID_CONFIG = [
    pytest.param(
        changed(VALID_CONFIG, "providers.1.name", "local"),
        "provider instance names must be unique",
        id="duplicate-provider-name",
    ),
    pytest.param(
        changed(VALID_CONFIG, "defaultEnvironment", "staging"),
        "is not declared in environments",
        id="undeclared-default-environment",
    ),
    pytest.param(
        changed(VALID_CONFIG, "providers.0.type", "nomad"), "type", id="unknown-provider-type"
    ),
    pytest.param(
        changed(VALID_CONFIG, "providers.4.connection.passwordEnv", "token value"),
        "passwordEnv",
        id="secret-instead-of-variable-name",
    ),
    pytest.param(changed(VALID_CONFIG, "state.backend", "consul"), "backend", id="unknown-backend"),
    pytest.param(changed(VALID_CONFIG, "surplus", 1), "surplus", id="extra-field"),
    pytest.param(
        changed(VALID_CONFIG, "providers.1.connection.contxt", "gpu"),
        "contxt",
        id="extra-connection-field",
    ),
    pytest.param(
        changed(VALID_CONFIG, "environments", {"Prod": {}}),
        "environments",
        id="environment-name-not-dns1123",
    ),
]


@pytest.mark.parametrize(("document", "message"), INVALID_CONFIG)
def test_invalid_root_config_is_rejected(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        RootConfig.model_validate(document)
    assert message in str(info.value)


def test_root_config_is_frozen() -> None:
    config = RootConfig.model_validate(VALID_CONFIG)
    with pytest.raises(ValidationError):
        config.default_environment = "prod"  # type: ignore[misc]
