"""ModelRelease end to end through the installed `trainform` command, on the session's real
docker-registry and moto S3 server: examples/release (the quickstart's bigram job and its
evaluation gate) trains, evaluates, then releases the run; the artifact is on the registry
and in S3 with its provenance, the plan after is empty, `lineage` walks back from the
registry reference; a failed gate and an evaluation on another dataset version are refused
at plan with file:line and the numbers; a tag moved by hand shows in drift.

One applied spec folder is shared by the module (training takes a few seconds); tests that
change specs work on copies of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.engine.support import run_trainform
from tests.helpers import REPO
from tests.services.registry import RegistryServer, head_digest, push_image
from tests.services.s3 import S3Server, credentials_env

pytestmark = pytest.mark.parametrize("s3_server", ["moto"], indirect=True)

EXAMPLE = REPO / "examples" / "release"
RELEASE = "ModelRelease/research/bigram"


@dataclass
class Released:
    root: Path
    registry: RegistryServer
    s3: S3Server
    repository: str
    bucket: str
    plan: str

    def trainform(self, *args: str, root: Path | None = None) -> tuple[int, str]:
        folder = root or self.root
        done = run_trainform(*args, "--env", "ci", cwd=folder, timeout=120)
        return done.returncode, done.stdout + done.stderr

    def copy(self, into: Path) -> Path:
        shutil.copytree(self.root, into, symlinks=True)
        return into


def configure(root: Path, registry: RegistryServer, s3: S3Server, repository: str, bucket: str):
    config = (root / "trainform.yaml").read_text(encoding="utf-8")
    config = config.replace("http://127.0.0.1:5000", registry.url)
    config = config.replace("127.0.0.1:5000", registry.host)
    config = config.replace("http://127.0.0.1:9000", s3.endpoint)
    config = config.replace("buckets: [models]", f"buckets: [{bucket}]")
    (root / "trainform.yaml").write_text(config, encoding="utf-8")
    release = (root / "specs" / "release.yaml").read_text(encoding="utf-8")
    release = release.replace("models/bigram", repository).replace(
        "s3://models/", f"s3://{bucket}/"
    )
    (root / "specs" / "release.yaml").write_text(release, encoding="utf-8")


def step(root: Path, *args: str) -> str:
    done = run_trainform(*args, "--env", "ci", cwd=root, timeout=120)
    assert done.returncode == 0, (args, done.stdout + done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def released(
    registry_server: RegistryServer, s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Released]:
    suffix = uuid.uuid4().hex[:10]
    repository, bucket = f"models/bigram-{suffix}", f"rel-{suffix}"
    root = tmp_path_factory.mktemp("release") / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".trainform", "trainform.lock"))
    configure(root, registry_server, s3_server, repository, bucket)
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            patch.delenv(key)
        for key, value in credentials_env().items():
            patch.setenv(key, value)
        s3_server.client().create_bucket(Bucket=bucket)
        job = "TrainingJob/research/bigram"
        step(root, "lock", ".")
        step(root, "apply", ".", "--auto-approve", "--target", job)  # submits the run
        step(root, "status", "--wait")
        step(root, "apply", ".", "--auto-approve", "--target", job)  # evaluates it
        step(root, "status", "--wait")
        plan = step(root, "apply", ".", "--locked", "--auto-approve")  # prints its plan
        yield Released(root, registry_server, s3_server, repository, bucket, plan)


def test_the_plan_shows_run_gate_and_digest_then_the_artifact_is_published(
    released: Released,
) -> None:
    plan = released.plan
    assert f"+ {RELEASE}" in plan, plan
    state = json.loads((released.root / ".trainform/ci/state.json").read_text(encoding="utf-8"))
    section = state["resources"][RELEASE]["spec"]["release"]
    run_id, digest = section["runId"], section["digest"]
    assert f"run {run_id} of TrainingJob/research/bigram" in plan
    assert (
        "gate EvalSuite/research/heldout-perplexity: perplexity" in plan and "<= 30: PASS" in plan
    )
    assert f"artifact {digest}" in plan
    # on the registry: the tag resolves to the planned digest; the manifest carries provenance
    assert head_digest(released.registry.url, released.repository, "1.0.0") == digest
    manifest = released_manifest(released, digest)
    assert manifest["artifactType"] == "application/vnd.trainform.model.v1"
    annotations = manifest["annotations"]
    assert annotations["dev.trainform.release.run"] == run_id
    assert "Dataset/tiny-corpus@v1" in annotations["dev.trainform.release.datasets"]
    assert annotations["dev.trainform.release.lockDigest"].startswith("sha256:")
    assert json.loads(annotations["dev.trainform.release.evaluations"])[0]["verdict"] == "pass"
    titles = [
        layer["annotations"]["org.opencontainers.image.title"] for layer in manifest["layers"]
    ]
    assert titles == ["trainform-files.json", "model.json"]
    # in S3: the file, the files manifest and the record with the same digest
    client = released.s3.client()
    listed = client.list_objects_v2(Bucket=released.bucket)["Contents"]
    keys = sorted(entry["Key"] for entry in listed)
    base = "releases/bigram/1.0.0"
    assert keys == [
        f"{base}/.trainform/release.json",
        f"{base}/model.json",
        f"{base}/trainform-files.json",
    ]
    record = json.loads(client.get_object(Bucket=released.bucket, Key=keys[0])["Body"].read())
    assert (
        record["digest"] == digest and record["annotations"]["dev.trainform.release.run"] == run_id
    )
    # the plan right after is empty (other tests' objects on the shared registry are orphans)
    code, output = released.trainform("plan", ".", "--locked", "--detailed-exitcode")
    assert "No changes." in output, output
    findings = [line for line in output.splitlines() if line.startswith("  - ")]
    assert all("[orphaned]" in line for line in findings), output


def released_manifest(released: Released, digest: str, repository: str = "") -> dict:
    response = requests.get(
        f"{released.registry.url}/v2/{repository or released.repository}/manifests/{digest}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        timeout=10,
    )
    response.raise_for_status()
    return response.json()


def test_lineage_walks_back_from_the_registry_reference(released: Released) -> None:
    reference = f"{released.registry.host}/{released.repository}:1.0.0"
    code, output = released.trainform("lineage", reference)
    assert code == 0, output
    assert f"{RELEASE} version 1.0.0" in output
    assert "gate:      perplexity" in output and "PASS" in output
    assert "dataset:     Dataset/tiny-corpus@v1 sha256:" in output
    code, output = released.trainform("lineage", f"s3://{released.bucket}/releases/bigram/1.0.0/")
    assert code == 0 and f"{RELEASE} version 1.0.0" in output, output
    document = json.loads(
        run_trainform(
            "lineage", reference, "--format", "json", "--env", "ci", cwd=released.root
        ).stdout
    )
    assert document["formatVersion"] == 1
    assert document["release"]["runId"] == document["lineage"]["runId"]
    assert document["release"]["evaluations"][0]["gates"][0]["status"] == "pass"
    assert document["lineage"]["datasets"][0]["dataset"] == "Dataset/tiny-corpus@v1"
    code, output = released.trainform("status")
    assert code == 0 and f"{RELEASE}  1.0.0    {document['release']['runId']}" in output, output


NEW_RELEASE = """\
---
apiVersion: trainform/v1
kind: ModelRelease
metadata:
  name: bigram-next
  project: research
spec:
  job: bigram
  evaluations: [heldout-perplexity]
  version: "2.0.0"
  registry:
    repository: {repository}
"""


def test_a_failed_gate_is_refused_at_plan_with_its_numbers(
    released: Released, tmp_path: Path
) -> None:
    root = released.copy(tmp_path / "strict")
    training = root / "specs" / "training.yaml"
    training.write_text(
        training.read_text(encoding="utf-8").replace("threshold: 30.0", "threshold: 1.5"),
        encoding="utf-8",
    )
    with (root / "specs" / "release.yaml").open("a", encoding="utf-8") as handle:
        handle.write(NEW_RELEASE.format(repository=released.repository))
    code, output = released.trainform("plan", ".", root=root)
    assert code == 1, output
    assert "ModelRelease/research/bigram-next (specs/release.yaml:" in output
    assert "spec.evaluations[0]: EvalSuite/research/heldout-perplexity on run r-" in output
    assert "gate fail: perplexity" in output and "<= 1.5: FAIL" in output
    # the release already published is not judged again: it stays as it is
    assert f"{RELEASE} (" not in output


def test_an_evaluation_on_another_dataset_version_is_refused(
    released: Released, tmp_path: Path
) -> None:
    root = released.copy(tmp_path / "v2")
    (root / "data/heldout/v2").mkdir()
    (root / "data/heldout/v2/heldout.txt").write_text("another held-out text\n", encoding="utf-8")
    data = root / "specs" / "data.yaml"
    data.write_text(
        data.read_text(encoding="utf-8").replace(
            "  source: data/heldout\n  format: text\n  versions:\n    - name: v1\n",
            "  source: data/heldout\n  format: text\n  versions:\n    - name: v1\n    - name: v2\n",
        ),
        encoding="utf-8",
    )
    training = root / "specs" / "training.yaml"
    training.write_text(
        training.read_text(encoding="utf-8").replace("[heldout@v1]", "[heldout@v2]"),
        encoding="utf-8",
    )
    with (root / "specs" / "release.yaml").open("a", encoding="utf-8") as handle:
        handle.write(NEW_RELEASE.format(repository=released.repository))
    code, output = released.trainform("plan", ".", root=root)
    assert code == 1, output
    assert "ModelRelease/research/bigram-next (specs/release.yaml:" in output
    assert "on Dataset/heldout@v1 (sha256:" in output, output
    assert "but the suite declares Dataset/heldout@v2 (sha256:" in output, output


def test_a_tag_the_release_does_not_own_is_never_moved(released: Released, tmp_path: Path) -> None:
    root = released.copy(tmp_path / "taken")
    foreign = push_image(released.registry.url, released.repository, "2.0.0", payload=b"other\n")
    with (root / "specs" / "release.yaml").open("a", encoding="utf-8") as handle:
        handle.write(NEW_RELEASE.format(repository=released.repository))
    code, output = released.trainform("apply", ".", "--auto-approve", root=root)
    assert code == 1, output
    assert f"{released.repository}:2.0.0 already points at {foreign.digest}" in output, output
    assert "a release never moves a tag it does not own" in output
    assert head_digest(released.registry.url, released.repository, "2.0.0") == foreign.digest
    marker = head_digest(released.registry.url, released.repository, "2.0.0.trainform")
    assert marker is None  # refused before anything was written


def test_import_reads_the_published_release_back_and_the_plan_is_empty(
    released: Released,
) -> None:
    state_file = released.root / ".trainform/ci/state.json"
    before = json.loads(state_file.read_text(encoding="utf-8"))["resources"][RELEASE]
    code, output = released.trainform("state", "rm", RELEASE)
    assert code == 0, output
    reference = f"{released.registry.host}/{released.repository}:1.0.0"
    code, output = released.trainform("import", RELEASE, reference)
    assert code == 0, output
    after = json.loads(state_file.read_text(encoding="utf-8"))["resources"][RELEASE]
    assert after["spec"]["release"]["digest"] == before["spec"]["release"]["digest"]
    assert after["spec"]["release"]["evaluations"] == before["spec"]["release"]["evaluations"]
    code, output = released.trainform("plan", ".", "--locked", "--detailed-exitcode")
    assert "No changes." in output, output


PROMOTION = """\
---
apiVersion: trainform/v1
kind: ModelRelease
metadata:
  name: {name}
  project: research
spec:
  promoteFrom: bigram
  version: "1.0.0"
  registry:
    repository: {repository}
    tag: {tag}
"""


def test_promotion_copies_the_same_digest_to_another_repository(
    released: Released, tmp_path: Path
) -> None:
    root = released.copy(tmp_path / "promote")
    state = json.loads((root / ".trainform/ci/state.json").read_text(encoding="utf-8"))
    section = state["resources"][RELEASE]["spec"]["release"]
    digest, production = section["digest"], released.repository + "-prod"
    release = root / "specs" / "release.yaml"
    with release.open("a", encoding="utf-8") as handle:
        handle.write(PROMOTION.format(name="bigram-prod", repository=production, tag="production"))
    code, output = released.trainform("apply", ".", "--auto-approve", root=root)
    assert code == 0, output
    assert "+ ModelRelease/research/bigram-prod" in output, output
    assert f"promotion of {RELEASE} (from {RELEASE}'s run {section['runId']})" in output
    assert f"to {production}:production, same digest {digest}, no rebuild" in output
    assert f"relies on the gates of {RELEASE}" in output
    assert head_digest(released.registry.url, production, "production") == digest
    annotations = released_manifest(released, digest, production)["annotations"]
    assert annotations["dev.trainform.release.run"] == section["runId"]
    code, output = released.trainform("plan", ".", "--detailed-exitcode", root=root)
    assert "No changes." in output, output


REGRESSION_GATE = """\
    - metric: perplexity
      op: "<="
      threshold: 0.5
      compareTo: {release: bigram}
"""


def test_a_regression_against_the_released_model_is_refused(
    released: Released, tmp_path: Path
) -> None:
    root = released.copy(tmp_path / "regress")
    state = json.loads((root / ".trainform/ci/state.json").read_text(encoding="utf-8"))
    evaluation = state["resources"][RELEASE]["spec"]["release"]["evaluations"][0]
    before = evaluation["metrics"]["perplexity"]
    training = root / "specs" / "training.yaml"
    text = training.read_text(encoding="utf-8")
    training.write_text(text.replace("smoothing: 0.1", "smoothing: 25.0"), encoding="utf-8")
    job = "TrainingJob/research/bigram"
    for _ in range(2):  # a new run with heavier smoothing (a worse model), then its evaluation
        step(root, "apply", ".", "--auto-approve", "--target", job)
        step(root, "status", "--wait")
    text = training.read_text(encoding="utf-8")
    training.write_text(
        text.replace("      threshold: 30.0\n", "      threshold: 30.0\n" + REGRESSION_GATE),
        encoding="utf-8",
    )
    with (root / "specs" / "release.yaml").open("a", encoding="utf-8") as handle:
        handle.write(NEW_RELEASE.format(repository=released.repository))
    code, output = released.trainform("plan", ".", root=root)
    assert code == 1, output
    assert "ModelRelease/research/bigram-next (specs/release.yaml:" in output, output
    found = re.search(
        r"spec\.evaluations\[0\]: EvalSuite/research/heldout-perplexity on run r-\w+: gate "
        rf"fail: perplexity ([0-9.]+) <= released {RELEASE} 1\.0\.0 \(run r-\w+\) "
        r"([0-9.]+) \+ 0\.5: FAIL",
        output,
    )
    assert found, output
    assert float(found.group(2)) == pytest.approx(before, rel=1e-5)
    assert float(found.group(1)) > before + 0.5


def test_a_tag_moved_by_hand_shows_in_drift_and_the_plan_restores_it(released: Released) -> None:
    state = json.loads((released.root / ".trainform/ci/state.json").read_text(encoding="utf-8"))
    digest = state["resources"][RELEASE]["spec"]["release"]["digest"]
    other = push_image(released.registry.url, released.repository, "1.0.0", payload=b"not it\n")
    drift = run_trainform("drift", ".", "--format", "json", "--env", "ci", cwd=released.root)
    assert drift.returncode == 2, drift.stdout + drift.stderr
    report = json.loads(drift.stdout)
    mine = [f for f in report["findings"] if f["address"] == RELEASE]
    kinds = {f["drift"] for f in mine}
    assert "tag-moved" in kinds, mine
    moved = next(f for f in mine if f["drift"] == "tag-moved")
    assert other.digest in moved["message"] and digest in moved["message"]
    code, output = released.trainform("apply", ".", "--locked", "--auto-approve")
    assert code == 0, output
    assert head_digest(released.registry.url, released.repository, "1.0.0") == digest


def test_destroy_unpublishes_and_keeps_the_artifact(released: Released) -> None:
    state = json.loads((released.root / ".trainform/ci/state.json").read_text(encoding="utf-8"))
    files = state["resources"][RELEASE]["spec"]["release"]["files"]
    code, output = released.trainform("destroy", ".", "--auto-approve")
    assert code == 0, output
    assert head_digest(released.registry.url, released.repository, "1.0.0") is None
    assert head_digest(released.registry.url, released.repository, "1.0.0.trainform") is None
    blob = f"{released.registry.url}/v2/{released.repository}/blobs/{files[0]['digest']}"
    assert requests.head(blob, timeout=10).status_code == 200  # the blobs stay
    client = released.s3.client()
    keys = {e["Key"] for e in client.list_objects_v2(Bucket=released.bucket)["Contents"]}
    assert keys == {
        "releases/bigram/1.0.0/model.json",
        "releases/bigram/1.0.0/trainform-files.json",
    }
