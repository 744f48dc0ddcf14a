"""Accelerators by name through the engine: one queue over an NVIDIA, a MIG and an AMD pool.

The queue's Cohort covers the three resources with each pool's quota under its own name,
the project's ClusterQueue borrows at most its limit of each pool's own accelerator, and
each job requests the resource of the first pool (in the queue's order) whose nodes can
hold one of its pods, with a node affinity naming only the pools of that resource it fits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, COHORT, JOB
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, kubernetes_config, unique_prefix
from tests.providers.kubernetes.schemas import check_manifest
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

POOLS = {  # name: (resource, per node, node label)
    "h100": ("nvidia.com/gpu", 4, "h100"),
    "a100-mig": ("nvidia.com/mig-1g.10gb", 7, "a100-mig"),
    "mi300": ("amd.com/gpu", 8, "mi300"),
}
JOBS = {"small": 2, "sliced": 6, "wide": 8}  # name: accelerators per node

SPECS = """\
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [vision-leads@example.com]}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: mixed}}
spec:
  pools:
{entries}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: mixed, project: vision}}
spec: {{queue: mixed, limits: {{gpu: 16}}}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
POOL = """---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: {name}}}
spec:
  provider: k8s
  nodes: 2
  accelerator: {{type: {name}, count: {count}, resourceName: {resource}}}
  cpu: 64
  memory: 512Gi
  nodeSelector: {{example.com/pool: {label}}}
"""
JOB_SPEC = """---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: vision}}
spec:
  queue: mixed
  image: trainer
  command: [python, train.py]
  resources: {{nodes: 1, acceleratorsPerNode: {count}, cpu: 8, memory: 32Gi}}
"""


@pytest.fixture
def folder(
    tmp_path: Path, kube_api: KubeAPI, registry_server: RegistryServer
) -> Iterator[tuple[SpecFolder, str]]:
    prefix = unique_prefix()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    push_image(registry_server.url, repository, "v1")
    host = registry_server.host
    registry = (
        "  - name: registry\n    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
    )
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        kubernetes_config(kube_api, prefix).replace("state:", registry + "state:", 1)
    )
    entries = "".join(
        f"    - pool: {name}\n      nominalQuota: {{gpu: 8, cpu: 64, memory: 512Gi}}\n"
        for name in POOLS
    )
    text = SPECS.format(entries=entries, reference=f"{host}/{repository}:v1")
    text += "".join(
        POOL.format(name=name, resource=resource, count=count, label=label)
        for name, (resource, count, label) in POOLS.items()
    )
    text += "".join(JOB_SPEC.format(name=name, count=count) for name, count in JOBS.items())
    (root / "platform.yaml").write_text(text)
    spec_folder = SpecFolder(root)
    yield spec_folder, prefix
    spec_folder.close()


def test_each_queue_quota_and_job_names_its_pools_accelerator(
    folder: tuple[SpecFolder, str],
) -> None:
    spec_folder, prefix = folder
    spec_folder.converge()
    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)

    cohort = provider.client.get(COHORT, f"{prefix}mixed")
    assert cohort is not None
    check_manifest(cohort)
    [group] = cohort["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", *(r for r, _, _ in POOLS.values())]
    for flavor in group["flavors"]:
        own = POOLS[flavor["name"].removeprefix(prefix)][0]
        gpus = {r["name"]: str(r["nominalQuota"]) for r in flavor["resources"] if "/" in r["name"]}
        assert gpus == {r: ("8" if r == own else "0") for r, _, _ in POOLS.values()}, flavor

    namespace = f"{prefix}vision"
    project_queue = provider.client.get(CLUSTER_QUEUE, f"{prefix}mixed-vision")
    assert project_queue is not None
    check_manifest(project_queue)
    for flavor in project_queue["spec"]["resourceGroups"][0]["flavors"]:
        own = POOLS[flavor["name"].removeprefix(prefix)][0]
        limits = {
            r["name"]: r.get("borrowingLimit") for r in flavor["resources"] if "/" in r["name"]
        }
        assert limits == {r: ("16" if r == own else "0") for r, _, _ in POOLS.values()}, flavor

    requested = {}
    for job in provider.client.list(JOB, provider.naming.selector, namespace):
        name = job["metadata"]["name"].split("-")[0]
        pod = job["spec"]["template"]["spec"]
        resources = pod["containers"][0]["resources"]["requests"]
        [accelerator] = [r for r in resources if "/" in r]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        pools = [t["matchExpressions"][0]["values"][0] for t in terms["nodeSelectorTerms"]]
        requested[name] = (accelerator, resources[accelerator], pools)
    assert requested == {
        "small": ("nvidia.com/gpu", "2", ["h100"]),
        "sliced": ("nvidia.com/mig-1g.10gb", "6", ["a100-mig"]),
        "wide": ("amd.com/gpu", "8", ["mi300"]),
    }
    assert not spec_folder.plan().has_changes
