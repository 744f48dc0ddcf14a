"""Render is pure and valid: every manifest of examples/platform passes its CRD schema or
the client's model, and projecting the rendered objects gives the document back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import build_desired
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.jobs import DatasetInput, JobLaunch
from trainform.providers.kubernetes.jobs import job_environment, job_manifest, ledger_manifest
from trainform.providers.kubernetes.naming import Naming, dns_label, label_safe
from trainform.providers.kubernetes.placement import Placement
from trainform.providers.kubernetes.projection import by_role, canonical, project_document
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.specs import load_specs

from tests.providers.kubernetes.schemas import check_manifest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "platform"


def _resources(provider: KubernetesProvider) -> list[DesiredResource]:
    """The example's resources on gke-prod, each with its dependencies' outputs as the
    engine passes them after applying those (keyed by provider instance)."""
    desired = build_desired(load_specs(EXAMPLE))
    outputs: dict[str, dict[str, Any]] = {}
    resources = []
    for kind in ("Project", "ResourcePool", "Queue", "Quota", "TrainingJob"):
        for address, item in desired.items():
            if item.kind != kind or "gke-prod" not in item.providers:
                continue
            resource = DesiredResource(
                address,
                item.kind,
                item.name,
                item.project,
                item.document,
                {d: {"gke-prod": outputs[d]} for d in item.dependencies if d in outputs},
            )
            outputs[address] = provider._outputs(resource, provider.render(resource))
            resources.append(resource)
    return resources


@pytest.fixture(scope="module")
def provider() -> KubernetesProvider:
    provider = KubernetesProvider()
    provider.configure("gke-prod", {"namespacePrefix": "ml-"}, ProviderContext(EXAMPLE))
    return provider


@pytest.fixture(scope="module")
def resources(provider: KubernetesProvider) -> list[DesiredResource]:
    return _resources(provider)


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
        "Cohort",
        "ClusterQueue",
        "WorkloadPriorityClass",
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


def test_the_pretrain_queue_becomes_a_cohort_holding_its_quota(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    queue = next(r for r in resources if r.address == "Queue/pretrain")

    cohort, priority = provider.render(queue)

    spec = cohort["spec"]
    assert spec["parentName"] == "training"
    group = spec["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    gpu = group["flavors"][0]["resources"][2]
    assert gpu == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "96",
        "borrowingLimit": "32",
        "lendingLimit": "48",
    }
    assert spec["fairSharing"] == {"weight": "2"}
    assert priority["value"] == 1000


def test_a_quota_becomes_the_projects_cluster_queue_borrowing_at_most_its_limits(
    provider: KubernetesProvider, resources: list[DesiredResource]
) -> None:
    quota = next(r for r in resources if r.address == "Quota/llm-pretrain/eval")

    cluster_queue, local_queue = provider.render(quota)

    assert cluster_queue["metadata"]["name"] == "eval-llm-pretrain"
    spec = cluster_queue["spec"]
    assert spec["cohortName"] == "eval"
    assert spec["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "ml-llm-pretrain"}
    }
    [group] = spec["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert [f["name"] for f in group["flavors"]] == ["a100", "h100"]
    for flavor in group["flavors"]:
        assert flavor["resources"] == [
            {"name": "cpu", "nominalQuota": "0"},
            {"name": "memory", "nominalQuota": "0"},
            {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "16"},
        ]
    assert spec["queueingStrategy"] == "StrictFIFO"
    assert local_queue["metadata"]["namespace"] == "ml-llm-pretrain"
    assert local_queue["spec"] == {"clusterQueue": "eval-llm-pretrain"}


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
