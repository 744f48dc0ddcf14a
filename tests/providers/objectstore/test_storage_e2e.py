"""Datasets and checkpoints on S3 for jobs run by the local provider, end to end (CLI).

trainform.yaml places checkpoints (storage.checkpoints) and datasets (storage.datasets) on
`s3://`; nothing else in the quickstart's specs changes. Runs against both real S3 servers.
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
from tests.engine.test_jobs_e2e import (
    JOB,
    apply,
    attempts,
    ok,
    reference_model,
    tf,
    wait,
    with_backoff,
)
from tests.services.s3 import REGION, S3Server

pytestmark = pytest.mark.slow


def on_s3(folder: Path, server: S3Server, bucket: str, datasets: bool = False) -> Path:
    config = folder / "trainform.yaml"
    text = config.read_text()
    store = (
        "  - name: s3\n    type: objectstore\n"
        f"    connection: {{endpointUrl: '{server.endpoint}', region: {REGION}, "
        f"addressingStyle: path, buckets: [{bucket}]}}\n"
    )
    text = text.replace("      root: .trainform\n", "      root: .trainform\n" + store, 1)
    storage = f"storage:\n  checkpoints: s3://{bucket}/checkpoints\n"
    if datasets:
        storage += f"  datasets: s3://{bucket}/platform\n"
        client = server.client()
        for path in sorted((folder / "data").rglob("*")):
            if path.is_file():
                relative = path.relative_to(folder).as_posix()
                client.put_object(Bucket=bucket, Key=f"platform/{relative}", Body=path.read_bytes())
        shutil.rmtree(folder / "data")  # only S3 has the data now
    config.write_text(text + storage)
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
    with_backoff(folder, "4s")
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
    while len(attempts(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the supervisor schedules the retry, 4 s ahead
    first, retry = attempts(folder)
    shutil.rmtree(first["checkpoint_dir"])  # only S3 has them now
    manifests = [k for k in keys(server, bucket, "checkpoints/") if k.endswith("/manifest.json")]
    newest = max(k.split("/")[-2] for k in manifests)
    assert retry["resume_from"] == newest
    finished = wait(folder)  # nobody runs apply: the retry starts after its backoff
    assert finished["phase"] == "succeeded" and finished["attempt"] == 2
    output = Path(attempts(folder)[-1]["output_dir"]) / "model.json"
    assert json.loads(output.read_text()) == reference_model(folder, tmp_path)


def test_datasets_on_s3_feed_the_job_and_a_mutation_is_caught(
    tmp_path: Path, s3_env: S3Server
) -> None:
    bucket = s3_env.new_bucket()
    source = copy_example(QUICKSTART, tmp_path / "pristine", jobs=True)
    folder = on_s3(
        copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True), s3_env, bucket, True
    )
    ok(folder, "lock", ".", "--env", "ci")
    lock = json.loads((folder / "trainform.lock").read_text())
    assert "Dataset/tiny-corpus" in json.dumps(lock)
    apply(folder)
    report = wait(folder)
    assert report["phase"] == "succeeded", report
    output = Path(attempts(folder)[-1]["output_dir"]) / "model.json"
    assert json.loads(output.read_text()) == reference_model(source, tmp_path)

    key = "platform/data/tiny-corpus/v1/part-001.txt"
    client = s3_env.client()
    old = client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    new = client.put_object(Bucket=bucket, Key=key, Body=b"rewritten")["ETag"].strip('"')
    plan = ok(folder, "plan", ".", "--env", "ci")
    assert "data-mutated" in plan
    drift = tf(folder, "drift", ".", "--env", "ci", "--format", "json")
    assert drift.returncode == 2, drift.stdout + drift.stderr
    mutated = [f for f in json.loads(drift.stdout)["findings"] if f["drift"] == "data-mutated"]
    assert [f["address"] for f in mutated] == ["Dataset/tiny-corpus"]
    change = mutated[0]["evidence"]["changes"][0]
    written = client.head_object(Bucket=bucket, Key=key)
    assert change == {
        "change": "changed",
        "key": "part-001.txt",
        "oldEtag": old,
        "newEtag": new,
        "oldSize": change["oldSize"],
        "newSize": len(b"rewritten"),
        "oldVersionId": change["oldVersionId"],
        "newVersionId": written["VersionId"],
        "lastModified": written["LastModified"].strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert change["oldVersionId"] not in ("", None, written["VersionId"])
