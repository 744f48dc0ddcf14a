"""Every case of kube_api/refusals.py is refused by the fake API server as the real one refuses
it (status code and message), and leaves nothing behind."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.services.kube_api import KubeAPI, refusals
from tests.services.kube_api.refusals import CASES, Refusal

PLURALS = {
    "ClusterQueue": "clusterqueues",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "ResourceFlavor": "resourceflavors",
    "Topology": "topologies",
    "LocalQueue": "localqueues",
    "PriorityClass": "priorityclasses",
    "Job": "jobs",
    "Service": "services",
}


@pytest.fixture(scope="module")
def server(kube_api: KubeAPI) -> Iterator[KubeAPI]:
    before = kube_api.snapshot()
    yield kube_api
    kube_api.delete_created_since(before)


def _collection(obj: dict[str, Any]) -> str:
    group_version = obj["apiVersion"]
    root = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{root}{where}/{PLURALS[obj['kind']]}"


def _send(
    api: KubeAPI, method: str, path: str, body: Any, kind: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Content-Type": kind, "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _overlay(stored: Any, wanted: Any) -> Any:
    """`stored` with every field `wanted` sets (objects merged, other values replaced)."""
    if not isinstance(stored, dict) or not isinstance(wanted, dict):
        return json.loads(json.dumps(wanted))
    merged = dict(stored)
    for key, value in wanted.items():
        merged[key] = _overlay(stored.get(key), value)
    return merged


def _attempt(api: KubeAPI, case: Refusal) -> tuple[int, dict[str, Any]]:
    collection = _collection(case.obj)
    name = case.obj["metadata"]["name"]
    query = "?" + urllib.parse.urlencode(case.query) if case.query else ""
    if case.prior is not None:  # an update: the stored object with the case's fields
        code, created = _send(api, "POST", collection, case.prior)
        assert code == 201, created
        body = _overlay(created, case.obj)
        return _send(api, "PUT", f"{collection}/{name}{query}", body)
    if case.apply:
        path = f"{collection}/{name}?fieldManager=refusals"
        return _send(api, "PATCH", path, case.obj, "application/apply-patch+yaml")
    return _send(api, "POST", collection + query, case.obj)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_the_server_refuses_what_a_real_one_refuses(server: KubeAPI, case: Refusal) -> None:
    before = server.snapshot()
    try:
        code, body = _attempt(server, case)
        created = server.snapshot() - before
    finally:
        server.delete_created_since(before)
    assert (code, body.get("kind")) == (case.code, "Status"), body
    assert case.expect in body["message"], body["message"]
    assert len(created) == (1 if case.prior is not None else 0)  # only the prior object


def test_every_case_id_is_unique_and_names_its_source() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.source for c in CASES)


@pytest.mark.parametrize(
    "valid",
    [
        pytest.param(refusals.cluster_queue(), id="cluster-queue"),
        pytest.param(refusals.resource_flavor(nodeLabels={"pool": "h100"}), id="resource-flavor"),
        pytest.param(refusals.topology(["block", "kubernetes.io/hostname"]), id="topology"),
        pytest.param(refusals.local_queue("first"), id="local-queue"),
        pytest.param(refusals.priority_class("accepted-high", 1_000_000_000), id="priority-class"),
        pytest.param(refusals.cohort(fairSharing={"weight": "2n"}), id="cohort-smallest-weight"),
        pytest.param(
            refusals.workload_priority_class("system-train", 2_000_000_000),
            id="workload-priority-class-above-1e9-named-system",
        ),
        pytest.param(refusals.job(parallelism=2**31 - 1), id="job"),
        pytest.param(refusals.indexed_job("a" * 61, 10), id="indexed-job-longest-name"),
        pytest.param(refusals.service("llama-0a1b2c3d-1"), id="service"),
        pytest.param(
            refusals.failure_policy(
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
                },
            ),
            id="pod-failure-policy",
        ),
    ],
)
def test_the_valid_objects_the_cases_start_from_are_accepted(
    server: KubeAPI, valid: dict[str, Any]
) -> None:
    before = server.snapshot()
    code, body = _send(server, "POST", _collection(valid), valid)
    server.delete_created_since(before)
    assert code == 201, body
