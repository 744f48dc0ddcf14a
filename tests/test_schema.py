"""`trainform schema` is a JSON Schema (2020-12) that accepts every example and rejects typos."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml_rs
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from trainform.cli import cli
from trainform.specs import RootConfig
from trainform.specs.loader import CONFIG_FILE, discover_files
from trainform.specs.template_rendering import render_document

from tests.helpers import REPO, run_cli

EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if (p / CONFIG_FILE).is_file())


@cache
def schema_of(kind: str | None = None) -> dict[str, Any]:
    """What `trainform schema [KIND]` prints (in-process; one test runs the real command)."""
    result = CliRunner().invoke(cli, ["schema", *([kind] if kind else [])])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@cache
def validator(kind: str | None = None) -> Draft202012Validator:
    return Draft202012Validator(schema_of(kind))


def yaml_documents(path: Path) -> list[Any]:
    """Documents of a YAML file: yaml_rs returns a list only for multi-document files."""
    text = path.read_text(encoding="utf-8")
    loaded = yaml_rs.loads(text, parse_datetime=False)
    multiple = isinstance(loaded, list) and re.search(r"^---", text, re.MULTILINE)
    documents = loaded if multiple else [loaded]
    return [document for document in documents if document is not None]


def template_variables(example: Path) -> dict[str, Any]:
    """What the example's templates see by default: its variables and default environment."""
    (config_document,) = yaml_documents(example / CONFIG_FILE)
    config = RootConfig.model_validate(config_document)
    variables = dict(config.variables)
    if config.default_environment:
        variables.update(config.environments[config.default_environment].variables)
    variables.setdefault("environment", config.default_environment)
    return variables


PURE_TEMPLATE = re.compile(r"^\{\{[^{}]*\}\}$")


def typed(original: Any, rendered: Any) -> Any:
    """`rendered` with each value that was only a template (`"{{ nodes }}"`) read back as the
    YAML scalar it renders to, as an editor sees the value once it is filled in."""
    if isinstance(original, dict):
        return {key: typed(original[key], rendered[key]) for key in original}
    if isinstance(original, list):
        return [typed(a, b) for a, b in zip(original, rendered, strict=True)]
    if isinstance(original, str) and PURE_TEMPLATE.match(original.strip()):
        value = yaml_rs.loads(rendered, parse_datetime=False)
        return value if isinstance(value, str | int | float | bool) else rendered
    return rendered


def example_documents() -> list[Any]:
    params = []
    for example in EXAMPLES:
        variables = template_variables(example)
        for path in discover_files(example):
            for index, document in enumerate(yaml_documents(path)):
                rendered, problems = render_document(document, variables)
                assert not problems, (path, problems)
                name = f"{example.name}/{path.relative_to(example).as_posix()}#{index}"
                params.append(pytest.param(typed(document, rendered), id=name))
    return params


def raw_example_documents() -> list[Any]:
    """Every spec document of every example as written: templates not rendered."""
    return [
        pytest.param(document, id=f"{example.name}/{path.relative_to(example).as_posix()}#{i}")
        for example in EXAMPLES
        for path in discover_files(example)
        for i, document in enumerate(yaml_documents(path))
    ]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    result = run_cli("schema")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema == schema_of()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_quickstart_is_among_the_examples() -> None:
    assert REPO / "examples" / "quickstart" in EXAMPLES


@pytest.mark.parametrize("document", example_documents())
def test_schema_accepts_every_example_document(document: dict[str, Any]) -> None:
    errors = [error.message for error in validator().iter_errors(document)]
    assert errors == []


@pytest.mark.parametrize("document", example_documents())
def test_schema_of_the_documents_kind_accepts_it(document: dict[str, Any]) -> None:
    errors = [error.message for error in validator(document["kind"]).iter_errors(document)]
    assert errors == []


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_config_schema_accepts_every_example_config(example: Path) -> None:
    (config,) = yaml_documents(example / CONFIG_FILE)
    assert [error.message for error in validator("Config").iter_errors(config)] == []


QUEUE = {
    "apiVersion": "trainform/v1",
    "kind": "Queue",
    "metadata": {"name": "research"},
    "spec": {"pools": [{"pool": "a100", "nominalQuota": {"gpu": 8, "memory": "512Gi"}}]},
}


def test_schema_accepts_a_plain_queue() -> None:
    assert validator().is_valid(QUEUE)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param(("spec", "pools", 0, "nominalQuta"), {"gpu": 8}, id="unknown-nested-field"),
        pytest.param(("spec", "surplus"), 1, id="unknown-spec-field"),
        pytest.param(("metadata", "name"), "Research", id="name-not-dns1123"),
        pytest.param(("spec", "pools", 0, "nominalQuota", "memory"), "512GB", id="bad-quantity"),
        pytest.param(("spec", "maxRuntime"), "forever", id="bad-duration"),
        pytest.param(("kind",), "Queu", id="unknown-kind"),
    ],
)
def test_schema_rejects_invalid_documents(path: tuple[Any, ...], value: Any) -> None:
    document = copy.deepcopy(QUEUE)
    node: Any = document
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    assert not validator().is_valid(document)


@pytest.mark.parametrize("document", raw_example_documents())
def test_schema_accepts_every_example_document_as_written(document: dict[str, Any]) -> None:
    """What an editor validates: the document before its templates are rendered."""
    errors = [error.message for error in validator().iter_errors(document)]
    assert errors == []


def split_documents(text: str) -> list[str]:
    """The documents of a YAML stream as text, split at `---` lines (comments kept)."""
    parts = re.split(r"^---[ \t]*$", text, flags=re.MULTILINE)
    return [part for part in parts if yaml_rs.loads(part, parse_datetime=False) is not None]


def test_check_jsonschema_accepts_every_example_document(tmp_path: Path) -> None:
    """check-jsonschema (as a pre-commit hook or CI step would run it) on every document of
    every example file, one document per file as editors validate multi-document files."""
    schema = tmp_path / "trainform.schema.json"
    schema.write_text(json.dumps(schema_of()), encoding="utf-8")
    files = []
    for example in EXAMPLES:
        for path in discover_files(example):
            for index, text in enumerate(split_documents(path.read_text(encoding="utf-8"))):
                name = f"{example.name}--{path.relative_to(example).as_posix()}--{index}.yaml"
                target = tmp_path / name.replace("/", "_")
                target.write_text(text, encoding="utf-8")
                files.append(str(target))
    assert len(files) > 20
    result = subprocess.run(
        [str(Path(sys.executable).with_name("check-jsonschema")), "--schemafile", str(schema),
         "--", *files],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("path", "value", "valid"),
    [
        pytest.param(("spec", "pools", 0, "nominalQuota", "gpu"), "{{ gpus }}", True, id="quota"),
        pytest.param(("metadata", "name"), "{{ team }}-queue", True, id="name-template"),
        pytest.param(("spec", "maxRuntime"), "{{ runtime }}", True, id="duration-template"),
        pytest.param(("spec", "pools", 0, "nominalQuota", "gpu"), "lots", False, id="no-template"),
        pytest.param(("kind",), "{{ kind }}", False, id="kind-is-never-templated"),
    ],
)
def test_templated_values_are_accepted_where_the_loader_renders_them(
    path: tuple[Any, ...], value: Any, valid: bool
) -> None:
    document = copy.deepcopy(QUEUE)
    node: Any = document
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    assert validator().is_valid(document) is valid
    assert validator("Queue").is_valid(document) is valid


def test_config_schema_accepts_no_template() -> None:
    config = {"apiVersion": "trainform/v1", "state": {"backend": "{{ backend }}"}}
    assert not validator("Config").is_valid(config)


def test_config_schema_rejects_an_unknown_field() -> None:
    assert not validator("Config").is_valid({"apiVersion": "trainform/v1", "stat": {}})


def test_schema_for_an_unknown_kind_fails_with_a_suggestion() -> None:
    result = run_cli("schema", "Queu")
    assert result.returncode == 1
    assert "did you mean `Queue`" in result.stderr
    assert "Traceback" not in result.stderr


def test_schema_can_be_written_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "schema.json"
    result = run_cli("schema", "Queue", "--output", str(target))
    assert result.returncode == 0
    assert json.loads(target.read_text(encoding="utf-8")) == schema_of("Queue")
