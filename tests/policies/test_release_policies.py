"""release-gates and release-approval: a release requires its job's gates, relies only on
passed evaluations, and, where approval is asked for, lies in a file CODEOWNERS gives to
its project's owners."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from trainform.planner.plan_model import Action, ResourceChange

from tests.policies.support import DATASET, POOL, PROJECT, evaluate, folder, image, job, of, queue

SUITES = """\
apiVersion: trainform/v1
kind: EvalSuite
metadata: {name: heldout, project: team-a}
spec:
  image: trainer
  command: [python, eval.py]
  metrics: [{name: loss, goal: minimize}]
  gates: [{metric: loss, op: "<=", threshold: 2.0}]
---
apiVersion: trainform/v1
kind: EvalSuite
metadata: {name: safety, project: team-a}
spec:
  image: trainer
  command: [python, eval.py]
  metrics: [{name: refusals, goal: maximize}]
"""


def release(evaluations: str = "[heldout]", extra: str = "") -> str:
    return (
        "apiVersion: trainform/v1\nkind: ModelRelease\n"
        "metadata: {name: train, project: team-a}\n"
        f"spec:\n  job: train\n  evaluations: {evaluations}\n  version: '1.0.0'\n"
        "  registry: {repository: models/train}\n" + extra
    )


def platform(tmp_path: Path, release_text: str, **more: str) -> Path:
    return folder(
        tmp_path,
        {
            "platform/pool.yaml": POOL,
            "platform/queue.yaml": queue("team-a", 8),
            "platform/project.yaml": PROJECT,
            "platform/data.yaml": DATASET,
            "platform/image.yaml": image(),
            "teams/team-a/job.yaml": job("evaluations: [{suite: heldout}]\n"),
            "teams/team-a/suites.yaml": SUITES,
            "teams/team-a/release.yaml": release_text,
            **more,
        },
    )


def test_a_release_must_require_every_gate_of_its_job(tmp_path: Path) -> None:
    report = evaluate(platform(tmp_path, release("[safety]")))
    (finding,) = of(report, "release-gates")
    assert finding.severity == "deny"
    assert finding.field == "spec.evaluations"
    assert finding.location.startswith("teams/team-a/release.yaml:")
    assert "gated by EvalSuite heldout, which the release does not require" in finding.message
    assert (
        of(evaluate(platform(tmp_path / "ok", release("[heldout, safety]"))), "release-gates") == []
    )


def planned(verdict: str) -> SimpleNamespace:
    section = {
        "runId": "r-0123456789ab",
        "evaluations": [
            {
                "suite": "EvalSuite/team-a/heldout",
                "verdict": verdict,
                "gates": [{"text": f"loss 2.5 <= 2: {verdict.upper()}"}],
            }
        ],
    }
    change = ResourceChange(
        "ModelRelease/team-a/train",
        "ModelRelease",
        Action.CREATE,
        ["registry"],
        after={"metadata": {}, "spec": {}, "release": section},
    )
    return SimpleNamespace(changes=[change], destroy=False)


def test_a_planned_release_relies_only_on_passed_evaluations(tmp_path: Path) -> None:
    root = platform(tmp_path, release())
    (finding,) = of(evaluate(root, plan=planned("fail")), "release-gates")
    assert finding.field == "spec.evaluations[0]"
    assert "EvalSuite/team-a/heldout did not pass on run r-0123456789ab" in finding.message
    assert "loss 2.5 <= 2: FAIL" in finding.message
    assert of(evaluate(root, plan=planned("pass")), "release-gates") == []


APPROVED = "  approval: {required: true}\n"


@pytest.mark.parametrize(
    ("codeowners", "expected"),
    [
        pytest.param(None, "no CODEOWNERS line gives teams/team-a/release.yaml owners", id="none"),
        pytest.param(
            "/teams/team-a/ @someone-else\n",
            "CODEOWNERS gives teams/team-a/release.yaml to @someone-else",
            id="other-owners",
        ),
        pytest.param("/teams/team-a/ a@example.com @team-a\n", None, id="project-owners"),
    ],
)
def test_a_release_that_needs_approval_is_owned_by_its_project(
    tmp_path: Path, codeowners: str | None, expected: str | None
) -> None:
    files = {"CODEOWNERS": codeowners} if codeowners else {}
    report = evaluate(platform(tmp_path, release(extra=APPROVED), **files))
    found = of(report, "release-approval")
    if expected is None:
        assert found == []
        return
    (finding,) = found
    assert finding.severity == "deny" and finding.field == "spec.approval"
    assert expected in finding.message
    assert "a@example.com" in finding.message


def test_without_approval_asked_nothing_is_required(tmp_path: Path) -> None:
    assert of(evaluate(platform(tmp_path, release())), "release-approval") == []
