"""`plan/apply --replace ADDRESS` (and `-replace`): re-create an object, or start a new run
of a job, although nothing changed; the plan after it is empty again."""

from __future__ import annotations

import json
from pathlib import Path

from trainform.planner.backends.local import LocalBackend

from tests.engine.support import QUICKSTART, copy_example
from tests.helpers import CONFIG, PROJECT, run_cli, write_tree

JOB = "TrainingJob/research/bigram"


def test_replace_recreates_an_unchanged_object_and_the_next_plan_is_empty(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "specs"
    write_tree(folder, {"trainform.yaml": CONFIG, "project.yaml": PROJECT})
    assert run_cli("apply", str(folder), "--auto-approve").returncode == 0
    assert run_cli("plan", str(folder), "--detailed-exitcode").returncode == 0

    shown = run_cli("plan", str(folder), "-replace", "Project/research", "-detailed-exitcode")
    assert shown.returncode == 2, shown.stderr
    assert "# Project/research must be replaced" in shown.stdout
    assert "reason: replacement requested with --replace" in shown.stdout
    assert "Plan: 0 to create, 0 to update, 1 to replace, 0 to delete." in shown.stdout

    applied = run_cli("apply", str(folder), "--replace", "Project/research", "--auto-approve")
    assert applied.returncode == 0, applied.stderr
    assert "Project/research: replace complete" in applied.stdout
    assert "Apply complete: 1 change applied." in applied.stdout
    assert run_cli("plan", str(folder), "--detailed-exitcode").returncode == 0


def test_replace_of_an_unknown_or_uncreated_address_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    write_tree(folder, {"trainform.yaml": CONFIG, "project.yaml": PROJECT})
    unknown = run_cli("plan", str(folder), "--replace", "Project/researh")
    assert unknown.returncode == 1
    assert "--replace Project/researh: no such resource in the specs" in unknown.stderr
    uncreated = run_cli("plan", str(folder), "--replace", "Project/research")
    assert uncreated.returncode == 1
    assert "not created yet, so there is nothing to replace" in uncreated.stderr


def test_replace_is_refused_with_a_saved_plan(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    write_tree(folder, {"trainform.yaml": CONFIG, "project.yaml": PROJECT})
    assert run_cli("plan", str(folder), "-out", str(tmp_path / "p.json")).returncode == 0
    result = run_cli("apply", str(tmp_path / "p.json"), "--replace", "Project/research")
    assert result.returncode == 1
    assert "a saved plan is applied exactly as it was made" in result.stderr


def test_replace_of_a_job_starts_a_new_run_and_keeps_the_old_one_in_history(
    tmp_path: Path,
) -> None:
    folder = copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True)
    env = ("--env", "ci")
    assert run_cli("lock", str(folder), *env).returncode == 0
    first = run_cli("apply", str(folder), *env, "--auto-approve")
    assert first.returncode == 0, first.stdout + first.stderr

    def run_of() -> dict:
        state = LocalBackend(folder / ".trainform" / "ci" / "state.json").read()
        assert state is not None
        return state.resources[JOB].outputs["local"]

    before = run_of()["runId"]
    plan = run_cli("plan", str(folder), *env, "--replace", JOB, "--format", "json")
    assert plan.returncode == 0, plan.stderr
    change = next(c for c in json.loads(plan.stdout)["changes"] if c["address"] == JOB)
    assert change["action"] == "replace"
    assert change["reasons"][0] == "a new run requested with --replace"
    assert change["job"]["cancel"] == before and change["job"]["runId"] != before

    again = run_cli("apply", str(folder), *env, "--replace", JOB, "--auto-approve")
    assert again.returncode == 0, again.stdout + again.stderr
    after = run_of()
    assert after["runId"] == change["job"]["runId"]
    assert before in after["history"]
    assert after["inputs"]["rerun"] == 1
    follow = run_cli("plan", str(folder), *env, "--no-refresh", "--format", "json")
    assert follow.returncode == 0, follow.stderr
    job = next(c for c in json.loads(follow.stdout)["changes"] if c["address"] == JOB)
    assert job["action"] == "no-op"  # the new run's id holds: no endless re-runs
