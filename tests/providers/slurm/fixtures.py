"""Spec folders on the real Slurm test cluster, with names unique per test and a cleanup
that removes every Slurm object carrying those names (accounts, QOS, managed file blocks,
jobs), whoever owns them."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.partitions import ManagedFile, PartitionFile

from tests.services.slurm import SlurmCluster

_counter = itertools.count(1)


def unique_prefix(tag: str) -> str:
    return f"{tag}{os.getpid() % 1000}x{next(_counter)}"


def config(cluster: SlurmCluster, job_root: Path, local: bool = True) -> str:
    lines = [
        "apiVersion: trainform/v1",
        "providers:",
        "  - name: hpc",
        "    type: slurm",
        "    connection:",
        f"      conf: {cluster.conf}",
        f"      partitionsFile: {cluster.partitions_file}",
        f"      jobRoot: {job_root}",
        f"      cluster: {cluster.cluster_name}",
        f"      binDir: {cluster.bin_dir}",
    ]
    if local:
        lines += ["  - name: local", "    type: local"]
    lines += ["state: {backend: local, path: .trainform/state.json}", ""]
    return "\n".join(lines)


def pool(cluster: SlurmCluster, name: str) -> str:
    return (
        "apiVersion: trainform/v1\nkind: ResourcePool\n"
        f"metadata: {{name: {name}}}\n"
        f"spec: {{provider: hpc, nodes: 1, cpu: {cluster.cpus}, memory: {cluster.memory_mb}Mi, "
        f"accelerator: {{type: gpu, count: {cluster.gpus}}}, nodeList: {cluster.node_name}}}\n"
    )


def project(name: str, users: str = "[root]") -> str:
    return (
        "apiVersion: trainform/v1\nkind: Project\n"
        f"metadata: {{name: {name}}}\nspec: {{owners: [team@example.com], users: {users}}}\n"
    )


def queue(name: str, pool_name: str, quota: str = "{cpu: 4, memory: 4Gi}", extra: str = "") -> str:
    return (
        "apiVersion: trainform/v1\nkind: Queue\n"
        f"metadata: {{name: {name}}}\n"
        f"spec:\n  pools: [{{pool: {pool_name}, nominalQuota: {quota}}}]\n"
        f"  defaultPriority: 10\n  maxRuntime: 1h\n{extra}"
    )


def quota(name: str, project_name: str, queue_name: str, limits: str) -> str:
    return (
        "apiVersion: trainform/v1\nkind: Quota\n"
        f"metadata: {{name: {name}, project: {project_name}}}\n"
        f"spec: {{queue: {queue_name}, limits: {limits}}}\n"
    )


def cleanup(cluster: SlurmCluster, prefix: str) -> None:
    """Remove every Slurm object whose name starts with `prefix`, owner or not."""
    commands = SlurmCommands(str(cluster.bin_dir), str(cluster.conf))
    jobs = commands.run(["squeue", "--noheader", "--format=%i %a"], check=False).stdout
    ids = [line.split()[0] for line in jobs.splitlines() if prefix in line]
    if ids:
        commands.run(["scancel", *ids], check=False)

    def edit(managed: ManagedFile) -> None:
        managed.blocks = [b for b in managed.blocks if prefix not in b.address]

    PartitionFile(cluster.partitions_file, cluster.conf, commands).change(edit, lambda m: [])
    accounts = commands.run(["sacctmgr", "-nP", "show", "account", "format=Account"]).stdout
    for name in accounts.split():
        if name.startswith(prefix):
            commands.run(["sacctmgr", "-i", "delete", "account", name], check=False)
    qos = commands.run(["sacctmgr", "-nP", "show", "qos", "format=Name"]).stdout
    for name in qos.split():
        if name.startswith(prefix):
            commands.run(["sacctmgr", "-i", "delete", "qos", name], check=False)
