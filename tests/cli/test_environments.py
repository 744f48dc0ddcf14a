"""Environments are isolated targets: their own state and provider connections.

`validate` refuses two environments that resolve to the same state location or the same
endpoint, naming trainform.yaml's line and the field; plans name the environment, the
spec folder and the state location. The acceptance case: examples/platform, its state
moved to local files, plans staging and prod apart.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from tests.helpers import PROJECT, REPO, run_cli, write_tree

PLATFORM = REPO / "examples" / "platform"


def test_platform_staging_and_prod_plan_against_their_own_state_and_clusters(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "platform"
    shutil.copytree(PLATFORM, folder)
    config_path = folder / "trainform.yaml"
    config = yaml.safe_load(config_path.read_text())
    for name, environment in config["environments"].items():
        environment["state"] = {"backend": "local", "path": f"state/{name}.json"}
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    plans = {}
    for name in ("staging", "prod"):
        result = run_cli(
            "plan", str(folder), "--no-refresh", "--env", name, "--detailed-exitcode",
            "--format", "json",
        )  # fmt: skip
        assert result.returncode in (0, 2), result.stderr
        plans[name] = json.loads(result.stdout)
    text = run_cli("plan", str(folder), "--no-refresh", "--env", "staging")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == (
        f"Environment: staging, spec folder: {folder}, "
        f"state: {(folder / 'state' / 'staging.json').resolve()}"
    )

    staging, prod = plans["staging"], plans["prod"]
    assert staging["environment"] == "staging" and prod["environment"] == "prod"
    assert staging["specFolder"] == prod["specFolder"] == str(folder)
    assert staging["stateLocation"].endswith("/state/staging.json")
    assert prod["stateLocation"].endswith("/state/prod.json")
    connections = {
        name: {p["name"]: p["connection"] for p in plan["config"]["providers"]}
        for name, plan in plans.items()
    }
    assert connections["staging"].keys() == connections["prod"].keys()
    for instance in connections["prod"]:
        assert connections["staging"][instance] != connections["prod"][instance], instance
    # The specs are the same; the sizes come from each environment's variables.
    job = "TrainingJob/llm-pretrain/base-7b"

    def nodes(plan: dict) -> int:
        change = next(c for c in plan["changes"] if c["address"] == job)
        return change["after"]["spec"]["resources"]["nodes"]

    assert (nodes(staging), nodes(prod)) == (2, 12)


CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local}
environments:
  staging:
    state: {backend: local, path: .trainform/staging/state.json}
    providers: {local: {root: .trainform/staging}}
  prod:
%s
"""


def validate(tmp_path: Path, prod: str) -> tuple[int, str]:
    config = prod if prod.startswith("apiVersion") else CONFIG % prod
    write_tree(tmp_path / "specs", {"trainform.yaml": config, "project.yaml": PROJECT})
    result = run_cli("validate", str(tmp_path / "specs"))
    assert "Traceback" not in result.stdout + result.stderr
    return result.returncode, result.stdout + result.stderr


def location(output: str) -> str:
    found = re.search(r"--> (\S+:\d+:\d+)", output)
    assert found, output
    return found.group(1)


def test_two_environments_with_one_state_file_are_refused(tmp_path: Path) -> None:
    code, output = validate(
        tmp_path,
        "    state: {backend: local, path: .trainform/staging/state.json}\n"
        "    providers: {local: {root: .trainform/prod}}",
    )
    assert code == 1
    assert "error[shared-environment]: environments `staging` and `prod` share the state " \
        "location" in output  # fmt: skip
    assert location(output).endswith("trainform.yaml:9:12")
    assert "field:    environments.prod.state" in output


def test_an_environment_without_overrides_shares_everything_and_is_refused(
    tmp_path: Path,
) -> None:
    code, output = validate(
        tmp_path,
        "apiVersion: trainform/v1\n"
        "providers: [{name: local, type: local}]\n"
        "environments:\n"
        "  staging: {variables: {size: 1}}\n"
        "  prod: {variables: {size: 2}}\n",
    )
    assert code == 1
    assert output.count("error[shared-environment]") == 2  # the state and the local folder
    assert "instance `local` of `prod` and `local` of `staging` both reach the local " \
        "folder" in output  # fmt: skip
    assert location(output).endswith("trainform.yaml:5:3")


def test_an_override_of_an_undeclared_instance_names_the_close_one(tmp_path: Path) -> None:
    code, output = validate(
        tmp_path,
        "    state: {backend: local, path: p.json}\n    providers: {locale: {root: x}}",
    )
    assert code == 1
    assert "overrides provider instance `locale`, which trainform.yaml does not declare" in output
    assert "did you mean `local`" in output
    assert location(output).endswith("trainform.yaml:10:17")


def test_an_override_field_is_checked_against_the_connection(tmp_path: Path) -> None:
    code, output = validate(
        tmp_path,
        "    state: {backend: local, path: p.json}\n    providers: {local: {rot: x}}",
    )
    assert code == 1
    assert "unknown field `rot`" in output
    assert "environments.prod.providers.local.rot" in output
    assert location(output).endswith("trainform.yaml:10:25")


def test_isolated_environments_validate_and_plan_their_own_state(tmp_path: Path) -> None:
    code, output = validate(
        tmp_path,
        "    state: {backend: local, path: .trainform/prod/state.json}\n"
        "    providers: {local: {root: .trainform/prod}}",
    )
    assert code == 0, output
    folder = tmp_path / "specs"
    result = run_cli("plan", str(folder), "--env", "prod", "--format", "json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["stateLocation"] == str((folder / ".trainform/prod/state.json").resolve())
    assert plan["config"]["providers"][0]["connection"]["root"] == ".trainform/prod"
