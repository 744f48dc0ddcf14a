"""The provider contract for `slurm`, against the real one-node Slurm 22.05 test cluster.

Each test gets its own names (accounts, QOS, partitions and pools are cluster-wide) and
removes every Slurm object carrying them afterwards, whoever owns it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.base import Provider
from trainform.providers.slurm.provider import SlurmProvider

from tests.providers.contract.contract import ProviderContract
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster


def _rows(provider: Provider, argv: list[str]) -> list[list[str]]:
    assert isinstance(provider, SlurmProvider)
    text = provider.commands.run(argv).stdout
    return [line.split("|") for line in text.splitlines() if line]


class TestSlurmContract(ProviderContract):
    kinds = ("Project", "ResourcePool", "Queue", "Quota", "EvalSuite")
    provider_name = "hpc"

    @pytest.fixture
    def spec_root(self, tmp_path: Path, slurm_cluster: SlurmCluster) -> Iterator[Path]:
        prefix = fixtures.unique_prefix("ct")
        self.prefix = prefix
        root = tmp_path / "specs"
        root.mkdir()
        (root / "trainform.yaml").write_text(
            fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix)
        )
        documents = [
            fixtures.project(f"{prefix}-p"),
            fixtures.pool(slurm_cluster, f"{prefix}-pool"),
            fixtures.queue(f"{prefix}-q", f"{prefix}-pool"),
            fixtures.quota(
                f"{prefix}-quota",
                f"{prefix}-p",
                f"{prefix}-q",
                "{gpu: 1, runningJobs: 2, maxWallTime: 30m}",
            ),
            "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host}\n"
            "spec: {runtime: host}\n",
            "apiVersion: trainform/v1\nkind: EvalSuite\n"
            f"metadata: {{name: {prefix}-eval, project: {prefix}-p}}\n"
            "spec: {image: host, command: [python3, e.py], metrics: [{name: m, goal: maximize}]}\n",
        ]
        (root / "platform.yaml").write_text("---\n".join(documents))
        yield root
        fixtures.cleanup(slurm_cluster, prefix)

    def identity(self, provider: Provider, address: str) -> Any:
        kind, *rest = address.split("/")
        if kind == "Project":
            rows = _rows(provider, ["sacctmgr", "-nP", "show", "assoc", "format=Account,User,ID"])
            return [r[2] for r in rows if r[0] == rest[-1] and not r[1]]
        if kind == "Queue":
            rows = _rows(provider, ["sacctmgr", "-nP", "show", "qos", "format=Name,ID"])
            return [r[1] for r in rows if r[0] == rest[-1]]
        if kind == "Quota":
            rows = _rows(
                provider, ["sacctmgr", "-nP", "show", "assoc", "format=Account,Partition,ID"]
            )
            return [r[2] for r in rows if r[0] == rest[0] and r[1]]
        if kind == "ResourcePool":
            assert isinstance(provider, SlurmProvider)
            block = provider.partitions.read().find(address)
            return None if block is None else (block.manager, block.line)
        assert isinstance(provider, SlurmProvider)
        return provider.suites.uid(address)
