"""How the Slurm runner starts a job's command on every node: the launch contract on Slurm.

The runner (providers/slurm/runner.py) is the batch step's main process, on the job's first
node. For the launch of providers/launch.py (kept in launch.json as `distributed`) it:

- finds the rendezvous host: the first host of the expanded `SLURM_JOB_NODELIST`
  (`scontrol show hostnames <list>`, an argv list, no shell; the batch host, which Slurm
  puts on the first node, when that fails), and the rendezvous port: torch's 29500 plus
  the job id modulo 2000, so two jobs sharing a node (every node of the test cluster is one
  host) never race for one port;
- starts a `torchrun` command through `srun --ntasks-per-node=1` (one launcher per node,
  which starts the node's processes itself), any other command with world size above one
  through `srun --ntasks-per-node=<procsPerNode>` (Slurm starts every process: a failed one
  fails the step, signals reach each); either way srun starts
  `python -P -m trainform.providers.slurm.node_launch`, which adds the node's (or process's)
  variables from SLURM_NODEID / SLURM_LOCALID and execs the command
  (providers/slurm/node_launch.py);
- runs a one-node `torchrun` command directly, with the variables of node 0, and a
  one-process command directly, as before.

srun gets `--export=ALL` (the batch step inherits SLURM_EXPORT_ENV=NONE from sbatch's
`--export=NONE`, which would give the tasks no environment at all), `--kill-on-bad-exit=1`
(a failed task ends the step, the step's exit fails the job) and `--` before the launcher,
whose own `--` comes before the spec's argv: no element of it is read as an option.

Pure but for `first_node` (one scontrol call).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

from trainform.providers.launch import RENDEZVOUS_PORT, Launch, is_torchrun, node_environment

PORT_SPREAD = 2000
"""Rendezvous ports are RENDEZVOUS_PORT .. RENDEZVOUS_PORT + PORT_SPREAD - 1, below the
ephemeral range (32768 on Linux)."""
NODE_LAUNCH = "trainform.providers.slurm.node_launch"


def distributed_of(command: list[str], nodes: int, procs_per_node: int) -> dict[str, Any]:
    """What launch.json keeps of a job's launch (`distributed`)."""
    launch = Launch(nodes=nodes, procs_per_node=procs_per_node, torchrun=is_torchrun(command))
    return launch.to_json()


def launch_in(launch: dict[str, Any], environ: Mapping[str, str]) -> Launch:
    """The launch of this attempt. A launch.json written before `distributed` existed
    runs one task per node of the allocation, as it did then."""
    recorded = launch.get("distributed") or {}
    allocated = int(environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
    job_id = environ.get("SLURM_JOB_ID", "")
    port = RENDEZVOUS_PORT + (int(job_id) % PORT_SPREAD if job_id.isdigit() else 0)
    return Launch(
        nodes=int(recorded.get("nodes") or allocated),
        procs_per_node=int(recorded.get("procsPerNode") or 1),
        torchrun=recorded.get("launcher") == "torchrun",
        port=port,
    )


def first_node(launch: dict[str, Any], environ: Mapping[str, str]) -> str:
    """The job's first node (the rendezvous host): the first of `scontrol show hostnames`
    of SLURM_JOB_NODELIST; the batch host (the first node) or this host if that fails."""
    fallback = environ.get("SLURMD_NODENAME") or socket.gethostname()
    nodelist = environ.get("SLURM_JOB_NODELIST", "")
    if not nodelist or nodelist.startswith("-"):
        return fallback
    program = launch.get("slurm", {}).get("scontrol") or "scontrol"
    conf = launch.get("slurm", {}).get("conf") or environ.get("SLURM_CONF", "")
    environment = {**os.environ, **({"SLURM_CONF": conf} if conf else {})}
    try:
        completed = subprocess.run(
            [program, "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=30,
            env=environment,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return fallback
    hosts = completed.stdout.split() if completed.returncode == 0 else []
    return hosts[0] if hosts else fallback


def uses_srun(job: Launch) -> bool:
    return job.nodes > 1 or (not job.torchrun and job.world_size > 1)


def srun_argv(
    launch: dict[str, Any], job: Launch, environ: Mapping[str, str], master: str
) -> list[str]:
    """srun starting the node launcher on every node (torchrun) or for every process."""
    tasks = 1 if job.torchrun else job.procs_per_node
    cpus = int(environ.get("SLURM_CPUS_PER_TASK", "0") or 0)
    options = [
        f"--nodes={job.nodes}",
        f"--ntasks={job.nodes * tasks}",
        f"--ntasks-per-node={tasks}",
        "--export=ALL",
        "--kill-on-bad-exit=1",
    ]
    if cpus:  # srun 22.05 no longer inherits the job's --cpus-per-task
        options.append(f"--cpus-per-task={max(1, cpus // tasks)}")
        if cpus < tasks:
            options.append("--overcommit")
    python = launch.get("script", {}).get("python") or "python3"
    launcher = [
        python,
        "-P",
        "-m",
        NODE_LAUNCH,
        "torchrun" if job.torchrun else "per-process",
        str(job.nodes),
        str(job.procs_per_node),
        str(job.port),
        master,
    ]
    return ["srun", *options, "--", *launcher, "--", *launch["command"]]


def legacy_srun_argv(command: list[str], nodes: int) -> list[str]:
    """One task per node running the command itself (a launch.json without
    `distributed`)."""
    return [
        "srun",
        f"--nodes={nodes}",
        "--ntasks-per-node=1",
        "--export=ALL",
        "--kill-on-bad-exit=1",
        "--",
        *command,
    ]


def direct_environment(job: Launch, master: str) -> dict[str, str]:
    """What a command started without srun gets: node 0's variables for torchrun."""
    return node_environment(job, 0, master) if job.torchrun else {}
