"""The Slurm side of the launch contract without a cluster: the srun command the runner
builds for each kind of launch, and what the node launcher srun starts gives the command
(read back by torchrun's own parser, and by a real exec)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch.distributed.run as torch_run
from trainform.providers.launch import Launch
from trainform.providers.slurm import distributed, node_launch
from trainform.providers.slurm.runner import command_of

ALLOCATION = {"SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "4021", "SLURM_CPUS_PER_TASK": "4"}


def launch_json(command: list[str], nodes: int, procs: int) -> dict[str, object]:
    return {
        "command": command,
        "distributed": distributed.distributed_of(command, nodes, procs),
        "script": {"python": "/venv/bin/python", "path": "/usr/bin"},
    }


def test_torchrun_gets_one_launcher_per_node_through_srun() -> None:
    launch = launch_json(["torchrun", "train.py", "--steps", "3"], nodes=2, procs=2)
    argv = command_of(launch, ALLOCATION, "n1")
    port = str(29500 + 4021 % distributed.PORT_SPREAD)
    assert argv == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--export=ALL",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=4",
        "--",
        "/venv/bin/python",
        "-P",
        "-m",
        "trainform.providers.slurm.node_launch",
        "torchrun",
        "2",
        "2",
        port,
        "n1",
        "--",
        "torchrun",
        "train.py",
        "--steps",
        "3",
    ]


def test_other_commands_get_one_task_per_process() -> None:
    launch = launch_json(["python3", "train.py"], nodes=2, procs=2)
    argv = command_of(launch, ALLOCATION, "n1")
    assert argv[1:5] == ["--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--export=ALL"]
    assert "--cpus-per-task=2" in argv and "--overcommit" not in argv
    few = command_of(launch, {**ALLOCATION, "SLURM_CPUS_PER_TASK": "1"}, "n1")
    assert "--cpus-per-task=1" in few and "--overcommit" in few
    assert argv[argv.index("per-process") :] == [
        "per-process",
        "2",
        "2",
        argv[argv.index("per-process") + 3],
        "n1",
        "--",
        "python3",
        "train.py",
    ]


@pytest.mark.parametrize(
    ("command", "nodes", "procs", "srun"),
    [
        pytest.param(["torchrun", "t.py"], 1, 4, False, id="one-node-torchrun"),
        pytest.param(["python3", "t.py"], 1, 1, False, id="one-process"),
        pytest.param(["python3", "t.py"], 1, 2, True, id="one-node-two-processes"),
        pytest.param(["python3", "-m", "torch.distributed.run", "t.py"], 2, 1, True, id="module"),
    ],
)
def test_srun_only_where_slurm_must_start_more_than_one_launcher(
    command: list[str], nodes: int, procs: int, srun: bool
) -> None:
    argv = command_of(launch_json(command, nodes, procs), ALLOCATION, "n1")
    assert (argv[0] == "srun") is srun
    assert argv == command or argv[-len(command) - 1 :] == ["--", *command]


def test_a_launch_written_before_distributed_runs_one_task_per_node() -> None:
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


def test_every_node_launcher_gives_torchrun_its_rank_of_one_group() -> None:
    launch = Launch(nodes=2, procs_per_node=2, torchrun=True, port=30021)
    endpoints, ranks = set(), []
    for node in ("0", "1"):
        environment = node_launch.task_environment(
            launch, "n1", {"SLURM_NODEID": node, "SLURM_LOCALID": "0", "PATH": "/usr/bin"}
        )
        saved = dict(os.environ)
        try:
            os.environ.update(environment)
            config, _, _ = torch_run.config_from_args(torch_run.parse_args(["train.py"]))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (2, 2, 2)
        endpoints.add(config.rdzv_endpoint)
        ranks.append(config.rdzv_configs["rank"])
    assert endpoints == {"n1:30021"} and ranks == [0, 1]


PRINT = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.isupper()}))"


def test_the_node_launcher_execs_the_command_with_its_process_rank() -> None:
    argv = ["per-process", "2", "2", "30001", "n1", "--", sys.executable, "-c", PRINT]
    completed = subprocess.run(
        [sys.executable, "-P", "-m", "trainform.providers.slurm.node_launch", *argv],
        env={**os.environ, "SLURM_NODEID": "1", "SLURM_LOCALID": "1", "SLURMD_NODENAME": "n2"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    seen = json.loads(completed.stdout)
    assert {k: seen[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK")} == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "NODE_RANK": "1",
    }
    assert (seen["MASTER_ADDR"], seen["MASTER_PORT"]) == ("n1", "30001")
    assert "node 1 (n2) rank 3" in completed.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["torchrun", "2", "2", "1", "h", "--"], id="no-command"),
        pytest.param(["mpi", "2", "2", "1", "h", "--", "x"], id="unknown-launcher"),
        pytest.param(["torchrun", "2", "2", "1", "h", "x"], id="no-separator"),
        pytest.param(["torchrun", "two", "2", "1", "h", "--", "x"], id="not-a-number"),
    ],
)
def test_the_node_launcher_refuses_arguments_it_was_not_built_for(argv: list[str]) -> None:
    assert node_launch.main(argv) == 2
