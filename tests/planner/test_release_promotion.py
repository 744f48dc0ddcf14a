"""planner.release_promotion and compareTo.release gates, on the examples/release specs with
state written here (no provider is called): a promotion resolves to its source's published
digest or is refused at its field; a run that regresses against the released model's
recorded metric is refused with both numbers."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from trainform.planner.desired import DesiredItem, build_desired
from trainform.planner.jobs import JobContext
from trainform.planner.lockfile import LockFile
from trainform.planner.releases import (
    Refusal,
    ReleaseContext,
    release_section,
    resolve_releases,
)
from trainform.planner.state import ResourceState
from trainform.specs import load_specs

from tests.helpers import REPO

JOB = "TrainingJob/research/bigram"
SUITE = "EvalSuite/research/heldout-perplexity"
RELEASE = "ModelRelease/research/bigram"
PROMOTED = "ModelRelease/research/bigram-prod"
RUN = "r-00000000000a"
HELDOUT = {"dataset": "Dataset/heldout@v1", "manifestDigest": "sha256:" + "e" * 64}


@pytest.fixture(scope="module")
def desired() -> dict[str, DesiredItem]:
    return build_desired(load_specs(REPO / "examples" / "release", environment="ci"))


def a_run(output: Path, perplexity: float) -> dict[str, Any]:
    return {
        "run_id": RUN,
        "attempts": [{"phase": "succeeded", "ended_at": "2026-12-04T10:00:00.000Z"}],
        "evaluations": [
            {"suite": SUITE, "phase": "succeeded", "metrics": {"perplexity": perplexity}}
        ],
        "output_dir": str(output),
    }


def job_state() -> ResourceState:
    record = {
        "inputs": {},
        "lockDigest": "sha256:" + "2" * 64,
        "evaluationInputs": {SUITE: [HELDOUT]},
    }
    outputs = {"runId": RUN, "lineage": {RUN: record}}
    return ResourceState(JOB, "TrainingJob", ["local"], {}, "", {"local": outputs})


def context(
    desired: dict[str, DesiredItem], runs: list[dict[str, Any]], recorded: dict[str, Any]
) -> ReleaseContext:
    pins = LockFile(datasets={"Dataset/heldout@v1": {"manifestDigest": HELDOUT["manifestDigest"]}})
    jobs = JobContext(desired, pins, REPO, lambda address: runs if address == JOB else None)
    return ReleaseContext(jobs, {JOB: job_state(), **recorded}, None, lambda a, f, d: d)


@pytest.fixture
def output(tmp_path: Path) -> Path:
    (tmp_path / "model.json").write_text('{"counts": {}}', encoding="utf-8")
    return tmp_path


def published(desired: dict[str, DesiredItem], output: Path, perplexity: float = 6.0) -> Any:
    """State of the example's release, published from a run scoring `perplexity`."""
    ctx = context(desired, [a_run(output, perplexity)], {})
    section, _ = release_section(desired[RELEASE], None, ctx)
    outputs = {
        "repository": "models/bigram",
        "tag": "1.0.0",
        "digest": section["digest"],
        "reference": f"127.0.0.1:5000/models/bigram@{section['digest']}",
    }
    document = {**desired[RELEASE].document, "release": section}
    return ResourceState(
        RELEASE, "ModelRelease", ["registry", "s3"], document, "", {"registry": outputs}
    )


def promotion(desired: dict[str, DesiredItem], **spec: Any) -> DesiredItem:
    source = desired[RELEASE]
    document = copy.deepcopy(source.document)
    document["metadata"]["name"] = "bigram-prod"
    document["spec"] = {
        "promoteFrom": "bigram",
        "version": "1.0.0",
        "registry": {"repository": "models/bigram-prod", "tag": "production"},
    } | spec
    return replace(
        source,
        address=PROMOTED,
        name="bigram-prod",
        document=document,
        providers=["registry"],
        references=[("spec.promoteFrom", RELEASE, None)],
    )


def test_a_promotion_resolves_to_the_source_digest_and_relies_on_its_gates(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    source = published(desired, output)
    items = {RELEASE: desired[RELEASE], PROMOTED: promotion(desired)}
    resolved = resolve_releases(items, context(desired, [], {RELEASE: source}))
    assert resolved.problems == []
    section = resolved.items[PROMOTED].document["release"]
    assert section["digest"] == source.spec["release"]["digest"]
    assert section["promotedFrom"]["repository"] == "models/bigram"
    assert section["artifactAddress"] == RELEASE
    notes = resolved.notes[PROMOTED]
    assert "same digest " + section["digest"] + ", no rebuild" in notes[0]
    assert notes[1] == (
        f"relies on the gates of {RELEASE}, judged when it was released: {SUITE} pass"
    )


def test_a_promotion_once_published_keeps_its_digest_when_the_source_changes(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    source = published(desired, output)
    items = {RELEASE: desired[RELEASE], PROMOTED: promotion(desired)}
    first = resolve_releases(items, context(desired, [], {RELEASE: source})).items[PROMOTED]
    state = ResourceState(PROMOTED, "ModelRelease", ["registry"], first.document, "", {})
    (output / "model.json").write_text('{"counts": {"ab": 1}}', encoding="utf-8")
    changed = published(desired, output)
    assert changed.spec["release"]["digest"] != source.spec["release"]["digest"]
    ctx = context(desired, [], {RELEASE: changed, PROMOTED: state})
    again = resolve_releases(items, ctx)
    assert again.items[PROMOTED].document["release"] == first.document["release"]
    assert "pinned in state when first promoted" in again.notes[PROMOTED][0]


@pytest.mark.parametrize(
    ("spec", "recorded", "field", "words"),
    [
        pytest.param({}, False, "spec.promoteFrom", "is not published yet", id="unpublished"),
        pytest.param({"version": "2.0.0"}, True, "spec.version", "keeps its source's version"),
    ],
)
def test_a_promotion_is_refused_at_its_field(
    desired: dict[str, DesiredItem],
    output: Path,
    spec: dict[str, Any],
    recorded: bool,
    field: str,
    words: str,
) -> None:
    state = {RELEASE: published(desired, output)} if recorded else {}
    items = {RELEASE: desired[RELEASE], PROMOTED: promotion(desired, **spec)}
    resolved = resolve_releases(items, context(desired, [], state))
    mine = [problem for problem in resolved.problems if problem.startswith(PROMOTED + " (")]
    assert len(mine) == 1, resolved.problems
    assert f"{field}: " in mine[0] and words in mine[0]


def regression_gated(desired: dict[str, DesiredItem]) -> dict[str, DesiredItem]:
    suite = copy.deepcopy(desired[SUITE].document)
    suite["spec"]["gates"].append(
        {"metric": "perplexity", "op": "<=", "threshold": 0.5, "compareTo": {"release": "bigram"}}
    )
    return {**desired, SUITE: replace(desired[SUITE], document=suite)}


def next_release(desired: dict[str, DesiredItem]) -> DesiredItem:
    document = copy.deepcopy(desired[RELEASE].document)
    document["metadata"]["name"] = "bigram-next"
    document["spec"]["version"] = "2.0.0"
    return replace(desired[RELEASE], address=RELEASE + "-next", document=document)


def test_a_run_that_regresses_against_the_released_model_is_refused_with_both_numbers(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    gated = regression_gated(desired)
    state = {RELEASE: published(desired, output, perplexity=6.0)}
    ctx = context(gated, [a_run(output, 6.75)], state)
    with pytest.raises(Refusal) as refused:
        release_section(next_release(gated), None, ctx)
    assert refused.value.field == "spec.evaluations[0]"
    assert (
        f"perplexity 6.75 <= released {RELEASE} 1.0.0 (run {RUN}) 6 + 0.5: FAIL"
        in refused.value.message
    )
    within = context(gated, [a_run(output, 6.25)], state)
    section, notes = release_section(next_release(gated), None, within)
    assert section["evaluations"][0]["gates"][1]["against"].startswith(f"released {RELEASE}")
    assert any("6.25 <= released" in note and "PASS" in note for note in notes)


def test_a_compare_to_gate_passes_without_a_release_and_fails_on_another_task_set(
    desired: dict[str, DesiredItem], output: Path
) -> None:
    gated = regression_gated(desired)
    section, _ = release_section(next_release(gated), None, context(gated, [a_run(output, 9)], {}))
    gate = section["evaluations"][0]["gates"][1]
    assert gate["status"] == "pass" and gate["detail"] == f"{RELEASE} not released yet"
    source = published(desired, output)
    source.spec["release"]["evaluations"][0]["datasets"] = [
        {"dataset": "Dataset/heldout@v0", "manifestDigest": "sha256:" + "0" * 64}
    ]
    with pytest.raises(Refusal) as refused:
        release_section(
            next_release(gated), None, context(gated, [a_run(output, 1)], {RELEASE: source})
        )
    assert (
        "was evaluated on Dataset/heldout@v0, this run on Dataset/heldout@v1: not the same task set"
        in refused.value.message
    )
