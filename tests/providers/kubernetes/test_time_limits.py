"""Time limits and Kueue deactivations end attempts, through the `trainform` CLI against the
Kueue stand-in (the `kueue` fixture), time passing with `elapse` instead of sleeps.

Two jobs run on one queue: `capped` (maxRuntime 1h) and `stalled` (2h), whose Workload Kueue
deactivates because waitForPodsReady requeued it as often as allowed (the test sets the
DeactivationTarget condition as Kueue's workload controller does; the stand-in does the
rest). An hour later `capped`'s Job has failed with DeadlineExceeded: the attempt ended
with cause time-limit; `stalled`'s ended with node-failure in Kueue's words. Past the
retry backoff, apply submits attempt 2 of each (the finished Jobs are deleted); when
attempt 2 of `capped` runs out of time too, its one retry is spent and the plan says so.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.kubernetes.kinds import JOB, WORKLOAD
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import INSTANCE, kubernetes_config, unique_prefix
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.kube_api.clock import elapse
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: a100}}
spec:
  provider: k8s
  nodes: 4
  accelerator: {{type: nvidia-a100-80gb, count: 8}}
  cpu: 64
  memory: 512Gi
  nodeSelector: {{example.com/pool: a100}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: train}}
spec:
  pools:
    - pool: a100
      nominalQuota: {{gpu: 32, cpu: 256, memory: 2048Gi}}
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [leads@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: train, project: vision}}
spec: {{queue: train, limits: {{gpu: 16}}}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
JOB_SPEC = """---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: vision}}
spec:
  queue: train
  image: trainer
  command: [python, train.py]
  resources: {{nodes: 1, acceleratorsPerNode: 8, cpu: 8, memory: 32Gi}}
  retries: {{limit: 1, backoff: 1m}}
{extra}"""
HOUR = 3600
BACKOFF = 60


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
    text = PLATFORM.format(reference=f"{host}/{repository}:v1@{pushed.digest}")
    text += JOB_SPEC.format(name="capped", extra="  maxRuntime: 1h\n")
    text += JOB_SPEC.format(name="stalled", extra="  maxRuntime: 2h\n")
    (root / "platform.yaml").write_text(text)
    spec_folder = SpecFolder(root)
    yield spec_folder, prefix
    spec_folder.close()


def tf(root: Path, *args: str) -> tuple[int, str]:
    result = run_trainform(*args, cwd=root, timeout=120)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, output


def attempts(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Each job's attempts (of its current run), as `trainform status` reports them."""
    code, output = tf(root, "status", "--format", "json")
    assert code == 0, output
    return {
        report["address"].rsplit("/", 1)[-1]: report["attempts"]
        for report in json.loads(output)["jobs"]
    }


def _deactivate_for_requeuing_limit(provider: KubernetesProvider, namespace: str) -> None:
    """What Kueue's workload controller writes when waitForPodsReady's requeue limit is
    reached (workload_controller.go, triggerDeactivation)."""
    selector = f"trainform.dev/address-hash={short_hash('TrainingJob/vision/stalled')}"
    [job] = provider.client.list(JOB, selector, namespace)
    [workload] = [
        w
        for w in provider.client.list(WORKLOAD, "", namespace)
        if w["metadata"]["ownerReferences"][0]["name"] == job["metadata"]["name"]
    ]
    conditions = workload["status"]["conditions"] + [
        {
            "type": "DeactivationTarget",
            "status": "True",
            "reason": "RequeuingLimitExceeded",
            "message": "exceeding the maximum number of re-queuing retries",
            "lastTransitionTime": workload["status"]["conditions"][0]["lastTransitionTime"],
        }
    ]
    provider.client.merge_patch(
        WORKLOAD,
        workload["metadata"]["name"],
        namespace,
        {"status": {"conditions": conditions}},
        "kueue",
        "status",
    )


def test_a_job_over_its_max_runtime_and_a_deactivated_workload_end_and_are_retried(
    folder: tuple[SpecFolder, str], kueue: KubeAPI
) -> None:
    spec_folder, prefix = folder
    root = spec_folder.root
    code, output = tf(root, "apply", ".", "--auto-approve")
    assert code == 0, output
    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    namespace = f"{prefix}vision"
    jobs = {j["metadata"]["name"]: j for j in provider.client.list(JOB, "", namespace)}
    assert all(not j["spec"]["suspend"] for j in jobs.values()), "both admitted"
    assert sorted(j["spec"]["activeDeadlineSeconds"] for j in jobs.values()) == [HOUR, 2 * HOUR]
    for job in jobs.values():  # one time limit: not Kueue's as well
        assert "kueue.x-k8s.io/max-exec-time-seconds" not in job["metadata"]["labels"]

    _deactivate_for_requeuing_limit(provider, namespace)
    elapse(kueue, HOUR)

    ended = attempts(root)
    [first] = ended["capped"]
    assert (first["phase"], first["cause"]) == ("failed", "time-limit"), first
    assert first["reason"] == "DeadlineExceeded: Job was active longer than specified deadline"
    assert first["ranSeconds"] >= HOUR
    [stalled] = ended["stalled"]
    assert (stalled["phase"], stalled["cause"]) == ("failed", "node-failure"), stalled
    assert stalled["reason"] == (
        "deactivated by Kueue (DeactivatedDueToRequeuingLimitExceeded: The workload is "
        "deactivated due to exceeding the maximum number of re-queuing retries)"
    )
    code, output = tf(root, "plan", ".")
    assert "resumes after its retry backoff" in output, output

    elapse(kueue, BACKOFF)
    code, output = tf(root, "apply", ".", "--auto-approve")
    assert code == 0, output
    for name, tried in attempts(root).items():
        assert [(a["attempt"], a["phase"]) for a in tried] == [(1, "failed"), (2, "running")], name
    assert not set(jobs) & {j["metadata"]["name"] for j in provider.client.list(JOB, "", namespace)}

    elapse(kueue, HOUR)
    code, output = tf(root, "plan", ".")
    assert "retries exhausted (2 attempts, retries.limit 1)" in output, output
