"""Jobs on the local provider, run as real processes: submit, admission, supervision,
failure, cancellation, checkpoints, evaluations and data pinning.

Jobs are tiny Python programs; a test waits at most a few seconds for one.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest
from trainform.providers.base import DesiredResource, ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.jobs import DatasetInput, JobProvider, RunPhase
from trainform.providers.local.admission import SUPERVISOR_GONE
from trainform.providers.local.datasets import build_manifest
from trainform.providers.local.processes import is_job_process
from trainform.providers.local.provider import LocalProvider

from tests.providers.local.conftest import (
    ADDRESS,
    add_queue,
    add_quota,
    finished,
    launch,
    run_of,
    sleeper,
    wait_for,
)

CHECKPOINTING_JOB = """\
import hashlib, json, os, pathlib
root = pathlib.Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
steps = int(os.environ.get("TRAINFORM_PARAM_STEPS", "3"))
for step in range(int(os.environ["TRAINFORM_RESUME_STEP"]) + 1, steps + 1):
    folder = root / f"step-{step:04d}"
    folder.mkdir(parents=True)
    data = f"weights at step {step}".encode()
    (folder / "weights.bin").write_bytes(data)
    files = [{"path": "weights.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    (folder / "manifest.json").write_text(json.dumps({"step": step, "files": files}))
    pathlib.Path(os.environ["TRAINFORM_PROGRESS_FILE"]).write_text(json.dumps({"step": step}))
output = pathlib.Path(os.environ["TRAINFORM_OUTPUT_DIR"])
output.mkdir(parents=True, exist_ok=True)
(output / "env.json").write_text(json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}))
"""


@pytest.fixture
def code(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "train.py").write_text(CHECKPOINTING_JOB)
    return folder


def attempt_row(local: LocalProvider, run_id: str = "r-1", attempt: int = 1) -> sqlite3.Row:
    connection = sqlite3.connect(local.root / "platform.db")
    connection.row_factory = sqlite3.Row
    try:
        row = connection.execute(
            "SELECT * FROM attempts WHERE run_id = ? AND attempt = ? AND kind = 'train'",
            (run_id, attempt),
        ).fetchone()
    finally:
        connection.close()
    assert row is not None
    return row


def child_pid(local: LocalProvider, run_id: str = "r-1") -> int:
    return wait_for(lambda: attempt_row(local, run_id)["child_pid"], what="the job to start")


def test_the_local_provider_is_a_job_provider(local: LocalProvider) -> None:
    assert isinstance(local, JobProvider)
    assert local.supports("TrainingJob")


def test_a_job_runs_to_success_in_its_code_snapshot_with_valid_checkpoints(
    local: LocalProvider, code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_queue(local)
    monkeypatch.setenv("SECRET_OF_THE_CLI", "must not leak")
    job = launch(
        command=[sys.executable, "train.py"],
        code_dir=str(code),
        parameters={"steps": 3, "learning-rate": 0.5},
        env={"EXTRA": "yes"},
        checkpoint_interval=60,
        keep_last=5,
    )

    assert local.submit(job) == {"runId": "r-1", "attempt": 1}
    run = finished(local)

    latest = run.latest
    assert latest is not None and latest.phase is RunPhase.SUCCEEDED, latest
    assert latest.exit_code == 0 and latest.started_at and latest.ended_at
    assert [(c.step, c.valid) for c in run.checkpoints] == [(1, True), (2, True), (3, True)]
    assert run.latest_valid_checkpoint().id == "step-0003"  # type: ignore[union-attr]
    assert run.current_step == 3
    seen = json.loads((Path(run.output_dir) / "env.json").read_text())
    env = seen["env"]
    assert Path(seen["cwd"]) == Path(run.output_dir).parent / "code"
    assert env["TRAINFORM_JOB"] == ADDRESS and env["TRAINFORM_RUN_ID"] == "r-1"
    assert env["TRAINFORM_ATTEMPT"] == "1" and env["TRAINFORM_RESUME_FROM"] == ""
    assert env["TRAINFORM_CHECKPOINT_INTERVAL"] == "60" and env["TRAINFORM_KEEP_LAST"] == "5"
    assert env["TRAINFORM_PARAM_STEPS"] == "3" and env["TRAINFORM_PARAM_LEARNING_RATE"] == "0.5"
    assert json.loads(env["TRAINFORM_PARAMETERS"]) == {"steps": 3, "learning-rate": 0.5}
    assert env["EXTRA"] == "yes" and env["PYTHONHASHSEED"] == "0"
    assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU-only attempt sees no GPU
    assert "SECRET_OF_THE_CLI" not in env


def test_the_code_snapshot_is_taken_once_so_later_edits_never_change_the_run(
    local: LocalProvider, code: Path
) -> None:
    add_queue(local)
    script = "import pathlib, os; print(pathlib.Path('version.txt').read_text())"
    (code / "version.txt").write_text("original")
    local.submit(launch(command=[sys.executable, "-c", script], code_dir=str(code)))
    finished(local)
    (code / "version.txt").write_text("edited")

    local.submit(launch(command=[sys.executable, "-c", script], code_dir=str(code), attempt=2))
    run = finished(local)

    assert [a.phase for a in run.attempts] == [RunPhase.SUCCEEDED, RunPhase.SUCCEEDED]
    assert "original" in Path(run.attempts[1].log).read_text()
    assert "edited" not in Path(run.attempts[1].log).read_text()


def test_submit_is_idempotent(local: LocalProvider) -> None:
    add_queue(local)
    job = launch(command=sleeper(0.2))

    first = local.submit(job)
    second = local.submit(job)

    assert first == second == {"runId": "r-1", "attempt": 1}
    run = finished(local)
    assert len(run.attempts) == 1 and run.attempts[0].phase is RunPhase.SUCCEEDED
    assert local.submit(job) == first
    assert len(run_of(local).attempts) == 1


def test_an_attempt_beyond_the_queue_capacity_waits_and_starts_when_the_first_ends(
    local: LocalProvider,
) -> None:
    add_queue(local, cpu="2")
    local.submit(launch(run_id="r-1", cpu="2", command=sleeper(1)))
    local.submit(launch(run_id="r-2", cpu="1", command=sleeper(0.1)))

    waiting = run_of(local, "r-2").latest
    assert waiting is not None and waiting.phase is RunPhase.QUEUED
    assert waiting.reason == "queue default-queue: cpu 2/2 in use by 1 job (needs 1)"

    first = finished(local, "r-1")
    second = finished(local, "r-2")
    assert first.latest.phase is second.latest.phase is RunPhase.SUCCEEDED  # type: ignore[union-attr]
    assert second.latest.started_at >= first.latest.ended_at  # type: ignore[union-attr]


def test_a_project_quota_limits_running_jobs(local: LocalProvider) -> None:
    add_queue(local, cpu="4")
    add_quota(local, runningJobs=1, cpu="4", memory=str(2**32))
    local.submit(launch(run_id="r-1", command=sleeper(1)))
    local.submit(launch(run_id="r-2", command=sleeper(0.1)))

    waiting = run_of(local, "r-2").latest
    assert waiting is not None and waiting.phase is RunPhase.QUEUED
    assert waiting.reason == "project research quota on default-queue: runningJobs 1/1"
    assert finished(local, "r-2").latest.phase is RunPhase.SUCCEEDED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("strategy", "small_job"),
    [
        pytest.param("BestEffortFIFO", RunPhase.RUNNING, id="best-effort-skips-what-does-not-fit"),
        pytest.param("StrictFIFO", RunPhase.QUEUED, id="strict-stops-at-what-does-not-fit"),
    ],
)
def test_queueing_strategy_decides_whether_a_smaller_job_may_pass(
    local: LocalProvider, strategy: str, small_job: RunPhase
) -> None:
    add_queue(local, cpu="2", strategy=strategy)
    local.submit(launch(run_id="r-running", cpu="1", command=sleeper(5)))
    local.submit(launch(run_id="r-big", cpu="2", command=sleeper(5)))
    local.submit(launch(run_id="r-small", cpu="1", command=sleeper(5)))

    assert run_of(local, "r-big").latest.phase is RunPhase.QUEUED  # type: ignore[union-attr]
    small = run_of(local, "r-small").latest
    assert small is not None and small.phase is small_job
    if small_job is RunPhase.QUEUED:
        assert "StrictFIFO: waiting behind" in small.reason and "r-big" in small.reason
    for run_id in ("r-running", "r-big", "r-small"):
        local.cancel(ADDRESS, run_id)
    for run_id in ("r-running", "r-big", "r-small"):
        assert finished(local, run_id).latest.phase is RunPhase.CANCELLED  # type: ignore[union-attr]


def test_a_higher_priority_attempt_starts_first_when_capacity_frees(
    local: LocalProvider,
) -> None:
    add_queue(local, cpu="1")
    local.submit(launch(run_id="r-first", command=sleeper(0.8)))
    local.submit(launch(run_id="r-low", priority=100, command=sleeper(0.1)))
    local.submit(launch(run_id="r-high", priority=200, command=sleeper(0.1)))

    low = finished(local, "r-low").latest
    high = finished(local, "r-high").latest

    assert low is not None and high is not None
    assert high.started_at < low.started_at
    assert high.ended_at <= low.started_at


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"nodes": 0}, "at least one node", id="no-node"),
        pytest.param({"cpu": "500m"}, "cpu '500m' is not an exact", id="unnormalized-cpu"),
        pytest.param({"kind": "eval"}, "names no suite", id="evaluation-without-suite"),
        pytest.param({"code_dir": "/no/such/code"}, "code folder /no/such/code", id="no-code"),
    ],
)
def test_a_launch_the_local_platform_cannot_run_is_refused(
    local: LocalProvider, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(PermanentProviderError, match=message):
        local.submit(launch(**overrides))
    assert local.runs(ADDRESS) == []


def test_an_attempt_on_a_queue_that_is_not_applied_waits(local: LocalProvider) -> None:
    local.submit(launch(queue="nowhere"))

    latest = run_of(local).latest
    assert latest is not None and latest.phase is RunPhase.QUEUED
    assert latest.reason == "queue nowhere is not applied"

    add_queue(local, name="nowhere")
    local.tick()
    assert finished(local).latest.phase is RunPhase.SUCCEEDED  # type: ignore[union-attr]


def test_an_attempt_larger_than_the_queue_says_it_can_never_start(local: LocalProvider) -> None:
    add_queue(local, cpu="2")
    local.submit(launch(cpu="3"))

    reason = run_of(local).latest.reason  # type: ignore[union-attr]
    assert reason.startswith("queue default-queue: needs cpu 3, more than its nominal quota of 2")


def test_a_failing_command_records_its_exit_code(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(command=[sys.executable, "-c", "raise SystemExit(3)"]))

    latest = finished(local).latest
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert (latest.exit_code, latest.reason) == (3, "exit code 3")


def test_a_command_that_does_not_exist_fails_the_attempt(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(command=["no-such-program-anywhere"]))

    latest = finished(local).latest
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert latest.reason.startswith("cannot start no-such-program-anywhere")


def test_a_job_killed_by_sigkill_is_observed_as_failed(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(command=sleeper(30)))
    os.killpg(child_pid(local), signal.SIGKILL)

    latest = finished(local).latest
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert latest.reason == "killed by signal 9 (SIGKILL)" and latest.exit_code == -9


def test_a_killed_supervisor_is_observed_as_failed_and_its_job_is_stopped(
    local: LocalProvider,
) -> None:
    add_queue(local)
    local.submit(launch(command=sleeper(30)))
    job = child_pid(local)
    supervisor = attempt_row(local)["supervisor_pid"]
    os.kill(supervisor, signal.SIGKILL)

    latest = finished(local).latest  # read-only: the row still says running
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert latest.reason == SUPERVISOR_GONE
    assert attempt_row(local)["phase"] == "running"

    local.tick()
    assert attempt_row(local)["phase"] == "failed"
    wait_for(lambda: not is_job_process(job, ADDRESS, "r-1", 1), what="the orphaned job to stop")


def test_an_attempt_past_its_max_runtime_is_stopped(local: LocalProvider) -> None:
    add_queue(local)
    add_quota(local, maxWallTime="1s")
    local.submit(launch(command=sleeper(30), max_runtime=3600))

    latest = finished(local).latest
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert latest.reason == "exceeded max runtime (1s)"


def test_cancel_stops_a_running_attempt_and_a_queued_one_and_keeps_checkpoints(
    local: LocalProvider, code: Path
) -> None:
    add_queue(local, cpu="1")
    local.submit(launch(code_dir=str(code), command=[sys.executable, "train.py"]))
    done = finished(local)
    local.submit(launch(attempt=2, command=sleeper(30), resume_from="step-0003"))
    job = child_pid(local)
    local.submit(launch(run_id="r-2", command=sleeper(30)))

    local.cancel(ADDRESS, "r-1")
    local.cancel(ADDRESS, "r-2")

    run = finished(local)
    assert run.latest.phase is RunPhase.CANCELLED  # type: ignore[union-attr]
    assert run.latest.resumed_from == "step-0003"  # type: ignore[union-attr]
    assert finished(local, "r-2").latest.phase is RunPhase.CANCELLED  # type: ignore[union-attr]
    wait_for(lambda: not is_job_process(job, ADDRESS, "r-1", 2), what="the job to stop")
    assert [c.id for c in run.checkpoints] == [c.id for c in done.checkpoints]


def test_a_resumed_attempt_receives_its_checkpoint(local: LocalProvider, code: Path) -> None:
    add_queue(local)
    command = [sys.executable, "train.py"]
    local.submit(launch(code_dir=str(code), command=command, parameters={"steps": 2}))
    finished(local)

    local.submit(
        launch(
            code_dir=str(code),
            command=command,
            parameters={"steps": 4},
            attempt=2,
            resume_from="step-0002",
            keep_last=2,
        )
    )
    run = finished(local)

    assert run.latest.phase is RunPhase.SUCCEEDED  # type: ignore[union-attr]
    env = json.loads((Path(run.output_dir) / "env.json").read_text())["env"]
    assert env["TRAINFORM_RESUME_STEP"] == "2"
    assert env["TRAINFORM_RESUME_FROM"].endswith("/r-1/step-0002")
    assert [c.id for c in run.checkpoints] == ["step-0003", "step-0004"]  # retention: newest 2


def test_data_mutated_before_start_fails_the_attempt_without_running_it(
    local: LocalProvider, spec_root: Path, tmp_path: Path
) -> None:
    add_queue(local)
    version = spec_root / "data" / "corpus" / "v1"
    version.mkdir(parents=True)
    (version / "part-0.txt").write_text("hello\n")
    digest = build_manifest(version).digest
    spec = {
        "source": "data/corpus",
        "versions": [{"name": "v1", "path": "", "manifestDigest": digest}],
    }
    document = {"metadata": {}, "spec": spec}
    local.create(DesiredResource("Dataset/corpus", "Dataset", "corpus", None, document))
    marker = tmp_path / "ran"
    dataset = DatasetInput("corpus", "Dataset/corpus", "v1", digest, document)
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]

    (version / "part-0.txt").write_text("hello, edited\n")
    local.submit(launch(datasets=[dataset], command=command))

    latest = finished(local).latest
    assert latest is not None and latest.phase is RunPhase.FAILED
    assert latest.reason.startswith("dataset corpus@v1 changed since it was pinned (data mutated)")
    assert not marker.exists()


def test_an_evaluation_records_its_metrics(local: LocalProvider) -> None:
    add_queue(local)
    write_model = (
        "import os, pathlib; "
        "pathlib.Path(os.environ['TRAINFORM_OUTPUT_DIR'], 'model').write_text('7')"
    )
    local.submit(launch(command=[sys.executable, "-c", write_model]))
    finished(local)
    evaluate = (
        "import json, os, pathlib; "
        "model = pathlib.Path(os.environ['TRAINFORM_MODEL_DIR'], 'model').read_text(); "
        "pathlib.Path(os.environ['TRAINFORM_METRICS_FILE']).write_text("
        "json.dumps({'score': int(model), 'suite': 0}))"
    )
    suite = "EvalSuite/research/quality"

    local.submit(
        launch(kind="eval", suite=suite, model_run="r-1", command=[sys.executable, "-c", evaluate])
    )

    def evaluated() -> list | None:
        evaluations = run_of(local).evaluations
        return evaluations if evaluations and evaluations[-1].phase.finished else None

    [evaluation] = wait_for(evaluated, what="the evaluation")
    assert (evaluation.suite, evaluation.run_id) == (suite, "r-1")
    assert evaluation.phase is RunPhase.SUCCEEDED, evaluation.reason
    assert evaluation.metrics == {"score": 7.0, "suite": 0.0}
    assert len(run_of(local).attempts) == 1


def test_an_evaluation_without_metrics_fails(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(kind="eval", suite="EvalSuite/research/quality", model_run="r-1"))

    def evaluated() -> list | None:
        runs = local.runs(ADDRESS)
        evaluations = runs[0].evaluations if runs else []
        return evaluations if evaluations and evaluations[-1].phase.finished else None

    [evaluation] = wait_for(evaluated, what="the evaluation")
    assert evaluation.phase is RunPhase.FAILED
    assert evaluation.reason == "metrics file metrics.json was not written"


def test_observe_reports_runs_and_create_and_delete_manage_nothing_else(
    local: LocalProvider,
) -> None:
    add_queue(local)
    document = {"metadata": {}, "spec": {"resources": {"nodes": 1, "acceleratorsPerNode": 0}}}
    resource = DesiredResource(ADDRESS, "TrainingJob", "job", "research", document)
    request = ObserveRequest(ADDRESS, "TrainingJob", "job", "research", document)

    assert local.create(resource) == {}
    assert local.observe([request])[ADDRESS].exists is False
    local.submit(launch(command=sleeper(30)))
    observation = local.observe([request])[ADDRESS]

    assert observation.exists and observation.live is None
    [run] = observation.status["runs"]
    assert run["run_id"] == "r-1" and run["attempts"][0]["phase"] in ("queued", "running")
    assert type(run["attempts"][0]["phase"]) is str
    assert all(kind != "TrainingJob" for _, kind in local.list_owned())

    local.delete(ADDRESS, "TrainingJob", {"runId": "r-1"})
    assert finished(local).latest.phase is RunPhase.CANCELLED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        pytest.param(
            {"nodes": 2, "acceleratorsPerNode": 1},
            "spec.resources.acceleratorsPerNode",
            id="a-gpu-on-each-of-two-nodes",
        ),
        pytest.param(
            {"nodes": 1, "acceleratorsPerNode": 1},
            "spec.resources.acceleratorsPerNode",
            id="a-gpu-this-machine-lacks",
        ),
    ],
)
def test_a_job_beyond_this_machine_is_refused(
    local: LocalProvider, resources: dict[str, int], field: str
) -> None:
    document = {"metadata": {}, "spec": {"resources": resources}}
    resource = DesiredResource(ADDRESS, "TrainingJob", "job", "research", document)

    assert [problem.field for problem in local.validate(resource)] == [field]


def test_a_distributed_job_may_not_set_what_the_launch_contract_sets(
    local: LocalProvider,
) -> None:
    spec = {
        "command": ["python3", "train.py"],
        "env": {"MASTER_PORT": "1", "TRAINFORM_NODE_INDEX": "0", "SEED": "1"},
        "resources": {"nodes": 2, "acceleratorsPerNode": 0, "procsPerNode": 2},
    }
    resource = DesiredResource(ADDRESS, "TrainingJob", "job", "research", {"spec": spec})

    problems = local.validate(resource)
    assert [p.field for p in problems] == ["spec.env.MASTER_PORT", "spec.env.TRAINFORM_NODE_INDEX"]
    assert "2 nodes x 2 processes" in problems[0].message


def test_a_job_of_several_nodes_is_several_launchers_on_this_machine(
    local: LocalProvider,
) -> None:
    document = {"metadata": {}, "spec": {"resources": {"nodes": 4, "acceleratorsPerNode": 0}}}
    resource = DesiredResource(ADDRESS, "TrainingJob", "job", "research", document)

    assert local.validate(resource) == []
