"""A whole platform on real servers, through the CLI: datasets and checkpoints on S3
(moto and SeaweedFS), images on docker-registry (one referenced, one promoted), a job run by
the local provider reading the S3 data and writing S3 checkpoints. Then, out of band, an
object under the pinned dataset version changes, the image tag moves and a checkpoint object
is deleted: `trainform drift` reports all three, each with its class, address and evidence.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.engine.support import QUICKSTART, copy_example
from tests.engine.test_jobs_e2e import apply, ok, tf, wait
from tests.providers.objectstore.test_storage_e2e import keys, on_s3
from tests.providers.oci.fixtures import registry_server  # noqa: F401 - session fixture
from tests.services.registry import RegistryServer, push_image
from tests.services.s3 import S3Server

pytestmark = pytest.mark.slow
LABEL = "org.opencontainers.image.revision"


def with_registry(folder: Path, registry: RegistryServer, staging: str, production: str) -> None:
    config = folder / "trainform.yaml"
    instance = (
        "  - name: registry\n    type: registry\n"
        f"    connection: {{url: 'http://{registry.host}', insecure: true, "
        f"allowed: ['{registry.host}']}}\n"
    )
    text = config.read_text().replace("    type: objectstore\n", "    type: objectstore\n", 1)
    marker = "state:\n"
    config.write_text(text.replace(marker, instance + marker, 1))
    (folder / "specs" / "images.yaml").write_text(
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: trainer-candidate}\n"
        f"spec:\n  reference: {registry.host}/{staging}:1.0\n  requiredLabels: [{LABEL}]\n"
        "---\n"
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: trainer}\n"
        f"spec:\n  reference: {registry.host}/{production}:1.0\n"
        "  promotedFrom: trainer-candidate\n",
        encoding="utf-8",
    )


def checkpoints_per_environment(folder: Path) -> None:
    """dev and ci share the S3 endpoint: each checkpoints under a prefix of its own, since
    `validate` refuses one prefix both write with different specs."""
    training = folder / "specs" / "training.yaml"
    prefix = '    keepLast: 3\n    prefix: "{{ environment }}/research/bigram"\n'
    training.write_text(training.read_text().replace("    keepLast: 3\n", prefix, 1))


def test_platform_on_s3_and_a_registry_applies_and_drift_reports_all_three(
    tmp_path: Path,
    s3_env: S3Server,
    registry_server: RegistryServer,  # noqa: F811
) -> None:
    bucket = s3_env.new_bucket()
    suffix = uuid.uuid4().hex[:10]
    staging, production = f"ml-staging/{suffix}", f"ml/{suffix}"
    push_image(registry_server.url, staging, "1.0", {LABEL: "abc"}, b"first\n")
    folder = copy_example(QUICKSTART, tmp_path / "platform", jobs=True)
    on_s3(folder, s3_env, bucket, datasets=True)
    with_registry(folder, registry_server, staging, production)
    checkpoints_per_environment(folder)

    ok(folder, "validate", ".", "--env", "ci")
    ok(folder, "lock", ".", "--env", "ci")  # the promotion is not applied yet: its source pins it
    images = json.loads((folder / "trainform.lock").read_text())["images"]
    assert images["Image/trainer"] == images["Image/trainer-candidate"]
    apply(folder)
    report = wait(folder)
    assert report["phase"] == "succeeded", report
    planned = tf(folder, "plan", ".", "--env", "ci", "--locked", "--detailed-exitcode")
    assert planned.returncode in (0, 2), planned.stdout + planned.stderr

    client = s3_env.client()
    data_key = "platform/data/tiny-corpus/v1/part-000.txt"
    client.put_object(Bucket=bucket, Key=data_key, Body=b"changed out of band")
    push_image(registry_server.url, production, "1.0", {LABEL: "def"}, b"moved\n")
    stored = keys(s3_env, bucket, "checkpoints/")
    victim = next(k for k in sorted(stored) if "/step-" in k and not k.endswith("manifest.json"))
    client.delete_object(Bucket=bucket, Key=victim)

    drift = tf(folder, "drift", ".", "--env", "ci", "--format", "json")
    assert drift.returncode == 2, drift.stdout + drift.stderr
    found = {f["drift"]: f for f in json.loads(drift.stdout)["findings"]}
    assert found["data-mutated"]["address"] == "Dataset/tiny-corpus"
    assert found["data-mutated"]["evidence"]["changes"][0]["key"] == "part-000.txt"
    assert found["tag-moved"]["address"] == "Image/trainer"
    evidence = found["tag-moved"]["evidence"]
    assert evidence["pinned"] != evidence["current"]
    assert found["checkpoint-invalid"]["address"] == "TrainingJob/research/bigram"
    assert found["checkpoint-invalid"]["evidence"]["key"] == victim
