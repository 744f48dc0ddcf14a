"""The kubernetes provider against the fake API server: drift, conflicts, safe deletes,
the impact of a lower quota, and import. Names are unique per test (prefixes)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from trainform.planner.drift import detect_drift
from trainform.planner.normalize import normalize_document
from trainform.planner.plan_model import Action
from trainform.providers.base import ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.kinds import (
    BY_KIND,
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    PRIORITY_CLASS,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
)
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.specs.models.kinds import KINDS

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import (
    INSTANCE,
    platform_folder,
    unique_prefix,
)
from tests.providers.kubernetes.schemas import check_manifest
from tests.services.kube_api import KubeAPI


@pytest.fixture
def applied(tmp_path: Path, kube_api: KubeAPI) -> Iterator[tuple[SpecFolder, str]]:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, prefix))
    folder.converge()
    yield folder, prefix
    folder.close()


@pytest.fixture
def provider(applied: tuple[SpecFolder, str]) -> KubernetesProvider:
    found = applied[0].providers().get(INSTANCE)
    assert isinstance(found, KubernetesProvider)
    return found


def _kubectl_edit_gpu_quota(provider: KubernetesProvider, name: str, value: str) -> None:
    """What `kubectl edit cohort` does: a merge patch by another field manager."""
    queue = provider.client.get(COHORT, name)
    assert queue is not None
    groups = queue["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][2]["nominalQuota"] = value
    provider.client.merge_patch(
        COHORT, name, None, {"spec": {"resourceGroups": groups}}, "kubectl-edit"
    )


def test_a_kubectl_edit_of_a_quota_is_drift_and_apply_restores_it_when_allowed_to_force(
    applied: tuple[SpecFolder, str], provider: KubernetesProvider, kube_api: KubeAPI
) -> None:
    folder, prefix = applied
    _kubectl_edit_gpu_quota(provider, f"{prefix}train", "48")

    report = detect_drift(folder.state(), folder.providers())

    [finding] = [f for f in report.findings if f.address == "Queue/train"]
    [change] = finding.changes
    assert (change.path, change.before, change.after) == (
        "spec.pools[0].nominalQuota.gpu",
        "32",
        "48",
    )
    evidence = finding.evidence  # who and when, from the Cohort's managedFields
    assert (evidence["changedBy"], evidence["operation"]) == ("kubectl-edit", "Update")
    assert evidence["object"] == f"Cohort {prefix}train"
    assert evidence["changedAt"].startswith(str(datetime.now(UTC).year))
    plan = folder.plan(refresh=True)
    [update] = [c for c in plan.actionable if c.address == "Queue/train"]
    assert update.action is Action.UPDATE
    result = folder.apply(plan)
    assert result.failed
    [failure] = [o for o in result.outcomes if o.address == "Queue/train"]
    assert "kubectl-edit" in failure.message and "forceConflicts" in failure.message

    _annotate(folder.root, "Queue", "train", {"trainform.dev/force-conflicts": "true"})
    folder.converge(refresh=True)

    assert not detect_drift(folder.state(), folder.providers()).findings
    live = provider.client.get(COHORT, f"{prefix}train")
    assert live is not None
    nominal = {
        r["name"]: r["nominalQuota"]
        for r in live["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    }
    assert str(nominal["nvidia.com/gpu"]) == "32"


def _annotate(root: Path, kind: str, name: str, annotations: dict[str, str]) -> None:
    """Add annotations to the spec document `kind`/`name`, wherever it is declared."""
    for path in sorted(root.rglob("*.yaml")):
        if path.name == "trainform.yaml":
            continue
        documents = list(yaml.safe_load_all(path.read_text()))
        hit = [d for d in documents if d and d["kind"] == kind and d["metadata"]["name"] == name]
        if hit:
            hit[0]["metadata"].setdefault("annotations", {}).update(annotations)
            path.write_text(yaml.safe_dump_all(documents))
            return
    raise AssertionError(f"{kind}/{name} is not declared under {root}")


def test_a_deleted_local_queue_shows_the_quota_as_drifted(
    applied: tuple[SpecFolder, str], provider: KubernetesProvider
) -> None:
    folder, prefix = applied
    assert provider.client.delete(LOCAL_QUEUE, "train", f"{prefix}vision")

    report = detect_drift(folder.state(), folder.providers())

    [finding] = [f for f in report.findings if f.drift == "modified"]
    assert finding.address == "Quota/vision/train"
    assert [(c.path, c.before, c.after) for c in finding.changes] == [("spec.queue", "train", None)]
    [missing] = [f for f in report.findings if f.drift == "object-missing"]
    assert f"LocalQueue {prefix}vision/train is gone" in missing.message
    folder.converge(refresh=True)
    assert provider.client.get(LOCAL_QUEUE, "train", f"{prefix}vision") is not None


def test_a_projects_queue_is_drained_before_it_is_deleted_and_another_managers_is_refused(
    applied: tuple[SpecFolder, str], provider: KubernetesProvider, kube_api: KubeAPI
) -> None:
    folder, prefix = applied
    outputs = folder.state().resources["Quota/vision/train"].outputs[INSTANCE]  # type: ignore[union-attr]
    kube_api.reset_requests()

    provider.delete("Quota/vision/train", "Quota", outputs)

    writes = [(r.method, r.path) for r in kube_api.requests if r.method in ("PATCH", "DELETE")]
    queue_path = f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{prefix}train-vision"
    assert writes.index(("PATCH", queue_path)) < writes.index(("DELETE", queue_path))
    assert provider.client.get(CLUSTER_QUEUE, f"{prefix}train-vision") is None
    stranger = KubernetesProvider(provider.client)
    stranger.naming = provider.naming.__class__("someone-else", prefix, prefix)
    with pytest.raises(PermanentProviderError, match="not this trainform's"):
        stranger.delete("Project/vision", "Project", {})


def _admitted_workload(namespace: str, name: str, queue: str, flavor: str, gpus: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "train",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }, {
        "status": {
            "admission": {
                "clusterQueue": queue,
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"nvidia.com/gpu": flavor},
                        "resourceUsage": {"nvidia.com/gpu": gpus},
                        "count": 1,
                    }
                ],
            },
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }


def test_a_lower_quota_lists_the_admitted_workloads_it_leaves_over_quota(
    applied: tuple[SpecFolder, str], provider: KubernetesProvider
) -> None:
    folder, prefix = applied
    namespace = f"{prefix}vision"
    for name, gpus in (("big", "24"), ("small", "12")):
        workload, status = _admitted_workload(
            namespace, name, f"{prefix}train-vision", f"{prefix}h100", gpus
        )
        check_manifest({**workload, **status})
        provider.client.apply(workload, "kueue-controller", False)
        provider.client.merge_patch(WORKLOAD, name, namespace, status, "kueue", "status")
    folder.edit("platform.yaml", "nominalQuota: {gpu: 32,", "nominalQuota: {gpu: 16,")

    plan = folder.plan(refresh=True)

    [change] = [c for c in plan.actionable if c.address == "Queue/train"]
    impact = [r for r in change.reasons if "exceeds the new quota" in r]
    assert impact == [
        f"{namespace}/big: uses gpu 24 of pool h100; admitted total 36 exceeds the new "
        "quota 24 (Kueue may evict it)",
        f"{namespace}/small: uses gpu 12 of pool h100; admitted total 36 exceeds the new "
        "quota 24 (Kueue may evict it)",
    ]


def test_imported_objects_plan_no_change(tmp_path: Path, kube_api: KubeAPI) -> None:
    """Objects made by hand (another tool) are discovered as specs, adopted, and then
    observe projects them back onto exactly the discovered documents."""
    prefix = unique_prefix()
    source = SpecFolder(platform_folder(tmp_path / "source", kube_api, prefix))
    source.converge()
    made = source.providers().get(INSTANCE)
    assert isinstance(made, KubernetesProvider)
    state = source.state()
    assert state is not None
    for resource in state.resources.values():  # strip trainform's marks: made by hand now
        for entry in resource.outputs[INSTANCE]["objects"]:
            api = BY_KIND[entry["kind"]]
            made.client.merge_patch(
                api,
                entry["name"],
                entry.get("namespace"),
                {"metadata": {"labels": {"trainform.dev/manager": None}, "annotations": None}},
                "kubectl",
            )
    importer = SpecFolder(platform_folder(tmp_path / "importer", kube_api, prefix, ""))
    provider = importer.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)

    found = provider.discover()

    assert {d.identifier for d in found} >= {
        f"ResourceFlavor/{prefix}h100",
        f"Cohort/{prefix}train",
        f"LocalQueue/{prefix}vision/train",
        f"Namespace/{prefix}vision",
    }
    for item in found:
        document = item.document
        normalized = normalize_document(KINDS[document["kind"]].model_validate(document))
        name = document["metadata"]["name"]
        project = document["metadata"].get("project")
        address = "/".join([document["kind"], *([project] if project else []), name])
        request = ObserveRequest(address, document["kind"], name, project, normalized)
        kube_api.reset_requests()
        observation = provider.adopt(request, item.identifier)
        assert {r.method for r in kube_api.requests} == {"GET"}, address  # import only reads
        assert observation.exists, address
        assert observation.live == normalized, address
        recorded = ObserveRequest(
            address, document["kind"], name, project, normalized, observation.outputs
        )
        again = provider.observe([recorded])[address]  # later refreshes find it unmarked
        assert (again.exists, again.live) == (True, normalized), address
        assert not again.findings, address
    importer.close()
    source.close()


def test_an_imported_object_is_marked_by_its_first_update_only(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    """`trainform import` writes nothing; the plan after it is empty; the first planned
    update of the resource takes the object over (trainform's marks and fields)."""
    prefix = unique_prefix()
    source = SpecFolder(platform_folder(tmp_path / "source", kube_api, prefix))
    source.converge()
    made = source.providers().get(INSTANCE)
    assert isinstance(made, KubernetesProvider)
    made.client.merge_patch(
        COHORT,
        f"{prefix}train",
        None,
        {"metadata": {"labels": {"trainform.dev/manager": None}, "annotations": None}},
        "kubectl",
    )
    importer = SpecFolder(platform_folder(tmp_path / "importer", kube_api, prefix))
    kube_api.reset_requests()

    result = run_trainform("import", "Queue/train", f"Cohort/{prefix}train", cwd=importer.root)

    assert result.returncode == 0, result.stdout + result.stderr
    assert {r.method for r in kube_api.requests} == {"GET"}
    live = made.client.get(COHORT, f"{prefix}train")
    assert live is not None and "trainform.dev/manager" not in live["metadata"]["labels"]
    plan = importer.plan(refresh=True, targets=("Queue/train",))
    assert [c.address for c in plan.actionable if c.address == "Queue/train"] == []

    importer.edit("platform.yaml", "defaultPriority: 100", "defaultPriority: 200")
    importer.converge(refresh=True, targets=("Queue/train",))

    marked = made.client.get(COHORT, f"{prefix}train")
    assert marked is not None and made.naming.owns(marked, "Queue/train")
    assert not [
        f
        for f in detect_drift(importer.state(), importer.providers()).findings
        if f.address == "Queue/train"
    ]
    importer.close()
    source.close()


def test_destroying_deletes_quotas_then_queues_then_pools_and_drains_queues_first(
    applied: tuple[SpecFolder, str], kube_api: KubeAPI
) -> None:
    folder, prefix = applied
    kube_api.reset_requests()

    result = folder.apply(folder.plan(destroy=True, allow_mass_delete=True), parallelism=1)

    assert not result.failed, result.outcomes
    writes = [(r.method, r.path.rsplit("/", 2)[-2]) for r in kube_api.requests if r.method != "GET"]
    order = [plural for method, plural in writes if method == "DELETE"]
    assert order.index("localqueues") < order.index("clusterqueues")
    assert order.index("clusterqueues") < order.index("resourceflavors")
    assert order.index("resourceflavors") < order.index("topologies")
    assert writes.index(("PATCH", "clusterqueues")) < writes.index(("DELETE", "clusterqueues"))
    assert _provider_lists_nothing(folder)


def _provider_lists_nothing(folder: SpecFolder) -> bool:
    provider = folder.providers().get(INSTANCE)
    return provider.list_owned() == []


def test_a_new_default_priority_updates_the_workload_priority_class_and_no_pod_class(
    applied: tuple[SpecFolder, str], provider: KubernetesProvider
) -> None:
    folder, prefix = applied
    before = provider.client.get(WORKLOAD_PRIORITY_CLASS, f"{prefix}train")
    folder.edit("platform.yaml", "defaultPriority: 100", "defaultPriority: 200")

    folder.converge()

    after = provider.client.get(WORKLOAD_PRIORITY_CLASS, f"{prefix}train")
    assert before is not None and after is not None
    assert (before["value"], after["value"]) == (100, 200)
    assert before["metadata"]["uid"] == after["metadata"]["uid"]
    assert provider.client.get(PRIORITY_CLASS, f"{prefix}train") is None
    assert not folder.plan().has_changes
