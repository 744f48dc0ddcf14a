"""Checkpoints on S3 for jobs run by the local provider, end to end through the CLI.

trainform.yaml places checkpoints on `s3://` (storage.checkpoints) and nothing else in the
quickstart's specs changes. Runs against both real S3 servers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.engine.support import QUICKSTART, copy_example
from tests.engine.test_jobs_e2e import JOB, apply, attempts, ok, reference_model, status, tf, wait
from tests.services.s3 import REGION, S3Server

pytestmark = pytest.mark.slow


def on_s3(folder: Path, server: S3Server, bucket: str) -> Path:
    config = folder / "trainform.yaml"
    text = config.read_text()
    store = (
        "  - name: s3\n    type: objectstore\n"
        f"    connection: {{endpointUrl: '{server.endpoint}', region: {REGION}, "
        "addressingStyle: path}\n"
    )
    text = text.replace("      root: .trainform\n", "      root: .trainform\n" + store, 1)
    config.write_text(text + f"storage:\n  checkpoints: s3://{bucket}/checkpoints\n")
    return folder


@pytest.fixture
def s3_loop(tmp_path: Path, s3_env: S3Server) -> tuple[Path, S3Server, str]:
    bucket = s3_env.new_bucket()
    folder = on_s3(copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True), s3_env, bucket)
    ok(folder, "lock", ".", "--env", "ci")
    return folder, s3_env, bucket


def keys(server: S3Server, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {item["Key"]: item for page in pages for item in page.get("Contents", [])}


def test_checkpoints_are_published_kept_evaluated_and_checked(
    s3_loop: tuple[Path, S3Server, str],
) -> None:
    folder, server, bucket = s3_loop
    apply(folder)
    report = wait(folder)
    assert report["phase"] == "succeeded"
    run_prefix = f"checkpoints/research/bigram/{report['runId']}/"
    stored = keys(server, bucket, run_prefix)
    manifests = sorted(k for k in stored if k.endswith("/manifest.json"))
    assert 1 <= len(manifests) <= 3, manifests  # keepLast: 3, enforced on S3
    latest = report["latestValidCheckpoint"]
    assert latest["path"] == f"s3://{bucket}/{run_prefix}{latest['id']}"
    rules = server.client().get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert any(r["Filter"]["Prefix"] == "checkpoints/research/bigram/" for r in rules)

    apply(folder)  # the evaluation
    evaluated = wait(folder)
    assert evaluated["evaluations"][0]["phase"] == "succeeded"
    metrics = f"{run_prefix}evaluations/heldout-perplexity/metrics.json"
    body = server.client().get_object(Bucket=bucket, Key=metrics)["Body"].read()
    assert "perplexity" in json.loads(body)
    protected = server.client().get_object(
        Bucket=bucket, Key=run_prefix + ".trainform/protected.json"
    )
    assert latest["id"] in json.loads(protected["Body"].read())["checkpoints"]
    assert tf(folder, "drift", ".", "--env", "ci").returncode == 0

    victim = next(
        k for k in stored if k.startswith(f"{run_prefix}{latest['id']}/") and "manifest" not in k
    )
    etag = stored[victim]["ETag"].strip('"')
    server.client().delete_object(Bucket=bucket, Key=victim)
    drift = tf(folder, "drift", ".", "--env", "ci", "--format", "json")
    assert drift.returncode == 2, drift.stdout + drift.stderr
    findings = [
        f for f in json.loads(drift.stdout)["findings"] if f["drift"] == "checkpoint-invalid"
    ]
    assert len(findings) == 1
    finding = findings[0]
    assert finding["address"] == JOB
    assert finding["evidence"]["key"] == victim
    assert finding["evidence"]["expectedEtag"] == etag
    assert finding["evidence"]["foundEtag"] is None
    text = tf(folder, "drift", ".", "--env", "ci").stdout
    assert "checkpoint-invalid" in text and victim.rsplit("/", 1)[-1] in text


def test_a_run_resumes_from_s3_on_a_machine_without_its_local_checkpoints(
    s3_loop: tuple[Path, S3Server, str], tmp_path: Path
) -> None:
    folder, server, bucket = s3_loop
    apply(folder, "--var", "stepSeconds=0.15")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = attempts(folder)
        published = [
            k for k in keys(server, bucket, "checkpoints/") if k.endswith("/manifest.json")
        ]
        if rows and rows[-1]["child_pid"] and len(published) >= 2:
            os.kill(rows[-1]["child_pid"], signal.SIGKILL)
            break
        time.sleep(0.05)
    else:
        raise AssertionError("two checkpoints were never published")
    assert wait(folder)["phase"] == "failed"
    shutil.rmtree(attempts(folder)[-1]["checkpoint_dir"])  # only S3 has them now
    step = status(folder)["latestValidCheckpoint"]
    plan = ok(folder, "plan", ".", "--env", "ci", "--var", "stepSeconds=0.15")
    assert f"resume from the latest valid checkpoint {step['id']}" in plan
    apply(folder, "--var", "stepSeconds=0.15")
    finished = wait(folder)
    assert finished["phase"] == "succeeded" and finished["attempt"] == 2
    output = Path(attempts(folder)[-1]["output_dir"]) / "model.json"
    assert json.loads(output.read_text()) == reference_model(folder, tmp_path)
