"""Render is pure and valid: every manifest of examples/platform passes its CRD schema or
the client's model, and projecting the rendered objects gives the document back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.desired import build_desired
from providers.base import DesiredResource, ProviderContext
from providers.jobs import DatasetInput, JobLaunch
from providers.kubernetes.jobs import job_environment, job_manifest, ledger_manifest
from providers.kubernetes.naming import Naming, dns_label, label_safe
from providers.kubernetes.placement import Placement
from providers.kubernetes.projection import by_role, canonical, project_document
from providers.kubernetes.provider import KubernetesProvider
from specs import load_specs
from tests.providers.kubernetes.schemas import check_manifest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "platform"


def _resources() -> list[DesiredResource]:
    desired = build_desired(load_specs(EXAMPLE))
    return [
        DesiredResource(a, i.kind, i.name, i.project, i.document)
        for a, i in desired.items()
        if "gke-prod" in i.providers
    ]


@pytest.fixture(scope="module")
def provider() -> KubernetesProvider:
    provider = KubernetesProvider()
    provider.configure("gke-prod", {"namespacePrefix": "ml-"}, ProviderContext(EXAMPLE))
    return provider


@pytest.fixture(scope="module")
def resources() -> list[DesiredResource]:
    return _resources()


def test_every_rendered_manifest_is_valid(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    rendered = [m for r in resources for m in provider.render(r)]

    for manifest in rendered:
        check_manifest(manifest)
    assert {m["kind"] for m in rendered} == {
        "Namespace",
        "ResourceFlavor",
        "Topology",
        "ClusterQueue",
        "WorkloadPriorityClass",
        "PriorityClass",
        "ResourceQuota",
        "LocalQueue",
        "Job",
    }


def test_a_misspelt_field_fails_the_schema_check() -> None:
    manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {"cohort": "old-v1beta1-name"},
    }

    with pytest.raises(Exception, match="cohort"):
        check_manifest(manifest)


def test_projecting_the_rendered_objects_gives_the_document_back(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    for resource in resources:
        if resource.kind not in ("Project", "ResourcePool", "Queue", "Quota"):
            continue
        objects = by_role(provider.render(resource))

        live = project_document(resource.kind, resource.document, objects, provider.naming)

        assert live == resource.document, resource.address


def test_the_pretrain_queue_becomes_a_cluster_queue_with_kueue_fields(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    queue = next(r for r in resources if r.address == "Queue/pretrain")

    cluster_queue, priority, pod_priority = provider.render(queue)

    spec = cluster_queue["spec"]
    assert spec["cohortName"] == "training"
    group = spec["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    gpu = group["flavors"][0]["resources"][2]
    assert gpu == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "96",
        "borrowingLimit": "32",
        "lendingLimit": "48",
    }
    assert spec["preemption"]["borrowWithinCohort"] == {
        "policy": "LowerPriority",
        "maxPriorityThreshold": 500,
    }
    assert spec["fairSharing"] == {"weight": "2"}
    assert spec["namespaceSelector"]["matchExpressions"][0]["key"] == "trainform.dev/project"
    assert priority["value"] == pod_priority["value"] == 1000


def test_a_quota_becomes_a_quota_scoped_to_the_queue_a_local_queue_and_a_job_count(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    quota = next(r for r in resources if r.address == "Quota/llm-pretrain/pretrain")

    resource_quota, local_queue, job_count = provider.render(quota)

    assert resource_quota["metadata"]["namespace"] == "ml-llm-pretrain"
    assert resource_quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "96",
        "requests.cpu": "2400",
        "requests.memory": str(21600 * 2**30),
    }
    [scope] = resource_quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope == {"scopeName": "PriorityClass", "operator": "In", "values": ["pretrain"]}
    assert local_queue["metadata"]["name"] == "pretrain"
    assert local_queue["spec"] == {"clusterQueue": "pretrain"}
    assert job_count["metadata"]["name"] == "pretrain-jobs"
    assert job_count["spec"] == {"hard": {"count/jobs.batch": "2"}}


@pytest.mark.parametrize(
    ("spelled", "expected"),
    [
        pytest.param(64, "64", id="integer"),
        pytest.param("2k", "2000", id="decimal-suffix"),
        pytest.param("21600Gi", str(21600 * 2**30), id="binary-suffix"),
        pytest.param("500m", "0.5", id="milli"),
        pytest.param("not-a-quantity", "not-a-quantity", id="kept-as-is"),
    ],
)
def test_quantities_come_back_in_canonical_form(spelled: Any, expected: str) -> None:
    assert canonical(spelled) == expected


def _launch(**changes: Any) -> JobLaunch:
    fields: dict[str, Any] = dict(
        address="TrainingJob/vision/resnet",
        run_id="r-0123456789ab",
        attempt=2,
        kind="train",
        project="vision",
        queue="train",
        priority=100,
        command=["python", "train.py"],
        code_dir=None,
        parameters={"lr": 0.1},
        env={"EXTRA": "1"},
        datasets=[
            DatasetInput(
                "web-corpus",
                "Dataset/web-corpus",
                "v1",
                "sha256:" + "0" * 64,
                {"spec": {"source": "s3://data/web", "versions": [{"name": "v1"}]}},
            )
        ],
        cpu="16",
        memory=str(64 * 2**30),
        gpus=16,
        nodes=2,
        checkpoint_interval=600,
        keep_last=3,
        checkpoint_prefix="s3://ckpt/vision/resnet",
        resume_from="step-400",
        max_runtime=3600,
        image="registry.example.com/ml/train@sha256:" + "1" * 64,
    )
    fields.update(changes)
    return JobLaunch(**fields)


def test_an_attempt_becomes_a_suspended_indexed_job_labelled_for_kueue() -> None:
    job = job_manifest(Naming("trainform", "ml-"), _launch(), Placement(()), "train", 3600)

    check_manifest(job)
    spec = job["spec"]
    assert (spec["suspend"], spec["completionMode"]) == (True, "Indexed")
    assert spec["completions"] == spec["parallelism"] == 2
    assert spec["activeDeadlineSeconds"] == 3600
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "train"
    assert labels["kueue.x-k8s.io/priority-class"] == "train"
    assert labels["trainform.dev/run-id"] == "r-0123456789ab"
    assert job["metadata"]["annotations"]["trainform.dev/address"] == "TrainingJob/vision/resnet"
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert spec["template"]["spec"]["priorityClassName"] == "train"
    env = {e["name"]: e for e in container["env"]}
    assert env["TRAINFORM_NODES"]["value"] == "2"
    assert (
        "job-completion-index" in env["TRAINFORM_NODE_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    )


def test_the_job_environment_follows_the_checkpoint_layout() -> None:
    env = job_environment(_launch())

    assert env["TRAINFORM_CHECKPOINT_DIR"] == "s3://ckpt/vision/resnet/r-0123456789ab"
    assert env["TRAINFORM_RESUME_FROM"] == "s3://ckpt/vision/resnet/r-0123456789ab/step-400"
    assert env["TRAINFORM_RESUME_STEP"] == "400"
    assert env["TRAINFORM_DATASET_WEB_CORPUS_URI"] == "s3://data/web/v1"
    assert env["TRAINFORM_PARAM_LR"] == "0.1"
    assert env["EXTRA"] == "1"


def test_the_run_ledger_is_a_valid_config_map() -> None:
    check_manifest(ledger_manifest(Naming(), "TrainingJob/vision/resnet", "vision", []))


def test_names_and_label_values_stay_within_kubernetes_limits() -> None:
    long = "x" * 80 + "/Odd Name"

    assert len(dns_label(long)) <= 63 and dns_label(long) != dns_label(long + "2")
    assert len(label_safe(long)) == 16
    assert label_safe("TrainingJob") == "TrainingJob"
