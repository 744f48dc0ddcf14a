"""Provider problems at plan time name the file, line and column of the offending field."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainform.planner.plan import PlanError
from trainform.planner.provider_checks import parse_field
from trainform.providers.base import DesiredResource, Observation, ValidationProblem
from trainform.providers.local.provider import LocalProvider

from tests.engine.support import SpecFolder, project, write_folder

POOL = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: gpus}
spec:
  provider: local
  nodes: 3
  cpu: 1
  memory: 1Gi
"""


@pytest.mark.parametrize(
    ("field", "path"),
    [
        pytest.param("spec.nodes", ("spec", "nodes"), id="plain"),
        pytest.param(
            "spec.pools[0].lendingLimit.gpu",
            ("spec", "pools", 0, "lendingLimit", "gpu"),
            id="indexed",
        ),
        pytest.param("spec", ("spec",), id="one-step"),
    ],
)
def test_parse_field_reads_dotted_paths_with_indexes(field: str, path: tuple) -> None:
    assert parse_field(field) == path


def test_a_provider_problem_names_the_line_of_its_field(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "specs", {"team.yaml": project("team"), "pool.yaml": POOL})
    folder = SpecFolder(root)
    try:
        with pytest.raises(PlanError) as raised:
            folder.plan()
    finally:
        folder.close()
    message = str(raised.value)
    assert "ResourcePool/gpus (pool.yaml:6:10): spec.nodes:" in message, message
    assert "exactly one node" in message


QUEUE = """\
apiVersion: trainform/v1
kind: ResourcePool
metadata: {name: gpus}
spec: {provider: local, nodes: 1, cpu: 1, memory: 1Gi}
---
apiVersion: trainform/v1
kind: Queue
metadata: {name: main}
spec:
  pools:
    - pool: gpus
      nominalQuota: {cpu: CPU}
"""


class ImpactReporting(LocalProvider):
    """The local provider, plus the running work a queue change would squeeze."""

    def change_impact(self, resource: DesiredResource, observation: Observation) -> list[str]:
        if resource.kind != "Queue":
            return []
        cpu = resource.spec["pools"][0]["nominalQuota"]["cpu"]
        return [f"team/job-1 uses 1 CPU; the new quota is {cpu}"]


class CrossChecking(LocalProvider):
    """The local provider, plus a rule that only shows across resources."""

    def validate_all(self, resources: list[DesiredResource]) -> list[ValidationProblem]:
        queues = [r for r in resources if r.kind == "Queue"]
        return [
            ValidationProblem(q.address, "spec.pools[0].nominalQuota.cpu", "seen across all")
            for q in queues
        ]


def test_an_update_carries_the_running_work_it_affects(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "specs", {"queue.yaml": QUEUE.replace("CPU", "1")})
    folder = SpecFolder(root)
    try:
        folder.converge()
        (root / "queue.yaml").write_text(QUEUE.replace("CPU", "500m"), encoding="utf-8")
        plan = folder.plan(folder.providers(ImpactReporting))
    finally:
        folder.close()
    change = next(c for c in plan.changes if c.address == "Queue/main")
    assert "team/job-1 uses 1 CPU; the new quota is 0.5" in change.reasons
    assert [f.kind for f in plan.findings if f.address == "Queue/main"] == ["running-work"]


def test_cross_resource_problems_are_located_too(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "specs", {"queue.yaml": QUEUE.replace("CPU", "1")})
    folder = SpecFolder(root)
    try:
        with pytest.raises(PlanError) as raised:
            folder.plan(folder.providers(CrossChecking))
    finally:
        folder.close()
    assert "Queue/main (queue.yaml:12:27): spec.pools[0].nominalQuota.cpu: seen across all" in str(
        raised.value
    )
