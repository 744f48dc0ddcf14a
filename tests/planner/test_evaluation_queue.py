"""An evaluation runs on its EvalSuite's queue and priority where the suite declares them
(planner/jobs.py, evaluation_queue), on every provider: a suite naming a queue but no
priority gets that queue's defaultPriority, as a job does; a suite naming neither runs
at the training job's queue and priority. The suite's queue is a reference like any other:
an unknown one fails the load at its line."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.desired import build_desired
from trainform.planner.jobs import JobContext, evaluation_launch
from trainform.planner.lockfile import LockFile
from trainform.specs import load_specs
from trainform.specs.errors import SpecError

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local, connection: {root: .trainform}}
state: {backend: local, path: .trainform/state.json}
"""
PLATFORM = """\
apiVersion: trainform/v1
kind: Queue
metadata: {name: train}
spec: {pools: [{pool: box, nominalQuota: {gpu: 0, cpu: 8, memory: 16Gi}}], defaultPriority: 100}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: evals}
spec: {pools: [{pool: box, nominalQuota: {gpu: 0, cpu: 8, memory: 16Gi}}], defaultPriority: 10}
---
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: box}
spec: {provider: local, nodes: 1, cpu: 16, memory: 32Gi}
---
apiVersion: trainform/v1
kind: Project
metadata: {name: vision}
spec: {owners: [leads@example.com]}
---
apiVersion: trainform/v1
kind: Image
metadata: {name: trainer}
spec: {runtime: host}
---
apiVersion: trainform/v1
kind: EvalSuite
metadata: {name: heldout}
spec:
  image: trainer
  command: [python, eval.py]
  metrics: [{name: loss, goal: minimize}]
SUITE---
apiVersion: trainform/v1
kind: TrainingJob
metadata: {name: job, project: vision}
spec:
  queue: train
  image: trainer
  command: [python, train.py]
  resources: {nodes: 1, acceleratorsPerNode: 0, cpu: 1, memory: 1Gi}
JOB  evaluations: [{suite: heldout}]
"""


def _launch(tmp_path: Path, suite: str, job: str = "") -> tuple[str, int]:
    (tmp_path / "trainform.yaml").write_text(CONFIG)
    (tmp_path / "platform.yaml").write_text(PLATFORM.replace("SUITE", suite).replace("JOB", job))
    desired = build_desired(load_specs(tmp_path))
    context = JobContext(desired, LockFile(), tmp_path, lambda _: [])
    item, suite_item = desired["TrainingJob/vision/job"], desired["EvalSuite/heldout"]
    launch = evaluation_launch(item, suite_item, context, "r-1", 1)
    return launch.queue, launch.priority


@pytest.mark.parametrize(
    ("suite", "job", "expected"),
    [
        pytest.param(
            "  queue: evals\n  priority: 5\n", "", ("evals", 5), id="suite-queue-and-priority"
        ),
        pytest.param(
            "  queue: evals\n", "  priority: 300\n", ("evals", 10), id="suite-queue-default"
        ),
        pytest.param("  priority: 7\n", "", ("train", 7), id="suite-priority-on-job-queue"),
        pytest.param("", "  priority: 300\n", ("train", 300), id="the-jobs-own"),
        pytest.param("", "", ("train", 100), id="the-jobs-queue-default"),
    ],
)
def test_an_evaluation_runs_on_its_suites_queue_and_priority_where_declared(
    suite: str, job: str, expected: tuple[str, int], tmp_path: Path
) -> None:
    assert _launch(tmp_path, suite, job) == expected


def test_a_suite_naming_an_unknown_queue_fails_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as error:
        _launch(tmp_path, "  queue: nowhere\n")
    assert "platform.yaml:33:10: Queue `nowhere` is not declared" in str(error.value)
