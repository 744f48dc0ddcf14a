"""The launch contract of distributed training: one launcher per node, one process group.

A TrainingJob declares `resources.nodes` and `resources.procsPerNode` (processes per node;
by default its accelerators per node, else 1). Every provider starts one launcher per node
and gives it what PyTorch's own consumers read (docs/distributed.md):

- a command that starts with `torchrun` (or `python -m torch.distributed.run`) gets, on
  every node, the `PET_*` variables that torch.distributed.run's argument parser reads as
  the defaults of its flags (torch/distributed/argparse_util.py `env`): PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT (the static
  rendezvous, torchrun's default backend, on node 0). A plain `torchrun train.py` forms
  the group; flags the user passed win over the variables (that is how argparse treats a
  default), and a flag that contradicts the job (`--nnodes 4` on a 2-node job, a fixed
  `--node-rank` or `--standalone` on several nodes) is a plan error at `spec.command`;
- any other command is started once per process, with torch.distributed's env://
  variables: MASTER_ADDR, MASTER_PORT, WORLD_SIZE (all processes), RANK, LOCAL_RANK,
  LOCAL_WORLD_SIZE, NODE_RANK (and GROUP_RANK, torchrun's name for it).

Pure; no I/O. Providers call `launch_of`, `node_environment`, `process_environment` and
`launch_problems`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trainform.providers.base import ValidationProblem

RENDEZVOUS_PORT = 29500
"""torch.distributed's default master port."""

TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
NNODES_FLAGS = ("--nnodes",)
NPROC_FLAGS = ("--nproc-per-node", "--nproc_per_node")
FIXED_RANK_FLAGS = ("--node-rank", "--node_rank")


@dataclass(frozen=True)
class Launch:
    nodes: int
    procs_per_node: int
    torchrun: bool
    port: int = RENDEZVOUS_PORT

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "procsPerNode": self.procs_per_node,
            "worldSize": self.world_size,
            "launcher": "torchrun" if self.torchrun else "per-process",
        }


def is_torchrun(command: list[str]) -> bool:
    """torchrun itself, or a Python running torch.distributed.run as a module."""
    if not command:
        return False
    program = os.path.basename(command[0])
    if program == "torchrun":
        return True
    if program.startswith("python") and len(command) >= 3 and command[1] == "-m":
        return command[2] in TORCHRUN_MODULES
    return False


def processes_per_node(resources: dict[str, Any]) -> int:
    declared = resources.get("procsPerNode")
    if isinstance(declared, int) and declared >= 1:
        return declared
    accelerators = resources.get("acceleratorsPerNode")
    return accelerators if isinstance(accelerators, int) and accelerators >= 1 else 1


def launch_of(spec: dict[str, Any]) -> Launch:
    """The launch of a TrainingJob's (or EvalSuite's) spec, as a normalized document."""
    resources = spec.get("resources") or {}
    nodes = resources.get("nodes", 1)
    return Launch(
        nodes=nodes if isinstance(nodes, int) and nodes >= 1 else 1,
        procs_per_node=processes_per_node(resources),
        torchrun=is_torchrun(list(spec.get("command") or [])),
    )


def node_environment(launch: Launch, node_rank: int | str, master_addr: str) -> dict[str, str]:
    """What one node's launcher gets; `node_rank` may be a placeholder a provider fills."""
    if launch.torchrun:
        return {
            "PET_NNODES": str(launch.nodes),
            "PET_NPROC_PER_NODE": str(launch.procs_per_node),
            "PET_NODE_RANK": str(node_rank),
            "PET_MASTER_ADDR": master_addr,
            "PET_MASTER_PORT": str(launch.port),
        }
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(launch.port),
        "WORLD_SIZE": str(launch.world_size),
        "LOCAL_WORLD_SIZE": str(launch.procs_per_node),
        "NODE_RANK": str(node_rank),
        "GROUP_RANK": str(node_rank),
    }


def process_environment(
    launch: Launch, node_rank: int, local_rank: int, master_addr: str
) -> dict[str, str]:
    """What one process of a per-process launch gets (torch.distributed's env://)."""
    return {
        **node_environment(launch, node_rank, master_addr),
        "RANK": str(node_rank * launch.procs_per_node + local_rank),
        "LOCAL_RANK": str(local_rank),
    }


BOOLEAN_FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module"}
)
"""torchrun's flags that take no value (torch/distributed/run.py); all others take one."""


def torchrun_options(command: list[str]) -> list[tuple[str, str | None]]:
    """(flag, value) of torchrun's own options, up to the training script."""
    options: list[tuple[str, str | None]] = []
    index = 1
    while index < len(command) and command[index].startswith("-"):
        name, equals, inline = command[index].partition("=")
        if equals:
            options.append((name, inline))
        elif name in BOOLEAN_FLAGS:
            options.append((name, None))
        else:
            options.append((name, command[index + 1] if index + 1 < len(command) else None))
            index += 1
        index += 1
    return options


def flag_values(command: list[str], flags: tuple[str, ...]) -> list[str]:
    return [value or "" for name, value in torchrun_options(command) if name in flags]


def torchrun_arguments(command: list[str]) -> list[str]:
    if os.path.basename(command[0]) == "torchrun":
        return command
    return [command[0], *command[3:]]


def launch_problems(address: str, spec: dict[str, Any]) -> list[ValidationProblem]:
    """torchrun flags in `spec.command` that contradict the job's nodes and processes."""
    launch = launch_of(spec)
    if not launch.torchrun:
        return []
    command = torchrun_arguments(list(spec["command"]))
    problems = []

    def refuse(message: str) -> None:
        problems.append(ValidationProblem(address, "spec.command", message))

    for value in flag_values(command, NNODES_FLAGS):
        low, _, high = value.partition(":")
        if (low, high or low) != (str(launch.nodes), str(launch.nodes)):
            refuse(
                f"torchrun --nnodes {value} contradicts resources.nodes {launch.nodes}: "
                "drop the flag (trainform sets PET_NNODES) or make them agree"
            )
    for value in flag_values(command, NPROC_FLAGS):
        if value != str(launch.procs_per_node):
            refuse(
                f"torchrun --nproc-per-node {value} contradicts {launch.procs_per_node} "
                "processes per node (resources.procsPerNode, else acceleratorsPerNode): drop "
                "the flag or set resources.procsPerNode"
            )
    if launch.nodes > 1:
        for value in flag_values(command, FIXED_RANK_FLAGS):
            refuse(
                f"torchrun --node-rank {value} would give every one of the {launch.nodes} "
                "nodes the same rank: drop it (trainform sets PET_NODE_RANK per node)"
            )
        if any(name == "--standalone" for name, _ in torchrun_options(command)):
            refuse(
                f"torchrun --standalone runs one node alone, but the job has {launch.nodes} "
                "nodes: drop it"
            )
    return problems
