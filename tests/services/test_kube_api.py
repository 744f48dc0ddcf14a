"""The fake Kubernetes API server, driven by the official kubernetes client and by kubectl."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, dynamic, watch
from kubernetes.client.rest import ApiException

from tests.services.common import unavailable
from tests.services.kube_api import KubeAPI
from tests.services.kube_api.errors import ApiError
from tests.services.kube_api.fields import apply as apply_fields
from tests.services.kube_api.patch import json_patch, merge_patch, strategic_merge_patch
from tests.services.kube_api.selectors import label_matcher

KUEUE = "kueue.x-k8s.io"
V = "v1beta2"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module", autouse=True)
def leave_the_shared_server_as_found(kube_api: KubeAPI) -> Iterator[None]:  # noqa: F811
    """Other modules share the session server: delete what these tests created."""
    before = kube_api.snapshot()
    yield
    kube_api.delete_created_since(before)


@pytest.fixture
def api_client(kube_api: KubeAPI) -> Iterator[client.ApiClient]:  # noqa: F811
    with client.ApiClient(kube_api.configuration()) as api:
        yield api


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    name = unique("ns")
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as error:
        if error.status != 404:
            raise


def cluster_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {"namespaceSelector": {}, **spec},
    }


def error_body(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


@pytest.mark.parametrize(
    "path", ["/apis", "/apis/", "/api/v1", "/api/v1/", f"/apis/{KUEUE}/{V}", f"/apis/{KUEUE}/{V}/"]
)
def test_discovery_answers_with_and_without_trailing_slash(
    api_client: client.ApiClient, path: str
) -> None:
    response = api_client.call_api(*api_client.param_serialize("GET", path))
    response.read()
    assert response.status == 200
    body = json.loads(response.data)
    assert body["kind"] in ("APIGroupList", "APIResourceList")


def test_discovery_lists_kueue_kinds_from_the_crd_files(api_client: client.ApiClient) -> None:
    resources = client.ApisApi(api_client).get_api_versions()
    kueue = next(g for g in resources.groups if g.name == KUEUE)
    assert kueue.preferred_version.version == "v1beta2"
    listed = client.CustomObjectsApi(api_client).get_api_resources(KUEUE, V)
    by_name = {r.name: r for r in listed.resources}
    assert by_name["clusterqueues"].kind == "ClusterQueue"
    assert not by_name["clusterqueues"].namespaced
    assert by_name["localqueues"].namespaced
    assert "clusterqueues/status" in by_name
    assert "resourceflavors/status" not in by_name  # no status subresource in its CRD
    assert "cq" in by_name["clusterqueues"].short_names


def test_namespace_create_get_list_delete(api_client: client.ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    name = unique("ns")
    created = core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"x": "y"}))
    )
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Active"
    assert core.read_namespace(name).metadata.labels["x"] == "y"
    names = [n.metadata.name for n in core.list_namespace(label_selector="x=y").items]
    assert name in names and "default" not in names
    core.delete_namespace(name)
    with pytest.raises(ApiException) as caught:
        core.read_namespace(name)
    assert caught.value.status == 404


def test_duplicate_create_answers_409_already_exists(custom: client.CustomObjectsApi) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    with pytest.raises(ApiException) as caught:
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    body = error_body(caught.value)
    assert caught.value.status == 409
    assert body["kind"] == "Status" and body["reason"] == "AlreadyExists"
    assert body["details"] == {"name": name, "group": KUEUE, "kind": "clusterqueues"}


def test_get_of_a_missing_object_is_a_404_status(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as caught:
        custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", "absent")
    assert caught.value.status == 404
    body = error_body(caught.value)
    assert (body["status"], body["reason"], body["code"]) == ("Failure", "NotFound", 404)
    assert body["message"] == f'clusterqueues.{KUEUE} "absent" not found'


def test_create_sets_server_fields(custom: client.CustomObjectsApi) -> None:
    created = custom.create_cluster_custom_object(
        KUEUE, V, "clusterqueues", {**cluster_queue(unique("cq")), "status": {"x": 1}}
    )
    metadata = created["metadata"]
    assert metadata["generation"] == 1 and metadata["uid"] and metadata["creationTimestamp"]
    assert int(metadata["resourceVersion"]) > 0
    assert "status" not in created  # the status subresource ignores status on create


def test_list_filters_by_label_selector(custom: client.CustomObjectsApi) -> None:
    tag = unique("t")
    for index, tier in enumerate(["gold", "silver", "bronze"]):
        body = cluster_queue(f"{tag}-{index}")
        body["metadata"]["labels"] = {"run": tag, "tier": tier}
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)

    def names(selector: str) -> list[str]:
        listed = custom.list_cluster_custom_object(
            KUEUE, V, "clusterqueues", label_selector=selector
        )
        assert listed["kind"] == "ClusterQueueList"
        return [item["metadata"]["name"] for item in listed["items"]]

    assert names(f"run={tag},tier=gold") == [f"{tag}-0"]
    assert names(f"run=={tag},tier!=gold") == [f"{tag}-1", f"{tag}-2"]
    assert names(f"run={tag},tier in (gold,bronze)") == [f"{tag}-0", f"{tag}-2"]
    assert names(f"run={tag},tier notin (gold)") == [f"{tag}-1", f"{tag}-2"]
    assert names(f"run={tag},!absent") == [f"{tag}-0", f"{tag}-1", f"{tag}-2"]
    assert names(f"run={tag},absent") == []


def test_list_pages_with_limit_and_continue(custom: client.CustomObjectsApi) -> None:
    tag = unique("p")
    for index in range(5):
        body = cluster_queue(f"{tag}-{index}")
        body["metadata"]["labels"] = {"page": tag}
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    seen: list[str] = []
    token = None
    while True:
        page = custom.list_cluster_custom_object(
            KUEUE, V, "clusterqueues", label_selector=f"page={tag}", limit=2, _continue=token
        )
        seen += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert seen == [f"{tag}-{index}" for index in range(5)]


def test_merge_and_json_patch_bump_generation_only_on_spec_change(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    labelled = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"metadata": {"labels": {"extra": "1"}}}
    )
    assert labelled["metadata"]["generation"] == 1
    assert labelled["metadata"]["labels"] == {"team": "a", "extra": "1"}
    merged = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"spec": {"cohortName": "all"}}
    )
    assert merged["spec"]["cohortName"] == "all" and merged["metadata"]["generation"] == 2
    patched = custom.patch_cluster_custom_object(
        KUEUE,
        V,
        "clusterqueues",
        name,
        [{"op": "replace", "path": "/spec/cohortName", "value": "other"}],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["cohortName"] == "other" and patched["metadata"]["generation"] == 3
    status = custom.patch_cluster_custom_object_status(
        KUEUE, V, "clusterqueues", name, {"status": {"pendingWorkloads": 4}}
    )
    assert status["status"] == {"pendingWorkloads": 4}
    assert status["metadata"]["generation"] == 3
    ignored = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"status": {"pendingWorkloads": 9}}
    )
    assert ignored["status"] == {"pendingWorkloads": 4}


def test_put_with_a_stale_resource_version_is_a_409_conflict(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    first = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    first["spec"]["cohortName"] = "a"
    replaced = custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", name, first)
    assert replaced["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    first["spec"]["cohortName"] = "b"
    with pytest.raises(ApiException) as caught:
        custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", name, first)
    assert caught.value.status == 409
    assert error_body(caught.value)["reason"] == "Conflict"


def test_local_queue_lives_in_an_existing_namespace(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    body = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "labels": {"q": "1"}},
        "spec": {"clusterQueue": "cq"},
    }
    created = custom.create_namespaced_custom_object(KUEUE, V, namespace, "localqueues", body)
    assert created["metadata"]["namespace"] == namespace
    listed = custom.list_cluster_custom_object(KUEUE, V, "localqueues", label_selector="q=1")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]] == [
        (namespace, "lq")
    ]
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(KUEUE, V, unique("nowhere"), "localqueues", body)
    assert caught.value.status == 404
    assert error_body(caught.value)["details"]["kind"] == "namespaces"


def test_deleting_a_namespace_deletes_its_objects(
    api_client: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    name = unique("ns")
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    body = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": {"name": "lq"},
        "spec": {"clusterQueue": "cq"},
    }
    custom.create_namespaced_custom_object(KUEUE, V, name, "localqueues", body)
    core.delete_namespace(name)
    with pytest.raises(ApiException) as caught:
        custom.get_namespaced_custom_object(KUEUE, V, name, "localqueues", "lq")
    assert caught.value.status == 404


def test_server_side_apply_creates_then_updates(custom: client.CustomObjectsApi) -> None:
    name = unique("cq")
    _, code, _ = custom.patch_cluster_custom_object_with_http_info(
        KUEUE,
        V,
        "clusterqueues",
        name,
        cluster_queue(name, cohortName="x"),
        field_manager="trainform",
        _content_type="application/apply-patch+yaml",
    )
    assert code == 201
    # kubernetes 37 only deserializes the status codes an operation declares (200 for
    # patch), so the plain call returns None for an apply that created the object.
    other = unique("cq")
    plain = custom.patch_cluster_custom_object(
        KUEUE,
        V,
        "clusterqueues",
        other,
        cluster_queue(other),
        field_manager="trainform",
        _content_type="application/apply-patch+yaml",
    )
    assert plain is None
    stored = custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", other)["spec"]
    assert stored["namespaceSelector"] == {} and "cohortName" not in stored
    assert stored["queueingStrategy"] == "BestEffortFIFO"  # the CRD's default, filled in
    updated, code, _ = custom.patch_cluster_custom_object_with_http_info(
        KUEUE,
        V,
        "clusterqueues",
        name,
        cluster_queue(name, cohortName="y"),
        field_manager="trainform",
        _content_type="application/apply-patch+yaml",
    )
    assert code == 200 and updated["spec"]["cohortName"] == "y"
    managers = {e["manager"]: e for e in updated["metadata"]["managedFields"]}
    assert managers["trainform"]["operation"] == "Apply"
    assert managers["trainform"]["fieldsV1"]["f:spec"]["f:cohortName"] == {}


def test_dynamic_client_finds_kueue_kinds(api_client: client.ApiClient) -> None:
    dyn = dynamic.DynamicClient(api_client)
    queues = dyn.resources.get(api_version=f"{KUEUE}/{V}", kind="ClusterQueue")
    name = unique("cq")
    queues.create(body=cluster_queue(name))
    assert queues.get(name=name).metadata.name == name
    local = dyn.resources.get(api_version=f"{KUEUE}/{V}", kind="LocalQueue")
    assert local.namespaced
    queues.delete(name=name)
    with pytest.raises(dynamic.exceptions.NotFoundError):
        queues.get(name=name)


@pytest.fixture
def kubectl(kube_api: KubeAPI) -> Any:  # noqa: F811
    """Run kubectl against the server; answer its stdout (a non-zero exit fails the test)."""
    program = shutil.which("kubectl")
    if program is None:
        unavailable("kubectl is not on PATH")

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [program, "--kubeconfig", str(kube_api.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def test_kubectl_applies_gets_and_deletes(kubectl: Any, tmp_path: Path) -> None:
    run = kubectl
    name = unique("cq")
    manifest = tmp_path / "cq.yaml"
    manifest.write_text(json.dumps(cluster_queue(name, cohortName="all")))
    run("apply", "-f", str(manifest), "--server-side", "--field-manager", "x")
    listed = json.loads(run("get", "clusterqueues", "-o", "json"))
    assert name in [item["metadata"]["name"] for item in listed["items"]]
    run("delete", "-f", str(manifest))
    listed = json.loads(run("get", "clusterqueues", "-o", "json"))
    assert name not in [item["metadata"]["name"] for item in listed["items"]]


def apply_cq(
    custom: client.CustomObjectsApi, body: dict[str, Any], manager: str, force: bool = False
) -> dict[str, Any]:
    data, _, _ = custom.patch_cluster_custom_object_with_http_info(
        KUEUE,
        V,
        "clusterqueues",
        body["metadata"]["name"],
        body,
        field_manager=manager,
        force=force,
        _content_type="application/apply-patch+yaml",
    )
    return data  # type: ignore[no-any-return]


def test_apply_conflicts_between_managers_unless_forced(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    apply_cq(custom, cluster_queue(name, cohortName="a"), "first")
    shared = apply_cq(custom, cluster_queue(name, cohortName="a"), "second")  # same value: shared
    assert {e["manager"] for e in shared["metadata"]["managedFields"]} == {"first", "second"}
    with pytest.raises(ApiException) as caught:
        apply_cq(custom, cluster_queue(name, cohortName="b"), "second")
    body = error_body(caught.value)
    assert caught.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "first": .spec.cohortName'  # an applier
    )
    assert body["details"]["causes"][0]["field"] == ".spec.cohortName"
    forced = apply_cq(custom, cluster_queue(name, cohortName="b"), "second", force=True)
    assert forced["spec"]["cohortName"] == "b"
    owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert "f:cohortName" not in owners["first"].get("f:spec", {})


def test_apply_removes_fields_the_manager_stopped_applying(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    apply_cq(custom, cluster_queue(name, cohortName="a", queueingStrategy="StrictFIFO"), "mgr")
    applied = apply_cq(custom, cluster_queue(name, queueingStrategy="StrictFIFO"), "mgr")
    assert "cohortName" not in applied["spec"]
    assert applied["metadata"]["generation"] == 2
    again = apply_cq(custom, cluster_queue(name, queueingStrategy="StrictFIFO"), "mgr")
    assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


def test_apply_requires_a_field_manager(custom: client.CustomObjectsApi) -> None:
    name = unique("cq")
    with pytest.raises(ApiException) as caught:
        custom.patch_cluster_custom_object(
            KUEUE,
            V,
            "clusterqueues",
            name,
            cluster_queue(name),
            _content_type="application/apply-patch+yaml",
        )
    assert caught.value.status == 400
    assert "fieldManager" in error_body(caught.value)["message"]


def test_strategic_merge_patch_is_refused_for_custom_resources(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    with pytest.raises(ApiException) as caught:
        custom.patch_cluster_custom_object(
            KUEUE,
            V,
            "clusterqueues",
            name,
            {"spec": {"cohortName": "x"}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415


def test_failed_json_patch_test_is_a_422_and_changes_nothing(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    with pytest.raises(ApiException) as caught:
        custom.patch_cluster_custom_object(
            KUEUE,
            V,
            "clusterqueues",
            name,
            [
                {"op": "test", "path": "/spec/cohortName", "value": "nope"},
                {"op": "add", "path": "/spec/cohortName", "value": "x"},
            ],
            _content_type="application/json-patch+json",
        )
    assert caught.value.status == 422
    assert (
        "cohortName"
        not in custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)["spec"]
    )


def test_dry_run_answers_but_stores_nothing(custom: client.CustomObjectsApi) -> None:
    name = unique("cq")
    answered = custom.create_cluster_custom_object(
        KUEUE, V, "clusterqueues", cluster_queue(name), dry_run="All"
    )
    assert answered["metadata"]["name"] == name
    with pytest.raises(ApiException):
        custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    stored = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    patched = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"spec": {"cohortName": "dry"}}, dry_run="All"
    )
    assert patched["spec"]["cohortName"] == "dry"
    stored["spec"]["cohortName"] = "dry-put"
    custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", name, stored, dry_run="All")
    applied = cluster_queue(name, cohortName="dry-apply")
    custom.patch_cluster_custom_object(
        KUEUE,
        V,
        "clusterqueues",
        name,
        applied,
        field_manager="m",
        dry_run="All",
        _content_type="application/apply-patch+yaml",
    )
    custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", name, dry_run="All")
    now = custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    assert now["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert "cohortName" not in now["spec"]


def test_job_status_patch_changes_only_status(api_client: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(api_client)
    job = client.V1Job(
        metadata=client.V1ObjectMeta(name="train", labels={"kueue.x-k8s.io/queue-name": "lq"}),
        spec=client.V1JobSpec(
            suspend=True,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="busybox")],
                )
            ),
        ),
    )
    created = batch.create_namespaced_job(namespace, job)
    assert created.metadata.generation == 1
    patched = batch.patch_namespaced_job_status(
        "train", namespace, {"status": {"active": 1}, "spec": {"suspend": False}}
    )
    assert patched.status.active == 1
    assert patched.spec.suspend is True and patched.metadata.generation == 1
    resumed = batch.patch_namespaced_job("train", namespace, {"spec": {"suspend": False}})
    assert resumed.spec.suspend is False and resumed.metadata.generation == 2
    assert resumed.status.active == 1
    batch.delete_namespaced_job("train", namespace, propagation_policy="Background")
    with pytest.raises(ApiException) as caught:
        batch.read_namespaced_job("train", namespace)
    assert caught.value.status == 404


def test_put_of_a_custom_resource_needs_a_resource_version(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    with pytest.raises(ApiException) as caught:
        custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", name, cluster_queue(name))
    assert caught.value.status == 422


def test_deprecated_version_serves_the_same_object_with_a_warning(
    api_client: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    old, _, headers = custom.get_cluster_custom_object_with_http_info(
        KUEUE, "v1beta1", "clusterqueues", name
    )
    assert old["apiVersion"] == f"{KUEUE}/v1beta1"
    assert old["spec"] == custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)["spec"]
    assert old["spec"]["namespaceSelector"] == {}
    assert "deprecated" in headers["Warning"]


def test_field_selector_and_delete_collection(
    custom: client.CustomObjectsApi, namespace: str
) -> None:
    for name in ("a", "b", "c"):
        custom.create_namespaced_custom_object(
            KUEUE,
            V,
            namespace,
            "localqueues",
            {
                "apiVersion": f"{KUEUE}/{V}",
                "kind": "LocalQueue",
                "metadata": {"name": name},
                "spec": {"clusterQueue": "cq"},
            },
        )
    picked = custom.list_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", field_selector="metadata.name=b"
    )
    assert [i["metadata"]["name"] for i in picked["items"]] == ["b"]
    custom.delete_collection_namespaced_custom_object(
        KUEUE, V, namespace, "localqueues", field_selector="metadata.name!=b"
    )
    left = custom.list_namespaced_custom_object(KUEUE, V, namespace, "localqueues")
    assert [i["metadata"]["name"] for i in left["items"]] == ["b"]


def test_finalizers_hold_an_object_until_removed(custom: client.CustomObjectsApi) -> None:
    name = unique("cq")
    body = cluster_queue(name)
    body["metadata"]["finalizers"] = ["example.com/hold"]
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    marked = custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    assert marked["metadata"]["deletionTimestamp"]
    assert custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as caught:
        custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    assert caught.value.status == 404


def test_request_log_records_method_path_and_query(
    kube_api: KubeAPI,  # noqa: F811
    custom: client.CustomObjectsApi,
) -> None:
    kube_api.reset_requests()
    custom.list_cluster_custom_object(KUEUE, V, "clusterqueues", label_selector="a=b")
    assert kube_api.count("GET", f"/apis/{KUEUE}/{V}/clusterqueues") == 1
    [record] = kube_api.requests
    assert record.query == {"labelSelector": "a=b"} and record.status == 200


def test_kubeconfig_loads_with_the_python_client(kube_api: KubeAPI) -> None:  # noqa: F811
    from kubernetes import config

    with config.new_client_from_config(config_file=str(kube_api.kubeconfig)) as api:
        names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    assert "default" in names


def test_a_deleted_crd_takes_its_kind_out_of_discovery(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path)
    try:
        with client.ApiClient(server.configuration()) as api:
            extensions = client.ApiextensionsV1Api(api)
            crd = extensions.read_custom_resource_definition(f"cohorts.{KUEUE}")
            assert crd.status.conditions[-1].type == "Established"
            objects = client.CustomObjectsApi(api)
            objects.create_cluster_custom_object(
                KUEUE,
                V,
                "cohorts",
                {"apiVersion": f"{KUEUE}/{V}", "kind": "Cohort", "metadata": {"name": "c"}},
            )
            extensions.delete_custom_resource_definition(f"cohorts.{KUEUE}")
            listed = objects.get_api_resources(KUEUE, V)
            assert "cohorts" not in [r.name for r in listed.resources]
            with pytest.raises(ApiException) as caught:
                objects.list_cluster_custom_object(KUEUE, V, "cohorts")
            assert caught.value.status == 404
    finally:
        server.stop()


def test_kubectl_client_side_apply_wait_and_table(
    kubectl: Any, custom: client.CustomObjectsApi
) -> None:
    name = unique("cq")
    body = cluster_queue(name, cohortName="one")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    assert "created" in kubectl("apply", "-f", "-", stdin=json.dumps(body))
    body["spec"]["cohortName"] = "two"
    assert "configured" in kubectl("apply", "-f", "-", stdin=json.dumps(body))
    assert (
        custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)["spec"]["cohortName"]
        == "two"
    )
    header, row = kubectl("get", "clusterqueues", name).splitlines()
    assert header.split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]  # the CRD's columns
    assert row.split() == [name, "two"]

    def later() -> None:
        time.sleep(0.3)
        custom.patch_cluster_custom_object_status(
            KUEUE,
            V,
            "clusterqueues",
            name,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Ready",
                            "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ]
                }
            },
        )
        time.sleep(0.3)
        custom.patch_cluster_custom_object(
            KUEUE, V, "clusterqueues", name, {"metadata": {"finalizers": None}}
        )

    helper = threading.Thread(target=later)
    helper.start()
    try:
        kubectl("wait", "--for=condition=Active", f"clusterqueue/{name}", "--timeout=20s")
        kubectl("delete", "clusterqueue", name, "--timeout=20s")  # waits for the finalizer
    finally:
        helper.join()
    with pytest.raises(ApiException):
        custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)


def test_watch_streams_added_modified_deleted(custom: client.CustomObjectsApi) -> None:
    name = unique("rf")
    body = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": {"w": name}},
    }
    custom.create_cluster_custom_object(KUEUE, V, "resourceflavors", body)

    def later() -> None:
        time.sleep(0.2)
        custom.patch_cluster_custom_object(
            KUEUE, V, "resourceflavors", name, {"spec": {"nodeLabels": {"a": "b"}}}
        )
        custom.delete_cluster_custom_object(KUEUE, V, "resourceflavors", name)

    helper = threading.Thread(target=later)
    helper.start()
    seen = []
    watcher = watch.Watch()
    for event in watcher.stream(
        custom.list_cluster_custom_object,
        KUEUE,
        V,
        "resourceflavors",
        label_selector=f"w={name}",
        timeout_seconds=10,
    ):
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if event["type"] == "DELETED":
            watcher.stop()
    helper.join()
    assert seen == [("ADDED", name), ("MODIFIED", name), ("DELETED", name)]


def test_strategic_merge_patch_merges_containers_by_name(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(name="a", image="one"),
                client.V1Container(name="b", image="two"),
            ]
        ),
    )
    core.create_namespaced_pod(namespace, pod)
    patched = core.patch_namespaced_pod(
        "p",
        namespace,
        {"spec": {"containers": [{"name": "b", "image": "three"}]}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "one"), ("b", "three")]


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param("a=1", True, id="equals"),
        pytest.param("a==2", False, id="double-equals"),
        pytest.param("a!=2", True, id="not-equals"),
        pytest.param("missing!=2", True, id="not-equals-matches-absent-key"),
        pytest.param("a in (1,2)", True, id="in"),
        pytest.param("a notin (1)", False, id="notin"),
        pytest.param("missing notin (1)", True, id="notin-matches-absent-key"),
        pytest.param("a", True, id="exists"),
        pytest.param("!a", False, id="does-not-exist"),
        pytest.param("a>0,a<2", True, id="greater-and-less"),
        pytest.param("app.kubernetes.io/name=q, b in (x, y)", True, id="prefixed-key-and-set"),
    ],
)
def test_label_selector_requirements(selector: str, matches: bool) -> None:
    obj = {"metadata": {"labels": {"a": "1", "b": "x", "app.kubernetes.io/name": "q"}}}
    assert label_matcher(selector)(obj) is matches


@pytest.mark.parametrize("selector", ["a in b", "a b", "=b", "a in ()", "a>x", "a=(b)"])
def test_malformed_label_selector_is_a_bad_request(selector: str) -> None:
    with pytest.raises(ApiError) as caught:
        label_matcher(selector)
    assert caught.value.code == 400


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3]}
    assert merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "l": [3]}


def test_json_patch_follows_rfc_6902() -> None:
    target = {"foo": ["bar", "baz"], "x": {"y": 1}}
    operations = [
        {"op": "add", "path": "/foo/1", "value": "qux"},
        {"op": "add", "path": "/foo/-", "value": "end"},
        {"op": "remove", "path": "/foo/0"},
        {"op": "replace", "path": "/x/y", "value": 2},
        {"op": "copy", "from": "/x", "path": "/copied"},
        {"op": "move", "from": "/copied/y", "path": "/moved"},
        {"op": "test", "path": "/moved", "value": 2},
        {"op": "add", "path": "/a~1b", "value": True},
    ]
    assert json_patch(target, operations) == {
        "foo": ["qux", "baz", "end"],
        "x": {"y": 2},
        "copied": {},
        "moved": 2,
        "a/b": True,
    }


def test_strategic_merge_patch_directives() -> None:
    live = {
        "spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
            "finalizers": ["f1", "f2"],
            "strategy": {"type": "X", "extra": 1},
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "a"}],
            "containers": [{"name": "b", "$patch": "delete"}],
            "$deleteFromPrimitiveList/finalizers": ["f1"],
            "strategy": {"$patch": "replace", "type": "Y"},
        }
    }
    assert strategic_merge_patch(live, patch) == {
        "spec": {
            "containers": [{"name": "a", "image": "x"}],
            "finalizers": ["f2"],
            "strategy": {"type": "Y"},
        }
    }


def test_system_namespaces_cannot_be_deleted(api_client: client.ApiClient) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api_client).delete_namespace("default")
    assert caught.value.status == 403


def test_defaults_come_from_the_crd_schema_and_job_defaulting(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path, defaults=True)
    try:
        with client.ApiClient(server.configuration()) as api:
            objects = client.CustomObjectsApi(api)
            created = objects.create_cluster_custom_object(
                KUEUE, V, "clusterqueues", cluster_queue("defaulted")
            )
            assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"
            assert created["spec"]["stopPolicy"] == "None"
            assert created["metadata"]["labels"] == {"team": "a"}  # metadata is left alone
            patched = objects.patch_cluster_custom_object(
                KUEUE, V, "clusterqueues", "defaulted", {"spec": {"queueingStrategy": None}}
            )
            assert patched["spec"]["queueingStrategy"] == "BestEffortFIFO"
            job = client.BatchV1Api(api).create_namespaced_job(
                "default",
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "j"},
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "main", "image": "busybox:1.36"}],
                            }
                        }
                    },
                },
            )
            assert (job.spec.backoff_limit, job.spec.completions, job.spec.suspend) == (6, 1, False)
            assert job.spec.selector.match_labels == {
                "batch.kubernetes.io/controller-uid": job.metadata.uid
            }
            assert job.metadata.labels["job-name"] == "j"
            assert job.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    finally:
        server.stop()


def test_apply_merges_list_map_items_by_key_per_manager(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")

    def checks(*items: dict[str, Any]) -> dict[str, Any]:
        return cluster_queue(name, admissionChecksStrategy={"admissionChecks": list(items)})

    apply_cq(custom, checks({"name": "first-check", "onFlavors": ["a"]}), "one")
    both = apply_cq(custom, checks({"name": "second-check"}), "two")
    listed = both["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert [c["name"] for c in listed] == ["first-check", "second-check"]
    owned = {e["manager"]: e["fieldsV1"] for e in both["metadata"]["managedFields"]}
    items = owned["one"]["f:spec"]["f:admissionChecksStrategy"]["f:admissionChecks"]
    assert items == {
        'k:{"name":"first-check"}': {".": {}, "f:name": {}, "f:onFlavors": {'v:"a"': {}}}
    }
    union = apply_cq(custom, checks({"name": "first-check", "onFlavors": ["b"]}), "two")
    first = union["spec"]["admissionChecksStrategy"]["admissionChecks"][0]
    assert first["onFlavors"] == ["a", "b"]  # a set: each manager owns its own values
    listed = union["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert [c["name"] for c in listed] == ["first-check"]  # "two" stopped applying the other
    dropped = apply_cq(custom, cluster_queue(name), "one")
    listed = dropped["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert listed == [{"name": "first-check", "onFlavors": ["b"]}]  # "two" still owns it


def test_status_apply_conflicts_on_a_condition_owned_by_another_manager(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))

    def condition(manager: str, kind: str, status: str) -> dict[str, Any]:
        body = {
            "apiVersion": f"{KUEUE}/{V}",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "status": {
                "conditions": [
                    {
                        "type": kind,
                        "status": status,
                        "reason": "R",
                        "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            },
        }
        return custom.patch_cluster_custom_object_status(  # type: ignore[no-any-return]
            KUEUE,
            V,
            "clusterqueues",
            name,
            body,
            field_manager=manager,
            _content_type="application/apply-patch+yaml",
        )

    condition("kueue", "Active", "True")
    both = condition("other", "Extra", "True")
    assert [c["type"] for c in both["status"]["conditions"]] == ["Active", "Extra"]
    with pytest.raises(ApiException) as caught:
        condition("other", "Active", "False")
    assert caught.value.status == 409
    fields = [c["field"] for c in error_body(caught.value)["details"]["causes"]]
    assert fields == ['.status.conditions[type="Active"].status']
    entry = next(e for e in both["metadata"]["managedFields"] if e["manager"] == "kueue")
    assert entry["subresource"] == "status" and entry["operation"] == "Apply"


def test_config_maps_and_secrets_follow_the_size_and_string_data_rules(
    api_client: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api_client)
    created = core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="ledger"), data={"runs": "[]"}),
    )
    assert created.data == {"runs": "[]"} and created.metadata.generation is None
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map(
            "ledger", namespace, {"data": {"runs": "x" * (1024 * 1024 + 1)}}
        )
    assert caught.value.status == 422
    assert core.read_namespaced_config_map("ledger", namespace).data == {"runs": "[]"}
    secret = core.create_namespaced_secret(
        namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"token": "abc"}),
    )
    assert secret.data == {"token": "YWJj"} and secret.string_data is None


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({"team": "a" * 64}, id="value-too-long"),
        pytest.param({"team": "has space"}, id="value-with-space"),
        pytest.param({"bad key!": "a"}, id="key-with-bang"),
        pytest.param({"Not_A.Domain/x": "a"}, id="prefix-not-a-dns-subdomain"),
    ],
)
def test_invalid_labels_are_rejected_with_422(
    custom: client.CustomObjectsApi, labels: dict[str, str]
) -> None:
    body = cluster_queue(unique("cq"))
    body["metadata"]["labels"] = labels
    with pytest.raises(ApiException) as caught:
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    assert caught.value.status == 422
    assert error_body(caught.value)["details"]["causes"][0]["field"] == "metadata.labels"


def test_nodes_are_served_and_a_body_over_3_mib_is_refused(
    api_client: client.ApiClient,
) -> None:
    core = client.CoreV1Api(api_client)
    name = unique("node")
    core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(
                name=name, labels={"nvidia.com/gpu.product": "H100", "test": name}
            )
        )
    )
    core.patch_node_status(name, {"status": {"capacity": {"nvidia.com/gpu": "8"}}})
    [node] = core.list_node(label_selector=f"nvidia.com/gpu.product=H100,test={name}").items
    assert node.status.capacity == {"nvidia.com/gpu": "8"}
    with pytest.raises(ApiException) as caught:
        core.patch_node(name, {"metadata": {"annotations": {"x": "y" * (3 * 1024 * 1024)}}})
    assert caught.value.status == 413


def test_delete_answers_a_status_and_a_put_with_another_uid_conflicts(
    custom: client.CustomObjectsApi,
) -> None:
    name = unique("cq")
    created = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    impostor = {**created, "metadata": {**created["metadata"], "uid": str(uuid.uuid4())}}
    with pytest.raises(ApiException) as caught:
        custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", name, impostor)
    assert caught.value.status == 409
    answer = custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    assert answer["kind"] == "Status" and answer["status"] == "Success"
    assert answer["details"] == {
        "name": name,
        "group": KUEUE,
        "kind": "clusterqueues",
        "uid": created["metadata"]["uid"],
    }
    with pytest.raises(ApiException) as caught:
        custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", name)
    assert caught.value.status == 404


def test_injected_faults_answer_the_real_status_and_retry_after(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path)
    try:
        with client.ApiClient(server.configuration()) as api:
            objects = client.CustomObjectsApi(api)
            # urllib3 itself retries GET, PUT and DELETE answered 429/503 with Retry-After,
            # so the fault is shown on POST, which it does not retry.
            server.fail(429, times=1, method="POST", retry_after=2, after=1)
            objects.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
            with pytest.raises(ApiException) as caught:
                objects.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("b"))
            assert caught.value.status == 429 and caught.value.headers["Retry-After"] == "2"
            body = error_body(caught.value)
            assert (body["reason"], body["details"]) == (
                "TooManyRequests",
                {"retryAfterSeconds": 2},
            )
            objects.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("b"))
            assert server.count("POST") == 3
            server.fail(504, method="POST", applied=True)
            with pytest.raises(ApiException) as caught:
                objects.create_cluster_custom_object(
                    KUEUE, V, "clusterqueues", cluster_queue("lost-answer")
                )
            assert caught.value.status == 504
            assert objects.get_cluster_custom_object(KUEUE, V, "clusterqueues", "lost-answer")
            server.reset()
            with pytest.raises(ApiException) as caught:
                objects.get_cluster_custom_object(KUEUE, V, "clusterqueues", "lost-answer")
            assert caught.value.status == 404
            assert "clusterqueues" in [
                r.name for r in objects.get_api_resources(KUEUE, V).resources
            ]
    finally:
        server.stop()


def test_schema_mode_prunes_unknown_fields_or_refuses_them_when_strict(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path, defaults=False, schema=True)
    try:
        with client.ApiClient(server.configuration()) as api:
            objects = client.CustomObjectsApi(api)
            body = cluster_queue("pruned", cohort="v1beta1-name", cohortName="all")
            created, _, headers = objects.create_cluster_custom_object_with_http_info(
                KUEUE, V, "clusterqueues", body
            )
            assert created["spec"] == {"cohortName": "all", "namespaceSelector": {}}
            assert headers["Warning"] == '299 - "unknown field \\"spec.cohort\\""'
            with pytest.raises(ApiException) as caught:
                objects.create_cluster_custom_object(
                    KUEUE,
                    V,
                    "clusterqueues",
                    cluster_queue("strict", cohort="x"),
                    field_validation="Strict",
                )
            assert caught.value.status == 400
            assert 'unknown field "spec.cohort"' in error_body(caught.value)["message"]
            with pytest.raises(ApiException) as caught:
                objects.create_cluster_custom_object(
                    KUEUE,
                    V,
                    "clusterqueues",
                    cluster_queue(
                        "invalid",
                        queueingStrategy="Nope",
                        resourceGroups=[{"coveredResources": ["cpu"]}],
                    ),
                )
            assert caught.value.status == 422
            causes = error_body(caught.value)["details"]["causes"]
            assert [(c["field"], c["reason"]) for c in causes] == [
                ("spec.queueingStrategy", "FieldValueNotSupported"),
                ("spec.resourceGroups[0].flavors", "FieldValueRequired"),
            ]
            groups = [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "1", "borrowingLimit": "1"}
                            ],
                        }
                    ],
                }
            ]
            with pytest.raises(ApiException) as caught:  # a CEL rule of the CRD
                objects.create_cluster_custom_object(
                    KUEUE, V, "clusterqueues", cluster_queue("lonely", resourceGroups=groups)
                )
            assert error_body(caught.value)["message"] == (
                'ClusterQueue.kueue.x-k8s.io "lonely" is invalid: spec: Invalid value: '
                '"object": borrowingLimit must be nil when cohort is empty'
            )
            queue = {
                "apiVersion": f"{KUEUE}/{V}",
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {"clusterQueue": "one"},
            }
            objects.create_namespaced_custom_object(KUEUE, V, "default", "localqueues", queue)
            objects.patch_namespaced_custom_object(
                KUEUE, V, "default", "localqueues", "lq", {"metadata": {"labels": {"x": "y"}}}
            )
            with pytest.raises(ApiException) as caught:  # a transition rule: self == oldSelf
                objects.patch_namespaced_custom_object(
                    KUEUE, V, "default", "localqueues", "lq", {"spec": {"clusterQueue": "two"}}
                )
            assert caught.value.status == 422
            assert error_body(caught.value)["details"]["causes"] == [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.clusterQueue",
                    "message": 'Invalid value: "string": field is immutable',
                }
            ]
    finally:
        server.stop()


def test_an_applier_does_not_own_the_defaults_the_server_filled_in(tmp_path: Path) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path, defaults=True, schema=True)
    try:
        with client.ApiClient(server.configuration()) as api:
            objects = client.CustomObjectsApi(api)
            name = "applied"
            objects.patch_cluster_custom_object(
                KUEUE,
                V,
                "clusterqueues",
                name,
                cluster_queue(name, cohortName="a"),
                field_manager="trainform",
                _content_type="application/apply-patch+yaml",
            )
            live = objects.get_cluster_custom_object(KUEUE, V, "clusterqueues", name)
            assert live["spec"]["queueingStrategy"] == "BestEffortFIFO"
            [entry] = live["metadata"]["managedFields"]
            assert set(entry["fieldsV1"]["f:spec"]) == {"f:cohortName", "f:namespaceSelector"}
    finally:
        server.stop()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
OBJECTS = st.dictionaries(st.sampled_from(["a", "b", "c"]), JSON, max_size=3)


@settings(max_examples=200, deadline=None)
@given(OBJECTS)
def test_a_merge_patch_of_an_object_with_itself_changes_nothing(obj: dict[str, Any]) -> None:
    cleaned = merge_patch({}, obj)  # nulls removed, as stored objects have none
    assert merge_patch(cleaned, cleaned) == cleaned


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_label_selector_parsing_raises_only_bad_request(selector: str) -> None:
    try:
        label_matcher(selector)({"metadata": {"labels": {"a": "1"}}})
    except ApiError as error:
        assert error.code == 400


POINTERS = st.one_of(
    st.sampled_from(["", "/", "/a", "/a/0", "/a/-", "/b/c", "/a~1b", "/a/01"]),
    st.text(max_size=6),
    st.integers(),
    st.none(),
)
OPERATIONS = st.one_of(
    JSON,
    st.lists(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(
                    ["add", "remove", "replace", "move", "copy", "test", "bad", 3]
                ),
                "path": POINTERS,
            },
            optional={"value": JSON, "from": POINTERS},
        ),
        max_size=4,
    ),
)


@settings(max_examples=400, deadline=None)
@given(OPERATIONS, OBJECTS)
def test_json_patch_raises_only_api_errors(operations: Any, target: dict[str, Any]) -> None:
    try:
        json_patch(target, operations)
    except ApiError as error:
        assert error.code == 422


@settings(max_examples=100, deadline=None)
@given(OBJECTS)
def test_applying_the_same_configuration_twice_changes_nothing(spec: dict[str, Any]) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Thing",
        "metadata": {"name": "x"},
        "spec": merge_patch({}, spec),
    }
    first, managed = apply_fields(None, config, "m", False, "", "v1", False)
    first["metadata"]["managedFields"] = managed
    second, again = apply_fields(first, config, "m", False, "", "v1", False)
    assert second["spec"] == first["spec"] == config["spec"]
    assert [e["fieldsV1"] for e in again] == [e["fieldsV1"] for e in managed]


def test_concurrent_writers_get_distinct_resource_versions(
    custom: client.CustomObjectsApi,
) -> None:
    tag = unique("c")
    versions: list[str] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        for round_ in range(10):
            body = cluster_queue(f"{tag}-{index}-{round_}")
            created = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
            with lock:
                versions.append(created["metadata"]["resourceVersion"])

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(versions)) == 40
    listed = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")
    assert sum(1 for i in listed["items"] if i["metadata"]["name"].startswith(tag)) == 40


LIKELY_OBJECTS = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from([f"{KUEUE}/{V}"] * 4 + ["v1"]),
        "kind": st.sampled_from(["ClusterQueue"] * 4 + ["Other"]),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["fuzz"] * 4 + ["Bad Name", ""])},
            optional={
                "labels": st.one_of(
                    JSON,
                    st.dictionaries(
                        st.sampled_from(["a", "b/c", "x.io/y"]), st.sampled_from(["1", "", "-"])
                    ),
                ),
                "annotations": JSON,
                "finalizers": JSON,
                "resourceVersion": JSON,
                "uid": JSON,
                "managedFields": JSON,
            },
        ),
    },
    optional={"spec": JSON, "status": JSON},
)
BODIES = st.one_of(LIKELY_OBJECTS, LIKELY_OBJECTS, JSON, OPERATIONS)
REQUESTS = st.sampled_from(
    [
        ("POST", "application/json"),
        ("PUT", "application/json"),
        ("PATCH", "application/merge-patch+json"),
        ("PATCH", "application/json-patch+json"),
        ("PATCH", "application/apply-patch+yaml"),
        ("PATCH", "application/apply-patch+yaml"),
        ("PATCH", "application/strategic-merge-patch+json"),
        ("POST", "text/plain"),
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request=REQUESTS, body=BODIES)
def test_no_request_body_makes_the_server_fail_with_500(
    api_client: client.ApiClient, request: tuple[str, str], body: Any
) -> None:
    method, content_type = request
    path = f"/apis/{KUEUE}/{V}/clusterqueues" + ("" if method == "POST" else "/fuzz")
    if "apply" in content_type:
        path += "?fieldManager=fuzz"
    request = urllib.request.Request(
        api_client.configuration.host + path,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": content_type, "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, data = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, data = error.code, error.read()
    undeclared = b"field not declared in schema" in data and "apply" in content_type
    assert status < 500 or (status == 500 and undeclared), data  # the real server's 500


def test_schema_mode_keeps_a_job_template_immutable_except_while_suspended(
    tmp_path: Path,
) -> None:
    from tests.services.kube_api import start_kube_api

    server = start_kube_api(tmp_path, defaults=True, schema=True)
    try:
        with client.ApiClient(server.configuration()) as api:
            batch = client.BatchV1Api(api)
            batch.create_namespaced_job(
                "default",
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": "j"},
                    "spec": {
                        "suspend": True,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "main", "image": "busybox:1.36"}],
                            }
                        },
                    },
                },
            )
            batch.patch_namespaced_job(
                "j", "default", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "gpu"}}}}}
            )  # what Kueue does on admission
            with pytest.raises(ApiException) as caught:
                batch.patch_namespaced_job(
                    "j",
                    "default",
                    {
                        "spec": {
                            "template": {
                                "metadata": {"annotations": {"x": "y"}},
                                "spec": {"restartPolicy": "OnFailure"},
                            }
                        }
                    },
                )
            assert caught.value.status == 422
            assert error_body(caught.value)["details"]["causes"][0]["field"] == "spec.template"
            batch.patch_namespaced_job("j", "default", {"spec": {"suspend": False}})
            with pytest.raises(ApiException) as caught:
                batch.patch_namespaced_job(
                    "j",
                    "default",
                    {"spec": {"template": {"metadata": {"labels": {"late": "label"}}}}},
                )
            assert caught.value.status == 422
    finally:
        server.stop()
