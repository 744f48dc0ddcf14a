"""The in-job runner, run as Slurm runs it
(`python -P -m trainform.providers.slurm.runner launch.json`), without Slurm: the checkpoint
signal reaches the training process, a requeued attempt resumes from the latest valid
checkpoint, and a mutated dataset refuses the attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trainform.providers.slurm.runner import command_of

TRAP = """
import os, signal, sys, time, pathlib
out = pathlib.Path(os.environ["TRAINFORM_OUTPUT_DIR"])
def checkpoint(number, frame):
    (out / "signalled").write_text("USR1")
    sys.exit(0)
signal.signal(signal.SIGUSR1, checkpoint)
(out / "ready").write_text(os.environ["TRAINFORM_RESUME_FROM"])
time.sleep(30)
"""


def write_checkpoint(folder: Path, step: int) -> None:
    import hashlib

    target = folder / f"step-{step:06d}"
    target.mkdir(parents=True)
    data = b"model"
    (target / "model.bin").write_bytes(data)
    files = [{"path": "model.bin", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    (target / "manifest.json").write_text(json.dumps({"step": step, "files": files}))


def launch_file(tmp_path: Path, datasets: list[dict] | None = None) -> Path:
    output = tmp_path / "output"
    output.mkdir()
    launch = {
        "kind": "train",
        "command": [sys.executable, "-c", TRAP],
        "cwd": str(tmp_path),
        "env": {"TRAINFORM_OUTPUT_DIR": str(output), "PATH": os.environ["PATH"]},
        "datasets": datasets or [],
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "resume_from": None,
        "keep_last": 3,
    }
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(launch))
    return path


def start(path: Path, restarts: int = 0) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SLURM_RESTART_COUNT": str(restarts)}
    runner = [sys.executable, "-P", "-m", "trainform.providers.slurm.runner", str(path)]
    return subprocess.Popen(runner, env=env)


def wait_for(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_the_checkpoint_signal_reaches_the_training_process(tmp_path: Path) -> None:
    runner = start(launch_file(tmp_path))
    wait_for(tmp_path / "output" / "ready")

    runner.send_signal(signal.SIGUSR1)

    assert runner.wait(20) == 0
    assert (tmp_path / "output" / "signalled").read_text() == "USR1"
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["exit_code"] == 0 and result["signals"] == ["SIGUSR1"]


def test_a_requeued_attempt_resumes_from_the_latest_valid_checkpoint(tmp_path: Path) -> None:
    path = launch_file(tmp_path)
    write_checkpoint(tmp_path / "checkpoints", 5)
    write_checkpoint(tmp_path / "checkpoints", 10)
    (tmp_path / "checkpoints" / "step-000015").mkdir()  # incomplete: no manifest
    runner = start(path, restarts=1)
    wait_for(tmp_path / "output" / "ready")
    runner.send_signal(signal.SIGUSR1)
    runner.wait(20)

    resumed = (tmp_path / "output" / "ready").read_text()

    assert resumed == str(tmp_path / "checkpoints" / "step-000010")


def test_a_mutated_dataset_refuses_the_attempt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("changed")
    dataset = {"name": "d", "version": "v1", "folder": str(data), "manifest_digest": "sha256:0"}
    runner = start(launch_file(tmp_path, [dataset]))

    assert runner.wait(20) == 2
    result = json.loads((tmp_path / "result.json").read_text())
    assert "data mutated" in result["reason"]
    assert not (tmp_path / "output" / "ready").exists()


def test_multi_node_allocations_run_one_task_per_node_through_srun() -> None:
    launch = {"command": ["python3", "train.py"]}
    assert command_of(launch, {"SLURM_JOB_NUM_NODES": "1"}) == ["python3", "train.py"]
    assert command_of(launch, {"SLURM_JOB_NUM_NODES": "2"}) == [
        "srun",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--export=ALL",
        "--kill-on-bad-exit=1",
        "--",
        "python3",
        "train.py",
    ]
