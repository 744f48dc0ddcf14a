"""What a real API server does that the session's plain fake does not: defaulting (a
server started with defaults=True fills CRD schema and Job defaults), and a cluster
without Kueue. Each test starts its own small server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from trainform.planner.drift import detect_drift
from trainform.providers.base import ObserveRequest
from trainform.providers.errors import PermanentProviderError
from trainform.providers.kubernetes.jobs import job_name
from trainform.providers.kubernetes.kinds import CLUSTER_QUEUE, JOB
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, platform_folder, unique_prefix
from tests.providers.kubernetes.test_jobs import launch
from tests.services.kube_api import CRD_FOLDER, KubeAPI, start_kube_api


@pytest.fixture(scope="module")
def defaulting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPI]:
    api = start_kube_api(tmp_path_factory.mktemp("defaulting"), defaults=True)
    yield api
    api.stop()


def test_server_defaults_are_not_drift_and_a_job_outside_state_is_orphaned(
    tmp_path: Path, defaulting: KubeAPI
) -> None:
    prefix = unique_prefix()
    folder = SpecFolder(platform_folder(tmp_path / "specs", defaulting, prefix))
    try:
        folder.converge()
        provider = folder.providers().get(INSTANCE)
        assert isinstance(provider, KubernetesProvider)
        provider.submit(launch())
        queue = provider.client.get(CLUSTER_QUEUE, f"{prefix}train-vision")
        assert queue is not None and "flavorFungibility" in queue["spec"]  # defaulted
        job = provider.client.get(JOB, job_name(launch()), f"{prefix}vision")
        assert job is not None and job["spec"]["podReplacementPolicy"]

        assert not folder.plan(refresh=True).has_changes
        findings = detect_drift(folder.state(), folder.providers()).findings
        # the job was submitted outside any spec: owned by trainform, unknown to state
        assert [(f.address, f.drift) for f in findings] == [
            ("TrainingJob/vision/resnet", "orphaned")
        ]
    finally:
        folder.close()


def test_a_cluster_without_kueue_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    api = start_kube_api(tmp_path / "bare", crd_folder=None)
    try:
        folder = SpecFolder(platform_folder(tmp_path / "specs", api, unique_prefix()))
        provider = folder.providers().get(INSTANCE)
        request = ObserveRequest("Queue/train", "Queue", "train", None, {"spec": {"pools": []}})

        with pytest.raises(PermanentProviderError, match="Kueue is not installed"):
            provider.observe([request])
        folder.close()
    finally:
        api.stop()


def test_a_cluster_with_only_kueue_v1beta1_is_told_the_minimum_kueue_version(
    tmp_path: Path,
) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    for path in sorted(CRD_FOLDER.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        versions = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
        if not versions:
            continue
        versions[0].update(served=True, storage=True)
        crd["spec"]["versions"] = versions
        crd["spec"].pop("conversion", None)
        (crds / path.name).write_text(yaml.safe_dump(crd))
    (tmp_path / "old").mkdir()
    api = start_kube_api(tmp_path / "old", crd_folder=crds)
    try:
        folder = SpecFolder(platform_folder(tmp_path / "specs", api, unique_prefix()))
        provider = folder.providers().get(INSTANCE)
        request = ObserveRequest("Queue/train", "Queue", "train", None, {"spec": {"pools": []}})

        with pytest.raises(PermanentProviderError, match="only Kueue's v1beta1 API") as raised:
            provider.observe([request])
        assert "Kueue v0.15.0 or later" in str(raised.value)
        folder.close()
    finally:
        api.stop()
