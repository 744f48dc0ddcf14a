"""Acceptance from the CLI against the Kueue stand-in (the `kueue` fixture) and S3: on a
queue without a cohort and `withinQueue: LowerPriority`, a high-priority job preempts a
lower-priority one of the same queue; Kueue requeues the low one and, once the high one is
done, admits it again with its Job's original template; its pods then resume from the
run's latest valid checkpoint (not the start the attempt was submitted with), and its
timeline shows the preemption: the run it stopped (and the step it reached), the hold, the
run since the re-admission and the step it resumed from, the steps lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.jobs import RunPhase
from trainform.providers.kubernetes.kinds import JOB
from trainform.providers.kubernetes.naming import short_hash
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.providers.kubernetes.resume_entry import ENTRY_NAME
from trainform.providers.kubernetes.timeline import POD
from trainform.providers.objectstore.checkpoints import S3Checkpoints

from tests.engine.support import SpecFolder, run_trainform
from tests.providers.kubernetes.fixtures import INSTANCE, kubernetes_config, unique_prefix
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.registry import RegistryServer, push_image
from tests.services.s3 import REGION, S3Server, credentials_env

__all__ = ["registry_server"]

PLATFORM = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: a100}}
spec:
  provider: k8s
  nodes: 1
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
      nominalQuota: {{gpu: 8, cpu: 64, memory: 512Gi}}
  preemption: {{withinQueue: LowerPriority}}
---
apiVersion: trainform/v1
kind: Project
metadata: {{name: vision}}
spec: {{owners: [leads@example.com]}}
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: train, project: vision}}
spec: {{queue: train, limits: {{gpu: 8}}}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
"""
TRAINING_JOB = """---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: {name}, project: vision}}
spec:
  queue: train
  image: trainer
  priority: {priority}
  command: [python, train.py]
  resources: {{nodes: 1, acceleratorsPerNode: 8, cpu: 8, memory: 32Gi}}
  checkpoint: {{prefix: "s3://{bucket}/vision/{name}/", interval: 10m}}
  maxRuntime: 2h
"""
SHOW = "import os; print(os.environ['TRAINFORM_RESUME_FROM'])"


def _checkpoint(folder: Path, step: int) -> Path:
    folder.mkdir(parents=True)
    data = f"weights {step}".encode() * 64
    (folder / "model.bin").write_bytes(data)
    entry = {"path": "model.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": [entry]}))
    return folder


def _owner(job: str) -> str:
    return f"trainform.dev/address-hash={short_hash(f'TrainingJob/vision/{job}')}"


def _pods(provider: KubernetesProvider, namespace: str, job: str) -> list[dict[str, Any]]:
    return provider.client.list(POD, f"batch.kubernetes.io/job-name={job}", namespace)


def _resumes_from(pod: dict[str, Any], endpoint: str) -> str:
    """Start the pod's container entry here, as the kubelet would, with the pod's
    environment; the job's command replaced by one printing TRAINFORM_RESUME_FROM."""
    container = pod["spec"]["containers"][0]
    assert container["command"][3] == ENTRY_NAME
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {item["name"]: item["value"] for item in container["env"] if "value" in item}
    env |= credentials_env() | {"AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    argv = [*container["command"][:4], sys.executable, "-c", SHOW]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("s3_server", ["moto"], indirect=True)
def test_a_high_priority_job_preempts_and_the_preempted_one_resumes_from_its_latest_checkpoint(
    tmp_path: Path, kueue: KubeAPI, registry_server: RegistryServer, s3_env: S3Server
) -> None:
    prefix, bucket = unique_prefix(), s3_env.new_bucket()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    pushed = push_image(registry_server.url, repository, "v1")
    host = registry_server.host
    extra = (
        f"  - name: registry\n    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
        f"  - name: s3\n    type: objectstore\n"
        f"    connection: {{endpointUrl: '{s3_env.endpoint}', region: {REGION}, "
        f"addressingStyle: path, buckets: [{bucket}]}}\n"
    )
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        kubernetes_config(kueue, prefix).replace("state:", extra + "state:", 1)
    )
    platform = PLATFORM.format(reference=f"{host}/{repository}:v1@{pushed.digest}")
    (root / "platform.yaml").write_text(
        platform + TRAINING_JOB.format(name="low", priority=10, bucket=bucket)
    )
    folder = SpecFolder(root)
    namespace = f"{prefix}vision"

    applied = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    provider = folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    [low] = provider.runs("TrainingJob/vision/low")
    assert low.attempts[-1].phase is RunPhase.RUNNING
    [low_job] = provider.client.list(JOB, _owner("low"), namespace)
    job_name = low_job["metadata"]["name"]
    run_dir = f"s3://{bucket}/vision/low/{low.run_id}"
    store = {"endpoint_url": s3_env.endpoint, "region": REGION, "addressing_style": "path"}
    for step in (100, 200):  # written while it runs, before the preemption
        S3Checkpoints(run_dir, connection=store).publish(
            _checkpoint(tmp_path / "published" / f"step-{step}", step)
        )
    [pod] = _pods(provider, namespace, job_name)
    assert _resumes_from(pod, s3_env.endpoint) == f"{run_dir}/step-200"

    with (root / "platform.yaml").open("a") as specs:
        specs.write(TRAINING_JOB.format(name="high", priority=100, bucket=bucket))
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    [high] = provider.runs("TrainingJob/vision/high")
    assert high.attempts[-1].phase is RunPhase.RUNNING
    [low] = provider.runs("TrainingJob/vision/low")
    attempt = low.attempts[-1]
    assert attempt.phase is RunPhase.QUEUED
    assert attempt.reason.startswith("evicted by Kueue (Preempted: Preempted to accommodate")
    [stopped] = attempt.runs  # held: its next run has not started
    assert (stopped.stopped_by, stopped.last_step) == ("preempted", 200)
    assert stopped.ended_at and stopped.elapsed is not None
    assert _pods(provider, namespace, job_name) == []
    suspended = provider.client.get(JOB, job_name, namespace)
    assert suspended is not None and suspended["spec"]["suspend"] is True
    assert "nodeSelector" not in suspended["spec"]["template"]["spec"]  # the original template

    [high_job] = provider.client.list(JOB, _owner("high"), namespace)
    done = {"type": "Complete", "status": "True", "lastTransitionTime": stopped.ended_at}
    provider.client.merge_patch(
        JOB,
        high_job["metadata"]["name"],
        namespace,
        {"status": {"conditions": [done]}},
        "k",
        "status",
    )
    kueue.kueue.reconcile()

    [low] = provider.runs("TrainingJob/vision/low")
    attempt = low.attempts[-1]
    assert attempt.phase is RunPhase.RUNNING
    assert attempt.resumed_from == ""  # submitted from scratch
    stopped, restarted = attempt.runs
    assert (stopped.stopped_by, stopped.last_step, stopped.resumed_step) == ("preempted", 200, None)
    assert restarted.resumed_step == 200  # the latest valid checkpoint, not the start
    assert attempt.waits[-1].reason.startswith("preempted by Kueue (Preempted to accommodate")
    [pod] = _pods(provider, namespace, job_name)
    assert pod["spec"]["nodeSelector"] == {"example.com/pool": "a100"}
    assert _resumes_from(pod, s3_env.endpoint) == f"{run_dir}/step-200"

    status = run_trainform("status", "-v", "TrainingJob/vision/low", cwd=root, timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "requeued, waited for quota again" in status.stdout, status.stdout
    assert "(step 200), held" in status.stdout and "; lost 0 steps" in status.stdout
    folder.close()
