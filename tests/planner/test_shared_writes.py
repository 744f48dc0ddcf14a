"""What environments write on the data services they share, and when two of them disagree.

In-process: spec folders written to tmp_path, loaded once per environment, no servers (the
objectstore and registry instances point at endpoints nothing listens on: nothing is
contacted). The CLI side is in tests/cli/test_shared_writes.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.shared_writes import collect_writes, shared_write_diagnostics
from trainform.specs import RootConfig, Severity, load_specs
from trainform.specs.environments import data_endpoint, environments_sharing_data

from tests.helpers import POOL, PROJECT, QUEUE, training_job, write_tree

S3 = "S3 endpoint http://127.0.0.1:9"
REGISTRY = "registry https://registry.example.com"
DIGEST = "sha256:" + "b" * 64
JOB = "TrainingJob/research"

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local}
  - {name: s3, type: objectstore, connection: {endpointUrl: 'http://127.0.0.1:9/'}}
  - {name: registry, type: registry, connection: {url: 'https://registry.example.com'}}
storage: {datasets: 's3://data/platform', checkpoints: 's3://ckpt/runs'}
environments:
  staging:
    state: {backend: local, path: .trainform/staging/state.json}
    providers: {local: {root: .trainform/staging}%s}
    variables: {steps: 10, version: v2}
  prod:
    state: {backend: local, path: .trainform/prod/state.json}
    providers: {local: {root: .trainform/prod}}
    variables: {steps: 100, version: v1}
"""

IMAGES = f"""\
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer-candidate}}
spec: {{reference: "registry.example.com/ml-staging/trainer:2.4@{DIGEST}"}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: trainer}}
spec:
  reference: "registry.example.com:443/ml/trainer:2.4@{DIGEST}"
  promotedFrom: trainer-candidate
"""

DATASETS = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {name: corpus}
spec:
  source: corpus
  format: jsonl
  versions: [{name: "{{ version }}"}]
---
apiVersion: trainform/v1
kind: Dataset
metadata: {name: local-data}
spec: {source: s3://elsewhere/x, format: jsonl, versions: [{name: v1}], provider: local}
"""

JOBS = training_job(
    datasets="[]", parameters='{steps: "{{ steps }}"}', extra="  checkpoint: {interval: 10m}\n"
) + "---\n" + training_job(
    name="tuned",
    datasets="[]",
    extra="  checkpoint: {interval: 10m, prefix: 's3://tuned/{{ environment }}/'}\n",
)  # fmt: skip


def platform(root: Path, staging_s3: str = "") -> Path:
    write_tree(
        root,
        {
            "trainform.yaml": CONFIG % staging_s3,
            "platform.yaml": "---\n".join([PROJECT, POOL, QUEUE]),
            "images.yaml": IMAGES,
            "datasets.yaml": DATASETS,
            "jobs.yaml": JOBS,
        },
    )
    return root


def test_writes_are_the_placed_dataset_source_the_promoted_tag_and_s3_checkpoints(
    tmp_path: Path,
) -> None:
    specs = load_specs(platform(tmp_path), environment="staging")
    writes = collect_writes(specs)
    assert {key: (w.address, w.what) for key, w in writes.items()} == {
        (S3, "s3://data/platform/corpus"): ("Dataset/corpus", "dataset source"),
        (REGISTRY, "registry.example.com/ml/trainer:2.4"): ("Image/trainer", "promoted tag"),
        (S3, "s3://ckpt/runs/research/bigram"): (f"{JOB}/bigram", "checkpoint prefix"),
        (S3, "s3://tuned/staging"): (f"{JOB}/tuned", "checkpoint prefix"),
    }  # fmt: skip
    # a referenced image and a dataset held by the local provider write nothing there
    assert writes[(S3, "s3://ckpt/runs/research/bigram")].field == ("spec", "checkpoint")
    assert writes[(S3, "s3://tuned/staging")].field == ("spec", "checkpoint", "prefix")
    assert set(collect_writes(specs, [REGISTRY])) == {
        (REGISTRY, "registry.example.com/ml/trainer:2.4")
    }


def test_environments_sharing_data_pair_the_selected_one_with_each_other(tmp_path: Path) -> None:
    config = load_specs(platform(tmp_path), environment="prod").base_config
    assert isinstance(config, RootConfig)
    shared = frozenset({S3, REGISTRY})
    assert environments_sharing_data(config, "prod") == [("prod", "staging", shared)]
    assert environments_sharing_data(config, None) == [("prod", "staging", shared)]
    apart = load_specs(
        platform(tmp_path / "apart", ", s3: {endpointUrl: 'http://127.0.0.1:10'}"),
        environment="prod",
    ).base_config
    assert apart is not None
    assert environments_sharing_data(apart, "prod") == [("prod", "staging", frozenset({REGISTRY}))]


@pytest.mark.parametrize(
    ("url", "same"),
    [
        pytest.param("https://REGISTRY.example.com:443/", True, id="case-port-slash"),
        pytest.param("http://registry.example.com", False, id="scheme"),
        pytest.param("https://registry.example.com:5000", False, id="port"),
    ],
)
def test_a_registry_endpoint_is_its_normalized_url(url: str, same: bool) -> None:
    config = RootConfig.model_validate(
        {
            "apiVersion": "trainform/v1",
            "providers": [
                {"name": "a", "type": "registry", "connection": {"url": url}},
                {"name": "b", "type": "registry", "connection": {"url": "https://registry.example.com"}},
                {"name": "c", "type": "objectstore", "connection": {"region": "eu-west-1"}},
            ],
        }
    )  # fmt: skip
    a, b, c = config.providers
    assert (data_endpoint(a) == data_endpoint(b)) is same
    assert data_endpoint(c) == "AWS S3 in region eu-west-1"


def test_only_locations_written_with_different_documents_are_errors(tmp_path: Path) -> None:
    specs = load_specs(platform(tmp_path), environment="staging")
    found = shared_write_diagnostics(specs)
    assert {(d.address, d.field, d.found) for d in found} == {
        ("Dataset/corpus", "spec.source", "spec.versions differ"),
        ("TrainingJob/research/bigram", "spec.checkpoint", "spec.parameters.steps differ"),
    }
    for diagnostic in found:
        assert diagnostic.severity is Severity.ERROR and diagnostic.code == "shared-environment"
        assert "`prod` and `staging`" in diagnostic.summary
        assert diagnostic.location is not None
        assert diagnostic.location.file.startswith(str(tmp_path))
    # the same --var for both makes the documents the same again
    same = ["steps=5", "version=v1"]
    agreed = load_specs(tmp_path, environment="staging", variables=same)
    assert shared_write_diagnostics(agreed, variables=same) == []


def test_two_resources_at_one_location_conflict_even_with_like_documents(tmp_path: Path) -> None:
    root = platform(tmp_path)
    jobs = (root / "jobs.yaml").read_text()
    # staging's job `other` checkpoints where prod's `tuned` does
    jobs += "---\n" + training_job(
        name="other",
        datasets="[]",
        extra="  checkpoint:\n    interval: 10m\n"
        "    prefix: s3://tuned/{{ environment == 'staging' and 'prod' or 'none' }}\n",
    )
    (root / "jobs.yaml").write_text(jobs.replace('{steps: "{{ steps }}"}', "{}"))
    (root / "datasets.yaml").write_text(DATASETS.replace('"{{ version }}"', "v1"))
    specs = load_specs(root, environment="staging")
    [conflict] = shared_write_diagnostics(specs)
    assert conflict.address == "TrainingJob/research/other"
    assert conflict.found == "TrainingJob/research/tuned of `prod` writes it too"
    assert "checkpoint prefix s3://tuned/prod on the S3 endpoint" in conflict.summary


def test_an_environment_whose_specs_do_not_load_is_named_not_compared(tmp_path: Path) -> None:
    root = platform(tmp_path)
    config = (root / "trainform.yaml").read_text()
    (root / "trainform.yaml").write_text(config.replace("{steps: 100, version: v1}", "{}"))
    specs = load_specs(root, environment="staging")
    [warning] = shared_write_diagnostics(specs)
    assert warning.severity is Severity.WARNING
    assert "the specs of `prod` do not load" in warning.summary
