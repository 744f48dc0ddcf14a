"""`validate`: environments that share an object store or registry write apart there, or write
the same specs.

staging and prod below have their own state and local folder (test_environments.py's layout)
and share one S3 endpoint and one registry, which nothing serves: validate contacts neither.
Each conflicting case writes one location from both environments with different specs and
expects exit 1 naming both environments, the location and the address at the field's
file:line:column; templated apart, or with the same document in both, it validates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from trainform.cli.commands import cli

from tests.helpers import POOL, PROJECT, QUEUE, run_cli, training_job, write_tree

STAGING, PROD = "a" * 64, "c" * 64

CONFIG = f"""\
apiVersion: trainform/v1
providers:
  - {{name: local, type: local}}
  - {{name: s3, type: objectstore, connection: {{endpointUrl: 'http://127.0.0.1:9'}}}}
  - {{name: registry, type: registry, connection: {{url: 'https://registry.example.com'}}}}
storage: {{checkpoints: 's3://ckpt/runs'}}
environments:
  staging:
    state: {{backend: local, path: .trainform/staging/state.json}}
    providers: {{local: {{root: .trainform/staging}}}}
    variables: {{bucket: data-staging, repo: ml-staging/release, digest: {STAGING},
                version: v2, steps: 10}}
  prod:
    state: {{backend: local, path: .trainform/prod/state.json}}
    providers: {{local: {{root: .trainform/prod}}}}
    variables: {{bucket: data-prod, repo: ml, digest: {PROD}, version: v1, steps: 100}}
"""

IMAGES = """\
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer-candidate}
spec: {reference: "registry.example.com/ml-staging/trainer:2.4@sha256:{{ digest }}"}
---
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer}
spec:
  reference: "registry.example.com/{{ repo }}/trainer:2.4@sha256:{{ digest }}"
  promotedFrom: trainer-candidate
"""

DATASET = """\
apiVersion: trainform/v1
kind: Dataset
metadata: {name: corpus}
spec:
  source: "s3://{{ bucket }}/corpus"
  format: jsonl
  versions: [{name: "{{ version }}"}]
"""

JOB = training_job(
    datasets="[]",
    parameters='{steps: "{{ steps }}"}',
    extra='  checkpoint:\n    interval: 10m\n    prefix: "{{ environment }}/bigram"\n',
)


SHARED_CHECKPOINTS = ("jobs.yaml", '    prefix: "{{ environment }}/bigram"\n', "")
"""Drop the job's prefix: both environments checkpoint under storage's <base>/research/bigram."""


def platform(root: Path, replace: tuple[str, str, str] | None = None) -> Path:
    """The platform written apart; `replace` = (file, old, new) makes one place shared."""
    files = {
        "trainform.yaml": CONFIG,
        "platform.yaml": "---\n".join([PROJECT, POOL, QUEUE]),
        "images.yaml": IMAGES,
        "datasets.yaml": DATASET,
        "jobs.yaml": JOB,
    }
    if replace is not None:
        name, old, new = replace
        assert old in files[name]
        files[name] = files[name].replace(old, new)
    write_tree(root, files)
    return root


def position(root: Path, file: str, line_with: str, before: str) -> str:
    """file:line:column of the first line holding `line_with`, just after `before`."""
    lines = (root / file).read_text().splitlines()
    number, line = next((n, line) for n, line in enumerate(lines, 1) if line_with in line)
    return f"{root / file}:{number}:{line.index(before) + len(before) + 1}"


def test_environments_writing_apart_on_shared_services_validate(tmp_path: Path) -> None:
    root = platform(tmp_path / "specs")
    for environment in ("staging", "prod"):
        result = run_cli("validate", str(root), "--env", environment)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"(environment {environment})" in result.stdout


@pytest.mark.parametrize(
    ("replace", "summary", "address", "file", "field", "found"),
    [
        pytest.param(
            ("datasets.yaml", "s3://{{ bucket }}/corpus", "s3://shared/corpus"),
            "the dataset source s3://shared/corpus on the S3 endpoint http://127.0.0.1:9",
            "Dataset/corpus", "datasets.yaml", "spec.source", "spec.versions differ",
            id="dataset-source",
        ),
        pytest.param(
            ("images.yaml", "{{ repo }}/trainer", "ml/trainer"),
            "the promoted tag registry.example.com/ml/trainer:2.4 on the registry "
            "https://registry.example.com",
            "Image/trainer", "images.yaml", "spec.reference", "spec.reference differ",
            id="promoted-tag",
        ),
        pytest.param(
            SHARED_CHECKPOINTS,
            "the checkpoint prefix s3://ckpt/runs/research/bigram on the S3 endpoint",
            "TrainingJob/research/bigram", "jobs.yaml", "spec.checkpoint",
            "spec.parameters.steps differ",
            id="checkpoint-prefix",
        ),
    ],
)  # fmt: skip
def test_one_place_written_with_different_specs_is_refused_at_its_field(
    tmp_path: Path,
    replace: tuple[str, str, str],
    summary: str,
    address: str,
    file: str,
    field: str,
    found: str,
) -> None:
    root = platform(tmp_path / "specs", replace)
    result = run_cli("validate", str(root), "--env", "staging")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert (
        f"error[shared-environment]: environments `prod` and `staging` both write {summary}"
        in output
    )
    anchor = {
        "spec.source": "  source: ", "spec.reference": "  reference: ", "spec.checkpoint": "  "
    }  # fmt: skip
    where = position(root, file, f"  {field.rsplit('.', 1)[1]}:", anchor[field])
    assert f"--> {where}\n" in output
    assert f"address:  {address}\n" in output and f"field:    {field}\n" in output
    assert f"found:    {found}\n" in output
    assert "template the location by environment" in output
    assert "applying `staging` would overwrite what `prod` wrote there" in output
    assert output.count("error[shared-environment]") == 1


def test_one_place_written_with_the_same_specs_validates(tmp_path: Path) -> None:
    # the shared checkpoint prefix again, but the same --var reaches both environments
    root = platform(tmp_path / "specs", SHARED_CHECKPOINTS)
    result = run_cli("validate", str(root), "--env", "prod", "--var", "steps=7")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(CONFIG.split("environments:")[0], id="no-environments"),
        pytest.param(
            CONFIG.replace(
                "providers: {local: {root: .trainform/staging}}",
                "providers: {local: {root: .trainform/staging}, "
                "s3: {endpointUrl: 'http://127.0.0.1:10'}, registry: {url: 'https://r2.example.com'}}",
            ),
            id="own-endpoints",
        ),
    ],
)  # fmt: skip
def test_without_a_shared_data_service_validate_loads_the_specs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str
) -> None:
    import trainform.planner.shared_writes as shared_writes

    def refuse(*args: object, **kwargs: object) -> list[object]:
        raise AssertionError("the specs were loaded again")

    monkeypatch.setattr(shared_writes, "shared_write_diagnostics", refuse)
    root = platform(tmp_path / "specs", SHARED_CHECKPOINTS)
    (root / "trainform.yaml").write_text(config)
    variables = ("bucket=data", "repo=ml", f"digest={PROD}", "version=v1", "steps=1")
    arguments = ["--env=staging"] if "environments" in config else [f"--var={v}" for v in variables]
    result = CliRunner().invoke(cli, ["validate", str(root), *arguments])
    assert result.exit_code == 0, result.output
    assert "are valid" in result.output
