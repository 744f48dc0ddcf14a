"""Spec folders for the kubernetes provider's tests, against the fake API server.

`platform_folder` writes a trainform.yaml whose only provider is a kubernetes instance
pointed at the server's kubeconfig, with name and namespace prefixes unique to the test
(the server is shared by the session), plus one pool, queue, project and quota.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.services.kube_api import KubeAPI

INSTANCE = "k8s"


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}-"


def kubernetes_config(api: KubeAPI, prefix: str, extra: str = "") -> str:
    return (
        "apiVersion: trainform/v1\n"
        "providers:\n"
        f"  - name: {INSTANCE}\n"
        "    type: kubernetes\n"
        "    connection:\n"
        f"      kubeconfig: {api.kubeconfig}\n"
        f"      namespacePrefix: {prefix}\n"
        f"      namePrefix: {prefix}\n"
        f"{extra}"
        "state: {backend: local, path: .trainform/state.json}\n"
    )


PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: h100, labels: {tier: premium}}
spec:
  provider: k8s
  nodes: 4
  accelerator: {type: nvidia-h100-80gb, count: 8}
  cpu: 200
  memory: 1800Gi
  nodeSelector: {cloud.google.com/gke-nodepool: h100}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  topology: [cloud.google.com/gce-topology-block, kubernetes.io/hostname]
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: train}
spec:
  cohort: research
  pools:
    - pool: h100
      nominalQuota: {gpu: 32, cpu: 800, memory: 7200Gi}
      borrowingLimit: {gpu: 8}
      lendingLimit: {gpu: 16}
  defaultPriority: 100
  preemption: {withinQueue: LowerPriority, reclaimWithinCohort: Any}
  fairShareWeight: 2
---
apiVersion: trainform/v1
kind: Project
metadata: {name: vision, labels: {cost-center: cc-1}}
spec: {displayName: Vision, owners: [vision-leads@example.com]}
---
apiVersion: trainform/v1
kind: Quota
metadata: {name: train, project: vision}
spec:
  queue: train
  limits: {gpu: 16, cpu: 400, memory: 3600Gi, runningJobs: 4, maxWallTime: 3d}
"""


def platform_folder(root: Path, api: KubeAPI, prefix: str, specs: str = PLATFORM) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "trainform.yaml").write_text(kubernetes_config(api, prefix), encoding="utf-8")
    (root / "platform.yaml").write_text(specs, encoding="utf-8")
    return root
