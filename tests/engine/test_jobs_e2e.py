"""The training loop end to end on the local provider, through the CLI, with real processes.

Each test works on a copy of examples/quickstart (environment `ci`: 20 fast steps) and
checks one acceptance criterion of the job lifecycle: submit, wait, evaluate, gates;
resume after a kill, by the supervisor after its backoff, from the latest valid checkpoint
with the same final model; a corrupt checkpoint skipped; a new run on a hyper-parameter
change with the old one kept; no submission on mutated data; waiting on quota; a failing
gate; a stale lock.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engine.support import QUICKSTART, copy_example, run_trainform

JOB = "TrainingJob/research/bigram"
pytestmark = pytest.mark.slow


def tf(folder: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = run_trainform(*args, cwd=folder, timeout=timeout)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


def ok(folder: Path, *args: str, timeout: float = 120) -> str:
    result = tf(folder, *args, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def status(folder: Path, *extra: str) -> dict:
    return json.loads(
        ok(folder, "status", "--dir", ".", "--env", "ci", "--format", "json", *extra)
    )["jobs"][0]


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    folder = copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True)
    ok(folder, "lock", ".", "--env", "ci")
    return folder


def apply(folder: Path, *extra: str) -> str:
    return ok(folder, "apply", ".", "--env", "ci", "--auto-approve", *extra)


def wait(folder: Path) -> dict:
    ok(folder, "status", "--dir", ".", "--env", "ci", "--wait", "--timeout", "120")
    return status(folder)


def attempts(folder: Path) -> list[sqlite3.Row]:
    connection = sqlite3.connect(folder / ".trainform" / "ci" / "platform.db")  # --env ci
    connection.row_factory = sqlite3.Row
    try:
        return list(connection.execute("SELECT * FROM attempts ORDER BY submitted_at, id"))
    finally:
        connection.close()


def reference_model(folder: Path, tmp_path: Path, steps: int = 20) -> dict:
    """The model an uninterrupted run of the same script and data produces."""
    out = tmp_path / "reference"
    env = {
        **os.environ,
        "TRAINFORM_DATASET_TINY_CORPUS": str(folder / "data" / "tiny-corpus" / "v1"),
        "TRAINFORM_CHECKPOINT_DIR": str(out / "checkpoints"),
        "TRAINFORM_OUTPUT_DIR": str(out / "output"),
        "TRAINFORM_PARAM_STEPS": str(steps),
    }
    subprocess.run(
        [sys.executable, "train.py"], cwd=folder / "code", env=env, check=True, capture_output=True
    )
    return json.loads((out / "output" / "model.json").read_text())


def kill_after_checkpoints(folder: Path, count: int) -> list[Path]:
    """Wait until the running attempt wrote `count` checkpoints, then SIGKILL its process."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = attempts(folder)
        if rows and rows[-1]["child_pid"]:
            written = sorted(Path(rows[-1]["checkpoint_dir"]).glob("step-*/manifest.json"))
            if len(written) >= count:
                os.kill(rows[-1]["child_pid"], signal.SIGKILL)
                return [manifest.parent for manifest in written]
        time.sleep(0.05)
    raise AssertionError("the run wrote too few checkpoints in time")


def test_submit_wait_evaluate_and_gate(loop: Path) -> None:
    plan = ok(loop, "plan", ".", "--env", "ci", "--locked")
    assert f"# {JOB} will be created" in plan
    apply(loop)
    assert wait(loop)["phase"] == "succeeded"
    plan = ok(loop, "plan", ".", "--env", "ci")
    assert f"# {JOB} will be evaluated" in plan
    apply(loop)
    report = wait(loop)
    evaluation = report["evaluations"][0]
    assert evaluation["phase"] == "succeeded"
    assert evaluation["gate"] == "pass"
    assert "perplexity" in evaluation["metrics"]
    text = ok(loop, "status", "-v", "--dir", ".", "--env", "ci")
    assert "gate:      perplexity" in text and "PASS" in text
    assert "step:        20 of 20" in text
    header, row = ok(loop, "status", "--dir", ".", "--env", "ci").splitlines()[:2]
    assert header.split() == ["JOB", "PHASE", "STEP", "ETA", "QUEUE", "WAITED", "ATTEMPTS"]
    assert row.split()[:5] == [JOB, "succeeded", "20/20", "-", "default-queue"]
    assert tf(loop, "plan", ".", "--env", "ci", "--detailed-exitcode").returncode == 0
    assert tf(loop, "drift", ".", "--env", "ci").returncode == 0


def with_backoff(folder: Path, backoff: str) -> None:
    """Give the quickstart job a short `retries.backoff` (its supervisor retries by itself)."""
    training = folder / "specs" / "training.yaml"
    text = training.read_text()
    assert "  retries:\n    limit: 2\n" in text
    limit = "  retries:\n    limit: 2\n"
    training.write_text(text.replace(limit, f"{limit}    backoff: {backoff}\n"))
    ok(folder, "lock", ".", "--env", "ci")


def test_killed_run_resumes_by_itself_from_latest_valid_checkpoint_with_the_same_model(
    loop: Path, tmp_path: Path
) -> None:
    with_backoff(loop, "4s")
    apply(loop, "--var", "stepSeconds=0.15")
    written = kill_after_checkpoints(loop, 2)
    plan = json.loads(
        ok(loop, "plan", ".", "--env", "ci", "--var", "stepSeconds=0.15", "--format", "json")
    )
    assert any(f["kind"] == "retry-backoff" for f in plan["findings"]), plan["findings"]
    finished = wait(loop)  # nobody runs apply: the supervisor resubmits after the backoff
    assert finished["phase"] == "succeeded" and finished["attempt"] == 2
    first, second = attempts(loop)
    assert (first["phase"], first["cause"]) == ("failed", "node-failure")
    assert second["resume_from"] == max(folder.name for folder in written)
    assert second["eligible_at"] > first["ended_at"]
    output = Path(second["output_dir"]) / "model.json"
    assert json.loads(output.read_text()) == reference_model(loop, tmp_path)


def test_corrupt_latest_checkpoint_is_skipped_and_reported(loop: Path) -> None:
    with_backoff(loop, "3s")
    apply(loop, "--var", "stepSeconds=0.15")
    written = kill_after_checkpoints(loop, 3)
    newest, previous = written[-1], written[-2]
    deadline = time.monotonic() + 30
    while len(attempts(loop)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the supervisor schedules the retry from the newest checkpoint
    assert attempts(loop)[1]["resume_from"] == newest.name
    (newest / "model.json").write_text("")  # corrupt before the retry starts, 3 s later
    plan = ok(loop, "plan", ".", "--env", "ci", "--var", "stepSeconds=0.15")
    assert f"checkpoint {newest.name} is not usable" in plan
    drift = tf(loop, "drift", ".", "--env", "ci")
    assert drift.returncode == 2
    assert "checkpoint-invalid" in drift.stdout and newest.name in drift.stdout
    assert wait(loop)["phase"] == "succeeded"
    killed, refused, resumed = attempts(loop)
    assert (killed["cause"], refused["cause"], resumed["cause"]) == (
        "node-failure",
        "refused",
        "succeeded",
    )
    assert refused["resume_from"] == newest.name and "is not valid" in refused["reason"]
    assert resumed["resume_from"] == previous.name
    # A checkpoint of the succeeded run broken: the remedy promises no resume, and plan
    # indeed schedules none.
    newest = max((p for p in previous.parent.iterdir() if p.is_dir()), key=lambda p: p.name)
    (newest / "model.json").write_text("")
    after = tf(loop, "drift", ".", "--env", "ci")
    assert after.returncode == 2, after.stderr
    remedy = " ".join(after.stdout.split())
    assert "the run succeeded, so nothing resumes from it and plan schedules no run" in remedy
    assert f"delete the broken checkpoint {newest.name}" in remedy
    assert "resumes from the latest valid checkpoint" not in remedy
    planned = ok(loop, "plan", ".", "--env", "ci", "--var", "stepSeconds=0.15")
    assert "will resume" not in planned and "to resume" not in planned, planned


def test_hyperparameter_change_is_a_new_run_and_the_old_one_stays(loop: Path) -> None:
    apply(loop)
    first = wait(loop)["runId"]
    training = loop / "specs" / "training.yaml"
    training.write_text(training.read_text().replace("smoothing: 0.1", "smoothing: 0.2"))
    ok(loop, "lock", ".", "--env", "ci")
    plan = ok(loop, "plan", ".", "--env", "ci")
    assert f"# {JOB} must be replaced" in plan
    assert "inputs.parameters.smoothing" in plan or "parameters.smoothing: 0.1 -> 0.2" in plan
    assert f"run {first} and its checkpoints stay in history" in plan
    apply(loop)
    report = wait(loop)
    assert report["runId"] != first
    history = {run["runId"]: run for run in report["history"]}
    assert first in history and history[first]["checkpoints"]


def test_mutated_dataset_is_reported_and_never_submitted(loop: Path) -> None:
    ok(loop, "apply", ".", "--env", "ci", "--auto-approve", "--target", "Dataset/tiny-corpus")
    (loop / "data" / "tiny-corpus" / "v1" / "part-000.txt").write_text("changed\n")
    plan = ok(loop, "plan", ".", "--env", "ci")
    assert "data-mutated" in plan
    assert "not submitted: dataset Dataset/tiny-corpus@v1 was mutated" in plan
    assert f"# {JOB} will be created" not in plan
    drift = tf(loop, "drift", ".", "--env", "ci")
    assert drift.returncode == 2 and "data-mutated" in drift.stdout
    # plan and drift agree: the finding makes a detailed plan exit 2 too
    assert tf(loop, "plan", ".", "--env", "ci", "--detailed-exitcode").returncode == 2
    assert tf(loop, "plan", ".", "--env", "ci", "--locked").returncode == 1


def test_failing_gate_is_visible_in_plan_status_drift_and_json(loop: Path) -> None:
    training = loop / "specs" / "training.yaml"
    training.write_text(training.read_text().replace("threshold: 30.0", "threshold: 1.0"))
    apply(loop)
    wait(loop)
    apply(loop)
    report = wait(loop)
    assert report["evaluations"][0]["gate"] == "fail"
    plan = json.loads(ok(loop, "plan", ".", "--env", "ci", "--format", "json"))
    assert any(f["kind"] == "gate-fail" for f in plan["findings"])
    assert not any(c["action"] != "no-op" for c in plan["changes"])
    assert tf(loop, "plan", ".", "--env", "ci", "--detailed-exitcode").returncode == 2
    assert "FAIL" in ok(loop, "status", "-v", "--dir", ".", "--env", "ci")
    drift = tf(loop, "drift", ".", "--env", "ci", "--format", "json")
    assert drift.returncode == 2
    assert any(f["drift"] == "evaluation-failing" for f in json.loads(drift.stdout)["findings"])


def test_stale_lock_fails_a_locked_plan_naming_the_entry(loop: Path) -> None:
    (loop / "code" / "train.py").write_text(
        (loop / "code" / "train.py").read_text() + "\n# edited\n"
    )
    result = tf(loop, "plan", ".", "--env", "ci", "--locked")
    assert result.returncode == 1
    assert "trainform.lock is stale: code code#." in result.stderr


def test_a_job_over_its_project_quota_waits_with_the_reason_and_starts_later(
    loop: Path,
) -> None:
    platform = loop / "specs" / "platform.yaml"
    platform.write_text(platform.read_text().replace("runningJobs: 2", "runningJobs: 1"))
    training = loop / "specs" / "training.yaml"
    text = training.read_text()
    job = text.split("\n---\n")[0]
    second = (
        job.replace("name: bigram", "name: bigram-b")
        .replace("smoothing: 0.1", "smoothing: 0.3")
        .replace("  evaluations:\n    - suite: heldout-perplexity\n", "")
    )
    training.write_text(text + "\n---\n" + second)
    ok(loop, "lock", ".", "--env", "ci")
    apply(loop, "--var", "stepSeconds=0.1")
    reports = json.loads(ok(loop, "status", "--dir", ".", "--env", "ci", "--format", "json"))[
        "jobs"
    ]
    phases = {r["address"]: r for r in reports}
    waiting = [r for r in phases.values() if r["phase"] == "queued"]
    assert len(waiting) == 1, phases
    assert "runningJobs 1/1" in waiting[0]["reason"]
    assert "research" in waiting[0]["reason"]
    text = ok(loop, "status", "-v", "--dir", ".", "--env", "ci")
    assert "runningJobs 1/1" in text
    ok(loop, "status", "--dir", ".", "--env", "ci", "--wait", "--timeout", "120")
    final = json.loads(ok(loop, "status", "--dir", ".", "--env", "ci", "--format", "json"))
    assert {r["phase"] for r in final["jobs"]} == {"succeeded"}


def test_a_plain_plan_with_a_stale_lock_runs_and_records_the_code_it_runs(loop: Path) -> None:
    """Without --locked a stale lock is re-resolved: one run id never covers two codes."""
    before = json.loads(ok(loop, "plan", ".", "--env", "ci", "--format", "json"))
    (loop / "code" / "train.py").write_text(
        (loop / "code" / "train.py").read_text() + "\n# edited\n"
    )

    after = json.loads(ok(loop, "plan", ".", "--env", "ci", "--format", "json"))

    stale = [f for f in after["findings"] if f["kind"] == "stale-lock"]
    assert stale and "trainform.lock is stale: code code#." in stale[0]["message"]
    old, new = ({c["address"]: c for c in plan["changes"]}[JOB] for plan in (before, after))
    digests = [plan["job"]["inputs"]["code"]["contentDigest"] for plan in (old, new)]
    assert digests[0] != digests[1]


def test_a_lock_file_that_is_a_link_out_of_the_folder_is_refused(loop: Path) -> None:
    lock = loop / "trainform.lock"
    outside = loop.parent / "elsewhere.lock"
    outside.write_text(lock.read_text())
    lock.unlink()
    lock.symlink_to(outside)

    result = tf(loop, "plan", ".", "--env", "ci")

    assert result.returncode == 1
    assert "it is a link or not a regular file" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_code_folders_trainformignore_and_the_files_a_rerun_names(loop: Path) -> None:
    """What the code folder's .trainformignore lists is no part of the code identity: a
    README edited re-runs nothing; a code change re-runs and its reason names the files."""
    code, fast = loop / "code", ("--var", "steps=4", "--var", "stepSeconds=0.01")
    (code / ".trainformignore").write_text("# notes, never run\nREADME.md\ndocs/\n")
    (code / "README.md").write_text("how to train\n")
    apply(loop, *fast)
    (code / "README.md").write_text("how to train, edited\n")
    (code / "docs").mkdir()
    (code / "docs" / "notes.md").write_text("more notes\n")
    plan = json.loads(ok(loop, "plan", ".", "--env", "ci", *fast, "--format", "json"))
    job = next(c for c in plan["changes"] if c["address"] == "TrainingJob/research/bigram")
    assert job["action"] != "replace", job
    train = (code / "train.py").read_text()
    (code / "train.py").write_text(train + "\n# tweaked\n")
    (code / "helpers.py").write_text("SCALE = 1\n")
    text = ok(loop, "plan", ".", "--env", "ci", *fast)
    assert "code changed in 2 files (helpers.py, train.py)" in " ".join(text.split()), text
    (code / "train.py").write_text(train)
    wait(loop)
