"""Every spec class of spec_refusals.py is refused by `trainform plan` at its file:line and
field, and the objects trainform would write for it are refused (or never run) by the
strict fake API server and its Kueue stand-in, as a real cluster with Kueue does: the plan
check and the stand-in agree. The stale refusals (a queue priority above 1e9, a queue
named `system-...`) are accepted by both, and the valid platform they all start from is
planned and admitted.

The objects are rendered by the provider from the loaded specs, each class under its own
name and namespace prefixes, and sent as a client would create them; the Job is the one
runs.py submits (placement from the queue's pools, the queue's WorkloadPriorityClass, the
shortest time limit).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from trainform.cli.commands import cli
from trainform.planner.desired import build_desired
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes.admission_fit import EVALUATION_RESOURCES
from trainform.providers.kubernetes.jobs import job_manifest
from trainform.providers.kubernetes.manifests import pool_facts
from trainform.providers.kubernetes.placement import duration_seconds, place, pool_from_facts
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.specs import load_specs

from tests.providers.kubernetes.spec_refusals import BASE, CLASSES, STALE, SpecClass
from tests.providers.kubernetes.test_plan_refusals import CONFIG
from tests.services.kube_api import KubeAPI

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "Topology": "topologies",
    "Cohort": "cohorts",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
}
IMAGE = f"registry.example.com/t@sha256:{'1' * 64}"


def _folder(tmp_path: Path, text: str, namespace_prefix: str = "ml-") -> Path:
    config = CONFIG.replace("namespacePrefix: ml-", f"namespacePrefix: '{namespace_prefix}'")
    (tmp_path / "trainform.yaml").write_text(config)
    (tmp_path / "platform.yaml").write_text(text)
    return tmp_path


def _plan(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[str]]:
    monkeypatch.chdir(root)
    result = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["plan", ".", "--no-refresh"])
    # a refused plan raises its diagnostics (the console script prints them on stderr)
    shown = result.output + (str(result.exception) if result.exception else "")
    return result.exit_code, shown.splitlines()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CLASSES])
def test_plan_refuses_each_class_at_its_file_line_and_field(
    case: SpecClass, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = case.text()
    code, lines = _plan(_folder(tmp_path, text, case.namespace_prefix), monkeypatch)

    assert code == 1, "\n".join(lines)
    pattern = re.compile(
        rf"^\s+{re.escape(case.address)} \(platform\.yaml:(\d+):\d+\): "
        rf"{re.escape(case.field)}: .*{re.escape(case.words)}"
    )
    found = [m for m in map(pattern.match, lines) if m]
    assert found, "\n".join(lines)
    key = [part for part in re.split(r"[.\[\]]", case.field) if part and not part.isdigit()][-1]
    assert key in text.splitlines()[int(found[0][1]) - 1]  # the line of the field itself
    assert not (tmp_path / ".trainform" / "state.json").exists()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in STALE])
def test_plan_accepts_what_only_priority_classes_refused(
    case: SpecClass, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines = _plan(_folder(tmp_path, case.text()), monkeypatch)

    assert code == 0, "\n".join(lines)
    assert not [line for line in lines if "error" in line.lower()], "\n".join(lines)


def test_plan_accepts_the_platform_the_classes_start_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, lines = _plan(_folder(tmp_path, BASE), monkeypatch)

    assert code == 0, "\n".join(lines)


# --- the stand-in ---------------------------------------------------------------------


@pytest.fixture
def stand_in(kueue: KubeAPI) -> Iterator[KubeAPI]:
    """The module's server with Kueue running, emptied of each test's objects after it
    (the stand-in reconciles everything stored after every write)."""
    before = kueue.snapshot()
    yield kueue
    kueue.delete_created_since(before)


def _send(api: KubeAPI, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        api.url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _get(api: KubeAPI, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(api.url + path, timeout=30) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def _delete(api: KubeAPI, path: str) -> None:
    request = urllib.request.Request(api.url + path, method="DELETE")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def _collection(obj: dict[str, Any]) -> str:
    namespace = obj["metadata"].get("namespace")
    if obj["kind"] == "Namespace":
        return "/api/v1/namespaces"
    if obj["kind"] == "Job":
        return f"/apis/batch/v1/namespaces/{namespace}/jobs"
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{KUEUE}{where}/{PLURALS[obj['kind']]}"


def _job(provider: KubernetesProvider, desired: dict[str, Any], attempt: str) -> dict[str, Any]:
    """The Job runs.py submits for the job's first attempt (`train`) or its evaluation
    (`eval`: the suite's timeout instead of the job's maxRuntime)."""
    job = desired["TrainingJob/vision/job"].document["spec"]
    suite = desired["EvalSuite/vision/heldout"].document["spec"]
    queue = next(i for i in desired.values() if i.kind == "Queue").document["spec"]
    quota = next(i for i in desired.values() if i.kind == "Quota").document["spec"]
    pools = {i.name: i.document["spec"] for i in desired.values() if i.kind == "ResourcePool"}
    naming = provider.naming
    wanted = job["resources"]
    if attempt == "eval":
        wanted = suite.get("resources") or {**EVALUATION_RESOURCES, "acceleratorsPerNode": 0}
    placement = place(
        [
            pool_from_facts(
                naming.cluster_name(entry["pool"]),
                pool_facts(pools[entry["pool"]]),
                pools[entry["pool"]].get("nodeSelector"),
                tuple(pools[entry["pool"]].get("topology") or ()),
            )
            for entry in queue["pools"]
        ],
        wanted.get("acceleratorsPerNode", 0),
        wanted["cpu"],
        wanted["memory"],
    )
    own = job.get("maxRuntime") if attempt == "train" else suite.get("timeout")
    declared = (own, queue.get("maxRuntime"), quota["limits"].get("maxWallTime"))
    limits = [duration_seconds(text) for text in declared if text]
    seconds = min((s for s in limits if s is not None), default=None)
    launch = JobLaunch(
        address="TrainingJob/vision/job",
        run_id="r-0a1b2c3d",
        attempt=1,
        kind=attempt,
        suite="EvalSuite/vision/heldout" if attempt == "eval" else None,
        project="vision",
        queue=job["queue"],
        priority=0,
        command=list(job["command"]),
        code_dir=None,
        parameters={},
        env={},
        datasets=[],
        cpu=wanted["cpu"],
        memory=wanted["memory"],
        gpus=wanted.get("acceleratorsPerNode", 0) * wanted["nodes"],
        nodes=wanted["nodes"],
        image=IMAGE,
        max_runtime=seconds,
    )
    manifest = job_manifest(naming, launch, placement, naming.cluster_name(job["queue"]), seconds)
    if seconds == 0:  # the limit as it would be written (job_manifest leaves a 0 out)
        manifest["spec"]["activeDeadlineSeconds"] = 0
    return manifest


def _objects(
    root: Path, prefix: str, attempt: str = "train", namespaces: bool = True
) -> list[dict[str, Any]]:
    """Everything trainform would write for the folder, in the order apply writes it
    (namespaces prefixed with `prefix` unless `namespaces` is False)."""
    provider = KubernetesProvider()
    connection = {"namespacePrefix": f"{prefix}-" if namespaces else "", "namePrefix": f"{prefix}-"}
    provider.configure("k8s", connection, ProviderContext(root))
    desired = build_desired(load_specs(root))
    outputs: dict[str, dict[str, Any]] = {}
    objects: list[dict[str, Any]] = []
    for kind in ("Project", "ResourcePool", "Queue", "Quota"):
        for address, item in desired.items():
            if item.kind != kind:
                continue
            resource = DesiredResource(
                address,
                kind,
                item.name,
                item.project,
                item.document,
                {d: {"k8s": outputs[d]} for d in item.dependencies if d in outputs},
            )
            rendered = provider.render(resource)
            outputs[address] = provider._outputs(resource, rendered)
            objects += rendered
    return [*objects, _job(provider, desired, attempt)]


def _workload(api: KubeAPI, namespace: str) -> dict[str, Any]:
    [workload] = _get(api, f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
    return workload


def _condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def _write_all(api: KubeAPI, objects: list[dict[str, Any]]) -> tuple[str, int, str] | None:
    """Create the objects in order; the first refusal (kind, code, message), if any."""
    for obj in objects:
        code, body = _send(api, _collection(obj), obj)
        if code != 201:
            return obj["kind"], code, str(body.get("message"))
    return None


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CLASSES])
def test_the_stand_in_refuses_or_never_runs_each_class(
    case: SpecClass, tmp_path: Path, stand_in: KubeAPI
) -> None:
    prefix = re.sub(r"[^a-z0-9]", "", case.id)[:20]
    folder = _folder(tmp_path, case.text())
    objects = _objects(folder, prefix, case.attempt, bool(case.namespace_prefix))
    job = objects[-1]
    namespace = job["metadata"]["namespace"]
    outcome = case.outcome

    refusal = _write_all(stand_in, objects)

    if outcome.what == "refused":
        assert refusal is not None, "the stand-in accepted every object"
        assert refusal[:2] == (outcome.kind, outcome.code), refusal
        assert outcome.words in refusal[2], refusal
        return
    assert refusal is None, refusal
    if outcome.what == "overwritten":
        [namespace_object] = [o for o in objects if o["kind"] == "Namespace"]
        name = namespace_object["metadata"]["name"]
        stored = _get(stand_in, f"/api/v1/namespaces/{name}")
        declared = namespace_object["metadata"]["labels"][outcome.words]
        assert (declared, stored["metadata"]["labels"][outcome.words]) == ("ml", name)
        return
    workload = _workload(stand_in, namespace)
    if outcome.what == "pending":
        reserved = _condition(workload, "QuotaReserved")
        assert (reserved.get("status"), reserved.get("reason")) == ("False", "Pending"), reserved
        assert outcome.words in reserved["message"], reserved["message"]
    elif outcome.what == "start_refused":
        errors = list(stand_in.kueue.errors)
        path = f"{_collection(job)}/{job['metadata']['name']}"
        stored = _get(stand_in, path)
        _delete(stand_in, path)  # or the stand-in tries to start it again on every write
        stand_in.kueue.errors.clear()
        assert _condition(workload, "Admitted").get("status") == "True"
        assert any(outcome.words in error for error in errors), errors
        assert stored["spec"]["suspend"] is True  # Kueue could not start it
    else:
        assert outcome.what == "deadline"
        stored = _get(stand_in, f"{_collection(job)}/{job['metadata']['name']}")
        failed = [c for c in stored["status"]["conditions"] if c["type"] == "Failed"]
        assert [c["reason"] for c in failed] == [outcome.words], stored["status"]


@pytest.mark.parametrize(
    ("text", "priority", "limit"),
    [
        pytest.param(BASE, 0, None, id="base"),
        pytest.param(STALE[0].text(), 2_000_000_000, None, id=STALE[0].id),
        pytest.param(
            BASE.replace("  image: trainer\n", "  image: trainer\n  maxRuntime: 2h\n", 1),
            0,
            7200,
            id="base-with-max-runtime",
        ),
    ],
)
def test_the_stand_in_admits_what_the_plan_accepts(
    text: str, priority: int, limit: int | None, tmp_path: Path, stand_in: KubeAPI, request: Any
) -> None:
    prefix = re.sub(r"[^a-z0-9]", "", request.node.callspec.id)[:20]
    objects = _objects(_folder(tmp_path, text), prefix)

    assert _write_all(stand_in, objects) is None
    workload = _workload(stand_in, objects[-1]["metadata"]["namespace"])
    assert _condition(workload, "Admitted").get("status") == "True", workload.get("status")
    assert workload["spec"].get("priority") == priority
    assert objects[-1]["spec"].get("activeDeadlineSeconds") == limit  # the one time limit
    assert "maximumExecutionTimeSeconds" not in workload["spec"]
