"""Acceptance: pool and topology changes converge against Kueue's finalizers, from the CLI.

The test API server runs its Kueue stand-in (kueue_finalizers.py: a flavor stays while a
ClusterQueue lists it, a Topology while a flavor names it) during every command, as a
cluster with Kueue would. Dropping a topology level of a pool, removing a pool's topology,
giving it one again and `--replace` of a pool each converge in one apply: the plan shows
the steps (detach the flavor from the project ClusterQueue, delete, wait, create,
re-attach), the plan after it is empty, nothing is left Terminating and the project's
ClusterQueue lists both flavors with the project's limits again. Flavors deleted by hand
while their ClusterQueue lists them (what an older trainform left behind) show in plan and
drift as Terminating and the next apply converges them. Removing `runningJobs` plans and
deletes the Quota's `-jobs` flavor, and one left over by hand shows and goes too. A
ClusterQueue that is not trainform's listing the flavor stops a pool's delete before
anything is deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import RESOURCE_FLAVOR
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import run_trainform
from tests.providers.kubernetes.fixtures import kubernetes_config, unique_prefix
from tests.services.kube_api import KubeAPI

KUEUE = "kueue.x-k8s.io"
SPECS = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: h100}}
spec:
  provider: k8s
  nodes: 4
  accelerator: {{type: nvidia-h100-80gb, count: 8}}
  cpu: 200
  memory: 1800Gi
  nodeSelector: {{pool: h100}}
{topology}---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: a100}}
spec:
  provider: k8s
  nodes: 2
  accelerator: {{type: nvidia-a100-80gb, count: 8}}
  cpu: 100
  memory: 900Gi
  nodeSelector: {{pool: a100}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: train}}
spec:
  pools:
    - {{pool: h100, nominalQuota: {{gpu: 32, cpu: 800, memory: 7200Gi}}}}
    - {{pool: a100, nominalQuota: {{gpu: 16, cpu: 200, memory: 1800Gi}}}}
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [vision-leads@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: train, project: vision}}
spec: {{queue: train, limits: {{gpu: 16, cpu: 400{jobs}}}}}
"""
THREE = "  topology: [block, rack, kubernetes.io/hostname]\n"
TWO = "  topology: [block, kubernetes.io/hostname]\n"


class Site:
    """A spec folder on the module's server, run with the Kueue stand-in on."""

    def __init__(self, root: Path, api: KubeAPI) -> None:
        self.root, self.api, self.prefix = root, api, unique_prefix()
        root.mkdir(parents=True)
        (root / "trainform.yaml").write_text(kubernetes_config(api, self.prefix))

    def write(self, topology: str, jobs: str = "") -> None:
        text = SPECS.format(topology=topology, jobs=f", runningJobs: {jobs}" if jobs else "")
        (self.root / "platform.yaml").write_text(text)

    def run(self, *args: str) -> tuple[int, str]:
        result = run_trainform(*args, cwd=self.root, timeout=120)
        output = result.stdout + result.stderr
        assert "Traceback" not in output, output
        return result.returncode, output

    def objects(self, plural: str) -> list[dict[str, Any]]:
        found = self.api.store.items(KUEUE, plural, None)
        return [o for o in found if o["metadata"]["name"].startswith(self.prefix)]

    def terminating(self) -> list[str]:
        return [
            f"{plural}/{o['metadata']['name']}"
            for plural in ("resourceflavors", "topologies", "clusterqueues", "cohorts")
            for o in self.objects(plural)
            if o["metadata"].get("deletionTimestamp")
        ]

    def project_queue(self) -> dict[str, Any]:
        [queue] = self.objects("clusterqueues")
        return queue

    def converges(self, *apply_args: str) -> str:
        """One apply, then an empty plan, nothing Terminating, the project's queue whole."""
        code, output = self.run("apply", ".", "--auto-approve", *apply_args)
        assert code == 0, output
        code, after = self.run("plan", ".", "--detailed-exitcode")
        assert code == 0, after
        assert self.terminating() == []
        queue = self.project_queue()
        assert "trainform.dev/detached-flavors" not in queue["metadata"].get("annotations", {})
        group = queue["spec"]["resourceGroups"][0]
        assert [f["name"] for f in group["flavors"]] == [f"{self.prefix}h100", f"{self.prefix}a100"]
        limits = {r["name"]: r.get("borrowingLimit") for r in group["flavors"][0]["resources"]}
        assert limits == {"cpu": "400", "memory": None, "nvidia.com/gpu": "16"}
        return output


@pytest.fixture
def site(kueue: KubeAPI, tmp_path: Path) -> Iterator[Site]:
    made = Site(tmp_path / "specs", kueue)
    made.write(THREE)
    code, output = made.run("apply", ".", "--auto-approve")
    assert code == 0, output
    yield made


def test_dropping_a_level_removing_and_adding_topology_converge_in_one_apply(site: Site) -> None:
    flavor = f"{site.prefix}h100"
    site.write(TWO)
    code, plan = site.run("plan", ".")
    assert code == 0, plan
    assert f"step 1/4: detach flavor {flavor} from ClusterQueue {site.prefix}train-vision" in plan
    assert f"step 2/4: delete ResourceFlavor {flavor} and Topology {flavor}" in plan
    site.converges()
    [topology] = site.objects("topologies")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "block",
        "kubernetes.io/hostname",
    ]

    site.write("")
    site.converges()
    assert site.objects("topologies") == []
    [h100] = [f for f in site.objects("resourceflavors") if f["metadata"]["name"] == flavor]
    assert "topologyName" not in h100["spec"]

    site.write(THREE)
    site.converges()
    site.converges("--replace", "ResourcePool/a100")


def test_a_flavor_left_terminating_shows_in_plan_and_drift_and_apply_converges_it(
    site: Site,
) -> None:
    flavor = f"{site.prefix}h100"
    site.api.kueue.reconcile()
    code, output = site.run("plan", ".", "--detailed-exitcode")
    assert code == 0, output
    with client.ApiClient(site.api.configuration()) as api_client:
        custom = client.CustomObjectsApi(api_client)
        for name in (flavor, f"{site.prefix}a100"):  # with a Topology, and without
            custom.delete_cluster_custom_object(KUEUE, "v1beta2", "resourceflavors", name)
    assert site.terminating() == [
        f"resourceflavors/{site.prefix}a100",
        f"resourceflavors/{flavor}",
    ]

    code, drift = site.run("drift", ".", "--format", "json")
    assert code == 2, drift
    kinds = {(f["address"], f["drift"]) for f in json.loads(drift)["findings"]}
    assert ("ResourcePool/h100", "object-terminating") in kinds
    code, plan = site.run("plan", ".", "--detailed-exitcode")
    assert code == 2, plan
    assert f"ResourceFlavor {flavor} is Terminating" in plan
    assert f"Kueue keeps it while ClusterQueue {site.prefix}train-vision lists it" in plan
    site.converges()


def test_removing_running_jobs_plans_and_deletes_the_jobs_flavor(site: Site) -> None:
    jobs = f"{site.prefix}train-vision-jobs"
    site.write("", jobs="2")
    site.converges()
    assert jobs in [f["metadata"]["name"] for f in site.objects("resourceflavors")]
    site.write("")
    code, plan = site.run("plan", ".")
    assert code == 0, plan
    assert f"delete ResourceFlavor {jobs}: Quota/vision/train no longer renders it" in plan
    site.converges()
    assert jobs not in [f["metadata"]["name"] for f in site.objects("resourceflavors")]

    # what an older trainform left behind: the flavor, with the Quota's marks, unlisted
    with client.ApiClient(site.api.configuration()) as api_client:
        flavor = {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {
                "name": jobs,
                "labels": {
                    "trainform.dev/manager": "trainform",
                    "trainform.dev/address-hash": short_hash("Quota/vision/train"),
                    "trainform.dev/kind": "Quota",
                },
                "annotations": {"trainform.dev/address": "Quota/vision/train"},
            },
            "spec": {},
        }
        client.CustomObjectsApi(api_client).create_cluster_custom_object(
            KUEUE, "v1beta2", "resourceflavors", flavor
        )
    code, plan = site.run("plan", ".", "--detailed-exitcode")
    assert code == 2, plan
    assert f"ResourceFlavor {jobs} was written for Quota/vision/train" in plan
    site.converges()
    assert jobs not in [f["metadata"]["name"] for f in site.objects("resourceflavors")]


def test_a_foreign_cluster_queue_listing_the_flavor_stops_the_delete_before_anything_goes(
    kueue: KubeAPI, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    provider = KubernetesProvider(KubeClient(make_api_client(str(kueue.kubeconfig), "")))
    context = ProviderContext(tmp_path)
    provider.configure("k8s", {"namespacePrefix": prefix, "namePrefix": prefix}, context)
    document = {
        "metadata": {"labels": {}, "annotations": {}},
        "spec": {"nodes": 1, "cpu": "8", "memory": "8", "nodeSelector": {"pool": "x"}},
    }
    pool = DesiredResource("ResourcePool/x", "ResourcePool", "x", None, document)
    outputs = provider.create(pool)
    flavor = f"{prefix}x"
    foreign = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": f"{prefix}hand-made"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 1}]}
                    ],
                }
            ],
        },
    }
    provider.client.apply(foreign, "kubectl", False)

    with pytest.raises(PermanentProviderError) as refused:
        provider.delete("ResourcePool/x", "ResourcePool", outputs)

    assert f"ClusterQueue {prefix}hand-made lists it and is not this trainform's" in str(
        refused.value
    )
    live = provider.client.get(RESOURCE_FLAVOR, flavor)
    assert live is not None and not live["metadata"].get("deletionTimestamp")
    provider.close()
