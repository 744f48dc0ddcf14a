"""Import from the real Slurm cluster: discover -> spec documents -> adopt -> observe shows
exactly the normalized documents (a plan right after an import has nothing to change), and
adoption marks nothing on Slurm.

The live objects are made by hand, as an administrator would have: an account with a user,
a QOS, a partition line in the managed include file (without a trainform marker) and a
partition association with limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainform.planner.desired import build_desired
from trainform.planner.diff import diff_documents
from trainform.planner.session import ProviderSet
from trainform.providers.base import ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.slurm.commands import SlurmCommands
from trainform.providers.slurm.partitions import ManagedFile, PartitionFile
from trainform.providers.slurm.provider import SlurmProvider
from trainform.specs import load_specs

from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster


@pytest.fixture
def legacy(slurm_cluster: SlurmCluster) -> Iterator[str]:
    prefix = fixtures.unique_prefix("i")
    account, qos = f"{prefix}-legacy", f"{prefix}-lq"
    commands = SlurmCommands(str(slurm_cluster.bin_dir), str(slurm_cluster.conf))
    partitions = PartitionFile(slurm_cluster.partitions_file, slurm_cluster.conf, commands)

    def forget(managed: ManagedFile) -> None:
        managed.items = [i for i in managed.items if not isinstance(i, str) or prefix not in i]
        managed.blocks = [
            b
            for b in managed.blocks
            if b.address != "ResourcePool/pool-" + slurm_cluster.node_name.lower()
            and prefix not in b.address
        ]

    try:
        run = slurm_cluster.run
        assert run(["sacctmgr", "-i", "add", "account", account]).returncode == 0
        run(["sacctmgr", "-i", "add", "user", "root", f"account={account}"])
        run(["sacctmgr", "-i", "add", "qos", qos, "Priority=7", "GrpTRES=cpu=6"])
        line = f"PartitionName={qos} Nodes={slurm_cluster.node_name} QOS={qos} MaxTime=90 State=UP"
        partitions.change(lambda managed: managed.append_line(line), lambda managed: [])
        run(
            [
                "sacctmgr",
                "-i",
                "add",
                "user",
                "root",
                f"account={account}",
                f"partition={qos}",
                "GrpTRES=gres/gpu=1",
                "MaxJobs=3",
                "MaxWall=45",
            ]
        )
        yield prefix
    finally:
        partitions.change(forget, lambda managed: [])
        fixtures.cleanup(slurm_cluster, prefix)


def test_discovered_documents_are_what_observe_returns_after_adoption(
    tmp_path: Path, slurm_cluster: SlurmCluster, legacy: str
) -> None:
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / legacy, local=False)
    )
    providers = ProviderSet(load_specs(root).config, root)
    try:
        provider = providers.get("hpc")
        assert isinstance(provider, SlurmProvider)
        found = provider.discover()
        pool_name = f"pool-{slurm_cluster.node_name.lower()}"
        ours = [
            d
            for d in found
            if legacy in d.document["metadata"]["name"]
            or d.document["metadata"]["name"] == pool_name
        ]
        kinds = sorted(d.document["kind"] for d in ours)
        assert kinds == ["Project", "Queue", "Quota", "ResourcePool"], kinds
        (root / "imported.yaml").write_text(
            "---\n".join(yaml.safe_dump(d.document, sort_keys=False) for d in ours)
        )
        desired = build_desired(load_specs(root))
        order = {"ResourcePool": 0, "Project": 1, "Queue": 2, "Quota": 3}
        for discovered in sorted(ours, key=lambda d: order[d.document["kind"]]):
            metadata = discovered.document["metadata"]
            project = metadata.get("project")
            address = "/".join(
                filter(None, [discovered.document["kind"], project, metadata["name"]])
            )
            item = desired[address]
            request = ObserveRequest(address, item.kind, item.name, item.project, item.document)

            observation = provider.adopt(request, discovered.identifier)

            assert observation.exists, address
            assert diff_documents(item.document, observation.live) == [], address
        owned = dict(provider.list_owned())  # adoption is state's record: nothing is marked
        assert f"Project/{legacy}-legacy" not in owned
        accounts = slurm_cluster.run(["sacctmgr", "-nP", "show", "account", f"{legacy}-legacy"])
        assert "trainform:" not in accounts.stdout
    finally:
        providers.close()


def test_objects_of_another_manager_are_not_adopted(
    tmp_path: Path, slurm_cluster: SlurmCluster, legacy: str
) -> None:
    account = f"{legacy}-legacy"
    slurm_cluster.run(
        [
            "sacctmgr",
            "-i",
            "modify",
            "account",
            "where",
            f"name={account}",
            "set",
            f"Description=trainform:someone-else:Project/{account}",
        ]
    )
    root = tmp_path / "specs"
    root.mkdir()
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / legacy, local=False)
    )
    (root / "p.yaml").write_text(fixtures.project(account))
    providers = ProviderSet(load_specs(root).config, root)
    try:
        item = build_desired(load_specs(root))[f"Project/{account}"]
        request = ObserveRequest(item.address, item.kind, item.name, None, item.document)
        with pytest.raises(PermanentProviderError, match="not managed by this trainform"):
            providers.get("hpc").adopt(request, account)
    finally:
        providers.close()
