"""Acceptance through `trainform apply` with the Kueue stand-in running (the `kueue` fixture
of tests/services/kube_api): one queue over an NVIDIA, a MIG and an AMD pool, two
projects, a platform clean under every policy.

Kueue, not a ResourceQuota, holds each project to its limits: a project over its GPU
limit has its second job wait in Kueue's words (no pod is ever refused), and a project
with `runningJobs: 2` has all four of its jobs accepted, two admitted and two waiting for
pods. Each admitted job ran on a pool of the accelerator it asked for; the queue's Cohort
and each project's ClusterQueue give quota of each pool's own accelerator only; the plan
after the apply is empty (exit 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from trainform.providers.jobs import RunPhase
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, COHORT, JOB
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import INSTANCE, kubernetes_config, unique_prefix
from tests.providers.kubernetes.test_accelerators import POOL, POOLS
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

PLATFORM = """\
apiVersion: trainform/v1
kind: Queue
metadata: {{name: mixed}}
spec:
  pools:
{entries}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
PROJECT = """---
apiVersion: trainform/v1
kind: Project
metadata: {{name: {project}}}
spec: {{owners: [leads@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: mixed, project: {project}}}
spec: {{queue: mixed, limits: {limits}}}
"""
JOB_SPEC = """---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: {project}}}
spec:
  queue: mixed
  image: trainer
  command: [python, train.py]
  resources: {{nodes: {nodes}, acceleratorsPerNode: {per_node}, cpu: 8, memory: 32Gi}}
  maxRuntime: 2h
"""
# name: (project, nodes, accelerators per node)
JOBS = {
    "small": ("vision", 1, 2),  # nvidia.com/gpu
    "sliced": ("vision", 1, 6),  # nvidia.com/mig-1g.10gb
    "wide": ("vision", 1, 8),  # amd.com/gpu
    "tiny": ("vision", 1, 1),  # nvidia.com/gpu
    "first": ("nlp", 2, 4),  # 8 nvidia.com/gpu: the whole of nlp's limit
    "second": ("nlp", 2, 4),  # another 8: over nlp's limit while the first runs
}


@pytest.fixture
def folder(
    tmp_path: Path, kueue: KubeAPI, registry_server: RegistryServer
) -> Iterator[tuple[SpecFolder, str]]:
    prefix = unique_prefix()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    pushed = push_image(registry_server.url, repository, "v1")
    host = registry_server.host
    registry = (
        "  - name: registry\n    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
    )
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        kubernetes_config(kueue, prefix).replace("state:", registry + "state:", 1)
    )
    entries = "".join(
        f"    - pool: {name}\n      nominalQuota: {{gpu: 16, cpu: 256, memory: 2048Gi}}\n"
        for name in POOLS  # four nodes each: every quota fits its pool (pool-capacity)
    )
    text = PLATFORM.format(entries=entries, reference=f"{host}/{repository}:v1@{pushed.digest}")
    text += "".join(
        POOL.replace("nodes: 2", "nodes: 4").format(
            name=name, resource=resource, count=count, label=label
        )
        for name, (resource, count, label) in POOLS.items()
    )
    text += PROJECT.format(project="vision", limits="{gpu: 8, runningJobs: 2}")
    text += PROJECT.format(project="nlp", limits="{gpu: 8}")
    text += "".join(
        JOB_SPEC.format(name=name, project=project, nodes=nodes, per_node=per_node)
        for name, (project, nodes, per_node) in JOBS.items()
    )
    (root / "platform.yaml").write_text(text)
    spec_folder = SpecFolder(root)
    yield spec_folder, prefix
    spec_folder.close()


def test_kueue_admits_each_project_within_its_limits_and_the_rest_wait(
    folder: tuple[SpecFolder, str], kueue: KubeAPI
) -> None:
    spec_folder, prefix = folder

    applied = run_trainform(
        "apply", ".", "--auto-approve", "--parallelism", "1", cwd=spec_folder.root
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Apply complete" in applied.stdout

    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    attempts = {}
    for name, (project, _, _) in JOBS.items():
        [run] = provider.runs(f"TrainingJob/{project}/{name}")
        attempts[name] = run.attempts[-1]
    running = {n for n, a in attempts.items() if a.phase is RunPhase.RUNNING}
    waiting = {n: a.reason for n, a in attempts.items() if a.phase is RunPhase.QUEUED}
    assert running | set(waiting) == set(JOBS)
    vision = [n for n in JOBS if JOBS[n][0] == "vision"]
    assert len([n for n in vision if n in running]) == 2, attempts
    for name in vision:
        if name in waiting:
            assert "insufficient unused quota for pods" in waiting[name], waiting
    assert ("first" in running) != ("second" in running), attempts
    [late] = [n for n in ("first", "second") if n in waiting]
    assert "insufficient unused quota for nvidia.com/gpu" in waiting[late], waiting

    assert kueue.kueue.jobs.refused == []  # no pod was refused after admission (no 403)
    again = run_trainform("plan", ".", "--detailed-exitcode", cwd=spec_folder.root)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_quotas_name_their_accelerators(provider, prefix)
    for name in running:
        project = JOBS[name][0]
        [job] = provider.client.list(
            JOB, f"trainform.dev/address-hash={_hash(project, name)}", f"{prefix}{project}"
        )
        pod = job["spec"]["template"]["spec"]
        [resource] = [r for r in pod["containers"][0]["resources"]["requests"] if "/" in r]
        pool = pod["nodeSelector"]["example.com/pool"]  # the flavor Kueue admitted it on
        assert POOLS[{label: n for n, (_, _, label) in POOLS.items()}[pool]][0] == resource


def _hash(project: str, name: str) -> str:
    return short_hash(f"TrainingJob/{project}/{name}")


def _quotas(spec: dict, field: str) -> dict[str, dict[str, str]]:
    """flavor -> resource -> `field` (nominalQuota, borrowingLimit) of a Cohort or
    ClusterQueue; Kueue wants every flavor of a group to list every covered resource."""
    found: dict[str, dict[str, str]] = {}
    for group in spec.get("resourceGroups", []):
        for flavor in group["flavors"]:
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
            found[flavor["name"]] = {r["name"]: str(r.get(field, "0")) for r in flavor["resources"]}
    return found


def _assert_quotas_name_their_accelerators(provider: KubernetesProvider, prefix: str) -> None:
    """The queue's Cohort holds quota, and each project's ClusterQueue may borrow, of every
    pool's own accelerator resource on that pool's flavor, and of no other accelerator."""
    accelerators = {resource for resource, _, _ in POOLS.values()}
    [cohort] = [
        c for c in provider.client.list(COHORT) if c["metadata"]["name"] == f"{prefix}mixed"
    ]
    queues = [
        q
        for q in provider.client.list(CLUSTER_QUEUE)
        if q["spec"].get("cohortName") == f"{prefix}mixed"
    ]
    assert len(queues) == 2, [q["metadata"]["name"] for q in queues]
    owners = [(cohort, "nominalQuota"), *((queue, "borrowingLimit") for queue in queues)]
    for owner, field in owners:
        quotas = _quotas(owner["spec"], field)
        for name, (resource, _, _) in POOLS.items():
            [flavor] = [f for f in quotas if f.endswith(name)]
            given = {r for r, value in quotas[flavor].items() if r in accelerators and value != "0"}
            assert given == {resource}, (owner["metadata"]["name"], field, quotas)
