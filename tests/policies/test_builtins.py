"""Each built-in policy on a passing and a failing fixture, with file:line and field path."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.policies.findings import Severity
from trainform.policies.trusted import TrustedPolicies

from tests.policies.support import (
    DATASET,
    PINNED,
    POOL,
    PROJECT,
    evaluate,
    folder,
    image,
    job,
    of,
    queue,
)

BASE = {"platform/pool.yaml": POOL, "platform/project.yaml": PROJECT, "platform/data.yaml": DATASET}


def settings(**values: dict[str, object]) -> TrustedPolicies:
    return TrustedPolicies(settings={key.replace("_", "-"): v for key, v in values.items()})


CASES = [
    pytest.param(
        "image-pinned",
        {"images.yaml": image(PINNED)},
        {"images.yaml": image("registry.example.com/ml/trainer:v1")},
        None,
        ("Image/trainer", "spec.reference", "images.yaml:4:"),
        id="image-pinned",
    ),
    pytest.param(
        "dataset-pinned",
        {
            "images.yaml": image(),
            "teams/team-a/job.yaml": job(),
            "platform/q.yaml": queue("team-a", 8),
        },
        {
            "images.yaml": image(),
            "teams/team-a/job.yaml": job(datasets="[corpus]"),
            "platform/q.yaml": queue("team-a", 8),
        },
        None,
        ("TrainingJob/team-a/train", "spec.datasets[0]", "teams/team-a/job.yaml:7:"),
        id="dataset-pinned",
    ),
    pytest.param(
        "long-job-checkpoint",
        {
            "images.yaml": image(),
            "teams/team-a/job.yaml": job("maxRuntime: 2h\n"),
            "platform/q.yaml": queue("team-a", 8),
        },
        {
            "images.yaml": image(),
            "teams/team-a/job.yaml": job("maxRuntime: 12h\n"),
            "platform/q.yaml": queue("team-a", 8),
        },
        None,
        ("TrainingJob/team-a/train", "spec.maxRuntime", "teams/team-a/job.yaml:10:"),
        id="long-job-checkpoint",
    ),
    pytest.param(
        "pool-capacity",
        {"platform/q.yaml": queue("team-a", 8) + "---\n" + queue("team-b", 8)},
        {"platform/q.yaml": queue("team-a", 8) + "---\n" + queue("team-b", 12)},
        None,
        ("Queue/team-a", "spec.pools[0].nominalQuota.gpu", "platform/q.yaml:7:"),
        id="pool-capacity",
    ),
    pytest.param(
        "cohort-lending",
        {"platform/q.yaml": queue("team-a", 8, "      lendingLimit: {gpu: 8}\n", "c")},
        {"platform/q.yaml": queue("team-a", 8, "      lendingLimit: {gpu: 9}\n", "c")},
        None,
        ("Queue/team-a", "spec.pools[0].lendingLimit.gpu", "platform/q.yaml:9:"),
        id="cohort-lending",
    ),
    pytest.param(
        "cohort-borrowing",
        {
            "platform/q.yaml": queue("team-a", 8, "      borrowingLimit: {gpu: 4}\n", "c")
            + "---\n"
            + queue("team-b", 8, "      lendingLimit: {gpu: 4}\n", "c")
        },
        {
            "platform/q.yaml": queue("team-a", 8, "      borrowingLimit: {gpu: 6}\n", "c")
            + "---\n"
            + queue("team-b", 8, "      lendingLimit: {gpu: 4}\n", "c")
        },
        None,
        ("Queue/team-a", "spec.pools[0].borrowingLimit.gpu", "platform/q.yaml:9:"),
        id="cohort-borrowing",
    ),
    pytest.param(
        "priority-bounds",
        {"platform/q.yaml": queue("team-a", 8, "  defaultPriority: 100\n")},
        {"platform/q.yaml": queue("team-a", 8, "  defaultPriority: 5000\n")},
        settings(priority_bounds={"min": 0, "max": 1000}),
        ("Queue/team-a", "spec.defaultPriority", "platform/q.yaml:8:"),
        id="priority-bounds",
    ),
    pytest.param(
        "allowed-registries",
        {"images.yaml": image(PINNED)},
        {"images.yaml": image("docker.io/library/python@sha256:" + "b" * 64)},
        settings(allowed_registries={"registries": ["registry.example.com"]}),
        ("Image/trainer", "spec.reference", "images.yaml:4:"),
        id="allowed-registries",
    ),
    pytest.param(
        "project-isolation",
        {
            "images.yaml": image(),
            "teams/team-a/job.yaml": job(),
            "platform/q.yaml": queue("team-a", 8),
        },
        {
            "images.yaml": image(),
            "teams/team-b/job.yaml": job(),
            "platform/q.yaml": queue("team-a", 8),
        },
        settings(project_isolation={"adminPaths": ["platform/**", "/images.yaml"]}),
        ("TrainingJob/team-a/train", "metadata.project", "teams/team-b/job.yaml:3:"),
        id="project-isolation",
    ),
    pytest.param(
        "project-isolation",
        {"platform/q.yaml": queue("team-a", 8)},
        {"teams/team-a/q.yaml": queue("team-a", 8)},
        settings(project_isolation={"adminPaths": ["platform/**"]}),
        ("Queue/team-a", "kind", "teams/team-a/q.yaml:2:"),
        id="project-isolation-admin-paths",
    ),
]


@pytest.mark.parametrize(("policy", "passing", "failing", "trusted", "expected"), CASES)
def test_builtin_passes_good_specs_and_flags_bad_ones(
    tmp_path: Path,
    policy: str,
    passing: dict[str, str],
    failing: dict[str, str],
    trusted: TrustedPolicies | None,
    expected: tuple[str, str, str],
) -> None:
    good = evaluate(folder(tmp_path / "good", {**BASE, **passing}), trusted)
    assert of(good, policy) == [], good.findings

    bad = evaluate(folder(tmp_path / "bad", {**BASE, **failing}), trusted)
    found = of(bad, policy)
    assert found, bad.findings
    address, field, location = expected
    assert (found[0].address, found[0].field) == (address, field)
    assert found[0].location.startswith(location), found[0].location
    assert found[0].message


def test_pool_capacity_names_every_queue_and_the_sum(tmp_path: Path) -> None:
    root = folder(tmp_path, {**BASE, "q.yaml": queue("team-a", 10) + "---\n" + queue("team-b", 8)})
    found = of(evaluate(root), "pool-capacity")
    assert [f.address for f in found] == ["Queue/team-a", "Queue/team-b"]
    assert found[0].severity is Severity.DENY
    assert "sum to 18, more than its capacity 16 (team-a 10, team-b 8)" in found[0].message


def test_pool_capacity_counts_cpu_and_memory_per_node(tmp_path: Path) -> None:
    extra = "      lendingLimit: {}\n"
    text = queue("team-a", 8, extra).replace("{gpu: 8}", "{gpu: 8, cpu: 129, memory: 1Ti}")
    found = of(evaluate(folder(tmp_path, {**BASE, "q.yaml": text})), "pool-capacity")
    assert [f.field.rsplit(".", 1)[1] for f in found] == ["cpu"]
    assert "capacity 128" in found[0].message


def test_a_job_without_runtime_limit_needs_a_checkpoint(tmp_path: Path) -> None:
    files = {**BASE, "images.yaml": image(), "q.yaml": queue("team-a", 8), "j.yaml": job()}
    found = of(evaluate(folder(tmp_path, files)), "long-job-checkpoint")
    assert "has no runtime limit" in found[0].message


def test_a_checkpointed_long_job_passes(tmp_path: Path) -> None:
    spec = "maxRuntime: 48h\ncheckpoint: {interval: 30m}\n"
    files = {**BASE, "images.yaml": image(), "q.yaml": queue("team-a", 8), "j.yaml": job(spec)}
    assert of(evaluate(folder(tmp_path, files)), "long-job-checkpoint") == []


def test_the_threshold_and_severity_are_settings(tmp_path: Path) -> None:
    files = {
        **BASE,
        "images.yaml": image(),
        "q.yaml": queue("team-a", 8),
        "j.yaml": job("maxRuntime: 12h\n"),
    }
    trusted = settings(long_job_checkpoint={"maxRuntimeWithoutCheckpoint": "1d"})
    assert of(evaluate(folder(tmp_path / "a", files), trusted), "long-job-checkpoint") == []
    trusted = settings(long_job_checkpoint={"severity": "warn"})
    found = of(evaluate(folder(tmp_path / "b", files), trusted), "long-job-checkpoint")
    assert found[0].severity is Severity.WARN


def test_a_host_runtime_image_needs_no_digest(tmp_path: Path) -> None:
    text = "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host}\nspec: {runtime: host}\n"
    root = folder(tmp_path, {"i.yaml": text})
    root.joinpath("trainform.yaml").write_text(
        "apiVersion: trainform/v1\nproviders:\n  - {name: local, type: local}\n"
    )
    assert of(evaluate(root), "image-pinned") == []


def test_disabled_policies_do_not_run(tmp_path: Path) -> None:
    root = folder(tmp_path, {**BASE, "images.yaml": image("registry.example.com/ml/t:v1")})
    report = evaluate(root, TrustedPolicies(disabled=frozenset({"image-pinned"})))
    assert "image-pinned" not in report.policies
    assert of(report, "image-pinned") == []


def test_fingerprints_are_stable_across_line_moves(tmp_path: Path) -> None:
    bad = {**BASE, "images.yaml": image("registry.example.com/ml/t:v1")}
    first = of(evaluate(folder(tmp_path / "a", bad)), "image-pinned")[0]
    moved = {**bad, "images.yaml": "# a comment\n\n" + bad["images.yaml"]}
    second = of(evaluate(folder(tmp_path / "b", moved)), "image-pinned")[0]
    assert first.location != second.location
    assert first.fingerprint == second.fingerprint
    assert first.to_json()["fingerprint"] == first.fingerprint
