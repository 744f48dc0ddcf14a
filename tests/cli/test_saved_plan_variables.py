"""A saved plan carries its -var values, so `apply FILE` applies exactly what was planned;
a secret-looking value is kept redacted and must be given again; a -var that nothing
reads is an error naming the closest known variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import CONFIG, run_cli, write_tree

TEMPLATED = """\
apiVersion: trainform/v1
kind: Project
metadata:
  name: research
  labels: {tier: "{{ tier }}", key: "{{ api_token | default('none') }}"}
spec: {owners: [ml-platform@example.com]}
"""


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    config = CONFIG + "variables: {tier: bronze}\n"
    write_tree(root, {"trainform.yaml": config, "platform.yaml": TEMPLATED})
    return root


def test_apply_of_a_saved_plan_uses_the_variables_it_was_made_with(
    folder: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "p.plan"
    made = run_cli("plan", str(folder), "-var", "tier=gold", "-out", str(plan_file))
    assert made.returncode == 0, made.stderr
    assert json.loads(plan_file.read_text())["variables"] == {"tier": "gold"}

    applied = run_cli("apply", str(plan_file))

    assert applied.returncode == 0, applied.stderr
    shown = run_cli("state", "show", "Project/research", str(folder))
    assert json.loads(shown.stdout)["spec"]["metadata"]["labels"]["tier"] == "gold"
    again = run_cli("plan", str(folder), "-var", "tier=gold", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout


def test_a_secret_looking_variable_is_redacted_and_asked_for_again(
    folder: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "p.plan"
    secret = "ghp_" + "Zq8Lw3Vn5Rt7Yx2Kp4Mb6Nc9Hd1Jf0Gs"
    made = run_cli("plan", str(folder), "-var", f"api_token={secret}", "-out", str(plan_file))
    assert made.returncode == 0, made.stderr
    assert json.loads(plan_file.read_text())["variables"] == {"api_token": "(sensitive)"}

    refused = run_cli("apply", str(plan_file))

    assert refused.returncode == 1 and "api_token" in refused.stderr
    assert secret not in refused.stderr + refused.stdout


def test_a_misspelt_variable_is_an_error_naming_the_known_one(folder: Path) -> None:
    result = run_cli("plan", str(folder), "-var", "teir=gold")

    assert result.returncode == 1
    assert "teir" in result.stderr and "did you mean `tier`?" in result.stderr
    assert run_cli("validate", str(folder), "-var", "teir=gold").returncode == 1
