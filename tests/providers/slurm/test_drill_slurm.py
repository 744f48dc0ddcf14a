"""`trainform drill` of a job on the real Slurm test cluster: baseline, congested (filler
jobs of the drill's own holding the project's GPU quota, so the job pends with Slurm's
reason) and failure (one step of the running job cancelled with scancel, then recovery
from the latest valid checkpoint); afterwards the plan is empty and no job of the drill is
left in the queue. Names carry the test's prefix; the cleanup removes them all."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.support import QUICKSTART, run_trainform
from tests.providers.slurm import fixtures
from tests.services.slurm import SlurmCluster

pytestmark = pytest.mark.slow


def ok(folder: Path, *args: str, timeout: float = 180) -> str:
    result = run_trainform(*args, cwd=folder, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def drilled(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    prefix = fixtures.unique_prefix("dr")
    root = tmp_path_factory.mktemp("slurm-drill") / "specs"
    root.mkdir()
    shutil.copytree(QUICKSTART / "code", root / "code")
    shutil.copytree(QUICKSTART / "data", root / "data")
    (root / "trainform.yaml").write_text(
        fixtures.config(slurm_cluster, slurm_cluster.job_root / prefix)
    )
    team, queue, pool = f"{prefix}-a", f"{prefix}-q", f"{prefix}-pool"
    (root / "platform.yaml").write_text(
        "---\n".join(
            [
                fixtures.pool(slurm_cluster, pool),
                fixtures.project(team),
                fixtures.queue(queue, pool),
                fixtures.quota(f"{team}-q", team, queue, "{gpu: 1, runningJobs: 2}"),
            ]
        )
    )
    (root / "training.yaml").write_text(
        "apiVersion: trainform/v1\nkind: Dataset\nmetadata: {name: tiny-corpus}\n"
        "spec: {source: data/tiny-corpus, format: text, versions: [{name: v1}]}\n---\n"
        "apiVersion: trainform/v1\nkind: Dataset\nmetadata: {name: heldout}\n"
        "spec: {source: data/heldout, format: text, versions: [{name: v1}]}\n---\n"
        "apiVersion: trainform/v1\nkind: Image\nmetadata: {name: host-python}\n"
        "spec: {runtime: host}\n---\n"
        "apiVersion: trainform/v1\nkind: EvalSuite\n"
        f"metadata: {{name: heldout-perplexity, project: {team}}}\n"
        "spec:\n  image: host-python\n  code: {repo: code}\n"
        "  command: [python3, evaluate.py]\n  datasets: [heldout@v1]\n"
        "  metrics: [{name: perplexity, goal: minimize}]\n"
        "  gates: [{metric: perplexity, op: '<=', threshold: 1000.0}]\n---\n"
        "apiVersion: trainform/v1\nkind: TrainingJob\n"
        f"metadata: {{name: bigram, project: {team}}}\n"
        f"spec:\n  queue: {queue}\n  image: host-python\n  datasets: [tiny-corpus@v1]\n"
        "  code: {repo: code}\n  command: [python3, train.py]\n"
        "  parameters: {steps: 24, checkpointEvery: 4, stepSeconds: 0.2}\n"
        "  resources: {nodes: 1, cpu: 1, memory: 256Mi, acceleratorsPerNode: 1}\n"
        "  checkpoint: {interval: 1m, keepLast: 3}\n  retries: {limit: 2, backoff: 1s}\n"
        "  maxRuntime: 30m\n  evaluations: [{suite: heldout-perplexity}]\n"
    )
    try:
        ok(root, "lock", ".")
        for _ in range(3):  # train, then evaluate, until the plan is empty
            ok(root, "apply", ".", "--auto-approve")
            ok(root, "status", "--dir", ".", "--wait", "--timeout", "120")
        plan = run_trainform("plan", ".", "--detailed-exitcode", cwd=root)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        state = json.loads((root / ".trainform" / "state.json").read_text())["resources"]
        result = run_trainform(
            "drill", "bigram", "--dir", ".", "--out", str(root / "evidence"),
            "--time-limit", "120s", "--hold", "2s", cwd=root, timeout=600,
        )  # fmt: skip
        yield {
            "root": root,
            "result": result,
            "state": state,
            "prefix": prefix,
            "report": json.loads((root / "evidence" / "report.json").read_text()),
        }
    finally:
        fixtures.cleanup(slurm_cluster, prefix)


def conditions(drilled: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in drilled["report"]["conditions"]}


def test_the_slurm_drill_runs_three_conditions_of_one_job(drilled: dict[str, Any]) -> None:
    result = drilled["result"]
    assert result.returncode == 0, result.stdout + result.stderr
    found = conditions(drilled)
    assert list(found) == ["baseline", "congested", "failure"]
    assert {c["outcome"] for c in found.values()} == {"succeeded"}
    assert len({c["runId"] for c in found.values()}) == 3
    assert drilled["report"]["provider"]["type"] == "slurm"


def test_the_congested_job_pends_with_slurms_reason(drilled: dict[str, Any]) -> None:
    congested = conditions(drilled)["congested"]
    assert congested["delivery"]["waitedSeconds"] >= 2.0
    reasons = " ".join(w["reason"] for w in congested["waits"])
    assert "AssocGrpGRES" in reasons, congested["waits"]
    assert congested["congestion"]["left"] == []


def test_the_failure_is_one_cancelled_step_and_recovery_keeps_the_result(
    drilled: dict[str, Any],
) -> None:
    found = conditions(drilled)
    failure = found["failure"]
    assert failure["fault"]["injected"] and "scancel" in failure["fault"]["what"]
    recovery = failure["recovery"]
    assert recovery["checkpoint"] == recovery["latestValid"]
    assert failure["fault"]["latestValidCheckpoint"]["step"] <= recovery["step"]
    assert recovery["lostSteps"] is not None
    baseline = found["baseline"]["metrics"]["perplexity"]
    assert failure["metrics"]["perplexity"] == pytest.approx(baseline)


def test_after_the_slurm_drill_the_plan_is_empty_and_no_drill_job_is_left(
    drilled: dict[str, Any], slurm_cluster: SlurmCluster
) -> None:
    root = drilled["root"]
    plan = run_trainform("plan", ".", "--detailed-exitcode", cwd=root)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    state = json.loads((root / ".trainform" / "state.json").read_text())["resources"]
    assert state == drilled["state"]
    queued = slurm_cluster.run(["squeue", "--noheader", "--format=%i %a"]).stdout
    assert [line for line in queued.splitlines() if drilled["prefix"] in line] == []
