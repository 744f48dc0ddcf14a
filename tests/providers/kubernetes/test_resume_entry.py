"""The container entry of a training attempt (providers/kubernetes/resume_entry.py), run as a
pod runs it, against a real S3 endpoint: it resumes from the run's latest *valid*
checkpoint at every start, not from the one the Job's template names, and it keeps the
submitted one when it cannot read the checkpoints. The job's argv reaches it verbatim."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from trainform.providers.kubernetes.jobs import job_manifest
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import Placement
from trainform.providers.kubernetes.resume_entry import ENTRY_NAME, resume_command
from trainform.providers.objectstore.checkpoints import S3Checkpoints

from tests.providers.kubernetes.test_jobs import launch
from tests.services.s3 import REGION, S3Server, credentials_env

SHOW = "import os, sys; print(os.environ['TRAINFORM_RESUME_FROM'], os.environ['TRAINFORM_RESUME_STEP'], sys.argv[1:])"  # noqa: E501


def checkpoint(folder: Path, step: int) -> Path:
    """A checkpoint as a job writes it: its files, then manifest.json."""
    folder.mkdir(parents=True)
    data = f"weights {step}".encode() * 100
    (folder / "model.bin").write_bytes(data)
    entry = {"path": "model.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": [entry]}))
    return folder


def start(run_dir: str, server: S3Server, submitted: str = "", **extra: str) -> list[str]:
    """Run the entry as a pod would (python3 with boto3 on the PATH), printing what the
    job's command sees: TRAINFORM_RESUME_FROM, TRAINFORM_RESUME_STEP and its argv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= credentials_env() | {"AWS_ENDPOINT_URL": server.endpoint, "AWS_MAX_ATTEMPTS": "1"}
    env |= {
        "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
        "TRAINFORM_CHECKPOINT_DIR": run_dir,
        "TRAINFORM_RESUME_FROM": submitted,
        "TRAINFORM_RESUME_STEP": submitted.rsplit("-", 1)[-1] if submitted else "0",
        **extra,
    }
    argv = resume_command([sys.executable, "-c", SHOW, "$(touch x)", "a b"])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [done.stdout.rstrip("\n"), done.stderr.strip()]


ONE_SERVER = pytest.mark.parametrize("s3_server", ["moto"], indirect=True)


@ONE_SERVER
def test_a_restart_resumes_from_the_latest_valid_checkpoint(
    tmp_path: Path, s3_env: S3Server
) -> None:
    bucket = s3_env.new_bucket()
    run_dir = f"s3://{bucket}/vision/resnet/r-1"
    store = {"endpoint_url": s3_env.endpoint, "region": REGION, "addressing_style": "path"}
    checkpoints = S3Checkpoints(run_dir, connection=store)
    for step in (100, 200, 300):
        checkpoints.publish(checkpoint(tmp_path / f"step-{step}", step))
    s3_env.client().delete_object(Bucket=bucket, Key="vision/resnet/r-1/step-300/model.bin")

    shown, said = start(run_dir, s3_env, submitted=f"{run_dir}/step-100")

    assert shown == f"{run_dir}/step-200 200 ['$(touch x)', 'a b']"
    assert said == (
        f"{ENTRY_NAME}: resuming from {run_dir}/step-200 (step 200), the run's latest valid "
        "checkpoint"
    )
    assert not (Path.cwd() / "x").exists()


@ONE_SERVER
def test_a_run_without_a_valid_checkpoint_starts_from_scratch(s3_env: S3Server) -> None:
    run_dir = f"s3://{s3_env.new_bucket()}/vision/resnet/r-2"
    shown, said = start(run_dir, s3_env)
    assert shown.startswith(" 0 ")
    assert said == f"{ENTRY_NAME}: no valid checkpoint: starting from scratch"


@ONE_SERVER
def test_checkpoints_it_cannot_read_leave_the_submitted_one(s3_env: S3Server) -> None:
    run_dir = "s3://no-such-endpoint/vision/resnet/r-3"
    shown, said = start(
        run_dir, s3_env, submitted=f"{run_dir}/step-7", AWS_ENDPOINT_URL="http://127.0.0.1:9"
    )
    assert shown.startswith(f"{run_dir}/step-7 7 ")
    assert said.endswith(
        f"{ENTRY_NAME}: cannot read the run's checkpoints; resuming from {run_dir}/step-7 "
        "as submitted"
    )


def test_only_training_attempts_with_checkpoints_on_s3_start_through_the_entry() -> None:
    def command(**changes: object) -> list[str]:
        job = job_manifest(Naming(), launch(**changes), Placement(()), None)
        return list(job["spec"]["template"]["spec"]["containers"][0]["command"])

    assert command(checkpoint_prefix="s3://b/p")[3] == ENTRY_NAME
    assert command(checkpoint_prefix="s3://b/p")[4:] == command()
    assert ENTRY_NAME not in command(checkpoint_prefix="s3://b/p", resume="never")
    assert ENTRY_NAME not in command(checkpoint_prefix="/shared/ckpt")
