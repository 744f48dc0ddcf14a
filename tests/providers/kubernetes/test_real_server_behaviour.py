"""What a real API server does that the session's plain fake does not: defaulting (a
server started with defaults=True fills CRD schema and Job defaults), and a cluster
without Kueue. Each test starts its own small server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.drift import detect_drift
from providers.base import ObserveRequest
from providers.errors import PermanentProviderError
from providers.kubernetes.jobs import job_name
from providers.kubernetes.kinds import CLUSTER_QUEUE, JOB
from providers.kubernetes.provider import KubernetesProvider
from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import INSTANCE, platform_folder, unique_prefix
from tests.providers.kubernetes.test_jobs import launch
from tests.services.kube_api import KubeAPI, start_kube_api


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
        queue = provider.client.get(CLUSTER_QUEUE, f"{prefix}train")
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

        with pytest.raises(PermanentProviderError, match="is Kueue installed"):
            provider.observe([request])
        folder.close()
    finally:
        api.stop()
