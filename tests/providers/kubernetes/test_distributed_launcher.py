"""The per-pod launcher (launcher.py) of a command other than torchrun with several
processes per node, run for real by /bin/sh on this machine: each "pod" gets the container
command and environment the Job's template gives it (the completion-index fieldRef resolved
as the kubelet would, node 0 on 127.0.0.1), and its processes form one real gloo group
with the pods' other processes. One process failing fails the pod at once and ends the
others; SIGTERM to the launcher ends every process; the job's argv never runs as shell."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.kubernetes.jobs import job_manifest
from trainform.providers.kubernetes.naming import Naming
from trainform.providers.kubernetes.placement import Placement

from tests.providers.kubernetes.test_manifests import _launch

DASH = os.path.basename(os.path.realpath(shutil.which("sh") or "")) == "dash"

GROUP = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
line = f"{dist.get_rank()} {dist.get_world_size()} {os.environ['LOCAL_RANK']} "
os.write(1, f"{line}{int(value.item())} {sys.argv[1:]}\\n".encode())  # one write: no interleaving
dist.destroy_process_group()
"""
WORKER = """
import os, sys, time
if os.environ["RANK"] == sys.argv[1]:
    sys.exit(int(sys.argv[2]))
time.sleep(120)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pod(command: list[str], nodes: int, procs: int, index: int, port: int) -> tuple[list, dict]:
    """The container command and environment of pod `index`, as the kubelet resolves them."""
    launch = _launch(  # checkpoints off S3: no resume entry (test_resume_entry.py) in front
        command=command, nodes=nodes, gpus=0, procs_per_node=procs, env={}, checkpoint_prefix=""
    )
    job = job_manifest(Naming(), launch, Placement(()), None)
    [container] = job["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            assert path == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            env[item["name"]] = str(index)
        else:
            env[item["name"]] = item["value"]
    env["MASTER_ADDR"], env["MASTER_PORT"] = "127.0.0.1", str(port)  # one machine, no DNS
    return container["command"], env


def _start(command: list[str], env: dict[str, str], **options: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def test_two_pods_of_two_processes_form_one_gloo_group(tmp_path: Path) -> None:
    script = tmp_path / "group.py"
    script.write_text(GROUP)
    argv = [sys.executable, str(script), "$(touch pwned)", "; exit 3", "`id`"]
    for _ in range(3):  # the free port may be taken before rank 0 binds it: try another
        port = _free_port()
        pods = [_start(*_pod(argv, 2, 2, index, port), cwd=tmp_path) for index in range(2)]
        outputs = [pod.communicate(timeout=180) for pod in pods]
        if not any("address already in use" in err.lower() for _, err in outputs):
            break

    assert [pod.returncode for pod in pods] == [0, 0], outputs
    lines = sorted(line for out, _ in outputs for line in out.strip().splitlines())
    arguments = "['$(touch pwned)', '; exit 3', '`id`']"
    assert lines == [f"{rank} 4 {rank % 2} 6 {arguments}" for rank in range(4)]
    assert not (tmp_path / "pwned").exists()  # argv is passed, never run as shell


def test_one_failed_process_fails_the_pod_and_stops_the_others(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command, env = _pod([sys.executable, str(script), "6", "3"], 2, 4, 1, _free_port())
    started = time.monotonic()
    pod = _start(command, env)
    _, errors = pod.communicate(timeout=60)

    assert pod.returncode in ((3,) if DASH else (3, 1))  # bash's wait may lose it: 1
    assert time.monotonic() - started < 30  # the others were stopped, not waited for
    assert "rank 6 (local rank 2 on node 1) exited with code 3" in errors


def test_sigterm_to_the_launcher_reaches_every_process(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command, env = _pod([sys.executable, str(script), "-1", "0"], 2, 3, 0, _free_port())
    pod = _start(command, env)
    time.sleep(1.5)
    pod.send_signal(signal.SIGTERM)
    _, errors = pod.communicate(timeout=30)

    assert pod.returncode == 143, errors
    assert "exited with code" not in errors  # stopped, not failed


def test_a_node_rank_that_is_not_a_number_starts_nothing(tmp_path: Path) -> None:
    command, env = _pod([sys.executable, "-c", "print('started')"], 2, 2, 0, _free_port())
    env["NODE_RANK"] = "a[$(touch pwned)]"
    pod = _start(command, env, cwd=tmp_path)
    out, errors = pod.communicate(timeout=30)

    assert (pod.returncode, out) == (2, "")
    assert "must be numbers" in errors and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("procs", [1, 2])
def test_a_pod_command_is_the_job_argv_or_the_fixed_launcher(procs: int) -> None:
    command, _ = _pod(["python", "train.py", "--lr", "$LR"], 2, procs, 0, 1)

    if procs == 1:
        assert command == ["python", "train.py", "--lr", "$LR"]
    else:
        assert command[:2] == ["sh", "-c"] and "train.py" not in command[2]
        assert command[3:] == ["trainform-launch", "python", "train.py", "--lr", "$LR"]
