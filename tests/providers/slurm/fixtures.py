"""Spec folders on the real Slurm test cluster, with names unique per test and a cleanup
that removes every Slurm object carrying those names (accounts, QOS, managed file blocks,
jobs), whoever owns them."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import yaml
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


def ours(name: str, prefix: str) -> bool:
    """Whether a Slurm name is this test's: `prefix` itself or `prefix-...` (a bare
    startswith would also take the names of the test whose counter is prefix's followed
    by a digit)."""
    name = name.lower()
    return name == prefix.lower() or name.startswith(prefix.lower() + "-")


def own_targets(generated: Path, prefix: str) -> list[str]:
    """`--target` options for the documents of `import --from`'s file that are this
    test's (`ours`): import reads the whole shared cluster, the objects of other tests
    included, which are theirs to plan and apply."""
    targets = []
    for document in yaml.safe_load_all(generated.read_text()):
        metadata = (document or {}).get("metadata", {})
        if ours(metadata.get("name", ""), prefix):
            parts = [document["kind"], metadata.get("project"), metadata["name"]]
            targets.append("--target=" + "/".join(part for part in parts if part))
    assert targets, f"import wrote nothing of {prefix} to {generated}"
    return targets


def leftovers(cluster: SlurmCluster, prefix: str) -> list[str]:
    """Accounts, users and QOS whose names are this test's, still in the database."""
    commands = SlurmCommands(str(cluster.bin_dir), str(cluster.conf))
    found = []
    for entity, column in (("account", "Account"), ("user", "User"), ("qos", "Name")):
        listed = commands.run(["sacctmgr", "-nP", "show", entity, f"format={column}"]).stdout
        found += [f"{entity} {name}" for name in listed.split() if ours(name, prefix)]
    return found


def cleanup(cluster: SlurmCluster, prefix: str) -> None:
    """Remove every Slurm object whose name is this test's (`ours`), owner or not: jobs,
    managed file blocks, users (all their associations), the associations of other users
    with its accounts, its accounts and QOS; fail if any is left."""
    commands = SlurmCommands(str(cluster.bin_dir), str(cluster.conf))
    jobs = commands.run(["squeue", "--noheader", "--format=%i %a"], check=False).stdout
    ids = [line.split()[0] for line in jobs.splitlines() if prefix in line]
    if ids:
        commands.run(["scancel", *ids], check=False)

    def edit(managed: ManagedFile) -> None:
        managed.blocks = [b for b in managed.blocks if prefix not in b.address]

    PartitionFile(cluster.partitions_file, cluster.conf, commands).change(edit, lambda m: [])

    def sacctmgr(*argv: str) -> None:
        commands.run(["sacctmgr", "-i", *argv], check=False)

    for entity in leftovers(cluster, prefix):
        if entity.startswith("user "):  # first: a user's default account cannot go alone
            sacctmgr("delete", "user", "where", f"name={entity.split()[1]}")
    for entity in leftovers(cluster, prefix):
        if entity.startswith("account "):
            sacctmgr("delete", "user", "where", f"account={entity.split()[1]}")
    for _ in range(3):  # deleting a parent leaves its child's account (not its association)
        accounts = [e.split()[1] for e in leftovers(cluster, prefix) if e.startswith("account ")]
        if not accounts:
            break
        for name in accounts:
            sacctmgr("delete", "account", "where", f"name={name}")
    for entity in leftovers(cluster, prefix):
        if entity.startswith("qos "):
            sacctmgr("delete", "qos", "where", f"name={entity.split()[1]}")
    left = leftovers(cluster, prefix)
    assert not left, f"the test's Slurm objects outlived its cleanup: {left}"
