"""What an admin of Kueue looks for, from the CLI against the Kueue stand-in: where each
waiting job stands in its queue (Kueue's visibility API, else the Workloads' own order), and
whether the Kueue configuration trainform relies on is on (checked at plan)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api
from trainform.providers.base import DesiredResource
from trainform.providers.kubernetes.kinds import WORKLOAD
from trainform.providers.kubernetes.kueue_config import (
    KueueConfig,
    config_warnings,
    parse_kueue_config,
)
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.providers.kubernetes.queue_positions import QueuePositions, ordered_positions

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import INSTANCE, PLATFORM, kubernetes_config, unique_prefix
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

IMAGE = """\
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
JOB = """\
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: vision}}
spec:
  queue: train
  image: trainer
  command: [python, train.py]
  priority: {priority}
  maxRuntime: 2h
  resources: {{nodes: 1, acceleratorsPerNode: 8, cpu: 16, memory: 64Gi}}
"""
# the project's Quota holds 16 GPUs: the first two jobs run, the others wait
JOBS = {"first": 100, "second": 100, "low": 50, "urgent": 300}
KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
waitForPodsReady: {{enable: {ready}, timeout: 10m}}
fairSharing: {{enable: {fair}}}
"""


@pytest.fixture
def platform(
    tmp_path: Path, kueue: KubeAPI, registry_server: RegistryServer
) -> Iterator[tuple[Path, KubernetesProvider, str]]:
    prefix = unique_prefix()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    pushed = push_image(registry_server.url, repository, "v1")
    host = registry_server.host
    registry = (
        "  - name: registry\n"
        "    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
    )
    root = tmp_path / "specs"
    root.mkdir()
    config = kubernetes_config(kueue, prefix, f"      kueueConfig: {prefix}kueue/manager\n")
    (root / "trainform.yaml").write_text(config.replace("state:", registry + "state:", 1))
    # no preemption within the queue: the jobs that do not fit wait (their places are the
    # subject here), where withinQueue: LowerPriority would let `urgent` preempt `first`
    platform = PLATFORM.replace("withinQueue: LowerPriority", "withinQueue: Never")
    text = platform + IMAGE.format(reference=f"{host}/{repository}@{pushed.digest}")
    for name in ("first", "second"):  # running before the others are submitted
        text += JOB.format(name=name, priority=JOBS[name])
    (root / "platform.yaml").write_text(text)
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=300)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    for name in ("low", "urgent"):
        text += JOB.format(name=name, priority=JOBS[name])
    (root / "platform.yaml").write_text(text)
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=300)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    spec_folder = SpecFolder(root)
    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    yield root, provider, prefix
    spec_folder.close()


def _attempts(root: Path) -> dict[str, dict[str, Any]]:
    shown = run_trainform("status", ".", "--format", "json", cwd=root, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    jobs = json.loads(shown.stdout)["jobs"]
    return {job["address"].rsplit("/", 1)[1]: job["attempts"][-1] for job in jobs}


def test_waiting_jobs_show_their_place_in_kueue_s_queue(
    platform: tuple[Path, KubernetesProvider, str], kueue: KubeAPI
) -> None:
    root, provider, prefix = platform
    attempts = _attempts(root)
    assert {n: a["phase"] for n, a in attempts.items()} == {
        "first": "running",
        "second": "running",
        "low": "queued",
        "urgent": "queued",
    }
    # Kueue's order: higher priority first, though submitted at the same time as `low`
    assert attempts["urgent"]["queuePosition"] == {
        "position": 0,
        "pending": 2,
        "source": "visibility API",
    }, attempts
    assert attempts["low"]["queuePosition"]["position"] == 1
    assert attempts["first"]["queuePosition"] is None
    text = run_trainform("status", ".", cwd=root, timeout=120).stdout
    assert "queue position 2 of 2 (1 workload ahead, from visibility API)" in text, text
    platform_text = run_trainform("status", ".", "--platform", cwd=root, timeout=120).stdout
    assert "queue position 1 of 2 (0 workloads ahead, from visibility API)" in platform_text

    # the same positions from the Workloads where the visibility API is not served
    namespace = f"{prefix}vision"
    workloads = provider.client.list(WORKLOAD, "", namespace)
    wanted = {(namespace, w["metadata"]["name"]) for w in workloads}
    served = QueuePositions(provider.client).of(workloads, wanted)
    kueue.kueue.stop()  # the visibility APIService is gone with Kueue
    try:
        fallback = QueuePositions(provider.client).of(workloads, wanted)
    finally:
        kueue.kueue.start()
    assert {k: v.position for k, v in fallback.items()} == {
        k: v.position for k, v in served.items()
    }
    assert {v.source for v in fallback.values()} == {"Workload order"}
    assert len(fallback) == 2
    _visibility_pages_and_counts_per_local_queue(provider, namespace)


def _visibility_pages_and_counts_per_local_queue(
    provider: KubernetesProvider, namespace: str
) -> None:
    """The stand-in's visibility API, as Kueue's pending_workloads_{cq,lq}.go answer."""
    local = (
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/train"
        "/pendingworkloads"
    )
    whole = json.loads(provider.client.text(local, [], "read") or "{}")
    assert [i["priority"] for i in whole["items"]] == [300, 50]
    assert [i["positionInLocalQueue"] for i in whole["items"]] == [0, 1]
    page = json.loads(provider.client.text(local, [("offset", "1")], "read") or "{}")
    assert [i["priority"] for i in page["items"]] == [50]
    assert page["items"][0]["positionInClusterQueue"] == 1
    [cluster_queue] = {
        w["status"]["admission"]["clusterQueue"]
        for w in provider.client.list(WORKLOAD, "", namespace)
        if (w.get("status") or {}).get("admission")
    }
    queue = (
        f"/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{cluster_queue}/pendingworkloads"
    )
    assert len(json.loads(provider.client.text(queue, [], "read") or "{}")["items"]) == 2
    assert provider.client.text(queue.replace(cluster_queue, "nope"), [], "read") is None


def test_ordered_positions_follow_priority_then_the_requeue_time() -> None:
    def workload(name: str, priority: int, created: str, evicted: str = "") -> dict[str, Any]:
        conditions = []
        if evicted:
            conditions.append(
                {
                    "type": "Evicted",
                    "status": "True",
                    "reason": "PodsReadyTimeout",
                    "lastTransitionTime": evicted,
                }
            )
        return {
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
            "spec": {"queueName": "q", "priority": priority},
            "status": {"conditions": conditions},
        }

    found = ordered_positions(
        [
            workload("old-requeued", 10, "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"),
            workload("newer", 10, "2026-01-01T00:01:00Z"),
            workload("high", 20, "2026-01-01T00:09:00Z"),
        ]
    )
    assert {name: p.position for (_, name), p in found.items()} == {
        "high": 0,
        "newer": 1,
        "old-requeued": 2,  # a PodsReadyTimeout eviction queues it from the eviction time
    }


@pytest.mark.parametrize(
    ("ready", "fair", "expected"),
    [
        pytest.param("true", "true", [], id="both-on"),
        pytest.param("false", "true", [], id="no-ready-but-no-multi-node-job"),
        pytest.param("true", "false", ["fair sharing, which Kueue's configuration"], id="no-fair"),
    ],
)
def test_plan_checks_the_kueue_configuration_it_relies_on(
    tmp_path: Path, kueue: KubeAPI, ready: str, fair: str, expected: list[str]
) -> None:
    prefix = unique_prefix()
    root = tmp_path / "specs"
    root.mkdir()
    config = kubernetes_config(kueue, prefix, f"      kueueConfig: {prefix}kueue/manager\n")
    (root / "trainform.yaml").write_text(config)
    (root / "platform.yaml").write_text(PLATFORM)
    planned = run_trainform("plan", ".", cwd=root, timeout=120)
    assert "cannot read Kueue's configuration" in planned.stdout, planned.stdout
    assert "no such ConfigMap" in planned.stdout
    namespace = f"{prefix}kueue"  # what Kueue's installation holds
    core = CoreV1Api(ApiClient(kueue.configuration()))
    core.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    core.create_namespaced_config_map(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "manager"},
            "data": {"controller_manager_config.yaml": KUEUE_CONFIG.format(ready=ready, fair=fair)},
        },
    )
    planned = run_trainform("plan", ".", cwd=root, timeout=120)
    warnings = [line for line in planned.stdout.splitlines() if "Kueue's configuration" in line]
    assert len(warnings) == len(expected), planned.stdout
    for line, wanted in zip(warnings, expected, strict=True):
        assert wanted in line and f"{prefix}kueue/manager" in line


def test_a_multi_node_job_warns_when_kueue_does_not_wait_for_pods_ready() -> None:
    job = DesiredResource(
        "TrainingJob/vision/big",
        "TrainingJob",
        "big",
        "vision",
        {"spec": {"command": ["torchrun", "train.py"], "resources": {"nodes": 2}}},
    )
    on = KueueConfig("kueue-system/kueue-manager-config", wait_for_pods_ready=True)
    assert config_warnings(job, on) == []
    [off] = config_warnings(job, KueueConfig(on.where))
    assert "waitForPodsReady, which Kueue's configuration kueue-system/" in off
    [unread] = config_warnings(job, KueueConfig(on.where, problem="403 Forbidden"))
    assert "cannot read Kueue's configuration" in unread and "403 Forbidden" in unread
    [offline] = config_warnings(job, None)
    assert "did not read (no refresh)" in offline
    single = DesiredResource(job.address, job.kind, job.name, job.project, {"spec": {}})
    assert config_warnings(single, KueueConfig(on.where)) == []


def test_kueue_configuration_versions_say_on_differently() -> None:
    v1beta2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
    on = parse_kueue_config(
        "a/b", {"controller_manager_config.yaml": v1beta2 + "waitForPodsReady: {timeout: 5m}\n"}
    )
    assert on.wait_for_pods_ready and not on.fair_sharing and not on.problem
    off = parse_kueue_config(
        "a/b",
        {"controller_manager_config.yaml": KUEUE_CONFIG.format(ready="false", fair="false")},
    )
    assert not off.wait_for_pods_ready and not off.fair_sharing
    assert parse_kueue_config("a/b", {"controller_manager_config.yaml": "[: nope"}).problem
    assert (
        "not a Kueue Configuration"
        in parse_kueue_config("a/b", {"controller_manager_config.yaml": "kind: Other\n"}).problem
    )
