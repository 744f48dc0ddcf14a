"""The quickstart's real train.py and evaluate.py, run by the local provider.

The platform objects come from the quickstart's own specs, normalized as the engine does
(load_specs + build_desired); the launches are written here the way the engine builds
them, so this test does not depend on the engine's job planning.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.providers.base import DesiredResource, ProviderContext
from trainform.providers.jobs import DatasetInput, JobLaunch, RunPhase
from trainform.providers.local.machine import MachineFacts
from trainform.providers.local.provider import LocalProvider
from trainform.specs import load_specs

from tests.engine.support import QUICKSTART, copy_example
from tests.providers.local.conftest import GiB, finished, run_of, wait_for

JOB = "TrainingJob/research/bigram"
PARAMETERS = {"steps": "12", "checkpointEvery": 1, "stepSeconds": 0, "smoothing": 0.1}


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    return copy_example(QUICKSTART, tmp_path / "quickstart", jobs=True)


@pytest.fixture
def desired(quickstart: Path) -> dict[str, DesiredItem]:
    return build_desired(load_specs(quickstart))


@pytest.fixture
def platform(quickstart: Path, desired: dict[str, DesiredItem]) -> Iterator[LocalProvider]:
    provider = LocalProvider(MachineFacts(cpus=4, memory_bytes=8 * GiB, gpus=()))
    provider.configure("local", None, ProviderContext(spec_root=quickstart))
    for address in ("Queue/default-queue", "Quota/research/research-default"):
        item = desired[address]
        provider.create(
            DesiredResource(item.address, item.kind, item.name, item.project, item.document)
        )
    for address in ("Dataset/tiny-corpus", "Dataset/heldout"):
        item = desired[address]
        provider.create(
            DesiredResource(item.address, item.kind, item.name, item.project, item.document)
        )
    yield provider
    provider.jobs.cancel(JOB)
    provider.close()


def dataset(desired: dict[str, DesiredItem], name: str) -> DatasetInput:
    item = desired[f"Dataset/{name}"]
    return DatasetInput(name, item.address, "v1", "", item.document)


def training(desired: dict[str, DesiredItem], quickstart: Path, **more: object) -> JobLaunch:
    spec = desired[JOB].document["spec"]
    values: dict[str, object] = {
        "address": JOB,
        "run_id": "r-quickstart",
        "attempt": 1,
        "kind": "train",
        "project": "research",
        "queue": "default-queue",
        "priority": 100,
        "command": spec["command"],
        "code_dir": str(quickstart / "code"),
        "parameters": PARAMETERS,
        "env": {},
        "datasets": [dataset(desired, "tiny-corpus")],
        "cpu": spec["resources"]["cpu"],
        "memory": spec["resources"]["memory"],
        "gpus": 0,
        "nodes": 1,
        "checkpoint_interval": 0,
        "keep_last": spec["checkpoint"]["keepLast"],
        "max_runtime": 1800,
    }
    values.update(more)
    return JobLaunch(**values)  # type: ignore[arg-type]


def test_the_quickstart_trains_checkpoints_resumes_and_evaluates(
    platform: LocalProvider, desired: dict[str, DesiredItem], quickstart: Path
) -> None:
    platform.submit(training(desired, quickstart))
    run = finished(platform, "r-quickstart", JOB)

    assert run.latest.phase is RunPhase.SUCCEEDED, run.latest  # type: ignore[union-attr]
    # a checkpoint per step, retention keeps the newest keepLast (3)
    assert [(c.id, c.valid) for c in run.checkpoints] == [
        ("step-000010", True),
        ("step-000011", True),
        ("step-000012", True),
    ]
    assert run.current_step == 12
    assert (Path(run.output_dir) / "model.json").is_file()

    platform.submit(training(desired, quickstart, attempt=2, resume_from="step-000012"))
    run = finished(platform, "r-quickstart", JOB)
    assert [a.phase for a in run.attempts] == [RunPhase.SUCCEEDED, RunPhase.SUCCEEDED]
    assert "resumed from" in Path(run.attempts[1].log).read_text()

    suite = desired["EvalSuite/research/heldout-perplexity"]
    platform.submit(
        JobLaunch(
            address=JOB,
            run_id="r-quickstart",
            attempt=1,
            kind="eval",
            project="research",
            queue="default-queue",
            priority=100,
            command=suite.document["spec"]["command"],
            code_dir=str(quickstart / "code"),
            parameters=PARAMETERS,
            env={},
            datasets=[dataset(desired, "heldout")],
            cpu="1",
            memory=str(2**29),
            gpus=0,
            nodes=1,
            max_runtime=600,
            suite=suite.address,
            model_run="r-quickstart",
        )
    )

    def evaluated() -> list | None:
        evaluations = run_of(platform, "r-quickstart", JOB).evaluations
        return evaluations if evaluations and evaluations[-1].phase.finished else None

    [evaluation] = wait_for(evaluated, what="the evaluation")
    assert evaluation.phase is RunPhase.SUCCEEDED, evaluation.reason
    assert evaluation.suite == suite.address
    assert 1.0 < evaluation.metrics["perplexity"] < 30.0  # the quickstart's gate
