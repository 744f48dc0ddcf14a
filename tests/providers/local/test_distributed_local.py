"""Acceptance: examples/distributed trains with real PyTorch DDP through the CLI.

Two nodes of two processes (world size 4) on this machine, `torchrun train.py` on each
node, gloo on CPU. One uninterrupted run trains to success and passes its evaluation
gate; a second run, its data loader slowed by the `dataDelay` parameter, has one worker
SIGKILLed mid-run: the group fails naming that rank, is retried, resumes every rank from
the latest valid checkpoint, and ends with the loss the uninterrupted run ended with, and
its breakdown (every rank reports its phases) shows a larger data-wait share. Real torch,
no mocks: without torch these tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.local.processes import environment_of, processes_with

from tests.engine.support import copy_example
from tests.helpers import REPO, TRAINFORM

try:
    import torch  # noqa: F401  (the example's own dependency)
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("torch is not installed (pip install .[torch])", allow_module_level=True)

pytestmark = pytest.mark.xdist_group("distributed-example")

EXAMPLE = REPO / "examples" / "distributed"
JOB = "TrainingJob/research/char-transformer"
SUITE = "EvalSuite/research/heldout-loss"
KILL_AT_STEP = 12
WAIT = 300.0


def cli(folder: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`trainform ARGS` in the example's folder, with this interpreter's bin folder (where
    torchrun is) first on the PATH the jobs inherit."""
    bin_folder = str(Path(sys.executable).parent)
    environment = {
        **os.environ,
        "NO_COLOR": "1",
        "PATH": bin_folder + os.pathsep + os.environ.get("PATH", ""),
    }
    result = subprocess.run(
        [str(TRAINFORM), *args],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=WAIT + 60,
        check=False,
    )
    if check:
        assert result.returncode == 0, (
            f"trainform {' '.join(args)}:\n{result.stdout}{result.stderr}"
        )
    return result


def settled_status(folder: Path) -> dict[str, Any]:
    cli(folder, "status", "--wait", "--timeout", str(WAIT), "--dir", ".")
    [job] = json.loads(cli(folder, "status", "--format", "json", "--dir", ".").stdout)["jobs"]
    return job  # type: ignore[no-any-return]


def run_folder(folder: Path, run_id: str) -> Path:
    return folder / ".trainform" / "runs" / "research" / "char-transformer" / run_id


def final_loss(folder: Path, run_id: str) -> float:
    final = json.loads((run_folder(folder, run_id) / "output" / "final.json").read_text())
    assert final["worldSize"] == 4
    return float(final["loss"])


@dataclass
class Trained:
    folder: Path
    status: dict[str, Any]
    loss: float
    seconds: float


def started(tmp: Path) -> Path:
    folder = copy_example(EXAMPLE, tmp / "distributed", jobs=True)
    cli(folder, "lock", ".")
    cli(folder, "apply", ".", "--auto-approve")
    return folder


def stop(folder: Path) -> None:
    """Whatever still runs of this folder's platform (a test that failed half way)."""
    cli(folder, "destroy", ".", "--auto-approve", check=False)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """The example trained once without interruption, then evaluated."""
    begin = time.monotonic()
    folder = started(tmp_path_factory.mktemp("uninterrupted"))
    try:
        trained = settled_status(folder)
        assert trained["phase"] == "succeeded", trained
        cli(folder, "apply", ".", "--auto-approve")  # the plan now evaluates the run
        status = settled_status(folder)
    except BaseException:
        stop(folder)
        raise
    return Trained(folder, status, final_loss(folder, status["runId"]), time.monotonic() - begin)


def test_two_nodes_of_two_processes_train_as_one_group_and_pass_the_gate(
    uninterrupted: Trained,
) -> None:
    status, folder = uninterrupted.status, uninterrupted.folder
    assert (status["phase"], status["attempt"]) == ("succeeded", 1)
    assert (status["nodes"], status["procsPerNode"], status["worldSize"]) == (2, 2, 4)
    [attempt] = status["attempts"]
    assert len(attempt["hosts"]) == 2 and attempt["worldSize"] == 4
    assert [(n["node"], n["exitCode"]) for n in attempt["launchers"]] == [(0, 0), (1, 0)]

    log = cli(folder, "logs", "char-transformer", "--dir", ".").stdout
    joined = [line for line in log.splitlines() if "joined the gloo group" in line]
    assert sorted(line.split("] ", 1)[1].split(" (")[0] for line in joined) == [
        f"rank {rank}/4" for rank in range(4)
    ]
    for line in joined:  # ranks 0 and 1 on node 0, 2 and 3 on node 1
        rank = int(line.split("rank ", 1)[1].split("/")[0])
        assert line.startswith(f"[node {rank // 2}] ")

    [evaluation] = status["evaluations"]
    assert (evaluation["suite"], evaluation["phase"], evaluation["gate"]) == (
        SUITE,
        "succeeded",
        "pass",
    )
    assert evaluation["metrics"]["loss"] <= 2.8

    usage = json.loads(cli(folder, "usage", "--format", "json", "--dir", ".").stdout)
    [row] = usage["rows"]  # the CPUs of both nodes, for as long as the attempt ran
    assert row["cpuHours"] == pytest.approx(2 * attempt["ranSeconds"] / 3600, abs=2e-4)

    lineage = json.loads(cli(folder, "lineage", "char-transformer", "--format", "json").stdout)
    group = lineage["lineage"]
    assert (group["nodes"], group["procsPerNode"], group["worldSize"]) == (2, 2, 4)
    assert len(group["hosts"]) == 2


def rank_process(folder: Path, rank: int) -> int:
    """The pid of the example's worker of `rank` in this folder's platform."""
    for pid in processes_with({"TRAINFORM_JOB": JOB, "RANK": str(rank)}):
        environment = environment_of(pid) or {}
        if environment.get("TRAINFORM_CHECKPOINT_DIR", "").startswith(str(folder)):
            return pid
    raise LookupError(f"no process of rank {rank} under {folder}")


def progress(folder: Path) -> int:
    for path in (folder / ".trainform" / "runs").glob("*/*/*/progress.json"):
        try:
            return int(json.loads(path.read_text())["step"])
        except (OSError, ValueError, KeyError):
            return 0
    return 0


DATA_DELAY = 0.05
"""Seconds the killed run's loader takes per batch (`dataDelay`): the batches, and so the
loss, stay those of the uninterrupted run; the time waiting on them grows."""


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """The example with a slowed loader, one worker SIGKILLed at step KILL_AT_STEP, then
    retried by the platform to the end."""
    begin = time.monotonic()
    folder = copy_example(EXAMPLE, tmp_path_factory.mktemp("resumed") / "distributed", jobs=True)
    cli(folder, "lock", ".")
    cli(folder, "apply", ".", "--auto-approve", "--var", f"dataDelay={DATA_DELAY}")
    try:
        deadline = time.monotonic() + WAIT
        while progress(folder) < KILL_AT_STEP:
            assert time.monotonic() < deadline, "the run never reached the step to kill at"
            time.sleep(0.02)
        os.kill(rank_process(folder, 3), signal.SIGKILL)
        status = settled_status(folder)
    except BaseException:
        stop(folder)
        raise
    return Trained(folder, status, final_loss(folder, status["runId"]), time.monotonic() - begin)


def test_a_killed_worker_fails_the_group_and_every_rank_resumes_to_the_same_loss(
    uninterrupted: Trained, resumed: Trained
) -> None:
    status, folder = resumed.status, resumed.folder
    first, second = status["attempts"]
    assert first["phase"] == "failed" and first["cause"] == "node-failure"
    assert first["reason"] == "node 1 rank 3 killed by signal 9 (SIGKILL)"
    assert second["phase"] == "succeeded"
    checkpoint = second["resumedFrom"]
    assert checkpoint and second["resumedStep"] % 10 == 0
    assert 10 <= second["resumedStep"] <= first["lastStep"]
    log = cli(folder, "logs", "char-transformer", "--attempt", "2", "--dir", ".").stdout
    assert sorted(
        line.split("] ", 1)[1] for line in log.splitlines() if "resumed from" in line
    ) == [
        f"rank {rank}: resumed from {checkpoint} at step {second['resumedStep']}"
        for rank in range(4)
    ]
    assert abs(resumed.loss - uninterrupted.loss) <= 1e-6, (resumed.loss, uninterrupted.loss)
    print(
        f"final loss uninterrupted {uninterrupted.loss!r} ({uninterrupted.seconds:.0f}s "
        f"with its evaluation), resumed from {checkpoint} {resumed.loss!r} "
        f"({resumed.seconds:.0f}s)"
    )


def test_a_slow_data_loader_raises_the_data_wait_share_of_the_breakdown(
    uninterrupted: Trained, resumed: Trained
) -> None:
    """Every rank reports its phases through trainform.runtime; the run whose loader was
    slowed (`dataDelay`) spends a larger share of its time running waiting on data."""
    baseline = uninterrupted.status["attempts"][0]["breakdown"]
    assert (baseline["source"], baseline["events"]["ranks"]) == ("events", 4)
    assert baseline["checkpoints"] == 4 and baseline["checkpointBytes"] > 0
    assert baseline["computeSeconds"] >= 40 * 0.05  # every step sleeps stepSeconds
    killed, retried = (attempt["breakdown"] for attempt in resumed.status["attempts"])
    assert killed["source"] == retried["source"] == "events"
    steps = 40 - resumed.status["attempts"][1]["resumedStep"]
    assert retried["dataWaitSeconds"] + retried["recoverySeconds"] >= steps * DATA_DELAY
    assert retried["recoverySeconds"] > 0  # the steps after the checkpoint, run again
    assert retried["shares"]["dataWait"] > baseline["shares"]["dataWait"], (retried, baseline)
    total = resumed.status["delivery"]["breakdown"]
    assert total["shares"]["dataWait"] > baseline["shares"]["dataWait"], (total, baseline)
