"""The launch contract, read by its real consumer: torch.distributed.run's own parser.

For each node of a job, the variables trainform gives a `torchrun` launcher are put in the
environment and torchrun's `parse_args` and `config_from_args` (torch 2.13) read them: the
group must come out as the job declares it (nodes, node rank, processes per node, one
rendezvous endpoint on node 0). Per-process launches are checked against what
torch.distributed's env:// initialisation reads, by forming a real gloo group.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed.run as torch_run
from trainform.providers.launch import (
    Launch,
    launch_of,
    launch_problems,
    node_environment,
    process_environment,
)


def torchrun_config(environment: dict[str, str], arguments: list[str]):  # type: ignore[no-untyped-def]
    saved = dict(os.environ)
    try:
        os.environ.update(environment)
        args = torch_run.parse_args(arguments)
        config, _, _ = torch_run.config_from_args(args)
        return args, config
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize(("nodes", "procs"), [(1, 1), (2, 2), (3, 4), (12, 8)])
def test_torchrun_reads_one_group_from_the_node_variables(nodes: int, procs: int) -> None:
    launch = launch_of(
        {"command": ["torchrun", "train.py"], "resources": {"nodes": nodes, "procsPerNode": procs}}
    )
    endpoints = set()
    for rank in range(nodes):
        args, config = torchrun_config(
            node_environment(launch, rank, "job-0.job.team.svc"), ["train.py", "--steps", "3"]
        )
        assert (config.min_nodes, config.max_nodes) == (nodes, nodes)
        assert config.nproc_per_node == procs
        assert config.rdzv_backend == "static"
        assert config.rdzv_configs["rank"] == rank
        endpoints.add(config.rdzv_endpoint)
        assert args.training_script == "train.py" and args.training_script_args == ["--steps", "3"]
    assert endpoints == {"job-0.job.team.svc:29500"}


def test_flags_the_user_passed_win_over_the_variables() -> None:
    launch = launch_of({"command": ["torchrun", "t.py"], "resources": {"nodes": 2}})
    _, config = torchrun_config(
        node_environment(launch, 1, "head"), ["--master-port", "31000", "t.py"]
    )
    assert config.rdzv_endpoint == "head:31000" and config.rdzv_configs["rank"] == 1


def test_accelerators_per_node_are_the_default_processes_per_node() -> None:
    launch = launch_of(
        {"command": ["torchrun", "t.py"], "resources": {"nodes": 2, "acceleratorsPerNode": 8}}
    )
    assert (launch.procs_per_node, launch.world_size) == (8, 16)
    assert launch_of({"command": ["python", "t.py"], "resources": {}}).world_size == 1


@pytest.mark.parametrize(
    ("command", "message"),
    [
        pytest.param(["torchrun", "--nnodes", "4", "t.py"], "--nnodes 4 contradicts", id="nnodes"),
        pytest.param(["torchrun", "--nnodes=1:4", "t.py"], "--nnodes 1:4", id="elastic"),
        pytest.param(
            ["torchrun", "--nproc-per-node", "3", "t.py"], "--nproc-per-node 3", id="nproc"
        ),
        pytest.param(["torchrun", "--node-rank", "0", "t.py"], "same rank", id="node-rank"),
        pytest.param(["torchrun", "--standalone", "t.py"], "--standalone", id="standalone"),
        pytest.param(
            ["python3", "-m", "torch.distributed.run", "--nnodes", "3", "t.py"],
            "--nnodes 3",
            id="module",
        ),
    ],
)
def test_a_torchrun_flag_that_contradicts_the_job_is_refused(
    command: list[str], message: str
) -> None:
    spec = {"command": command, "resources": {"nodes": 2, "procsPerNode": 2}}
    (problem,) = launch_problems("TrainingJob/t/j", spec)
    assert problem.field == "spec.command" and message in problem.message


def test_agreeing_flags_and_the_script_own_flags_are_not_refused() -> None:
    spec = {
        "command": ["torchrun", "--nnodes=2", "--nproc_per_node", "2", "t.py", "--nnodes", "9"],
        "resources": {"nodes": 2, "procsPerNode": 2},
    }
    assert launch_problems("TrainingJob/t/j", spec) == []


GROUP = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank())])
dist.all_reduce(value)
print(dist.get_rank(), dist.get_world_size(), os.environ["LOCAL_RANK"], int(value.item()))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_per_process_variables_form_one_gloo_group(tmp_path: Path) -> None:
    launch = Launch(nodes=2, procs_per_node=2, torchrun=False, port=free_port())
    script = tmp_path / "group.py"
    script.write_text(GROUP)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env={**os.environ, **process_environment(launch, node, local, "127.0.0.1")},
            stdout=subprocess.PIPE,
            text=True,
        )
        for node in range(2)
        for local in range(2)
    ]
    lines = sorted(process.communicate(timeout=120)[0].strip() for process in processes)
    assert all(process.returncode == 0 for process in processes)
    assert lines == ["0 4 0 6", "1 4 1 6", "2 4 0 6", "3 4 1 6"]
