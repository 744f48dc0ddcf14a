"""The `trainform` console script end to end: exit codes, output formats, no tracebacks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import BASE, CONFIG, REPO, TRAINFORM, run_cli, training_job, write_tree

QUICKSTART = str(REPO / "examples" / "quickstart")
ANSI = re.compile(r"\x1b\[")


@pytest.fixture
def invalid_folder(tmp_path: Path) -> Path:
    write_tree(
        tmp_path / "specs",
        {
            "trainform.yaml": CONFIG,
            "base.yaml": BASE.replace("nominalQuota", "nominalQuta"),
            "job.yaml": training_job(image="traner"),
        },
    )
    return tmp_path / "specs"


def test_console_script_is_installed_next_to_the_interpreter() -> None:
    assert TRAINFORM.is_file()


def test_validate_quickstart_succeeds() -> None:
    result = run_cli("validate", QUICKSTART)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: 9 resources in 3 files are valid")
    assert "(environment dev)" in result.stdout
    assert result.stderr == ""


def test_validate_quickstart_json_is_valid_and_empty() -> None:
    result = run_cli("validate", QUICKSTART, "--format", "json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["diagnostics"] == []
    assert (report["resourceCount"], report["fileCount"]) == (9, 3)


def test_validate_quickstart_in_the_ci_environment() -> None:
    result = run_cli("validate", QUICKSTART, "--env", "ci")
    assert result.returncode == 0
    assert "(environment ci)" in result.stdout


def test_invalid_folder_exits_1_without_traceback(invalid_folder: Path) -> None:
    result = run_cli("validate", str(invalid_folder))
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "error[unknown-field]" in result.stdout
    assert "error[unknown-reference]" in result.stdout
    assert "help:     did you mean `trainer`?" in result.stdout
    assert re.search(r"^2 errors, 0 warnings in 2 files$", result.stdout, re.MULTILINE)


def test_json_output_has_the_same_diagnostics_as_text(invalid_folder: Path) -> None:
    text = run_cli("validate", str(invalid_folder)).stdout
    result = run_cli("validate", str(invalid_folder), "--format", "json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["formatVersion"] == 1
    assert report["valid"] is False
    assert report["errorCount"] == len(report["diagnostics"]) == text.count("error[")
    assert {d["code"] for d in report["diagnostics"]} == {"unknown-field", "unknown-reference"}


def test_json_output_is_byte_identical_across_runs(invalid_folder: Path) -> None:
    first = run_cli("validate", str(invalid_folder), "--format", "json").stdout
    second = run_cli("validate", str(invalid_folder), "--format", "json").stdout
    assert first == second


@pytest.mark.parametrize(
    ("output_format", "marker"),
    [
        pytest.param("text", "stage 1:", id="text"),
        pytest.param("dot", "digraph trainform {", id="dot"),
        pytest.param("mermaid", "flowchart LR", id="mermaid"),
        pytest.param("json", '"formatVersion": 1', id="json"),
    ],
)
def test_graph_renders_in_every_format(output_format: str, marker: str) -> None:
    result = run_cli("graph", QUICKSTART, "--format", output_format)
    assert result.returncode == 0, result.stderr
    assert marker in result.stdout
    assert "TrainingJob/research/bigram" in result.stdout


def test_graph_json_lists_edges_from_dependency_to_dependent() -> None:
    data = json.loads(run_cli("graph", QUICKSTART, "--format", "json").stdout)
    edges = {(edge["from"], edge["to"]) for edge in data["edges"]}
    assert ("Queue/default-queue", "TrainingJob/research/bigram") in edges
    assert data["order"][0] == sorted(data["order"][0])


def test_graph_of_invalid_folder_reports_diagnostics(invalid_folder: Path) -> None:
    result = run_cli("graph", str(invalid_folder), "--format", "dot")
    assert result.returncode == 1
    assert "error[unknown-field]" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_explain_prints_the_field_description() -> None:
    result = run_cli("explain", "Queue.spec.pools.nominalQuota")
    assert result.returncode == 0
    assert result.stdout.startswith("Queue.spec.pools.nominalQuota (ResourceAmounts)")
    assert "Resources the queue is guaranteed from the pool (Kueue nominalQuota)." in result.stdout
    assert "  gpu: Quantity or null" in result.stdout


def test_explain_json_is_structured() -> None:
    result = run_cli("explain", "Queue.spec.cohort", "--format", "json")
    assert result.returncode == 0
    explanation = json.loads(result.stdout)
    assert explanation["path"] == "Queue.spec.cohort"
    assert explanation["required"] is False
    assert "borrow" in explanation["description"]


def test_explain_a_kind_lists_its_fields() -> None:
    result = run_cli("explain", "TrainingJob")
    assert result.returncode == 0
    assert "  spec: TrainingJobSpec (required)" in result.stdout


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param("Queue.spec.pols", "did you mean `pools`", id="misspelled-field"),
        pytest.param("Queu", "did you mean `Queue`", id="misspelled-kind"),
        pytest.param("Queue.spec.pools.nominalQuota.gpus", "did you mean `gpu`", id="deep-field"),
    ],
)
def test_explain_unknown_target_exits_1_with_suggestion(target: str, message: str) -> None:
    result = run_cli("explain", target)
    assert result.returncode == 1
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_missing_folder_exits_1_with_one_line_error(tmp_path: Path) -> None:
    result = run_cli("validate", str(tmp_path / "absent"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: cannot load specs:")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "pair",
    [pytest.param("steps", id="no-equals"), pytest.param("=3", id="no-name")],
)
def test_malformed_var_exits_1(pair: str) -> None:
    result = run_cli("validate", QUICKSTART, "--var", pair)
    assert result.returncode == 1
    assert "NAME=VALUE" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_environment_exits_1_naming_the_declared_ones() -> None:
    result = run_cli("validate", QUICKSTART, "--env", "prod")
    assert result.returncode == 1
    assert "declared: ci, dev" in result.stderr


def test_var_overrides_the_environment(tmp_path: Path) -> None:
    write_tree(
        tmp_path / "specs",
        {
            "trainform.yaml": CONFIG + "variables: {image: trainer}\n",
            "base.yaml": BASE,
            "job.yaml": training_job(image='"{{ image }}"'),
        },
    )
    assert run_cli("validate", str(tmp_path / "specs")).returncode == 0
    result = run_cli("validate", str(tmp_path / "specs"), "--var", "image=other")
    assert result.returncode == 1
    assert "Image `other` is not declared" in result.stdout


def test_var_file_must_exist(tmp_path: Path) -> None:
    result = run_cli("validate", QUICKSTART, "--var-file", str(tmp_path / "absent.yaml"))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr


def test_no_color_means_no_escape_codes(invalid_folder: Path) -> None:
    result = run_cli("validate", str(invalid_folder), env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert result.returncode == 1
    assert not ANSI.search(result.stdout + result.stderr)


def test_force_color_paints_diagnostics_when_no_color_is_unset(invalid_folder: Path) -> None:
    result = run_cli("validate", str(invalid_folder), env={"NO_COLOR": "", "FORCE_COLOR": "1"})
    assert ANSI.search(result.stdout)


def test_output_to_a_pipe_is_not_coloured(invalid_folder: Path) -> None:
    result = run_cli("validate", str(invalid_folder), env={"NO_COLOR": ""})
    assert not ANSI.search(result.stdout + result.stderr)


def test_version_and_help_work() -> None:
    assert run_cli("--version").stdout.startswith("trainform, version ")
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("validate", "graph", "schema", "explain"):
        assert command in result.stdout


def test_unknown_command_exits_with_usage_error() -> None:
    result = run_cli("valdate")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
