"""A TrainingJob on Kubernetes through the engine: plan submits the run as a Job running the
image pinned by digest, a queued run plans no change, and a Job deleted by hand is a failed
attempt the next plan resumes as attempt 2. The image lives in the session's registry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from trainform.planner.plan_model import Action
from trainform.providers.kubernetes.kinds import JOB
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, PLATFORM, kubernetes_config, unique_prefix
from tests.providers.oci.fixtures import registry_server
from tests.services.kube_api import KubeAPI
from tests.services.registry import RegistryServer, push_image

__all__ = ["registry_server"]

JOB_SPEC = """\
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec: {{reference: "{reference}"}}
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: resnet, project: vision}}
spec:
  queue: train
  image: trainer
  command: [python, train.py]
  resources: {{nodes: 1, acceleratorsPerNode: 8, cpu: 16, memory: 64Gi}}
  retries: {{limit: 2}}
"""


@pytest.fixture
def folder(
    tmp_path: Path, kube_api: KubeAPI, registry_server: RegistryServer
) -> Iterator[tuple[SpecFolder, str, str]]:
    prefix = unique_prefix()
    repository = f"ml/{uuid.uuid4().hex[:8]}"
    pushed = push_image(registry_server.url, repository, "v1")
    root = tmp_path / "specs"
    root.mkdir()
    host = registry_server.host
    registry = (
        "  - name: registry\n"
        "    type: registry\n"
        f"    connection: {{url: 'http://{host}', insecure: true, allowed: ['{host}']}}\n"
    )
    config = kubernetes_config(kube_api, prefix).replace("state:", registry + "state:", 1)
    (root / "trainform.yaml").write_text(config)
    (root / "platform.yaml").write_text(
        PLATFORM + JOB_SPEC.format(reference=f"{host}/{repository}:v1")
    )
    spec_folder = SpecFolder(root)
    yield spec_folder, prefix, f"{host}/{repository}@{pushed.digest}"
    spec_folder.close()


def test_a_run_is_submitted_by_digest_and_a_job_deleted_by_hand_is_resumed(
    folder: tuple[SpecFolder, str, str],
) -> None:
    spec_folder, prefix, pinned = folder
    spec_folder.converge()
    provider = spec_folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    namespace = f"{prefix}vision"
    [job] = provider.client.list(JOB, provider.naming.selector, namespace)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == pinned
    assert not spec_folder.plan().has_changes  # queued: nothing to do

    provider.client.delete(JOB, job["metadata"]["name"], namespace)
    plan = spec_folder.plan()

    [change] = [c for c in plan.actionable if c.address == "TrainingJob/vision/resnet"]
    assert change.action is Action.RESUME
    assert "attempt 1 failed: Job deleted outside trainform" in change.reasons
    spec_folder.apply(plan)
    [resumed] = provider.client.list(JOB, provider.naming.selector, namespace)
    assert resumed["metadata"]["labels"]["trainform.dev/attempt"] == "2"
