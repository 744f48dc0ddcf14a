"""The provider contract for the local provider, plus what only the local provider promises.

The contract runs against the real SQLite database under a copy of the quickstart, which
declares one resource of each kind the local provider reconciles.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.session import ProviderSet
from trainform.providers.base import DesiredResource, Provider, ProviderContext
from trainform.providers.errors import PermanentProviderError
from trainform.providers.local.datasets import build_manifest
from trainform.providers.local.machine import MachineFacts
from trainform.providers.local.provider import LocalProvider
from trainform.specs import load_specs

from tests.engine.support import QUICKSTART, copy_example
from tests.providers.contract.contract import ProviderContract, desired_resource


def database_row(provider: Provider, address: str) -> sqlite3.Row | None:
    assert isinstance(provider, LocalProvider)
    connection = sqlite3.connect(provider.root / "platform.db")
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(
            "SELECT rowid, created_at, generation FROM objects WHERE address = ?", (address,)
        ).fetchone()
    finally:
        connection.close()


class TestLocalProviderContract(ProviderContract):
    kinds = ("Project", "ResourcePool", "Queue", "Quota", "Dataset", "Image", "EvalSuite")
    provider_name = "local"

    @pytest.fixture
    def spec_root(self, tmp_path: Path) -> Path:
        return copy_example(QUICKSTART, tmp_path / "quickstart")

    def identity(self, provider: Provider, address: str) -> Any:
        row = database_row(provider, address)
        return None if row is None else (row["rowid"], row["created_at"])

    def generation(self, provider: Provider, address: str) -> int | None:
        row = database_row(provider, address)
        return None if row is None else int(row["generation"])


# beyond the contract: what the local provider checks -------------------------------------


@pytest.fixture
def quickstart_root(tmp_path: Path) -> Path:
    return copy_example(QUICKSTART, tmp_path / "quickstart")


@pytest.fixture
def local(quickstart_root: Path) -> Iterator[Provider]:
    providers = ProviderSet(load_specs(quickstart_root).config, quickstart_root)
    yield providers.get("local")
    providers.close()


@pytest.fixture
def desired(quickstart_root: Path) -> dict[str, DesiredItem]:
    return build_desired(load_specs(quickstart_root))


def with_spec(item: DesiredItem, **spec: Any) -> DesiredResource:
    """The item as a DesiredResource, with some spec fields replaced."""
    document = {**item.document, "spec": {**item.document["spec"], **spec}}
    return DesiredResource(item.address, item.kind, item.name, item.project, document)


def small_machine(root: Path) -> LocalProvider:
    """A local provider on a 2-CPU, 8Gi machine without GPUs, its database under `root`."""
    provider = LocalProvider(MachineFacts(cpus=2, memory_bytes=8 * 2**30, gpus=()))
    provider.configure("local", None, ProviderContext(spec_root=root))
    return provider


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"nodes": 2}, "spec.nodes", id="two-nodes"),
        pytest.param({"cpu": "100000"}, "spec.cpu", id="more-cpus-than-this-machine"),
        pytest.param({"memory": str(2**60)}, "spec.memory", id="more-memory-than-this-machine"),
        pytest.param(
            {"accelerator": {"type": "nvidia-h100", "count": 1, "resourceName": "nvidia.com/gpu"}},
            "spec.accelerator.count",
            id="a-gpu-this-machine-lacks",
        ),
    ],
)
def test_a_pool_beyond_this_machine_is_refused(
    desired: dict[str, DesiredItem], spec: dict[str, Any], field: str, tmp_path: Path
) -> None:
    provider = small_machine(tmp_path)
    pool = with_spec(desired["ResourcePool/this-machine"], **spec)

    assert [problem.field for problem in provider.validate(pool)] == [field]
    with pytest.raises(PermanentProviderError, match=field):
        provider.create(pool)


def test_a_container_image_is_refused(desired: dict[str, DesiredItem], tmp_path: Path) -> None:
    provider = small_machine(tmp_path)
    image = with_spec(desired["Image/host-python"], runtime="container")

    assert [problem.field for problem in provider.validate(image)] == ["spec.runtime"]


def test_a_dataset_whose_content_differs_from_its_pinned_digest_is_refused(
    local: Provider, quickstart_root: Path, desired: dict[str, DesiredItem]
) -> None:
    item = desired["Dataset/heldout"]
    actual = build_manifest(quickstart_root / "data" / "heldout" / "v1").digest
    wrong = "sha256:" + "0" * 64
    versions = [{"name": "v1", "path": "", "manifestDigest": wrong}]

    with pytest.raises(PermanentProviderError, match="the spec pins"):
        local.create(with_spec(item, versions=versions))

    pinned = [{"name": "v1", "path": "", "manifestDigest": actual}]
    outputs = local.create(with_spec(item, versions=pinned))
    assert outputs["versions"]["v1"]["manifestDigest"] == actual
    assert outputs["versions"]["v1"]["files"] == 1


def test_a_recorded_dataset_version_is_immutable(
    local: Provider, quickstart_root: Path, desired: dict[str, DesiredItem]
) -> None:
    resource = desired_resource(desired["Dataset/tiny-corpus"], {})
    outputs = local.create(resource)
    (quickstart_root / "data" / "tiny-corpus" / "v1" / "part-000.txt").write_text("edited\n")

    with pytest.raises(PermanentProviderError, match="versions are immutable"):
        local.update(resource, outputs)


def test_manifests_stay_in_the_database_not_in_outputs(
    local: Provider, desired: dict[str, DesiredItem]
) -> None:
    outputs = local.create(desired_resource(desired["Dataset/tiny-corpus"], {}))

    assert set(outputs) == {"versions"}
    assert outputs["versions"]["v1"]["files"] == 3
