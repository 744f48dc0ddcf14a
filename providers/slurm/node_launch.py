"""One task of a distributed Slurm job step: the launch contract's variables, then the command.

srun starts, on every node (torchrun) or for every process (any other command),

    python -P -m trainform.providers.slurm.node_launch <torchrun|per-process> <nodes>
        <procs per node> <port> <rendezvous host> -- <command argv...>

(providers/slurm/distributed.py). This module reads the task's place from what slurmstepd
sets, SLURM_NODEID (the node's rank in the allocation) and SLURM_LOCALID (the task's rank on
its node), adds `node_environment` (torchrun: PET_NODE_RANK=$SLURM_NODEID, PET_NNODES, ...)
or `process_environment` (RANK, LOCAL_RANK, WORLD_SIZE, ...) of providers/launch.py to its
environment and execs the command in place (no shell, no child: signals srun forwards reach
the command itself). Nothing of the spec is interpreted here: the argv after `--` is exec'd
as given.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from trainform.providers.launch import Launch, node_environment, process_environment

USAGE = (
    "usage: node_launch torchrun|per-process NODES PROCS PORT HOST -- COMMAND...\n"
    "(started by srun inside a trainform Slurm job)"
)


class UsageError(Exception):
    pass


def parse(argv: list[str]) -> tuple[Launch, str, list[str]]:
    """(launch, rendezvous host, command) of the launcher's arguments."""
    if len(argv) < 7 or argv[5] != "--" or argv[0] not in ("torchrun", "per-process"):
        raise UsageError(USAGE)
    try:
        nodes, procs, port = int(argv[1]), int(argv[2]), int(argv[3])
    except ValueError:
        raise UsageError(USAGE) from None
    launch = Launch(nodes=nodes, procs_per_node=procs, torchrun=argv[0] == "torchrun", port=port)
    return launch, argv[4], argv[6:]


def task_environment(launch: Launch, master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """This task's environment: its own plus the contract's variables for its place."""
    node = int(environ.get("SLURM_NODEID", "0") or 0)
    local = int(environ.get("SLURM_LOCALID", "0") or 0)
    if launch.torchrun:
        added = node_environment(launch, node, master)
    else:
        added = process_environment(launch, node, local, master)
    return {**environ, **added}


def main(argv: list[str]) -> int:
    try:
        launch, master, command = parse(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    environment = task_environment(launch, master, os.environ)
    host = environment.get("SLURMD_NODENAME", "")
    place = f"node {environment.get('SLURM_NODEID', '0')} ({host})"
    if not launch.torchrun:
        place += f" rank {environment['RANK']}"
    print(f"trainform: {place} starts {command[0]!r}", file=sys.stderr, flush=True)
    try:
        os.execvpe(command[0], command, environment)
    except OSError as exc:
        print(f"trainform: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        return 127
    return 0  # not reached: execvpe replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
