"""From the `trainform` CLI against the fake API server, which keys field managers by name
and operation as a real one does: trainform never conflicts with its own earlier writes.

A Queue's policy and pools are written onto its projects' ClusterQueues by the same
server-side apply (one field manager, one Apply entry) as the Quota's own write, so
reversing a queue's pools and then changing a quota applies cleanly, a key the spec
removes (maxPriorityThreshold) is removed from the cluster, and each plan after an apply
is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.project_queues import project_queue_spec
from trainform.providers.kubernetes.projection import quota_limits

from tests.engine.support import run_trainform
from tests.providers.kubernetes.fixtures import platform_folder, unique_prefix
from tests.services.kube_api import KubeAPI

SPECS = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: a100}
spec:
  provider: k8s
  nodes: 4
  accelerator: {type: nvidia-a100-80gb, count: 8}
  cpu: 90
  memory: 1300Gi
  nodeSelector: {cloud.google.com/gke-nodepool: a100}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: h100}
spec:
  provider: k8s
  nodes: 2
  accelerator: {type: nvidia-h100-80gb, count: 8}
  cpu: 200
  memory: 1800Gi
  nodeSelector: {cloud.google.com/gke-nodepool: h100}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: tune}
spec:
  cohort: research
  pools:
    - pool: a100
      nominalQuota: {gpu: 32, cpu: 360, memory: 5200Gi}
    - pool: h100
      nominalQuota: {gpu: 16, cpu: 400, memory: 3600Gi}
  defaultPriority: 500
  preemption:
    withinQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 400}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: vision}
spec: {displayName: Vision, owners: [vision-leads@example.com]}
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: tune, project: vision}
spec:
  queue: tune
  limits: {gpu: 16, cpu: 200}
"""
REVERSED = SPECS.replace(
    "    - pool: a100\n      nominalQuota: {gpu: 32, cpu: 360, memory: 5200Gi}\n"
    "    - pool: h100\n      nominalQuota: {gpu: 16, cpu: 400, memory: 3600Gi}\n",
    "    - pool: h100\n      nominalQuota: {gpu: 16, cpu: 400, memory: 3600Gi}\n"
    "    - pool: a100\n      nominalQuota: {gpu: 32, cpu: 360, memory: 5200Gi}\n",
)


def _tf(folder: Path, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=folder, timeout=120)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def _apply_then_plan_is_empty(folder: Path, specs: str) -> None:
    (folder / "platform.yaml").write_text(specs, encoding="utf-8")
    code, output = _tf(folder, "apply", ".", "--auto-approve")
    assert code == 0, output
    code, output = _tf(folder, "plan", ".", "--detailed-exitcode")
    assert code == 0, output


def test_reversing_pools_then_changing_a_quota_applies_and_converges(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    prefix = unique_prefix()
    folder = platform_folder(tmp_path / "platform", kube_api, prefix, SPECS)
    client = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))
    _apply_then_plan_is_empty(folder, SPECS)

    _apply_then_plan_is_empty(folder, REVERSED)
    _apply_then_plan_is_empty(folder, REVERSED.replace("gpu: 16, cpu: 200", "gpu: 24, cpu: 200"))

    live = client.get(CLUSTER_QUEUE, f"{prefix}tune-vision")
    assert live is not None
    flavors = live["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == [f"{prefix}h100", f"{prefix}a100"]
    gpus = [r for f in flavors for r in f["resources"] if r["name"] == "nvidia.com/gpu"]
    assert [r["borrowingLimit"] for r in gpus] == ["24", "24"]
    assert {(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]} == {
        ("trainform", "Apply")
    }


def test_removing_max_priority_threshold_converges_in_one_apply(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    prefix = unique_prefix()
    folder = platform_folder(tmp_path / "platform", kube_api, prefix, SPECS)
    client = KubeClient(make_api_client(str(kube_api.kubeconfig), ""))
    _apply_then_plan_is_empty(folder, SPECS)

    without = SPECS.replace(", maxPriorityThreshold: 400", "")
    assert without != SPECS
    _apply_then_plan_is_empty(folder, without)

    live = client.get(CLUSTER_QUEUE, f"{prefix}tune-vision")
    assert live is not None
    assert live["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "LowerPriority"}


@pytest.mark.parametrize("pools", [["cpu", "gpu"], ["gpu", "cpu"], ["gpu"]])
@pytest.mark.parametrize(
    "limits",
    [{"gpu": "16", "cpu": "100"}, {"cpu": "100"}, {"gpu": "8", "memory": "1000", "runningJobs": 3}],
)
def test_a_quotas_limits_read_back_whatever_the_order_of_its_queues_pools(
    pools: list[str], limits: dict[str, Any]
) -> None:
    """The Queue's rewrite keeps each project's limits as read back: a CPU pool listed
    first holds only 0s for the accelerator, which is not the project's gpu limit."""
    facts = {"flavors": pools, "resourceNames": {"gpu": "nvidia.com/gpu"}}
    spec = project_queue_spec(Naming("m"), facts, "q", "p", limits)

    assert quota_limits({"spec": spec}) == limits
