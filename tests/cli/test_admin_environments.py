"""Every command that reads or writes state reaches every environment (`--env`, or
TRAINFORM_ENV), and a lock error's `force-unlock` suggestion works as printed.

The acceptance case: examples/platform with a local state file per environment (default
environment staging); prod's state is listed, shown, audited, edited, restored, accepted
and unlocked with `--env prod`, while staging's stays untouched.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from trainform.planner.backends.local import LocalBackend
from trainform.planner.state import ResourceState, State

from tests.helpers import REPO, run_cli

PLATFORM = REPO / "examples" / "platform"
STALE_LOCK = {
    "id": "stale-prod-1",
    "holder": "ci",
    "host": "a-runner-long-gone",
    "pid": 1,
    "operation": "apply",
    "time": "2026-01-01T00:00:00Z",
}


@pytest.fixture()
def platform(tmp_path: Path) -> Path:
    """examples/platform with local state per environment and two resources in prod."""
    folder = tmp_path / "platform"
    shutil.copytree(PLATFORM, folder)
    config_path = folder / "trainform.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["state"] = {"backend": "local", "path": "state/prod.json"}
    config["environments"]["staging"]["state"] = {"backend": "local", "path": "state/staging.json"}
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    backend = LocalBackend(folder / "state" / "prod.json")
    for names in (["Project/llm"], ["Project/llm", "Project/vision"]):
        info = backend.lock("apply")
        state = backend.read() or State.new()
        for name in names:
            resource = ResourceState(name, "Project", ["gke-prod"], {}, "sha256:0")
            backend.record(
                state, {"type": "outcome", "address": name, "resource": resource.to_json()}
            )
        backend.compact(state)
        backend.unlock(info)
    return folder


def test_state_commands_reach_prod_with_env(platform: Path) -> None:
    folder = str(platform)
    listed = run_cli("state", "list", folder, "--env", "prod")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["Project/llm", "Project/vision"]
    staging = run_cli("state", "list", folder)
    assert staging.returncode == 1 and "state/staging.json" in staging.stderr
    from_variable = run_cli("state", "list", folder, env={"TRAINFORM_ENV": "prod"})
    assert from_variable.stdout == listed.stdout
    shown = run_cli("state", "show", "Project/vision", folder, "--env", "prod")
    assert json.loads(shown.stdout)["address"] == "Project/vision"

    removed = run_cli("state", "rm", "Project/vision", "--dir", folder, "--env", "prod")
    assert removed.returncode == 0, removed.stderr
    assert run_cli("state", "list", folder, "--env", "prod").stdout.split() == ["Project/llm"]
    restored = run_cli("state", "restore", "1", folder, "--env", "prod")
    assert restored.returncode == 0, restored.stderr
    after = run_cli("state", "list", folder, "--env", "prod").stdout.split()
    assert after == ["Project/llm", "Project/vision"]
    accepted = run_cli("state", "accept", folder, "--env", "prod", "--reason", "restored")
    assert accepted.returncode == 0, accepted.stderr
    audit = run_cli("state", "audit", folder, "--env", "prod", "--format", "json")
    operations = [r["operation"] for r in json.loads(audit.stdout)["records"]]
    assert {"state rm", "state restore", "state accept"} <= set(operations)
    assert not (platform / "state" / "staging.json").exists()


def test_a_stale_prod_lock_is_released_by_the_printed_command(platform: Path) -> None:
    (platform / "state" / "prod.json.lock").write_text(json.dumps(STALE_LOCK))

    refused = run_cli("state", "rm", "Project/llm", "--dir", str(platform), "--env", "prod")

    assert refused.returncode == 1
    printed = refused.stderr.split("run `", 1)[1].split("`", 1)[0]
    argv = shlex.split(printed)
    assert argv[:2] == ["trainform", "force-unlock"] and "stale-prod-1" in argv
    released = run_cli(*argv[1:], cwd=platform.parent.parent)
    assert released.returncode == 0, released.stderr
    assert "Released lock stale-prod-1" in released.stdout
    assert not (platform / "state" / "prod.json.lock").exists()
