"""Runs on Kubernetes read their checkpoints and evaluation metrics from S3 (the layout of
providers/jobs.py, through the objectstore provider's reader): a valid checkpoint the job
published is the run's current step, a finished evaluation's metrics are its result."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trainform.providers.base import ProviderContext
from trainform.providers.jobs import RunPhase
from trainform.providers.kubernetes.client import KubeClient, make_api_client
from trainform.providers.kubernetes.jobs import job_name
from trainform.providers.kubernetes.kinds import JOB
from trainform.providers.kubernetes.provider import KubernetesProvider
from trainform.providers.objectstore.checkpoints import S3Checkpoints

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import platform_folder, unique_prefix
from tests.providers.kubernetes.test_jobs import ADDRESS, launch
from tests.services.kube_api import KubeAPI
from tests.services.s3 import REGION, S3Server

RUN = "r-0123456789ab"


def _checkpoint(folder: Path, step: int) -> Path:
    """A checkpoint as a job writes it: its files, then manifest.json."""
    folder.mkdir(parents=True)
    data = b"weights" * 100
    (folder / "model.bin").write_bytes(data)
    files = [{"path": "model.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": files}))
    return folder


def test_checkpoints_and_evaluation_metrics_come_from_s3(
    tmp_path: Path, kube_api: KubeAPI, s3_env: S3Server
) -> None:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, prefix))
    folder.converge()
    folder.close()
    bucket = s3_env.new_bucket()
    store = {"endpoint_url": s3_env.endpoint, "region": REGION, "addressing_style": "path"}
    provider = KubernetesProvider(KubeClient(make_api_client(str(kube_api.kubeconfig), "")))
    provider.configure(
        "k8s",
        {"namespacePrefix": prefix, "namePrefix": prefix},
        ProviderContext(tmp_path, object_store=store),
    )
    checkpoints = f"s3://{bucket}/vision/resnet"
    provider.submit(launch(checkpoint_prefix=checkpoints))
    S3Checkpoints(f"{checkpoints}/{RUN}", connection=store).publish(
        _checkpoint(tmp_path / "step-100", 100)
    )
    evaluation = launch(kind="eval", suite="EvalSuite/vision/mmlu", model_run=RUN)
    provider.submit(evaluation)
    namespace = f"{prefix}vision"
    complete = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    provider.client.merge_patch(
        JOB, job_name(evaluation), namespace, {"status": {"conditions": [complete]}}, "k", "status"
    )
    s3_env.client().put_object(
        Bucket=bucket,
        Key=f"vision/resnet/{RUN}/evaluations/mmlu/metrics.json",
        Body=json.dumps({"accuracy": 0.71}).encode(),
    )

    [run] = provider.runs(ADDRESS)

    assert [(c.id, c.step, c.valid) for c in run.checkpoints] == [("step-100", 100, True)]
    assert run.current_step == 100
    assert run.output_dir == f"{checkpoints}/{RUN}/output"
    [result] = run.evaluations
    assert (result.suite, result.phase, result.metrics) == (
        "EvalSuite/vision/mmlu",
        RunPhase.SUCCEEDED,
        {"accuracy": 0.71},
    )
    provider.close()
