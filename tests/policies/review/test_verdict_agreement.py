"""One verdict: on the same change, `review --base` and `plan` (state = the base applied)
exit alike and report the same findings (policy, address, field, fingerprint).

The base platform (local provider, this machine's CPU) is applied once; each case edits the
working tree, runs both commands, and puts the tree back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.support import run_trainform
from tests.policies.review.fixture import commit, git

CONFIG = """\
apiVersion: trainform/v1
providers:
  - {name: local, type: local, connection: {root: .trainform}}
state: {backend: local, path: .trainform/state.json}
policies: {path: .policies}
"""

POLICIES = """\
settings:
  project-isolation: {adminPaths: ["**"]}
  quota-cut: {resources: [cpu, gpu]}
rules:
  - id: priority-jump
    kinds: [Queue]
    violation: >-
      has(previous.spec) &&
      int(resource.spec.defaultPriority) > int(previous.spec.defaultPriority) + 100
    message: "queue {name} raises its priority by more than 100"
"""

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: this-machine}
spec: {provider: local, nodes: 1, cpu: 1, memory: 1Gi}
"""

PROJECT = """\
apiVersion: trainform/v1
kind: Project
metadata: {name: team-a}
spec: {owners: [a@example.com], specPaths: ["**"]}
"""


def queue(cpu: str = "500m", priority: int = 100, annotations: str = "") -> str:
    metadata = f"{{name: team-a{annotations}}}"
    return f"""\
apiVersion: trainform/v1
kind: Queue
metadata: {metadata}
spec:
  pools:
    - pool: this-machine
      nominalQuota: {{cpu: "{cpu}"}}
  defaultPriority: {priority}
"""


def quota(cpu: str = "1", running: int = 4) -> str:
    return f"""\
apiVersion: trainform/v1
kind: Quota
metadata: {{name: team-a, project: team-a}}
spec:
  queue: team-a
  limits: {{cpu: "{cpu}", runningJobs: {running}}}
"""


BASE = {
    "trainform.yaml": CONFIG,
    ".policies/policies.yaml": POLICIES,
    "pool.yaml": POOL,
    "project.yaml": PROJECT,
    "queue.yaml": queue(),
    "quota.yaml": quota(),
}
ALLOW = ', annotations: {trainform.dev/allow-quota-cut: "team shrinks"}'


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository whose base commit is applied (state and local platform beside it)."""
    root = tmp_path_factory.mktemp("agreement") / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".trainform/\n", encoding="utf-8")
    commit(root, BASE, "base platform")
    result = run_trainform("apply", ".", "--auto-approve", cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    yield root


def _findings(output: str, key: str) -> set[tuple[str, str, str, str, str]]:
    data = json.loads(output)
    findings = data[key]["findings"]
    return {
        (f["severity"], f["policy"], f["address"], f["field"], f["fingerprint"])
        for f in findings
        if not f["waived"]
    }


CASES = [
    pytest.param({}, 0, set(), id="no-change"),
    pytest.param({"queue.yaml": queue(cpu="400m")}, 0, set(), id="small-cut"),
    pytest.param({"queue.yaml": queue(cpu="250m")}, 3, {"quota-cut"}, id="queue-cpu-cut-50%"),
    pytest.param(
        {"queue.yaml": queue(cpu="250m", annotations=ALLOW)}, 0, set(), id="annotated-cut"
    ),
    pytest.param({"quota.yaml": quota(cpu="500m")}, 3, {"quota-cut"}, id="quota-limit-cut"),
    pytest.param({"quota.yaml": quota(cpu="2", running=2)}, 0, set(), id="quota-raised"),
    pytest.param({"queue.yaml": queue(priority=500)}, 3, {"priority-jump"}, id="rule-compares"),
    pytest.param({"queue.yaml": queue(cpu="900m")}, 0, set(), id="quota-grows"),
    # on a local queue a project without a Quota is held by the queue alone: no cut
    pytest.param({"quota.yaml": None}, 0, set(), id="local-quota-deleted"),
    pytest.param({"quota.yaml": None, "queue.yaml": None}, 3, {"quota-cut"}, id="queue-deleted"),
]


@pytest.mark.parametrize(("files", "code", "policies"), CASES)
def test_review_and_plan_reach_the_same_verdict(
    applied: Path, files: dict[str, str | None], code: int, policies: set[str]
) -> None:
    for name, text in files.items():
        if text is None:
            (applied / name).unlink()
        else:
            (applied / name).write_text(text, encoding="utf-8")
    try:
        plan = run_trainform("plan", ".", "--format", "json", "--no-lock", cwd=applied)
        review = run_trainform("review", ".", "--base", "HEAD", "--format", "json", cwd=applied)
    finally:
        git(applied, "checkout", "--", ".")
    assert (plan.returncode, review.returncode) == (code, code), plan.stderr + review.stderr
    planned = _findings(plan.stdout, "policies")
    reviewed = _findings(review.stdout, "policies")
    assert planned == reviewed
    assert {finding[1] for finding in reviewed if finding[0] == "deny"} == policies
