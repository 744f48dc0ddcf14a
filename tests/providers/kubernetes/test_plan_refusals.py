"""What the API server or Kueue would refuse is refused by `trainform plan` first: each case
is a diagnostic naming the address, file:line:column and field, the plan exits 1 and nothing
is called (the kubeconfig points nowhere). A pool's topology change is a replacement.
test_refusals_agree.py covers the classes of issue 30, each against the stand-in."""

from __future__ import annotations

import re
from pathlib import Path

from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.api_limits import queue_size_problems
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import run_trainform

CONFIG = """\
apiVersion: trainform/v1
providers:
  - name: k8s
    type: kubernetes
    connection: {kubeconfig: /nonexistent/kubeconfig, namespacePrefix: ml-}
  - name: registry
    type: registry
    connection: {url: 'https://registry.example.com', allowed: [registry.example.com]}
state: {backend: local, path: .trainform/state.json}
"""
LABELS = "".join(f"    l{i}.example.com/x: v\n" for i in range(9))
LEVELS = "".join(f"    - t{i}.example.com/level\n" for i in range(17))
TOLERATIONS = "".join(f"    - {{key: t{i}, operator: Exists}}\n" for i in range(8))
SPECS = f"""\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: wide}}
spec:
  provider: k8s
  nodes: 2
  cpu: 64
  memory: 512Gi
  nodeSelector:
{LABELS}  tolerations:
    - {{key: "bad key!", operator: Exists}}
{TOLERATIONS}  topology:
{LEVELS}---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: gpus}}
spec:
  provider: k8s
  nodes: 2
  accelerator: {{type: h100, count: 8}}
  cpu: 64
  memory: 512Gi
  nodeSelector: {{pool: gpus}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: system-train}}
spec:
  cohort: lab
  pools:
    - pool: gpus
      nominalQuota: {{cpu: 64}}
  defaultPriority: 2000000000
  preemption:
    reclaimWithinCohort: Any
    borrowWithinCohort: {{policy: LowerPriority, maxPriorityThreshold: 3000000000}}
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [a@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: q, project: vision}}
spec: {{queue: system-train, limits: {{gpu: 8}}}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "registry.example.com/t@sha256:{"1" * 64}"}}
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: gpu-job, project: vision}}
spec:
  queue: system-train
  image: trainer
  command: [python]
  priority: 5000000000
  resources: {{nodes: 1, acceleratorsPerNode: 1, cpu: 8, memory: 8Gi}}
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: fat-job, project: vision}}
spec:
  queue: system-train
  image: trainer
  command: [python]
  resources: {{nodes: 1, cpu: 128, memory: 8Gi}}
"""
EXPECTED = [
    ("ResourcePool/wide", "spec.nodeSelector", "at most 8 nodeLabels"),
    ("ResourcePool/wide", "spec.tolerations", "at most 8 tolerations"),
    ("ResourcePool/wide", "spec.tolerations[0].key", "'bad key!' is not a qualified name"),
    ("ResourcePool/wide", "spec.topology", "at most 16 levels"),
    (
        "Queue/system-train",
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
        "does not fit a 32-bit integer",
    ),
    ("TrainingJob/vision/gpu-job", "spec.priority", "does not fit a 32-bit integer"),
    (
        "TrainingJob/vision/gpu-job",
        "spec.resources.acceleratorsPerNode",
        "more than queue system-train can ever admit",
    ),
    ("TrainingJob/vision/fat-job", "spec.resources", "no pool of queue system-train has nodes"),
]


def test_every_refusal_is_a_plan_diagnostic_at_its_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "trainform.yaml").write_text(CONFIG)
    (tmp_path / "platform.yaml").write_text(SPECS)

    result = run_trainform("plan", ".", "--no-refresh", cwd=tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    for address, field, words in EXPECTED:
        pattern = re.compile(
            rf"^\s+{re.escape(address)} \(platform\.yaml:\d+:\d+\): {re.escape(field)}: .*"
            + re.escape(words)
        )
        assert any(pattern.match(line) for line in lines), (address, field, result.stderr)
    # WorkloadPriorityClasses take any int32 value and any name: the PriorityClass limits
    # (1e9, `system-`) no longer apply (test_refusals_agree.py shows the stand-in agree)
    assert not [line for line in lines if "spec.defaultPriority" in line], result.stderr
    assert not [line for line in lines if "Queue/system-train" in line and "metadata" in line]
    assert not (tmp_path / ".trainform" / "state.json").exists()


def test_a_queue_over_512_flavor_resource_pairs_is_refused() -> None:
    pools = {
        f"p{i}": {"accelerator": {"count": 1, "resourceName": f"v{i % 3}.com/gpu"}}
        for i in range(103)
    }

    def queue(count: int) -> DesiredResource:
        entries = [{"pool": f"p{i}", "nominalQuota": {}} for i in range(count)]
        return DesiredResource("Queue/q", "Queue", "q", None, {"spec": {"pools": entries}})

    [problem] = queue_size_problems(queue(103), pools)
    assert "103 pools x 5 resources = 515" in problem.message
    assert queue_size_problems(queue(102), pools) == []  # 510 pairs


def test_changing_a_pools_topology_replaces_it() -> None:
    schema = KubernetesProvider.schemas["ResourcePool"]

    assert "spec.topology" in schema.forces_replacement
