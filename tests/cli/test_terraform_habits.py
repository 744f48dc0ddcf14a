"""Terraform habits work: single-dash option spellings, --no-color, --lock-timeout, and
messages with correct plurals and verbs (`1 change applied`, `Destroy complete`)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from trainform.planner.backends.local import LocalBackend

from tests.helpers import CONFIG, run_cli, write_tree

PROJECTS = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: research}
spec: {owners: [ml@example.com], displayName: "{{ title }}"}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: other}
spec: {owners: [ml@example.com]}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    write_tree(root, {"trainform.yaml": CONFIG, "projects.yaml": PROJECTS})
    return root


def planned(result_stdout: str) -> dict[str, dict]:
    return {c["address"]: c for c in json.loads(result_stdout)["changes"]}


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["-var", "title=Research", "-target", "Project/research"], id="separate"),
        pytest.param(["-var=title=Research", "-target=Project/research"], id="equals"),
    ],
)
def test_single_dash_spellings_are_aliases(folder: Path, args: list[str]) -> None:
    result = run_cli(
        "plan", str(folder), *args, "-no-color", "-lock-timeout", "1s", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    changes = planned(result.stdout)
    assert list(changes) == ["Project/research"]
    assert changes["Project/research"]["after"]["spec"]["displayName"] == "Research"


def test_no_color_wins_over_a_forced_colour(folder: Path) -> None:
    coloured = run_cli(
        "plan", str(folder), "--var", "title=R", env={"NO_COLOR": "", "FORCE_COLOR": "1"}
    )
    assert coloured.returncode == 0, coloured.stderr
    assert "\x1b[" in coloured.stdout
    for flag in ("--no-color", "-no-color"):
        plain = run_cli(
            "plan", str(folder), "--var", "title=R", flag, env={"NO_COLOR": "", "FORCE_COLOR": "1"}
        )
        assert plain.returncode == 0, plain.stderr
        assert "\x1b[" not in plain.stdout
        assert "Plan: 2 to create" in plain.stdout


def test_lock_timeout_waits_for_the_holder_and_gives_up_after_it(folder: Path) -> None:
    backend = LocalBackend(folder / ".trainform" / "state.json")
    held = backend.lock("apply (held by the test)")
    refused = run_cli("plan", str(folder), "--var", "title=R")
    assert refused.returncode == 1
    assert "cannot lock state: held by" in refused.stderr
    assert "apply (held by the test)" in refused.stderr
    gave_up = run_cli("plan", str(folder), "--var", "title=R", "--lock-timeout", "1s")
    assert gave_up.returncode == 1
    assert "cannot lock state" in gave_up.stderr

    releaser = threading.Timer(1.5, backend.unlock, args=(held,))
    releaser.start()
    try:
        waited = run_cli("plan", str(folder), "--var", "title=R", "-lock-timeout", "20s")
    finally:
        releaser.join()
    assert waited.returncode == 0, waited.stderr
    assert "Plan: 2 to create" in waited.stdout


def test_a_lock_timeout_that_is_not_a_duration_is_a_usage_error(folder: Path) -> None:
    result = run_cli("plan", str(folder), "--lock-timeout", "soon")
    assert result.returncode == 1
    assert "Invalid value for '--lock-timeout'" in result.stderr
    assert "'soon' is not a duration" in result.stderr


def test_apply_and_destroy_say_what_they_did_in_correct_words(folder: Path) -> None:
    one = run_cli(
        "apply", str(folder), "-var", "title=R", "-target", "Project/other", "--auto-approve"
    )
    assert one.returncode == 0, one.stderr
    assert "Apply complete: 1 change applied." in one.stdout
    two = run_cli("apply", str(folder), "-var", "title=R", "--auto-approve")
    assert "Apply complete: 1 change applied." in two.stdout  # only research was left
    gone = run_cli("destroy", str(folder), "-var", "title=R", "-auto-approve", "-parallelism=2")
    assert gone.returncode == 0, gone.stderr
    assert "Destroy complete: 2 resources destroyed." in gone.stdout
    assert "Apply" not in gone.stdout.split("will be deleted")[-1]
