"""A distributed attempt on the local platform: one launcher per node, one group.

Real processes, without torch: each rank is a small Python process started once per
process with the launch contract's env:// variables (providers/launch.py), so these run
in a second or two. tests/providers/local/test_distributed_local.py trains the real
PyTorch example with torchrun through the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from trainform.planner.usage import compute_usage
from trainform.providers.jobs import AccountedRun, Cause, RunPhase, RunStatus
from trainform.providers.local.group import LauncherGroup, Member
from trainform.providers.local.processes import processes_with
from trainform.providers.local.provider import LocalProvider
from trainform.providers.local.runs import Attempt
from trainform.providers.local.status import attempt_status

from tests.providers.local.conftest import (
    ADDRESS,
    add_queue,
    finished,
    launch,
    run_of,
    wait_for,
)

VARIABLES = [
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TRAINFORM_NODES", "TRAINFORM_NODE_INDEX",
]  # fmt: skip
RANK_SCRIPT = f"""
import json, os, sys, time
print(json.dumps({{name: os.environ.get(name) for name in {VARIABLES!r}}}), flush=True)
if os.environ["RANK"] == os.environ.get("FAIL_RANK"):
    sys.exit(3)
time.sleep(float(os.environ.get("HOLD", "0")))
"""
ATTEMPT = f"{ADDRESS}:r-1.1"


def group_launch(**overrides: object) -> object:
    values: dict[str, object] = {
        "command": [sys.executable, "-c", RANK_SCRIPT],
        "nodes": 2,
        "procs_per_node": 2,
    }
    values.update(overrides)
    return launch(**values)


def printed(log: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def no_process_left(attempt: str = ATTEMPT) -> bool:
    """True once no process of the attempt is alive (a killed one takes a moment to go)."""
    wait_for(lambda: not processes_with({"TRAINFORM_ATTEMPT_ID": attempt}), what="no process")
    return True


def node_log(run: RunStatus, node: int) -> Path:
    assert run.latest is not None
    return Path(run.latest.log).with_name(f"attempt-1.node-{node}.log")


def test_every_process_of_a_group_gets_its_rank_and_each_node_its_own_log(
    local: LocalProvider,
) -> None:
    add_queue(local)
    local.submit(group_launch())  # type: ignore[arg-type]
    run = finished(local)

    attempt = run.latest
    assert attempt is not None and attempt.phase is RunPhase.SUCCEEDED
    ranks = {}
    for node in (0, 1):
        for seen in printed(node_log(run, node)):
            assert seen["NODE_RANK"] == seen["TRAINFORM_NODE_INDEX"] == str(node)
            ranks[seen["RANK"]] = seen
    assert sorted(ranks) == ["0", "1", "2", "3"]
    assert {seen["WORLD_SIZE"] for seen in ranks.values()} == {"4"}
    assert {seen["LOCAL_WORLD_SIZE"] for seen in ranks.values()} == {"2"}
    assert [ranks[r]["LOCAL_RANK"] for r in "0123"] == ["0", "1", "0", "1"]
    assert len({(seen["MASTER_ADDR"], seen["MASTER_PORT"]) for seen in ranks.values()}) == 1
    joined = Path(attempt.log).read_text()
    assert joined.count("[node 0] {") == 2 and joined.count("[node 1] {") == 2
    assert (attempt.nodes, attempt.procs_per_node, attempt.cpus) == (2, 2, 2.0)
    assert len(attempt.hosts) == 2
    assert [(n.node, n.exit_code, Path(n.log).name) for n in attempt.launchers] == [
        (0, 0, "attempt-1.node-0.log"),
        (1, 0, "attempt-1.node-1.log"),
    ]
    assert all(n.started_at and n.ended_at for n in attempt.launchers)


def test_a_group_is_admitted_with_the_resources_of_all_its_nodes(local: LocalProvider) -> None:
    add_queue(local, cpu="1")
    local.submit(group_launch())  # type: ignore[arg-type]

    waiting = run_of(local).latest
    assert waiting is not None and waiting.phase is RunPhase.QUEUED
    assert "needs cpu 2, more than its nominal quota of 1" in waiting.reason
    local.cancel(ADDRESS, "r-1")


def test_a_worker_that_fails_ends_the_group_and_names_its_node_and_rank(
    local: LocalProvider,
) -> None:
    add_queue(local)
    started = time.monotonic()
    local.submit(group_launch(env={"FAIL_RANK": "2", "HOLD": "60"}))  # type: ignore[arg-type]
    attempt = finished(local).latest

    assert attempt is not None and attempt.phase is RunPhase.FAILED
    assert attempt.reason == "node 1 rank 2 exited with code 3"
    assert (attempt.cause, attempt.exit_code) == (Cause.CODE_ERROR, 3)
    assert time.monotonic() - started < 10  # the others were stopped, not waited for
    assert no_process_left()


def test_a_killed_worker_is_named_with_its_signal_and_the_group_is_retried(
    local: LocalProvider,
) -> None:
    add_queue(local)
    local.submit(group_launch(env={"HOLD": "60"}, retries=1, backoff=0))  # type: ignore[arg-type]
    [victim] = wait_for(
        lambda: processes_with({"TRAINFORM_ATTEMPT_ID": ATTEMPT, "RANK": "1"}),
        what="rank 1 to run",
    )
    os.kill(victim, signal.SIGKILL)

    def retried() -> RunStatus | None:
        run = run_of(local)
        return run if len(run.attempts) == 2 else None

    first = wait_for(retried, what="the retry").attempts[0]
    assert first.reason == "node 0 rank 1 killed by signal 9 (SIGKILL)"
    assert (first.cause, first.exit_code) == (Cause.NODE_FAILURE, -9)
    local.cancel(ADDRESS, "r-1")
    assert no_process_left()


def test_a_group_whose_supervisor_dies_leaves_no_process_behind(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(group_launch(env={"HOLD": "60"}))  # type: ignore[arg-type]
    wait_for(lambda: len(processes_with({"TRAINFORM_ATTEMPT_ID": ATTEMPT})) == 4, what="4 ranks")
    supervisor = local.jobs.store.get(ATTEMPT)
    assert supervisor is not None and supervisor.supervisor_pid
    os.kill(supervisor.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: local.tick() is not None and local.jobs.store.get(ATTEMPT).finished)  # type: ignore[union-attr]

    assert no_process_left()


def test_cancelling_a_group_stops_every_node(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(group_launch(env={"HOLD": "60"}))  # type: ignore[arg-type]
    wait_for(lambda: len(processes_with({"TRAINFORM_ATTEMPT_ID": ATTEMPT})) == 4, what="4 ranks")
    local.cancel(ADDRESS, "r-1")

    assert finished(local).latest.phase is RunPhase.CANCELLED  # type: ignore[union-attr]
    assert no_process_left()


def test_a_group_that_cannot_start_starts_no_node(local: LocalProvider) -> None:
    add_queue(local)
    local.submit(group_launch(command=["/no/such/program"]))  # type: ignore[arg-type]
    attempt = finished(local).latest

    assert attempt is not None and attempt.phase is RunPhase.FAILED
    assert attempt.reason.startswith("cannot start /no/such/program")
    assert no_process_left()


def test_a_single_process_job_runs_as_before_without_group_variables(
    local: LocalProvider,
) -> None:
    add_queue(local)
    script = RANK_SCRIPT.replace('os.environ["RANK"]', '"0"')  # no RANK here
    local.submit(launch(command=[sys.executable, "-c", script]))
    run = finished(local)

    attempt = run.latest
    assert attempt is not None and attempt.phase is RunPhase.SUCCEEDED
    [seen] = printed(Path(attempt.log))
    assert set(seen.values()) == {None}
    assert not node_log(run, 0).exists() and attempt.launchers == []
    assert (attempt.nodes, attempt.procs_per_node, attempt.cpus) == (1, 1, 1.0)


def test_usage_counts_the_accelerators_and_cpus_of_every_node() -> None:
    start = datetime(2026, 12, 1, 10, tzinfo=UTC)
    row = Attempt(
        id=ATTEMPT, address=ADDRESS, run_id="r-1", attempt=1, kind="train",
        queue="default-queue", cpu="8", memory="1024", phase="succeeded",
        launch={"nodes": 2, "procs_per_node": 4}, workdir="/nowhere", checkpoint_dir="/nowhere",
        output_dir="/nowhere", log_path="/nowhere/attempt-1.log", submitted_at="", manager="m",
        gpus=8, host="node-a", started_at="2026-12-01T10:00:00.000Z",
        ended_at="2026-12-01T11:00:00.000Z", cause="succeeded",
    )  # fmt: skip
    status = attempt_status(row, set())
    assert (status.nodes, status.procs_per_node, status.gpus, status.cpus) == (2, 4, 8, 16.0)
    assert status.hosts == ["node-a", "node-a"]

    run = RunStatus("r-1", attempts=[status])
    report = compute_usage(
        [AccountedRun(ADDRESS, "research", "default-queue", run)],
        (start - timedelta(hours=1), start + timedelta(hours=2)),
        "project",
    )
    [usage] = report.rows
    assert (usage.gpu_hours, usage.cpu_hours) == (8.0, 16.0)


TORCHRUN_REPORT = """\
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_04:03:04
  host      : localhost
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 4242)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
"""


def test_a_worker_torchrun_reaped_unseen_is_named_from_torchrun_s_report(tmp_path: Path) -> None:
    row = Attempt(
        id=ATTEMPT, address=ADDRESS, run_id="r-1", attempt=1, kind="train",
        queue="default-queue", cpu="1", memory="1024", phase="running",
        launch={"nodes": 2, "procs_per_node": 2, "command": ["torchrun", "train.py"]},
        workdir=str(tmp_path), checkpoint_dir=str(tmp_path), output_dir=str(tmp_path),
        log_path=str(tmp_path / "attempt-1.log"), submitted_at="", manager="m",
    )  # fmt: skip
    (tmp_path / "attempt-1.node-1.log").write_text(TORCHRUN_REPORT)
    group = LauncherGroup(row, ["torchrun", "train.py"], {}, lambda line: None)
    worker = Member(4242, node=1, rank=3, ended=True, ended_at=1.0)  # its status never seen
    launcher = Member(4200, node=1, rank=None, ended=True, returncode=1, ended_at=2.0)
    group.members, group.unseen, group.failure = [launcher, worker], [worker], launcher

    group.close()

    assert group.failure is worker and group.returncode == -9
    assert group.describe() == "node 1 rank 3 killed by signal 9 (SIGKILL)"
