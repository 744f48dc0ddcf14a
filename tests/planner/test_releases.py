"""planner.releases: which run a ModelRelease publishes and when the plan refuses it, on the
examples/release specs with runs and state written here (no provider is called)."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.jobs import JobContext
from trainform.planner.lockfile import LockFile
from trainform.planner.releases import Refusal, ReleaseContext, release_section
from trainform.planner.state import ResourceState
from trainform.specs import load_specs

from tests.helpers import REPO

JOB = "TrainingJob/research/bigram"
SUITE = "EvalSuite/research/heldout-perplexity"
RELEASE = "ModelRelease/research/bigram"
RUN, NEWER = "r-00000000000a", "r-00000000000b"
HELDOUT = {"dataset": "Dataset/heldout@v1", "manifestDigest": "sha256:" + "e" * 64}


@pytest.fixture(scope="module")
def desired() -> dict[str, DesiredItem]:
    return build_desired(load_specs(REPO / "examples" / "release", environment="ci"))


def run(output: Path, phase: str = "succeeded", perplexity: float = 6.0) -> dict[str, Any]:
    return {
        "run_id": RUN,
        "attempts": [{"phase": phase, "ended_at": "2026-12-04T10:00:00.000Z"}],
        "checkpoints": [{"id": "step-000020", "step": 20, "valid": True, "path": str(output)}],
        "evaluations": [
            {"suite": SUITE, "phase": "succeeded", "metrics": {"perplexity": perplexity}}
        ],
        "output_dir": str(output),
    }


def job_state(current: str = RUN) -> ResourceState:
    record = {
        "inputs": {"image": {"digest": "sha256:" + "1" * 64}, "datasets": [], "parameters": {}},
        "lockDigest": "sha256:" + "2" * 64,
        "evaluationInputs": {SUITE: [HELDOUT]},
    }
    outputs = {"runId": current, "lineage": {RUN: record, NEWER: {"inputs": {}}}}
    return ResourceState(JOB, "TrainingJob", ["local"], {}, "", {"local": outputs})


def context(
    desired: dict[str, DesiredItem], runs: list[dict[str, Any]], current: str = RUN
) -> ReleaseContext:
    pins = LockFile(datasets={"Dataset/heldout@v1": {"manifestDigest": HELDOUT["manifestDigest"]}})
    jobs = JobContext(desired, pins, REPO, lambda address: runs if address == JOB else None)
    return ReleaseContext(jobs, {JOB: job_state(current)}, None, lambda a, f, d: d)


def with_spec(item: DesiredItem, **spec: Any) -> DesiredItem:
    document = copy.deepcopy(item.document)
    document["spec"].update(spec)
    return replace(item, document=document)


@pytest.fixture
def output(tmp_path: Path) -> Path:
    (tmp_path / "model.json").write_text('{"counts": {}}', encoding="utf-8")
    return tmp_path


def test_a_passed_run_resolves_with_its_gates_files_and_digest(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    section, notes = release_section(desired[RELEASE], None, context(desired, [run(output)]))
    assert section["runId"] == RUN and section["files"][0]["path"] == "model.json"
    assert section["evaluations"][0]["verdict"] == "pass"
    assert section["digest"].startswith("sha256:")
    assert notes[0].startswith(f"run {RUN} of {JOB} (resolved now")
    assert notes[1] == f"gate {SUITE}: perplexity 6 <= 30: PASS"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        pytest.param({"phase": "running"}, "spec.job", "is not finished (running)", id="running"),
        pytest.param({"phase": "failed"}, "spec.job", "is not finished (failed)", id="failed"),
        pytest.param({"perplexity": 31.0}, "spec.evaluations[0]", "31 <= 30: FAIL", id="gate"),
    ],
)
def test_the_plan_refuses_an_unfinished_or_failing_run(
    desired: dict[str, DesiredItem], output: Path, change: dict[str, Any], field: str, words: str
) -> None:
    ctx = context(desired, [run(output, **change)])
    with pytest.raises(Refusal) as refused:
        release_section(desired[RELEASE], None, ctx)
    assert refused.value.field == field and words in refused.value.message


def test_a_pinned_run_the_provider_does_not_know_is_refused_at_spec_run(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    item = with_spec(desired[RELEASE], run=NEWER)
    with pytest.raises(Refusal) as refused:
        release_section(item, None, context(desired, [run(output)]))
    assert refused.value.field == "spec.run"
    assert f"run {NEWER} of {JOB} is not known to its provider" in refused.value.message


def test_a_missing_checkpoint_is_refused_with_the_ones_there_are(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    item = with_spec(desired[RELEASE], checkpoint="step-000005")
    with pytest.raises(Refusal) as refused:
        release_section(item, None, context(desired, [run(output)]))
    assert refused.value.field == "spec.checkpoint"
    assert "has no checkpoint step-000005 (has: step-000020)" in refused.value.message


def test_another_dataset_version_than_the_suite_declares_is_refused(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    ctx = context(desired, [run(output)])
    ctx.jobs.pins.datasets["Dataset/heldout@v1"] = {"manifestDigest": "sha256:" + "f" * 64}
    with pytest.raises(Refusal) as refused:
        release_section(desired[RELEASE], None, ctx)
    assert "evaluated run r-00000000000a on Dataset/heldout@v1 (sha256:eeeeeeeeeeee)" in (
        refused.value.message
    )
    assert "declares Dataset/heldout@v1 (sha256:ffffffffffff)" in refused.value.message


def test_a_newer_run_of_the_job_does_not_move_a_published_release(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    first, _ = release_section(desired[RELEASE], None, context(desired, [run(output)]))
    previous = ResourceState(
        RELEASE, "ModelRelease", ["registry"], {**desired[RELEASE].document, "release": first}, ""
    )
    (output / "model.json").unlink()  # nothing is read again, no gate judged again
    later = context(desired, [], current=NEWER)
    section, notes = release_section(desired[RELEASE], previous, later)
    assert section == first
    assert notes[0] == f"run {RUN} of {JOB} (pinned in state when first released)"
    assert "gates were judged when this run was first released" in notes
