"""The shared `trainform-priority-<n>` WorkloadPriorityClasses go with the last Job that
names them: a TrainingJob's (or a Queue's) delete lists in the plan the shared classes no
other Job of the instance names and deletes them, and never one a Job still names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trainform.providers.jobs import JobLaunch
from trainform.providers.kubernetes.kinds import WORKLOAD_PRIORITY_CLASS
from trainform.providers.kubernetes.provider import KubernetesProvider

from tests.engine.support import SpecFolder
from tests.providers.kubernetes.fixtures import (
    INSTANCE,
    PLATFORM,
    platform_folder,
    unique_prefix,
)
from tests.services.kube_api import KubeAPI


@pytest.fixture
def provider(tmp_path: Path, kube_api: KubeAPI) -> Iterator[KubernetesProvider]:
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, unique_prefix()))
    folder.converge()
    made = folder.providers().get(INSTANCE)
    assert isinstance(made, KubernetesProvider)
    yield made
    folder.close()


def _submit(provider: KubernetesProvider, name: str, priority: int) -> None:
    fields: dict[str, Any] = dict(
        address=f"TrainingJob/vision/{name}",
        run_id="r-0123456789ab",
        attempt=1,
        kind="train",
        project="vision",
        queue="train",
        priority=priority,
        command=["python", "train.py"],
        code_dir=None,
        parameters={},
        env={},
        datasets=[],
        cpu="8",
        memory=str(32 * 2**30),
        gpus=8,
        nodes=1,
        image="registry.example.com/ml/train@sha256:" + "1" * 64,
    )
    provider.submit(JobLaunch(**fields))


def _shared(provider: KubernetesProvider) -> list[str]:
    """The shared classes of this provider's instance (its name prefix: the session's
    server holds other tests' classes under the same manager)."""
    prefix = provider.naming.cluster_name("")
    return sorted(
        c["metadata"]["name"].removeprefix(prefix)
        for c in provider.client.list(WORKLOAD_PRIORITY_CLASS, provider.naming.selector)
        if c["metadata"]["labels"].get("trainform.dev/kind") == "Priority"
        and c["metadata"]["name"].startswith(prefix)
    )


def test_a_shared_class_goes_with_the_last_job_that_names_it(
    provider: KubernetesProvider,
) -> None:
    _submit(provider, "a", 7)
    _submit(provider, "b", 7)
    _submit(provider, "c", -9)
    assert _shared(provider) == ["trainform-priority-7", "trainform-priority-m9"]

    assert provider.delete_impact("TrainingJob/vision/a", "TrainingJob", {}) == []
    provider.delete("TrainingJob/vision/b", "TrainingJob", {})
    assert _shared(provider) == ["trainform-priority-7", "trainform-priority-m9"]  # a: 7

    impact = provider.delete_impact("TrainingJob/vision/a", "TrainingJob", {})
    name = provider.naming.cluster_name("trainform-priority-7")
    assert impact == [
        f"also deletes WorkloadPriorityClass {name} (job priority 7): no Job of this "
        "trainform names it any more"
    ]
    provider.delete("TrainingJob/vision/a", "TrainingJob", {})
    assert _shared(provider) == ["trainform-priority-m9"]  # c still names it

    provider.delete("TrainingJob/vision/c", "TrainingJob", {})
    assert _shared(provider) == []


def test_a_queue_delete_lists_and_deletes_the_unused_shared_classes(
    provider: KubernetesProvider,
) -> None:
    _submit(provider, "a", 3)
    provider.cancel("TrainingJob/vision/a")  # the attempt's Job is gone, its class stays
    assert _shared(provider) == ["trainform-priority-3"]

    [line] = provider.delete_impact("Queue/train", "Queue", {})
    assert "trainform-priority-3 (job priority 3)" in line
    assert provider.delete_impact("Quota/vision/train", "Quota", {}) == []
    provider.delete("Queue/train", "Queue", {})

    assert _shared(provider) == []


def test_the_plan_of_a_queues_delete_shows_the_shared_classes_it_removes(
    tmp_path: Path, kube_api: KubeAPI
) -> None:
    folder = SpecFolder(platform_folder(tmp_path / "specs", kube_api, unique_prefix()))
    folder.converge()
    provider = folder.providers().get(INSTANCE)
    assert isinstance(provider, KubernetesProvider)
    _submit(provider, "a", 3)
    provider.cancel("TrainingJob/vision/a")
    kept = [part for part in PLATFORM.split("---\n") if "kind: Queue" not in part]
    kept = [part for part in kept if "kind: Quota" not in part]
    (folder.root / "platform.yaml").write_text("---\n".join(kept), encoding="utf-8")

    plan = folder.plan(allow_mass_delete=True)

    [queue] = [change for change in plan.changes if change.address == "Queue/train"]
    name = provider.naming.cluster_name("trainform-priority-3")
    assert f"also deletes WorkloadPriorityClass {name} (job priority 3)" in " ".join(queue.reasons)
    result = folder.apply(plan)
    assert not result.failed, result.outcomes
    assert _shared(provider) == []
    folder.close()
