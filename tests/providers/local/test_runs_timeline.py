"""The local platform's run timeline, logs, accounting and self-driven retries.

The end-to-end test drives the CLI on a spec folder of its own: a job waits on its
project's quota (another job holds it), runs, checkpoints every 2 steps, is SIGKILLed at a
known step, is retried by its supervisor after its 2 s backoff (nobody runs apply),
resumes from its latest valid checkpoint and succeeds. Its timeline, logs and accounting
are then read back from the provider field by field. Unit tests cover the cause classes,
admission honouring `eligible_at`, the wait spans and the schema migration.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from trainform.planner.timeline import attempt_timelines, parse_time
from trainform.providers.base import ProviderContext
from trainform.providers.errors import ProviderError
from trainform.providers.jobs import Cause, DatasetInput, RunPhase, RunStatus, utc_text
from trainform.providers.local.datasets import build_manifest
from trainform.providers.local.machine import MachineFacts
from trainform.providers.local.outcomes import classify
from trainform.providers.local.processes import is_job_process, supervisor_alive
from trainform.providers.local.provider import LocalProvider
from trainform.providers.local.runs import ADDED_COLUMNS, Attempt, RunStore

from tests.engine.support import run_trainform, write_folder
from tests.providers.local.conftest import (
    ADDRESS,
    GiB,
    add_queue,
    add_quota,
    finished,
    launch,
    run_of,
    sleeper,
    wait_for,
)

WORKER = "TrainingJob/research/worker"
HOLDER = "TrainingJob/research/holder"
BACKOFF = 2.0

TRAIN = """\
import hashlib, json, os, pathlib, time
checkpoints = pathlib.Path(os.environ["TRAINFORM_CHECKPOINT_DIR"])
progress = pathlib.Path(os.environ["TRAINFORM_PROGRESS_FILE"])
attempt = int(os.environ["TRAINFORM_ATTEMPT"])
start = int(os.environ["TRAINFORM_RESUME_STEP"])
steps = int(os.environ["TRAINFORM_PARAM_STEPS"])
block_at = int(os.environ["TRAINFORM_PARAM_BLOCK_AT"])
print(f"attempt {attempt} starts after step {start}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(0.05)
    if step % 2 == 0:
        folder = checkpoints / f"step-{step:04d}"
        folder.mkdir(parents=True)
        data = f"weights at step {step}".encode()
        (folder / "weights.bin").write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        entry = {"path": "weights.bin", "size": len(data), "sha256": digest}
        (folder / "manifest.json").write_text(json.dumps({"step": step, "files": [entry]}))
    progress.write_text(json.dumps({"step": step}))
    print(f"step {step}", flush=True)
    if attempt == 1 and step == block_at:
        print("blocking until killed", flush=True)
        time.sleep(600)
out = pathlib.Path(os.environ["TRAINFORM_OUTPUT_DIR"])
out.mkdir(parents=True, exist_ok=True)
(out / "model.json").write_text(json.dumps({"steps": steps}))
print("done", flush=True)
"""

HOLD = """\
import os, time
while not os.path.exists(os.environ["TRAINFORM_PARAM_RELEASE"]):
    time.sleep(0.05)
"""


def specs(release: Path) -> str:
    return f"""\
apiVersion: trainform/v1
kind: Project
metadata: {{name: research}}
spec: {{owners: [team@example.com]}}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {{name: this-machine}}
spec: {{provider: local, nodes: 1, cpu: 2, memory: 4Gi}}
---
apiVersion: trainform/v1
kind: Queue
metadata: {{name: default-queue}}
spec:
  pools: [{{pool: this-machine, nominalQuota: {{cpu: 2, memory: 4Gi}}}}]
  defaultPriority: 100
---
apiVersion: trainform/v1
kind: Quota
metadata: {{name: research-default, project: research}}
spec:
  queue: default-queue
  limits: {{cpu: 2, memory: 4Gi, runningJobs: 1}}
---
apiVersion: trainform/v1
kind: Image
metadata: {{name: host-python}}
spec: {{runtime: host, class: standard}}
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: holder, project: research}}
spec:
  queue: default-queue
  image: host-python
  code: {{repo: code}}
  command: [python3, hold.py]
  parameters: {{release: "{release}"}}
  resources: {{nodes: 1, cpu: 1, memory: 256Mi}}
  maxRuntime: 10m
---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {{name: worker, project: research}}
spec:
  queue: default-queue
  image: host-python
  code: {{repo: code}}
  command: [python3, train.py]
  parameters: {{steps: 8, block-at: 5}}
  resources: {{nodes: 1, cpu: 1, memory: 256Mi}}
  checkpoint: {{interval: 1s, keepLast: 5}}
  resume: {{policy: latest}}
  retries: {{limit: 1, backoff: 2s}}
  maxRuntime: 10m
"""


def ok(folder: Path, *args: str) -> str:
    result = run_trainform(*args, cwd=folder, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return result.stdout


def attempt_rows(root: Path, address: str) -> list[sqlite3.Row]:
    connection = sqlite3.connect(root / "platform.db")
    connection.row_factory = sqlite3.Row
    try:
        return list(
            connection.execute(
                "SELECT * FROM attempts WHERE address = ? ORDER BY attempt", (address,)
            )
        )
    finally:
        connection.close()


def progress_step(root: Path, address: str) -> int | None:
    rows = attempt_rows(root, address)
    if not rows:
        return None
    try:
        return json.loads((Path(rows[0]["workdir"]) / "progress.json").read_text())["step"]
    except (OSError, ValueError):
        return None


def at(text: str) -> datetime:
    moment = parse_time(text)
    assert moment is not None, f"not a time: {text!r}"
    return moment


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    root = write_folder(
        tmp_path / "platform",
        {
            "specs/platform.yaml": specs(tmp_path / "release"),
            "code/train.py": TRAIN,
            "code/hold.py": HOLD,
        },
    )
    yield root
    (tmp_path / "release").touch()
    store = RunStore(root / ".trainform" / "platform.db")
    for attempt in store.in_phase("queued", "running"):
        store.update(attempt.id, cancel_requested=1)
        if supervisor_alive(attempt.supervisor_pid, attempt.id):
            os.kill(attempt.supervisor_pid or 0, signal.SIGKILL)
        if is_job_process(attempt.child_pid, attempt.address, attempt.run_id, attempt.attempt):
            os.killpg(attempt.child_pid or 0, signal.SIGKILL)
    store.close()


@pytest.fixture
def provider(folder: Path) -> Iterator[LocalProvider]:
    local = LocalProvider(MachineFacts(cpus=2, memory_bytes=8 * GiB, gpus=()))
    local.configure("local", SimpleNamespace(root=".trainform"), ProviderContext(spec_root=folder))
    yield local
    local.close()


def test_a_killed_job_is_retried_after_its_backoff_and_its_timeline_is_recorded(
    folder: Path, provider: LocalProvider, tmp_path: Path
) -> None:
    since = utc_text(datetime.now(UTC))
    root = folder / ".trainform"
    ok(folder, "lock", ".")
    ok(folder, "apply", ".", "--auto-approve", "--target", HOLDER)
    wait_for(lambda: attempt_rows(root, HOLDER)[0]["child_pid"], what="the holder to run")
    ok(folder, "apply", ".", "--auto-approve")

    [waiting] = provider.runs(WORKER)
    assert waiting.latest is not None and waiting.latest.phase is RunPhase.QUEUED
    assert "runningJobs 1/1" in waiting.latest.reason
    (tmp_path / "release").touch()
    wait_for(lambda: progress_step(root, WORKER) == 5, timeout=30, what="step 5 of attempt 1")
    child = attempt_rows(root, WORKER)[0]["child_pid"]
    os.kill(child, signal.SIGKILL)

    def done() -> RunStatus | None:
        [run] = provider.runs(WORKER)
        latest = run.latest
        return run if latest and latest.attempt == 2 and latest.phase.finished else None

    run = wait_for(done, timeout=40, what="attempt 2 to finish without an apply")
    first, second = run.attempts

    # Attempt 1: waited on the quota, ran to step 5, killed from outside.
    assert first.phase is RunPhase.FAILED and first.exit_code == -9
    assert first.cause == Cause.NODE_FAILURE
    assert first.reason == "killed by signal 9 (SIGKILL)"
    assert first.eligible_at == "" and first.resumed_from == "" and first.resumed_step is None
    assert first.last_step == 5
    assert [w.reason for w in first.waits] == [waiting.latest.reason]
    [quota_wait] = first.waits
    assert "project research quota on default-queue: runningJobs 1/1" in quota_wait.reason
    submitted, admitted = at(first.submitted_at), at(first.admitted_at)
    started, ended = at(first.started_at), at(first.ended_at)
    assert at(quota_wait.since) >= submitted and at(quota_wait.until) == admitted
    assert submitted <= admitted <= started < ended
    checkpoints = {c.id: c for c in run.checkpoints}
    assert list(checkpoints) == ["step-0002", "step-0004", "step-0006", "step-0008"]
    assert all(c.valid and c.size == len(f"weights at step {c.step}") for c in run.checkpoints)
    assert started <= at(checkpoints["step-0002"].written_at)
    assert at(checkpoints["step-0004"].written_at) <= ended
    assert (first.queue, first.nodes, first.gpus, first.cpus) == ("default-queue", 1, 0, 1.0)
    assert first.hosts == [socket.gethostname()]

    # Attempt 2: scheduled by the supervisor at the failure, eligible after the backoff.
    assert second.phase is RunPhase.SUCCEEDED and second.cause == Cause.SUCCEEDED
    assert second.exit_code == 0 and second.reason == ""
    assert at(second.submitted_at) == ended
    eligible = at(second.eligible_at)
    assert ended < eligible
    assert abs((eligible - ended).total_seconds() - BACKOFF) < 0.01
    assert at(second.admitted_at) >= eligible
    assert at(second.started_at) >= at(second.admitted_at)
    assert at(second.ended_at) > at(second.started_at)
    assert [w.reason for w in second.waits][0] == (
        f"waiting for retry backoff until {second.eligible_at}"
    )
    assert all(w.until for w in second.waits)
    assert (second.resumed_from, second.resumed_step, second.last_step) == ("step-0004", 4, 8)
    assert at(checkpoints["step-0006"].written_at) >= at(second.started_at)

    # What the engine derives from those facts.
    one, two = attempt_timelines(run)
    assert two.lost_steps == 1  # step 5 is run again
    lost = (ended - at(checkpoints["step-0004"].written_at)).total_seconds()
    assert two.lost_seconds == pytest.approx(lost, abs=0.001) and 0 < lost < 2
    assert two.backoff == pytest.approx(BACKOFF, abs=0.01)
    assert [c.id for c in two.checkpoints] == ["step-0006", "step-0008"]

    # Logs of both attempts; the first is complete, chunked reads add up.
    log = provider.read_log(WORKER, run.run_id, 1)
    assert log.complete and log.location == first.log
    assert "attempt 1 starts after step 0" in log.text and "blocking until killed" in log.text
    assert "step 5\n" in log.text and "step 6\n" not in log.text
    assert "attempt 2 scheduled (node-failure): resumes from step-0004" in log.text
    assert log.next_offset == Path(first.log).stat().st_size
    tail = provider.read_log(WORKER, run.run_id, 1, offset=log.next_offset)
    assert (tail.text, tail.complete) == ("", True)
    head = provider.read_log(WORKER, run.run_id, 1, offset=10)
    assert head.text == log.text[10:]
    resumed = provider.read_log(WORKER, run.run_id, 2)
    assert resumed.complete
    assert "attempt 2 starts after step 4" in resumed.text and "done" in resumed.text
    with pytest.raises(ProviderError, match="no such attempt"):
        provider.read_log(WORKER, run.run_id, 3)

    # Accounting: both jobs since the test began, none after it.
    accounted = {entry.address: entry for entry in provider.accounting(since)}
    assert set(accounted) == {WORKER, HOLDER}
    entry = accounted[WORKER]
    assert (entry.project, entry.queue, entry.pool) == ("research", "default-queue", "this-machine")
    assert [a.cause for a in entry.run.attempts] == [Cause.NODE_FAILURE, Cause.SUCCEEDED]
    assert entry.run.attempts == run.attempts
    assert [c.id for c in entry.run.checkpoints] == list(checkpoints)
    later = utc_text(datetime.now(UTC) + timedelta(seconds=5))
    assert provider.accounting(later) == []

    # The same facts through the commands people run: status, logs, lineage, usage.
    _check_commands(folder, run, first, second, lost)


def _check_commands(folder: Path, run: RunStatus, first: Any, second: Any, lost: float) -> None:
    [report] = json.loads(ok(folder, "status", "worker", "--format", "json"))["jobs"]
    assert report["address"] == WORKER and report["phase"] == "succeeded"
    one, two = report["attempts"]
    assert (one["cause"], one["lastStep"], one["submittedAt"]) == (
        "node-failure",
        5,
        first.submitted_at,
    )
    assert [w["reason"] for w in one["waits"]] == [w.reason for w in first.waits]
    assert (two["resumedFrom"], two["resumedStep"], two["lostSteps"]) == ("step-0004", 4, 1)
    assert two["lostSeconds"] == pytest.approx(lost, abs=0.001)
    assert two["backoffSeconds"] == pytest.approx(BACKOFF, abs=0.01)
    assert report["delivery"]["attempts"] == 2 and report["delivery"]["lostSteps"] == 1
    text = ok(folder, "status", "-v", "worker")
    assert "#1   failed (node-failure: killed by signal 9 (SIGKILL))" in text
    assert "resumed from step-0004 (step 4), lost 1 step" in text

    log = ok(folder, "logs", "worker", "--attempt", "1")
    assert "blocking until killed" in log and "step 6\n" not in log
    whole = ok(folder, "logs", WORKER)  # the latest attempt
    assert "attempt 2 starts after step 4" in whole and "done\n" in whole
    assert ok(folder, "logs", WORKER, "--tail", "2") == "".join(
        whole.splitlines(keepends=True)[-2:]
    )
    assert ok(folder, "logs", WORKER, "--attempt", "2", "--follow") == whole

    lock = json.loads((folder / "trainform.lock").read_text())
    lineage = json.loads(ok(folder, "lineage", "worker", "--format", "json"))["lineage"]
    assert (lineage["address"], lineage["runId"], lineage["phase"]) == (
        WORKER,
        run.run_id,
        "succeeded",
    )
    assert lineage["image"]["digest"] == lock["images"]["Image/host-python"]["digest"]
    assert lineage["code"]["contentDigest"] == lock["code"]["code#."]["contentDigest"]
    assert lineage["parameters"] == {"block-at": 5, "steps": 8}
    assert lineage["lockDigest"] and lineage["lockDigest"].startswith("sha256:")
    assert lineage["specCommit"] is None  # the folder is not a Git work tree
    assert [c["id"] for c in lineage["checkpoints"]] == [c.id for c in run.checkpoints]
    by_checkpoint = ok(folder, "lineage", run.checkpoints[-1].path, "--format", "json")
    assert json.loads(by_checkpoint)["lineage"]["runId"] == run.run_id
    by_model = json.loads(ok(folder, "lineage", run.output_dir, "--format", "json"))
    assert by_model["lineage"]["address"] == WORKER

    usage = json.loads(ok(folder, "usage", "--since", "1h", "--format", "json"))
    [row] = usage["rows"]
    assert (row["group"], row["runs"], row["attempts"]) == ("research", 2, 3)
    ran = sum((at(a.ended_at) - at(a.started_at)).total_seconds() * a.cpus for a in run.attempts)
    assert row["cpuHours"] >= round(ran / 3600, 4)  # plus the holder's
    assert row["lostHours"] == pytest.approx(lost / 3600, abs=1e-4)
    assert row["acceleratorHours"] == 0
    csv = ok(folder, "usage", "--since", "1h", "--format", "csv")
    assert csv.splitlines()[0].startswith("project,runs,attempts,acceleratorHours")

    view = json.loads(ok(folder, "status", "--platform", "--format", "json"))
    [queue] = view["queues"]
    assert (queue["queue"], queue["running"], queue["waiting"]) == ("default-queue", [], [])
    assert (queue["nominal"]["cpu"], queue["nominal"]["gpu"]) == (2, 0)
    [pool] = view["pools"]
    assert (pool["capacity"]["cpu"], pool["capacity"]["gpu"], view["accelerators"]) == (2, 0, [])


@pytest.mark.parametrize(
    ("exit_code", "more", "cause"),
    [
        pytest.param(0, {}, Cause.SUCCEEDED, id="exit-0"),
        pytest.param(3, {}, Cause.CODE_ERROR, id="exit-3"),
        pytest.param(-9, {"peak_rss": 600, "memory": 512}, Cause.OUT_OF_MEMORY, id="oom"),
        pytest.param(-9, {"peak_rss": 512, "memory": 512}, Cause.OUT_OF_MEMORY, id="oom-at"),
        pytest.param(-9, {"peak_rss": 100, "memory": 512}, Cause.NODE_FAILURE, id="sigkill"),
        pytest.param(-9, {"peak_rss": 100, "memory": None}, Cause.NODE_FAILURE, id="no-request"),
        pytest.param(-15, {}, Cause.NODE_FAILURE, id="sigterm-from-outside"),
        pytest.param(-7, {}, Cause.NODE_FAILURE, id="sigbus"),
        pytest.param(-11, {}, Cause.CODE_ERROR, id="sigsegv"),
        pytest.param(-6, {}, Cause.CODE_ERROR, id="sigabrt"),
        pytest.param(-24, {}, Cause.TIME_LIMIT, id="sigxcpu"),
        pytest.param(-15, {"timed_out": True}, Cause.TIME_LIMIT, id="max-runtime"),
        pytest.param(-15, {"cancelled": True}, Cause.CANCELLED, id="cancelled"),
        pytest.param(None, {}, Cause.NODE_FAILURE, id="never-seen-ending"),
    ],
)
def test_an_ended_command_is_classified(
    exit_code: int | None, more: dict[str, object], cause: Cause
) -> None:
    assert classify(exit_code, **more) is cause  # type: ignore[arg-type]


def test_a_job_killed_above_its_memory_request_is_out_of_memory(local: LocalProvider) -> None:
    add_queue(local)
    grow = "import os; block = bytearray(96 * 2**20); os.kill(os.getpid(), 9)"
    local.submit(launch(command=[sys.executable, "-c", grow], memory=str(64 * 2**20)))

    latest = finished(local).latest
    assert latest is not None and latest.cause == Cause.OUT_OF_MEMORY
    assert latest.reason.startswith("killed by signal 9 (SIGKILL): out of memory (peak ")


def test_causes_of_refused_cancelled_and_supervisor_gone_attempts(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(command=[sys.executable, "-c", "pass"], resume_from="step-0007"))
    refused = finished(local).latest
    assert refused is not None and refused.phase is RunPhase.FAILED
    assert refused.cause == Cause.REFUSED and refused.started_at == ""
    assert "step-0007 to resume from does not exist" in refused.reason

    local.submit(launch(run_id="r-2", command=sleeper(30)))
    wait_for(lambda: run_of(local, "r-2").latest.started_at, what="r-2 to start")  # type: ignore[union-attr]
    local.cancel(ADDRESS, "r-2")
    assert finished(local, "r-2").latest.cause == Cause.CANCELLED  # type: ignore[union-attr]

    local.submit(launch(run_id="r-3", command=sleeper(30)))
    row = wait_for(lambda: local.jobs.store.get(f"{ADDRESS}:r-3.1").child_pid, what="r-3")  # type: ignore[union-attr]
    assert row
    os.kill(local.jobs.store.get(f"{ADDRESS}:r-3.1").supervisor_pid, signal.SIGKILL)  # type: ignore[arg-type, union-attr]
    gone = finished(local, "r-3").latest
    assert gone is not None and gone.cause == Cause.NODE_FAILURE


def test_a_retry_waits_for_its_backoff_and_then_starts_by_itself(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(
        launch(command=[sys.executable, "-c", "raise SystemExit(2)"], retries=2, backoff=1)
    )

    def attempts(count: int) -> RunStatus | None:
        run = run_of(local)
        ended = len(run.attempts) == count and run.attempts[-1].phase.finished
        return run if ended else None

    run = wait_for(lambda: attempts(3), timeout=20, what="three attempts")
    assert [a.cause for a in run.attempts] == [Cause.CODE_ERROR] * 3
    delays = [
        (at(later.eligible_at) - at(earlier.ended_at)).total_seconds()
        for earlier, later in zip(run.attempts, run.attempts[1:], strict=False)
    ]
    assert delays == pytest.approx([1.0, 2.0], abs=0.01)  # doubling backoff
    for attempt in run.attempts[1:]:
        assert at(attempt.started_at) >= at(attempt.eligible_at)
    assert len(run_of(local).attempts) == 3  # retries.limit 2: no fourth


def test_admission_never_starts_an_attempt_before_it_is_eligible(local: LocalProvider) -> None:
    add_queue(local)
    store = local.jobs.store
    local.submit(launch(command=sleeper(30)))
    local.cancel(ADDRESS, "r-1")
    finished(local)
    eligible = utc_text(datetime.now(UTC) + timedelta(hours=1))
    job = launch(attempt=2, command=sleeper(0))
    # As a supervisor scheduling a retry would: queued, eligible in an hour.
    store.insert(replace(local.jobs._attempt(job, f"{ADDRESS}:r-1.2"), eligible_at=eligible))
    local.submit(job)  # the engine submitting the same attempt changes nothing
    local.tick()

    waiting = run_of(local).latest
    assert waiting is not None and waiting.phase is RunPhase.QUEUED
    assert waiting.reason == f"waiting for retry backoff until {eligible}"
    assert [(w.reason, w.until) for w in waiting.waits] == [(waiting.reason, "")]

    store.update(f"{ADDRESS}:r-1.2", eligible_at=utc_text(datetime.now(UTC)))
    local.tick()
    started = finished(local).latest
    assert started is not None and started.phase is RunPhase.SUCCEEDED
    assert started.waits[0].until == started.admitted_at


def test_an_eligible_retry_holds_no_place_in_a_strict_fifo_queue(local: LocalProvider) -> None:
    add_queue(local, cpu="2", strategy="StrictFIFO")
    add_quota(local, runningJobs=5)
    store = local.jobs.store
    job = launch(attempt=2, command=sleeper(0))
    later = utc_text(datetime.now(UTC) + timedelta(hours=1))
    store.insert(replace(local.jobs._attempt(job, f"{ADDRESS}:r-1.2"), eligible_at=later))
    local.submit(launch(run_id="r-2", command=sleeper(0)))

    assert finished(local, "r-2").latest.phase is RunPhase.SUCCEEDED  # type: ignore[union-attr]
    assert run_of(local).latest.phase is RunPhase.QUEUED  # type: ignore[union-attr]
    local.cancel(ADDRESS, "r-1")


def test_a_database_from_before_the_timeline_columns_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "platform.db"
    store = RunStore(path)
    store.close()
    connection = sqlite3.connect(path)
    for name in ADDED_COLUMNS:
        connection.execute(f"ALTER TABLE attempts DROP COLUMN {name}")
    connection.execute(
        "INSERT INTO attempts (id, address, run_id, attempt, kind, queue, cpu, memory, phase,"
        " launch, workdir, checkpoint_dir, output_dir, log_path, submitted_at, manager) VALUES"
        " ('a', 'TrainingJob/p/j', 'r', 1, 'train', 'q', '1', '1', 'succeeded', '{}', '.', '.',"
        " '.', 'x.log', '2024-01-01T00:00:00.000Z', 'trainform')"
    )
    connection.commit()
    connection.close()

    store = RunStore(path)
    try:
        old = store.get("a")
        assert old is not None and old.waits == [] and old.cause == "" and old.last_step is None
    finally:
        store.close()


def test_logs_outlive_a_cancelled_job(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(launch(command=[sys.executable, "-c", "print('hello', flush=True)"]))
    finished(local)
    local.delete(ADDRESS, "TrainingJob", {})

    log = local.read_log(ADDRESS, "r-1", 1)
    assert log.complete and "hello\n" in log.text


def test_an_abandoned_attempt_is_retried_after_its_backoff_by_a_waker(
    local: LocalProvider,
) -> None:
    add_queue(local)
    script = "import os, time; time.sleep(30 if os.environ['TRAINFORM_ATTEMPT'] == '1' else 0)"
    local.submit(launch(command=[sys.executable, "-c", script], retries=1, backoff=1))
    store = local.jobs.store

    def first() -> Attempt:
        attempt = store.get(f"{ADDRESS}:r-1.1")
        assert attempt is not None
        return attempt

    wait_for(lambda: first().child_pid, what="the job")
    os.kill(first().supervisor_pid or 0, signal.SIGKILL)
    wait_for(lambda: not supervisor_alive(first().supervisor_pid), what="the supervisor to die")
    local.tick()  # settles the orphan: failed, retry scheduled, a waker started

    retry = store.get(f"{ADDRESS}:r-1.2")
    assert retry is not None and retry.phase == "queued" and retry.resume_from is None
    ended = run_of(local).attempts[0]
    assert ended.cause == Cause.NODE_FAILURE and ended.reason.startswith("supervisor exited")
    assert (at(retry.eligible_at) - at(ended.ended_at)).total_seconds() == pytest.approx(1.0)

    def succeeded() -> RunStatus | None:
        run = run_of(local)
        return run if run.latest and run.latest.phase is RunPhase.SUCCEEDED else None

    run = wait_for(succeeded, timeout=15, what="the retry to succeed without a tick")
    assert at(run.attempts[1].admitted_at) >= at(run.attempts[1].eligible_at)


def test_a_refused_resume_point_is_retried_but_mutated_data_is_not(
    local: LocalProvider, spec_root: Path
) -> None:
    add_queue(local)
    local.submit(launch(resume_from="step-0003", retries=1, backoff=0))
    wait_for(lambda: len(run_of(local).attempts) == 2, what="the retry")
    run = finished(local)
    assert [a.cause for a in run.attempts] == [Cause.REFUSED, Cause.SUCCEEDED]
    assert run.attempts[1].resumed_from == ""  # no valid checkpoint: it starts over

    version = spec_root / "data" / "corpus" / "v1"
    version.mkdir(parents=True)
    (version / "part-0.txt").write_text("hello\n")
    document = {"metadata": {}, "spec": {"source": "data/corpus", "versions": [{"name": "v1"}]}}
    digest = build_manifest(version).digest
    dataset = DatasetInput("corpus", "Dataset/corpus", "v1", digest, document)
    (version / "part-0.txt").write_text("edited\n")
    local.submit(launch(run_id="r-2", datasets=[dataset], retries=3, backoff=0))
    mutated = finished(local, "r-2")
    assert [a.cause for a in mutated.attempts] == [Cause.REFUSED]
    assert "data mutated" in mutated.attempts[0].reason
    assert local.jobs.store.get(f"{ADDRESS}:r-2.2") is None
