"""Datasets on S3 through the objectstore provider, against moto and SeaweedFS.

The provider is driven directly (ProviderSet over a spec folder, as the contract suite does)
and, where noted, through the installed `trainform` script. Objects are changed "out of
band" with a plain boto3 client, as someone with bucket access would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import build_desired
from trainform.planner.lockfile import LOCK_FILE
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource, Observation
from trainform.providers.errors import PermanentProviderError
from trainform.providers.objectstore.manifests import S3Manifest
from trainform.providers.objectstore.provider import READERS_TAG, ObjectStoreProvider
from trainform.specs import load_specs

from tests.engine.support import run_trainform
from tests.providers.contract.contract import desired_resource, request_for
from tests.providers.objectstore.fixtures import dataset_folder
from tests.services.s3 import S3Server

ADDRESS = "Dataset/corpus"
VERSION_PREFIX = "datasets/corpus/v1"
MARKER_KEY = "datasets/corpus/.trainform/dataset.json"
PARTS = ("part-000.txt", "part-001.txt", "part-002.txt")


@dataclass
class Corpus:
    """One spec folder declaring Dataset/corpus (v1: three objects) on a fresh bucket."""

    root: Path
    server: S3Server
    bucket: str
    providers: ProviderSet
    provider: ObjectStoreProvider
    resource: DesiredResource

    @property
    def s3(self) -> Any:
        return self.server.client()

    def observe(self, resource: DesiredResource | None = None) -> Observation:
        resource = resource or self.resource
        return self.provider.observe([request_for(resource)])[resource.address]

    def marker(self) -> dict[str, Any]:
        body = self.s3.get_object(Bucket=self.bucket, Key=MARKER_KEY)["Body"].read()
        return json.loads(body)  # type: ignore[no-any-return]

    def keys(self, prefix: str = VERSION_PREFIX) -> dict[str, str]:
        """{key: ETag} of every object under `prefix/`."""
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix + "/"
        )
        return {
            item["Key"]: item["ETag"].strip('"')
            for page in pages
            for item in page.get("Contents", [])
        }

    def tags(self, key: str) -> dict[str, str]:
        answer = self.s3.get_object_tagging(Bucket=self.bucket, Key=key)
        return {tag["Key"]: tag["Value"] for tag in answer["TagSet"]}

    def put(self, relative: str, body: bytes) -> str:
        """Write an object of v1 behind trainform's back; its new ETag."""
        answer = self.s3.put_object(
            Bucket=self.bucket, Key=f"{VERSION_PREFIX}/{relative}", Body=body
        )
        return str(answer["ETag"]).strip('"')


def drop_bucket(server: S3Server, bucket: str) -> None:
    """Remove a test's bucket with every object version in it.

    The S3 servers live for the whole session and `list_owned` searches every bucket when
    a configuration names none: datasets a test leaves behind would show as orphaned in
    later tests' drift reports.
    """
    client = server.client()
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
        doomed = [
            {"Key": item["Key"], "VersionId": item["VersionId"]}
            for item in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if doomed:
            client.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})
    client.delete_bucket(Bucket=bucket)


def open_corpus(root: Path, server: S3Server, policy: str = "Abandon") -> Corpus:
    bucket = server.new_bucket()
    dataset_folder(root, server, bucket, policy=policy)
    specs = load_specs(root)
    providers = ProviderSet(specs.config, root)
    provider = providers.get("s3")
    assert isinstance(provider, ObjectStoreProvider)
    resource = desired_resource(build_desired(specs)[ADDRESS], {})
    return Corpus(root, server, bucket, providers, provider, resource)


@pytest.fixture
def corpus(tmp_path: Path, s3_env: S3Server) -> Iterator[Corpus]:
    opened = open_corpus(tmp_path / "specs", s3_env)
    yield opened
    opened.providers.close()
    drop_bucket(s3_env, opened.bucket)


def with_versions(resource: DesiredResource, versions: list[dict[str, Any]]) -> DesiredResource:
    document = {**resource.document, "spec": {**resource.spec, "versions": versions}}
    return replace(resource, document=document)


def mutation(corpus: Corpus) -> dict[str, Any]:
    """The only data-mutated finding of the corpus's observation."""
    findings = [f for f in corpus.observe().findings if f.kind == "data-mutated"]
    assert len(findings) == 1, findings
    return findings[0].evidence


# manifests and pins ----------------------------------------------------------------------


def test_create_records_the_manifest_digest_in_outputs_marker_resolve_and_lock(
    corpus: Corpus,
) -> None:
    outputs = corpus.provider.create(corpus.resource)

    summary = outputs["versions"]["v1"]
    digest = summary["manifestDigest"]
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert summary["files"] == 3
    marker = corpus.marker()
    assert S3Manifest.from_json(marker["manifests"]["v1"]).digest == digest
    assert marker["outputs"] == outputs
    assert corpus.provider.resolve(corpus.resource) == {"versions": {"v1": summary}}

    locked = run_trainform("lock", ".", cwd=corpus.root)

    assert locked.returncode == 0, locked.stdout + locked.stderr
    lock = json.loads((corpus.root / LOCK_FILE).read_text())
    assert lock["datasets"] == {f"{ADDRESS}@v1": {"manifestDigest": digest}}


def test_an_object_rewritten_under_a_recorded_version_is_data_mutated(corpus: Corpus) -> None:
    corpus.provider.create(corpus.resource)
    old = corpus.keys()[f"{VERSION_PREFIX}/part-001.txt"]
    new = corpus.put("part-001.txt", b"rewritten out of band\n")

    evidence = mutation(corpus)

    assert evidence["version"] == "v1"
    assert evidence["location"] == f"s3://{corpus.bucket}/{VERSION_PREFIX}/"
    assert evidence["expected"] == corpus.marker()["outputs"]["versions"]["v1"]["manifestDigest"]
    assert evidence["found"] != evidence["expected"]
    (change,) = evidence["changes"]
    assert {k: v for k, v in change.items() if not k.endswith(("VersionId", "Modified"))} == {
        "change": "changed",
        "key": "part-001.txt",
        "oldEtag": old,
        "newEtag": new,
        "oldSize": len(b"corpus record 1\n"),
        "newSize": len(b"rewritten out of band\n"),
    }
    assert old != new
    # who/when: the bucket keeps the previous version (readable by its id) and LastModified
    assert change["oldVersionId"] and change["newVersionId"] != change["oldVersionId"]
    previous = corpus.s3.get_object(
        Bucket=corpus.bucket,
        Key=f"{VERSION_PREFIX}/part-001.txt",
        VersionId=change["oldVersionId"],
    )
    assert previous["Body"].read() == b"corpus record 1\n"
    written = datetime.strptime(change["lastModified"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - written) < timedelta(minutes=5)


def test_an_object_added_under_a_recorded_version_is_data_mutated(corpus: Corpus) -> None:
    corpus.provider.create(corpus.resource)
    new = corpus.put("part-003.txt", b"one more\n")

    (change,) = mutation(corpus)["changes"]

    assert {k: v for k, v in change.items() if k != "lastModified"} == {
        "change": "added",
        "key": "part-003.txt",
        "oldEtag": None,
        "newEtag": new,
        "oldSize": None,
        "newSize": len(b"one more\n"),
        "oldVersionId": None,
        "newVersionId": change["newVersionId"],
    }
    assert change["newVersionId"] and change["lastModified"].endswith("Z")


def test_an_object_removed_under_a_recorded_version_is_data_mutated(corpus: Corpus) -> None:
    corpus.provider.create(corpus.resource)
    old = corpus.keys()[f"{VERSION_PREFIX}/part-002.txt"]
    corpus.s3.delete_object(Bucket=corpus.bucket, Key=f"{VERSION_PREFIX}/part-002.txt")

    (change,) = mutation(corpus)["changes"]

    assert change["change"] == "removed"
    assert change["key"] == "part-002.txt"
    assert (change["oldEtag"], change["newEtag"]) == (old, None)


def test_a_version_whose_objects_all_vanished_is_data_missing(corpus: Corpus) -> None:
    corpus.provider.create(corpus.resource)
    for key in corpus.keys():
        corpus.s3.delete_object(Bucket=corpus.bucket, Key=key)

    (finding,) = corpus.observe().findings

    assert finding.kind == "data-missing"
    assert finding.evidence == {
        "version": "v1",
        "location": f"s3://{corpus.bucket}/{VERSION_PREFIX}/",
    }


def test_create_refuses_a_pinned_digest_the_objects_do_not_match(corpus: Corpus) -> None:
    pinned = with_versions(
        corpus.resource, [{"name": "v1", "manifestDigest": "sha256:" + "0" * 64}]
    )

    with pytest.raises(PermanentProviderError, match="pins"):
        corpus.provider.create(pinned)

    assert corpus.observe().exists is False


def test_create_accepts_a_pinned_digest_the_objects_match(corpus: Corpus) -> None:
    digest = corpus.provider.resolve(corpus.resource)["versions"]["v1"]["manifestDigest"]
    pinned = with_versions(corpus.resource, [{"name": "v1", "manifestDigest": digest}])

    outputs = corpus.provider.create(pinned)

    assert outputs["versions"]["v1"]["manifestDigest"] == digest
    assert corpus.observe(pinned).findings == ()


def test_update_after_the_data_changed_refuses_because_versions_are_immutable(
    corpus: Corpus,
) -> None:
    outputs = corpus.provider.create(corpus.resource)
    recorded = corpus.marker()
    corpus.put("part-000.txt", b"changed\n")

    with pytest.raises(PermanentProviderError, match="versions are immutable"):
        corpus.provider.update(corpus.resource, outputs)

    assert corpus.marker() == recorded


# readers -----------------------------------------------------------------------------


def test_every_object_of_the_version_carries_the_readers_tag(corpus: Corpus) -> None:
    corpus.provider.create(corpus.resource)

    keys = sorted(corpus.keys())
    assert keys == [f"{VERSION_PREFIX}/{part}" for part in PARTS]
    for key in [*keys, MARKER_KEY]:
        assert corpus.tags(key)[READERS_TAG] == "research", key


def test_tagging_keeps_the_other_tags_of_data_objects(corpus: Corpus) -> None:
    key = f"{VERSION_PREFIX}/part-000.txt"
    corpus.s3.put_object_tagging(
        Bucket=corpus.bucket,
        Key=key,
        Tagging={"TagSet": [{"Key": "owner", "Value": "data-team"}]},
    )

    corpus.provider.create(corpus.resource)

    assert corpus.tags(key) == {"owner": "data-team", READERS_TAG: "research"}


def test_a_readers_tag_edited_by_hand_shows_in_observe_and_update_retags(corpus: Corpus) -> None:
    outputs = corpus.provider.create(corpus.resource)
    tags = {**corpus.tags(MARKER_KEY), READERS_TAG: "alignment"}
    corpus.s3.put_object_tagging(
        Bucket=corpus.bucket,
        Key=MARKER_KEY,
        Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]},
    )

    live = corpus.observe().live
    assert live is not None and live["spec"]["readers"] == ["alignment"]
    assert live != corpus.resource.document

    corpus.provider.update(corpus.resource, outputs)

    assert corpus.observe().live == corpus.resource.document
    assert corpus.tags(MARKER_KEY)[READERS_TAG] == "research"


# deletion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        pytest.param("Delete", [], id="Delete-removes-the-objects"),
        pytest.param("Abandon", list(PARTS), id="Abandon-keeps-the-objects"),
    ],
)
def test_delete_follows_the_deletion_policy(
    tmp_path: Path, s3_env: S3Server, policy: str, left: list[str]
) -> None:
    corpus = open_corpus(tmp_path / "specs", s3_env, policy=policy)
    try:
        outputs = corpus.provider.create(corpus.resource)

        corpus.provider.delete(ADDRESS, "Dataset", outputs)

        assert sorted(corpus.keys()) == [f"{VERSION_PREFIX}/{part}" for part in left]
        assert corpus.observe().exists is False
        assert corpus.keys("datasets/corpus/.trainform") == {}
    finally:
        corpus.providers.close()
        drop_bucket(s3_env, corpus.bucket)


# where the servers differ from AWS ----------------------------------------------------


def test_the_marker_records_version_ids_on_a_versioned_bucket(corpus: Corpus) -> None:
    """Both servers version objects like AWS does, so the marker's manifest records each
    object's version id (AWS: opaque strings; moto: UUIDs; SeaweedFS: hex strings).

    Differences from AWS the other tests rely on: moto accepts any credentials (a wrong key
    is not refused), SeaweedFS checks them (tests/providers/objectstore/test_errors.py).
    """
    corpus.provider.create(corpus.resource)

    entries = {entry["path"]: entry for entry in corpus.marker()["manifests"]["v1"]}

    assert sorted(entries) == list(PARTS)
    for path, entry in entries.items():
        head = corpus.s3.head_object(Bucket=corpus.bucket, Key=f"{VERSION_PREFIX}/{path}")
        assert entry["versionId"], path
        assert entry["versionId"] == head["VersionId"]


# the CLI, end to end -------------------------------------------------------------------


def test_drift_and_plan_report_an_object_mutated_after_apply(
    tmp_path: Path, s3_env: S3Server, request: pytest.FixtureRequest
) -> None:
    bucket = s3_env.new_bucket()
    request.addfinalizer(lambda: drop_bucket(s3_env, bucket))
    root = dataset_folder(tmp_path / "specs", s3_env, bucket)
    applied = run_trainform("apply", ".", "--auto-approve", cwd=root)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    clean = run_trainform("drift", ".", cwd=root)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    client = s3_env.client()
    key = f"{VERSION_PREFIX}/part-001.txt"
    old = client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
    new = client.put_object(Bucket=bucket, Key=key, Body=b"mutated\n")["ETag"].strip('"')

    text = run_trainform("drift", ".", cwd=root)
    report = run_trainform("drift", ".", "--format", "json", cwd=root)
    plan = run_trainform("plan", ".", cwd=root)

    assert text.returncode == 2, text.stdout + text.stderr
    assert f"data-mutated: {ADDRESS} (s3): " in text.stdout
    assert "changed part-001.txt" in text.stdout
    assert report.returncode == 2, report.stderr
    (finding,) = json.loads(report.stdout)["findings"]
    assert (finding["drift"], finding["address"]) == ("data-mutated", ADDRESS)
    (change,) = finding["evidence"]["changes"]
    assert (change["key"], change["oldEtag"], change["newEtag"]) == ("part-001.txt", old, new)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"[data-mutated] {ADDRESS}: s3: version v1: " in plan.stdout
    assert "changed part-001.txt" in plan.stdout
