"""Attempt timelines on Slurm: how Slurm's records become facts (pure, first), then one
run's whole timeline on the real Slurm test cluster, without anyone running apply after
the first submit.

The platform (pool, project, queue, a one-GPU quota) is applied through the CLI; the job is
submitted through the provider. A plain sbatch job holds the project's GPU quota, so the
attempt first waits on it; then it runs, checkpoints every second step, and at step 5 the
test kills its training process (SIGKILL: Slurm sees the batch script fail, FAILED with
exit code 137). The runner submits attempt 2 itself with `--begin=now+2` (retries.backoff
2s); it waits for its backoff, resumes from step-000004 and succeeds at step 8. Everything
is asserted from `provider.runs()` and planner.timeline, both logs through `read_log`,
and the run through `accounting(since)`.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.run_breakdown import breakdown_of
from trainform.planner.session import ProviderSet
from trainform.planner.timeline import attempt_timelines, parse_time, seconds_between
from trainform.providers.jobs import Cause, JobLaunch, RunPhase, RunStatus
from trainform.providers.slurm.status import SlurmJobState, parse_jobs
from trainform.providers.slurm.timeline import attempt_status, expand_hostlist
from trainform.specs import load_specs

from tests.engine.support import run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

BACKOFF = 2
TRAIN = """
import hashlib, json, os, time
from pathlib import Path

checkpoints = Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
output = Path(os.environ["TRAINFORM_OUTPUT_DIR"])
progress = Path(os.environ["TRAINFORM_PROGRESS_FILE"])
steps = int(os.environ["TRAINFORM_PARAM_STEPS"])
every = int(os.environ["TRAINFORM_PARAM_EVERY"])
stop = int(os.environ["TRAINFORM_PARAM_STOPAT"])
resume = os.environ.get("TRAINFORM_RESUME_FROM", "")
step = json.loads((Path(resume) / "state.json").read_text())["step"] if resume else 0
print(f"attempt {os.environ['TRAINFORM_ATTEMPT']} starts at step {step}", flush=True)
events = open(os.environ["TRAINFORM_EVENTS_FILE"], "a")  # the protocol, written by hand
while step < steps:
    step += 1
    time.sleep(0.1)
    events.write(json.dumps({"v": 1, "t": time.time(), "event": "span", "phase": "compute",
                             "seconds": 0.1, "step": step}) + "\\n")
    events.flush()
    print(f"step {step}", flush=True)
    if step % every == 0:
        folder = checkpoints / f"step-{step:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"step": step}).encode()
        (folder / "state.json").write_bytes(data)
        files = [{"path": "state.json", "size": len(data),
                  "sha256": hashlib.sha256(data).hexdigest()}]
        (folder / "manifest.json").write_text(json.dumps({"step": step, "files": files}))
    progress.write_text(json.dumps({"step": step}))
    if step == stop and not resume:
        (output / "pid").write_text(str(os.getpid()))
        time.sleep(120)  # killed here by the test
output.mkdir(parents=True, exist_ok=True)
(output / "model.json").write_text(json.dumps({"steps": step}))
print("done", flush=True)
"""


SEEN: list[Any] = []


def record(state: str, **values: Any) -> SlurmJobState:
    base: dict[str, Any] = {
        "job_id": "7",
        "state": state,
        "reason": "None",
        "exit_code": 0,
        "comment": "",
        "submitted_at": "2030-01-01T00:00:00Z",
        "started_at": "2030-01-01T00:00:05Z",
        "ended_at": "2030-01-01T00:01:00Z",
        "source": "sacct",
    }
    return SlurmJobState(**{**base, **values})


def status_of(records: list[SlurmJobState], result: dict[str, Any] | None = None) -> Any:
    return attempt_status(1, Path("/x"), {"result": result or {}}, records, "q", None)


def test_squeue_exit_codes_are_wait_statuses_and_pending_forecasts_are_dropped() -> None:
    text = json.dumps(
        {
            "jobs": [
                {"job_id": 1, "job_state": "FAILED", "exit_code": 768, "end_time": 100},
                {"job_id": 2, "job_state": "CANCELLED", "exit_code": 9, "end_time": 100},
                {"job_id": 3, "job_state": "PENDING", "start_time": 5, "end_time": 9},
                {
                    "job_id": 4,
                    "job_state": "RUNNING",
                    "tres_alloc_str": "cpu=2,gres/gpu=1",
                    "nodes": "gpu[01-02]",
                    "start_time": 5,
                    "end_time": 9,
                },
            ]
        }
    )
    failed, killed, pending, running = parse_jobs(text, "squeue")
    assert (failed.exit_code, failed.signal) == (3, None)
    assert (killed.exit_code, killed.signal) == (None, 9)
    assert pending.started_at == pending.ended_at == ""
    assert running.ended_at == "" and running.tres == {"cpu": 2.0, "gres/gpu": 1.0}
    assert expand_hostlist(running.node_list) == ["gpu01", "gpu02"]
    assert expand_hostlist("a1,b[2-3,7],c") == ["a1", "b2", "b3", "b7", "c"]


@pytest.mark.parametrize(
    ("state", "result", "cause"),
    [
        pytest.param("COMPLETED", {"exit_code": 0}, Cause.SUCCEEDED, id="completed"),
        pytest.param("COMPLETED", {"exit_code": 1}, Cause.CODE_ERROR, id="completed-nonzero"),
        pytest.param("FAILED", {"exit_code": 3}, Cause.CODE_ERROR, id="failed"),
        pytest.param("FAILED", {}, Cause.NODE_FAILURE, id="failed-without-runner-record"),
        pytest.param("FAILED", {"exit_code": 2, "refused": True}, Cause.REFUSED, id="refused"),
        pytest.param("OUT_OF_MEMORY", {}, Cause.OUT_OF_MEMORY, id="oom"),
        pytest.param("NODE_FAIL", {}, Cause.NODE_FAILURE, id="node-fail"),
        pytest.param("BOOT_FAIL", {}, Cause.NODE_FAILURE, id="boot-fail"),
        pytest.param("PREEMPTED", {}, Cause.PREEMPTED, id="preempted"),
        pytest.param("TIMEOUT", {"exit_code": 143}, Cause.TIME_LIMIT, id="timeout"),
        pytest.param("DEADLINE", {}, Cause.TIME_LIMIT, id="deadline"),
        pytest.param("CANCELLED", {"exit_code": 143}, Cause.CANCELLED, id="cancelled"),
    ],
)
def test_slurm_states_and_the_runner_record_give_the_cause(
    state: str, result: dict[str, Any], cause: Cause
) -> None:
    assert status_of([record(state)], result).cause == cause


def test_a_requeued_job_is_one_attempt_with_a_requeue_wait_between_its_runs() -> None:
    runs = [
        record("REQUEUED", reason="Priority", ended_at="2030-01-01T00:00:30Z"),
        record(
            "COMPLETED",
            reason="BeginTime",
            submitted_at="2030-01-01T00:00:30Z",
            eligible_at="2030-01-01T00:02:31Z",
            started_at="2030-01-01T00:02:33Z",
            ended_at="2030-01-01T00:03:00Z",
        ),
    ]
    status = status_of(runs, {"exit_code": 0})
    assert (status.submitted_at, status.started_at, status.ended_at) == (
        "2030-01-01T00:00:00Z",
        "2030-01-01T00:00:05Z",
        "2030-01-01T00:03:00Z",
    )
    assert status.eligible_at == "" and status.cause == Cause.SUCCEEDED
    first, requeue = status.waits
    assert (first.since, first.until) == ("2030-01-01T00:00:00Z", "2030-01-01T00:00:05Z")
    assert "higher-priority" in first.reason
    assert requeue.reason == (
        "requeued by Slurm: waiting out its requeue delay until 2030-01-01T00:02:31Z"
    )
    assert (requeue.since, requeue.until) == ("2030-01-01T00:00:30Z", "2030-01-01T00:02:33Z")


def test_a_retry_that_sacct_kept_no_reason_for_still_shows_its_backoff_wait() -> None:
    backoff = record(
        "COMPLETED",
        submitted_at="2030-01-01T00:00:00Z",
        eligible_at="2030-01-01T00:00:10Z",
        started_at="2030-01-01T00:00:11Z",
    )
    status = attempt_status(2, Path("/x"), {"result": {"exit_code": 0}}, [backoff], "q", None)
    [wait] = status.waits
    assert wait.reason == "waiting for retry backoff until 2030-01-01T00:00:10Z (BeginTime)"
    assert (wait.since, wait.until) == ("2030-01-01T00:00:00Z", "2030-01-01T00:00:11Z")
    no_backoff = record("COMPLETED", eligible_at="2030-01-01T00:00:00Z")
    assert status_of([no_backoff], {"exit_code": 0}).waits == []
    first_attempt = attempt_status(1, Path("/x"), {}, [backoff], "q", None)
    assert first_attempt.waits == []


def poll(check: Any, timeout: float = 40, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out; last seen: {SEEN[-1:]!r}"
        time.sleep(interval)


@pytest.fixture(scope="module")
def platform(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    prefix = fixtures.unique_prefix("t")
    root = tmp_path_factory.mktemp("slurm-timeline") / "specs"
    (root / "code").mkdir(parents=True)
    (root / "code" / "train.py").write_text(TRAIN)
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix, local=False)
    )
    project, queue, pool = (f"{prefix}-{s}" for s in ("a", "q", "pool"))
    documents = [
        fixtures.pool(slurm_cluster, pool),
        fixtures.project(project),
        fixtures.queue(queue, pool),
        fixtures.quota(f"{project}-q", project, queue, "{gpu: 1}"),
    ]
    (root / "platform.yaml").write_text("---\n".join(documents))
    result = run_trainform("apply", ".", "--auto-approve", cwd=root, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    providers = ProviderSet(load_specs(root).config, root)
    try:
        yield {
            "root": root,
            "project": project,
            "queue": queue,
            "provider": providers.get("hpc"),
        }
    finally:
        providers.close()
        fixtures.cleanup(slurm_cluster, prefix)


def launch(platform: dict[str, Any], attempt: int = 1) -> JobLaunch:
    return JobLaunch(
        address=f"TrainingJob/{platform['project']}/timeline",
        run_id="r-timeline",
        attempt=attempt,
        kind="train",
        project=platform["project"],
        queue=platform["queue"],
        priority=10,
        command=["python3", "train.py"],
        code_dir=str(platform["root"] / "code"),
        parameters={"steps": 8, "every": 2, "stopAt": 5},
        env={},
        datasets=[],
        cpu="1",
        memory=str(128 * 2**20),
        gpus=1,
        nodes=1,
        checkpoint_interval=60,
        max_runtime=600,
        retries=1,
        backoff=BACKOFF,
        resume="latest",
    )


def only_run(provider: Any, address: str) -> RunStatus:
    [run] = provider.runs(address)
    SEEN.append(run)
    return run


def stamp(text: str) -> datetime:
    value = parse_time(text)
    assert value is not None, text
    return value


@pytest.mark.slow
def test_a_killed_attempt_is_retried_after_its_backoff_and_the_timeline_tells_it_all(
    platform: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    provider, project, queue = platform["provider"], platform["project"], platform["queue"]
    first = launch(platform)
    address = first.address
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    blocker = slurm_cluster.run(
        [
            "sbatch",
            "--parsable",
            f"--account={project}",
            f"--partition={queue}",
            f"--qos={queue}",
            "--cpus-per-task=1",
            "--gres=gpu:1",
            "--mem=64M",
            f"--output={slurm_cluster.job_root}/{project}-blocker.log",
            "--wrap=sleep 4",
        ]
    )
    assert blocker.returncode == 0, blocker.stderr
    blocker_id = blocker.stdout.strip().split(";")[0]

    def blocker_running() -> bool:
        text = slurm_cluster.run(["squeue", "--noheader", "-j", blocker_id, "-o", "%T"]).stdout
        return text.strip() == "RUNNING"

    poll(blocker_running)
    provider.submit(first)

    def waiting_on_quota() -> RunStatus | None:
        run = only_run(provider, address)
        return run if "AssocGrpGRES" in run.attempts[0].reason else None

    waiting = poll(waiting_on_quota).attempts[0]
    assert waiting.phase == RunPhase.QUEUED and waiting.cause == ""
    assert "project's GPU quota" in waiting.reason
    assert [w.reason for w in waiting.waits] == [waiting.reason]
    assert waiting.waits[0].since == waiting.submitted_at and waiting.waits[0].until == ""

    recorded = json.loads((provider.jobs.attempt_dir(first) / "launch.json").read_text())
    output = Path(recorded["env"]["TRAINFORM_OUTPUT_DIR"])
    pid = int(poll(lambda: (output / "pid").exists() and (output / "pid").read_text()))
    running = only_run(provider, address).attempts[0]
    assert running.phase == RunPhase.RUNNING and running.last_step == 5
    assert running.hosts == [slurm_cluster.node_name] and running.cpus == 1.0
    os.kill(pid, signal.SIGKILL)

    def retry_submitted() -> RunStatus | None:
        run = only_run(provider, address)
        return run if run.attempts[-1].attempt == 2 else None

    retried = poll(retry_submitted, interval=0.1).attempts[1]
    # The retry waits out its 2 s backoff in Slurm's queue. On a loaded machine one look can
    # take longer than that, so the first look may find it running or done; its recorded
    # backoff wait is checked below either way.
    if retried.phase == RunPhase.QUEUED:
        assert retried.eligible_at and retried.reason == (
            f"waiting for retry backoff until {retried.eligible_at} (BeginTime)"
        )
    assert retried.resumed_from == "step-000004"
    provider.submit(launch(platform, attempt=2))  # the engine submitting it too: no change
    provider.submit(first)

    def succeeded() -> RunStatus | None:
        run = only_run(provider, address)
        done = run.attempts[-1].phase == RunPhase.SUCCEEDED
        return run if done and run.attempts[0].phase.finished else None

    run = poll(succeeded)
    one, two = run.attempts
    assert [a.attempt for a in run.attempts] == [1, 2]

    assert one.phase == RunPhase.FAILED and one.cause == Cause.CODE_ERROR
    assert one.exit_code == 128 + signal.SIGKILL and "killed by signal SIGKILL" in one.reason
    assert one.admitted_at == one.started_at
    assert stamp(one.submitted_at) <= stamp(one.started_at) < stamp(one.ended_at)
    assert one.eligible_at == ""  # no backoff before the first attempt
    [quota_wait] = one.waits
    assert "AssocGrpGRES" in quota_wait.reason
    assert (quota_wait.since, quota_wait.until) == (one.submitted_at, one.started_at)
    assert (one.resumed_from, one.resumed_step, one.last_step) == ("", None, 5)
    assert (one.queue, one.nodes, one.cpus, one.gpus) == (queue, 1, 1.0, 1)
    assert one.hosts == [slurm_cluster.node_name]

    assert two.phase == RunPhase.SUCCEEDED and two.cause == Cause.SUCCEEDED
    assert two.exit_code == 0 and two.reason == ""
    assert stamp(one.started_at) <= stamp(two.submitted_at) <= stamp(one.ended_at)
    times = [two.submitted_at, two.eligible_at, two.started_at, two.ended_at]
    assert [stamp(t) for t in times] == sorted(stamp(t) for t in times)
    assert two.submitted_at < two.eligible_at and two.admitted_at == two.started_at
    backoff = seconds_between(two.submitted_at, two.eligible_at)
    assert backoff is not None and abs(backoff - BACKOFF) <= 1
    after_end = (stamp(two.eligible_at) - stamp(one.ended_at)).total_seconds()
    assert abs(after_end - BACKOFF) <= 2, (one.ended_at, two.eligible_at)
    [backoff_wait] = two.waits
    assert backoff_wait.reason == f"waiting for retry backoff until {two.eligible_at} (BeginTime)"
    assert (backoff_wait.since, backoff_wait.until) == (two.submitted_at, two.started_at)
    assert (two.resumed_from, two.resumed_step, two.last_step) == ("step-000004", 4, 8)
    assert (two.queue, two.cpus, two.gpus, two.hosts) == (queue, 1.0, 1, [slurm_cluster.node_name])

    steps = [c.step for c in run.checkpoints]
    assert steps == [2, 4, 6, 8] and all(c.valid and c.size > 0 for c in run.checkpoints)
    written = [stamp(c.written_at) for c in run.checkpoints]
    assert written == sorted(written)
    assert stamp(one.started_at) <= written[1] <= stamp(one.ended_at)
    assert stamp(two.started_at) <= written[2]
    timelines = attempt_timelines(run)
    assert [c.id for c in timelines[0].checkpoints] == ["step-000002", "step-000004"]
    assert [c.id for c in timelines[1].checkpoints] == ["step-000006", "step-000008"]
    assert timelines[0].lost_steps is None and timelines[1].lost_steps == 1
    lost = seconds_between(run.checkpoints[1].written_at, one.ended_at)
    assert timelines[1].lost_seconds == pytest.approx(lost, abs=0.01) and lost > 0
    assert timelines[1].backoff == pytest.approx(backoff)
    assert timelines[0].waited is not None and timelines[0].waited >= 0

    # each attempt's run events, beside its log in the attempt's folder on the shared file
    # system: the killed one's 5 steps, the retry's 4 (steps 5 to 8, step 5 again)
    assert [a.events["phases"]["compute"]["count"] for a in (one, two)] == [5, 4]  # type: ignore[index]
    recovered = breakdown_of(run.run_id, timelines).attempts[1]
    assert recovered.source == "events" and recovered.seconds["compute"] is not None
    assert recovered.seconds["recovery"] == pytest.approx(min(lost, 0.4), abs=0.01)

    log_one = provider.read_log(address, run.run_id, 1)
    assert log_one.complete and "attempt 1 starts at step 0" in log_one.text
    lines = log_one.text.splitlines()
    assert "step 5" in lines and "step 6" not in lines
    assert "killed by signal SIGKILL" in log_one.text
    assert "attempt 2 submitted as job" in log_one.text
    tail = provider.read_log(address, run.run_id, 1, offset=10)
    assert tail.text == log_one.text[10:] and tail.next_offset == log_one.next_offset
    log_two = provider.read_log(address, run.run_id, 2)
    assert log_two.complete and "attempt 2 starts at step 4" in log_two.text
    lines = log_two.text.splitlines()
    assert "step 4" not in lines and lines[lines.index("step 5") :][:4] == [
        "step 5",
        "step 6",
        "step 7",
        "step 8",
    ]
    assert log_two.location == two.log

    accounted = [a for a in provider.accounting(since) if a.address == address]
    assert [(a.project, a.queue, a.run.run_id) for a in accounted] == [(project, queue, run.run_id)]
    listed = accounted[0].run.attempts
    assert [(a.attempt, a.cause, a.cpus) for a in listed] == [
        (1, Cause.CODE_ERROR, 1.0),
        (2, Cause.SUCCEEDED, 1.0),
    ]
    assert [(a.submitted_at, a.started_at, a.ended_at) for a in listed] == [
        (a.submitted_at, a.started_at, a.ended_at) for a in run.attempts
    ]
    jobs = slurm_cluster.run(["squeue", "--states=all", "--noheader", "--format=%i %k"]).stdout
    assert sum(f":{address}:" in line for line in jobs.splitlines()) == 2  # never three
    _usage_through_the_cli(platform, project, listed)


def _usage_through_the_cli(platform: dict[str, Any], project: str, listed: list[Any]) -> None:
    """`trainform usage` reads the same sacct records through trainform.yaml's instance."""
    result = run_trainform(
        "usage", "--dir", ".", "--since", "1h", "--format", "json", cwd=platform["root"]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["group"]: row for row in json.loads(result.stdout)["rows"]}
    row = rows[project]
    assert (row["runs"], row["attempts"]) == (1, 2)
    ran = sum(seconds_between(a.started_at, a.ended_at) or 0 for a in listed)
    assert row["acceleratorHours"] == pytest.approx(ran / 3600, abs=1e-3)  # one GPU each
    assert row["cpuHours"] == pytest.approx(ran / 3600, abs=1e-3)
    assert row["lostHours"] > 0
